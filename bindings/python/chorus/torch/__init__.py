"""chorus.torch: run a script written for ``horovod.torch`` on Chorus by changing its import::

    import chorus.torch as hvd

Same names, arguments, defaults and semantics; see docs/python.md for what is and is not
covered. Collective failures raise ``hvd.HorovodInternalError``
(= ``chorus.common.exceptions.HorovodInternalError``, a RuntimeError).
"""

from chorus._loader import check_torch_version  # noqa: F401  (runs the check first)
from chorus.common.exceptions import (ArgumentError, CollectiveError,  # noqa: F401
                                      HorovodInternalError, HostsUpdatedInterrupt,
                                      NotSupportedError)
from chorus.torch.compression import Compression  # noqa: F401
from chorus.torch.mpi_ops import (  # noqa: F401
    Adasum, Average, Max, Min, Product, ProcessSet, Sum, add_process_set, allgather,
    allgather_async, allreduce, allreduce_, allreduce_async, allreduce_async_, alltoall,
    alltoall_async, barrier, broadcast, broadcast_, broadcast_async, broadcast_async_,
    ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled,
    global_process_set, grouped_allgather, grouped_allgather_async, grouped_allreduce,
    grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_,
    grouped_reducescatter, grouped_reducescatter_async, init, is_homogeneous, is_initialized, join, local_rank,
    local_size, mark_step, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built, poll, rank,
    reduce, reduce_, reduce_async, reduce_async_, reducescatter, reducescatter_async,
    remove_process_set, rocm_built, shutdown, size,
    sparse_allreduce_async, start_timeline, stop_timeline, synchronize)
from chorus.torch.functions import (allgather_object, broadcast_object,  # noqa: F401
                                    broadcast_optimizer_state, broadcast_parameters)
from chorus.torch.optimizer import DistributedOptimizer, PowerSGD  # noqa: F401
from chorus.torch.sharded import ShardedOptimizer  # noqa: F401
from chorus.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401
from chorus.torch import distributed, elastic  # noqa: F401
