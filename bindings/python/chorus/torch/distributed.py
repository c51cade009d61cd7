"""The ``torch.distributed`` backend ``chorus``, registered by ``import chorus.torch``::

    import chorus.torch
    dist.init_process_group("chorus", init_method=..., rank=..., world_size=...)

Every call of the process group (``dist.all_reduce``, DDP's buckets, ...) is a Chorus
collective: negotiated, fused and reduced like any other, named by its place in the group's
sequence of calls (docs/torch_distributed.md). The group's ranks must be those of the Chorus
job. The default group starts Chorus if the script has not called ``hvd.init()`` itself: on
MPI where an MPI launcher (``mpirun``, ``srun --mpi=pmix``) started the job, else on Gloo, the
ranks meeting in the store ``init_process_group`` made (``env://``, ``tcp://``, ``file://``).
"""

import inspect

import torch.distributed as dist

from chorus import _ext
from chorus.torch import mpi_ops, runtime

BACKEND = "chorus"


def _create(options, _backend_options):
    """c10d's creator (extended form): ``options`` holds the group's rank, size and members
    (none for the default group), and the store."""
    if not mpi_ops.is_initialized():
        if list(options.global_ranks_in_group):
            raise RuntimeError(
                "the chorus backend starts with the default group: call "
                "dist.init_process_group('chorus', ...) or hvd.init() before new_group(..., "
                "backend='chorus')")
        runtime.init_in_store(options.store, options.group_rank, options.group_size)
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
