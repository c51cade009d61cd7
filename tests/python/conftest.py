"""Runs under mpirun: every rank runs the same tests in the same order, so the collectives
of a test meet across ranks. Chorus is initialized once per process for the whole session."""

import pytest
import torch

import chorus.torch as hvd


def pytest_configure(config):
    torch.set_num_threads(1)
    hvd.init()


def pytest_unconfigure(config):
    if hvd.is_initialized():
        hvd.shutdown()


@pytest.fixture(autouse=True)
def _in_step():
    """Ranks enter and leave each test together, so a failure points at one test."""
    hvd.barrier()
    yield
    hvd.barrier()
