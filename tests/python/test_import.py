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
    assert hvd.mpi_built() and hvd.mpi_enabled()
    assert not (hvd.gloo_built() or hvd.gloo_enabled() or hvd.ddl_built() or hvd.ccl_built()
                or hvd.rocm_built())
    # nccl_built() is an int, as in Horovod: NCCL's version code, or 0 without NCCL.
    assert type(hvd.nccl_built()) is int
    # CTest passes how CMake configured the build (CHORUS_WITH_CUDA, CHORUS_WITH_NCCL).
    expected_nccl = os.environ.get("CHORUS_TEST_WITH_NCCL")
    if expected_nccl is not None:
        assert bool(hvd.nccl_built()) == (expected_nccl == "1")
        if hvd.nccl_built():
            assert hvd.nccl_built() >= 2000  # NCCL 2.x.y codes are 2xyz or 2xxyy
    expected_cuda = os.environ.get("CHORUS_TEST_WITH_CUDA")
    if expected_cuda is not None:
        assert hvd.cuda_built() == (expected_cuda == "1")



def test_horovod_variables_become_chorus_options(monkeypatch):
    from chorus.torch import runtime

    for name in ("CHORUS_LOG_LEVEL", "CHORUS_HIERARCHICAL_ALLREDUCE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOROVOD_LOG_LEVEL", "ERROR")
    for value, want in (("1", True), ("off", False), ("auto", None)):
        monkeypatch.setenv("HOROVOD_HIERARCHICAL_ALLREDUCE", value)
        options = runtime._options_from_horovod_env()
        assert options["log_level"] == "error"
        assert options["hierarchical_allreduce"] is want

    monkeypatch.setenv("CHORUS_HIERARCHICAL_ALLREDUCE", "1")
    assert "hierarchical_allreduce" not in runtime._options_from_horovod_env()

    monkeypatch.delenv("CHORUS_HIERARCHICAL_ALLREDUCE")
    monkeypatch.setenv("HOROVOD_HIERARCHICAL_ALLREDUCE", "sometimes")
    with pytest.raises(ValueError, match="HOROVOD_HIERARCHICAL_ALLREDUCE='sometimes'"):
        runtime._options_from_horovod_env()
