"""The import-time check that the torch being imported is the one chorus was built for, and
the HOROVOD_* variables read at init."""

import os
import subprocess
import sys

import pytest

from chorus import _build_info
from chorus._loader import check_torch_version

import torch


def test_built_for_this_torch():
    check_torch_version()  # the real check passes here
    assert _build_info.TORCH_VERSION.split("+")[0][:4] == torch.__version__[:4]


def test_mismatch_is_a_clear_import_error():
    with pytest.raises(ImportError, match=r"built against torch 1\.13\.0 .* imports torch 2\.3"):
        check_torch_version(imported="2.3.1+cu121", built="1.13.0")
    check_torch_version(imported="1.13.0a0", built="1.13.0")  # local suffixes do not matter


def test_import_with_a_different_torch_fails_before_loading_the_module():
    code = ("import torch; torch.__version__ = '9.8.7'\n"
            "try:\n"
            "    import chorus.torch\n"
            "except ImportError as e:\n"
            "    print('IMPORT-ERROR', e)\n"
            "import sys; print('LOADED' if 'chorus._ext' in sys.modules else 'NOT-LOADED')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=None)
    assert "IMPORT-ERROR chorus was built against torch" in out.stdout, out.stdout + out.stderr
    assert "imports torch 9.8.7" in out.stdout
    assert "NOT-LOADED" in out.stdout


def test_build_queries_have_horovods_types_and_match_the_build():
    import chorus.torch as hvd

    for query in (hvd.mpi_built, hvd.mpi_enabled, hvd.gloo_built, hvd.gloo_enabled,
                  hvd.ddl_built, hvd.ccl_built, hvd.cuda_built, hvd.rocm_built):
        assert type(query()) is bool, query.__name__
    assert hvd.mpi_built()
    assert not (hvd.ddl_built() or hvd.ccl_built() or hvd.rocm_built())
    # Exactly one of them carries the job, once it runs.
    assert hvd.mpi_enabled() != hvd.gloo_enabled()
    assert hvd.gloo_built() or not hvd.gloo_enabled()
    # nccl_built() is an int, as in Horovod: NCCL's version code, or 0 without NCCL.
    assert type(hvd.nccl_built()) is int
    # CTest passes how CMake configured the build (CHORUS_WITH_CUDA, CHORUS_WITH_NCCL).
    expected_nccl = os.environ.get("CHORUS_TEST_WITH_NCCL")
    if expected_nccl is not None:
        assert bool(hvd.nccl_built()) == (expected_nccl == "1")
        if hvd.nccl_built():
            assert hvd.nccl_built() >= 2000  # NCCL 2.x.y codes are 2xyz or 2xxyy
    expected_gloo = os.environ.get("CHORUS_TEST_WITH_GLOO")
    if expected_gloo is not None:
        assert hvd.gloo_built() == (expected_gloo == "1")
    expected_cuda = os.environ.get("CHORUS_TEST_WITH_CUDA")
    if expected_cuda is not None:
        assert hvd.cuda_built() == (expected_cuda == "1")



def _init_in_a_fresh_process(extra_env):
    """hvd.init() in a new Python, outside this job (no mpirun or torchrun variables): what it
    raised."""
    torchrun = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                "MASTER_ADDR", "MASTER_PORT"}
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX_", "CHORUS_", "HOROVOD_")) and k not in torchrun}
    env.update(extra_env)
    code = ("import chorus.torch as hvd\n"
            "try:\n"
            "    hvd.init()\n"
            "except Exception as e:\n"
            "    print('RAISED', type(e).__name__, isinstance(e, ValueError), e)\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)


def test_a_job_without_mpi_names_what_it_lacks():
    # torchrun's variables without MASTER_ADDR: the Gloo world cannot meet, and says why.
    out = _init_in_a_fresh_process({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "29500"})
    assert "MASTER_ADDR is unset" in out.stdout, out.stdout + out.stderr
    out = _init_in_a_fresh_process({"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                                    "MASTER_PORT": "29500"})
    assert "RANK=2 is not below WORLD_SIZE=2" in out.stdout, out.stdout + out.stderr
    # Gloo asked for with no store to meet in.
    out = _init_in_a_fresh_process({"CHORUS_CONTROLLER": "gloo"})
    expected = ("no store to meet in" if os.environ.get("CHORUS_TEST_WITH_GLOO", "1") == "1"
                else "this build of Chorus has no Gloo")
    assert expected in out.stdout, out.stdout + out.stderr
    out = _init_in_a_fresh_process({"HOROVOD_CONTROLLER": "ucx"})
    assert "HOROVOD_CONTROLLER='ucx' is invalid" in out.stdout, out.stdout + out.stderr


def test_horovod_variables_are_read_by_the_core():
    # Valid HOROVOD_* values earlier in the settings table pass; a bad one later is refused
    # by the core's own parser, naming the Horovod variable (CHORUS_* ones are unset).
    out = _init_in_a_fresh_process({"HOROVOD_FUSION_THRESHOLD": "1",
                                    "HOROVOD_HIERARCHICAL_ALLREDUCE": "1",
                                    "HOROVOD_LOG_LEVEL": "chatty"})
    assert "RAISED ArgumentError True" in out.stdout, out.stdout + out.stderr
    assert "HOROVOD_LOG_LEVEL='chatty'" in out.stdout, out.stdout + out.stderr
    # The values Horovod's docs allow but the core refuses are refused in Python too.
    out = _init_in_a_fresh_process({"HOROVOD_HIERARCHICAL_ALLREDUCE": "yes"})
    assert "HOROVOD_HIERARCHICAL_ALLREDUCE='yes'" in out.stdout, out.stdout + out.stderr


def test_a_horovod_job_scripts_variables_load():
    # Issue 32: what Horovod runs, Chorus runs. HOROVOD_CYCLE_TIME=0 keeps the default cycle
    # time, HOROVOD_STALL_CHECK_DISABLE=1 turns stall inspection off, and variables with no
    # effect in Chorus (any value) are noted in the log, not refused.
    out = _init_in_a_fresh_process({"HOROVOD_CYCLE_TIME": "0",
                                    "HOROVOD_STALL_CHECK_DISABLE": "1",
                                    "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE": "0.8",
                                    "HOROVOD_CPU_OPERATIONS": "not-a-library",
                                    "HOROVOD_GPU_OPERATIONS": "NCCL",
                                    "CHORUS_LOG_LEVEL": "info"})
    assert out.returncode == 0 and "RAISED" not in out.stdout, out.stdout + out.stderr
    for note in ("HOROVOD_CYCLE_TIME=0: read as unset",
                 "HOROVOD_STALL_CHECK_DISABLE=1: read as CHORUS_STALL_CHECK_SECONDS=0",
                 "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE=0.8 has no effect in Chorus",
                 "HOROVOD_CPU_OPERATIONS=not-a-library has no effect in Chorus",
                 "HOROVOD_GPU_OPERATIONS=NCCL has no effect in Chorus"):
        assert (out.stdout + out.stderr).count(note) == 1, out.stdout + out.stderr
