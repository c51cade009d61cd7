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


@pytest.fixture(scope="module")
def chorus_group():
    """The default torch.distributed group on the backend chorus, through a file store whose
    path rank 0 chooses (test_c10d.py, test_ddp.py)."""
    import tempfile

    import torch.distributed as dist

    path = hvd.broadcast_object(tempfile.mktemp(prefix="chorus-c10d-") if hvd.rank() == 0
                                else None, root_rank=0)
    dist.init_process_group("chorus", init_method="file://" + path, rank=hvd.rank(),
                            world_size=hvd.size())
    yield
    dist.destroy_process_group()


@pytest.fixture(autouse=True)
def _in_step():
    """Ranks enter and leave each test together, so a failure points at one test."""
    hvd.barrier()
    yield
    hvd.barrier()
