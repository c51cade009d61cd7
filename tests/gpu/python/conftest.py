"""chorus.torch with CUDA tensors, under mpirun: every rank runs the same tests in the same
order, on cuda:(local rank % device count), so ranks on one host may share one GPU.

Skipping: CTest runs this folder through tests/gpu/run_gpu.sh, which exits 77 (skipped)
before pytest starts when gpu_probe finds no CUDA device. Where a device exists but this
Python's torch cannot use it (a CPU-only torch, or one built for a CUDA that the driver does
not support), every rank ends the session here with exit code 77 and the reason, before
Chorus is initialized: pytest would otherwise report a pass with every test skipped, or
fail every test with the same unrelated message. 77 is the SKIP_RETURN_CODE of the CTest
registration (tests/python/CMakeLists.txt), so the result reads "skipped", never "passed";
the reason is in the test's output."""

import pytest
import torch

import chorus.torch as hvd

NO_CUDA = 77


def pytest_configure(config):
    if not torch.cuda.is_available():
        # pytest.exit in pytest_configure: pytest prints the reason and exits with returncode,
        # and no test is collected. Every rank takes this branch (same torch, same host
        # setup), so mpirun passes 77 on.
        pytest.exit(f"SKIPPED: no CUDA device usable from torch {torch.__version__} (built "
                    f"for CUDA {torch.version.cuda or 'none'}, "
                    f"{torch.cuda.device_count()} device(s) visible)", returncode=NO_CUDA)
    torch.set_num_threads(1)
    hvd.init()
    torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())


def pytest_unconfigure(config):
    if hvd.is_initialized():
        hvd.shutdown()


@pytest.fixture
def dev():
    """This rank's GPU."""
    return torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())


@pytest.fixture(autouse=True)
def _in_step():
    """Ranks enter and leave each test together, so a failure points at one test."""
    hvd.barrier()
    yield
    hvd.barrier()
