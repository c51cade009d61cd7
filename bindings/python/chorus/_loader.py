"""Loads chorus._ext after checking that it was built for the torch being imported.

The module links libtorch; loaded into a process whose torch differs, it would fail with an
undefined symbol or, worse, load and misbehave. The check compares major.minor.patch of the
torch that CMake saw at build time with ``torch.__version__`` (local suffixes such as
``+cu121`` or ``a0`` are ignored) and fails with an ImportError that says how to rebuild.
"""

import re

import torch

from chorus import _build_info


def _release(version):
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", str(version))
    if not m:
        return None
    return tuple(int(g or 0) for g in m.groups())


def check_torch_version(imported=None, built=None):
    imported = torch.__version__ if imported is None else imported
    built = _build_info.TORCH_VERSION if built is None else built
    if _release(imported) != _release(built):
        raise ImportError(
            f"chorus was built against torch {built} but this Python imports torch {imported} "
            f"(from {getattr(torch, '__file__', '?')}); rebuild chorus with this Python: "
            f"pip install --no-build-isolation <chorus>/bindings/python, or configure CMake "
            f"with -DCHORUS_PYTHON_EXECUTABLE=<this python>")


check_torch_version()

from chorus import _ext as ext  # noqa: E402  (only after the check)
