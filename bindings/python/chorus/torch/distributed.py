"""The ``torch.distributed`` backend ``chorus``, registered by ``import chorus.torch``::

    import chorus.torch
    dist.init_process_group("chorus", init_method=..., rank=..., world_size=...)

Every call of the process group (``dist.all_reduce``, DDP's buckets, ...) is a Chorus
collective: negotiated, fused and reduced like any other, named by its place in the group's
sequence of calls (docs/torch_distributed.md). The group's ranks must be those of the Chorus
job, which a launcher such as ``mpirun`` or ``srun`` started; Chorus is initialized by the
first group made, if the script has not called ``hvd.init()`` itself.
"""

import inspect

import torch.distributed as dist

from chorus import _ext
from chorus.torch import mpi_ops

BACKEND = "chorus"


def _create(options, _backend_options):
    """c10d's creator (extended form): ``options`` holds the group's rank, size and members."""
    if not mpi_ops.is_initialized():
        mpi_ops.init()
    return _ext.process_group(options.group_rank, options.group_size,
                              list(options.global_ranks_in_group), str(options.group_id))


def _register():
    """Registers the backend once; False where this torch or this build has no c10d."""
    if not dist.is_available() or not hasattr(_ext, "process_group"):
        return False
    if not hasattr(dist.Backend, BACKEND.upper()):
        kwargs = {"extended_api": True}
        if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
            kwargs["devices"] = ["cpu", "cuda"]
        dist.Backend.register_backend(BACKEND, _create, **kwargs)
    return True


registered = _register()
