"""Runtime control with horovod.torch's names: init/shutdown, the topology and build
queries, process sets, the handles of asynchronous collectives (poll, synchronize) and the
timeline. The collectives themselves are in mpi_ops, which re-exports all of this.
"""

import itertools
import os
import threading

from chorus.common.exceptions import NotSupportedError
from chorus._loader import ext as _ext


class ProcessSet:
    """A subset of the ranks that collectives can run within.

    Create it with the global ranks it contains, then register it on every rank (the same
    sets in the same order): ``hvd.init(process_sets=[...])`` or ``hvd.add_process_set(ps)``.
    """

    def __init__(self, ranks):
        self.ranks = sorted(int(r) for r in ranks)
        self.process_set_id = None

    def _require_id(self):
        if self.process_set_id is None:
            raise ValueError(f"{self} is not registered: pass it to hvd.init(process_sets=...) "
                             f"or hvd.add_process_set() on every rank first")
        return self.process_set_id

    def size(self):
        """Number of ranks in the set, or None if it is not registered."""
        if self.process_set_id is None:
            return None
        return _ext.process_set_size(self.process_set_id)

    def rank(self):
        """This rank's rank within the set (-1 if not a member), or None if not registered."""
        if self.process_set_id is None:
            return None
        return _ext.process_set_rank(self.process_set_id)

    def included(self):
        """Whether this rank belongs to the set (None if it is not registered)."""
        if self.process_set_id is None:
            return None
        return _ext.process_set_rank(self.process_set_id) >= 0

    def __repr__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0

_lock = threading.Lock()
_handles = {}  # int -> (TensorHandle, finish(TensorHandle) -> result)
_handle_ids = itertools.count(1)
_registered_sets = {}  # id -> ProcessSet


def init(comm=None, process_sets=None):
    """Starts Chorus on this rank (collective: every rank calls it).

    The job is MPI's where an MPI launcher (mpirun, srun's PMI plugin) started it, else Gloo's
    where torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) say where the ranks
    meet; CHORUS_CONTROLLER (or HOROVOD_CONTROLLER) chooses otherwise. ``comm`` (an mpi4py
    communicator in Horovod) is not supported: Chorus runs on every rank the launcher started.
    ``process_sets`` is a list of ProcessSet registered right after start, in
    order, on every rank. HOROVOD_* tuning variables are honoured when the CHORUS_* variable
    of the same meaning is unset (the core reads both). Calling init() again while
    initialized does nothing.
    """
    if comm is not None:
        raise NotSupportedError("hvd.init(comm=...) is not supported: Chorus runs on every rank "
                                "that mpirun or srun started (MPI_COMM_WORLD)")
    if process_sets == "dynamic":
        process_sets = None
    _start(_ext.init, process_sets)


def init_in_store(store, rank, size):
    """Starts Chorus on a job's ranks that meet in ``store``, a torch.distributed store (the
    chorus backend's default group does this); an MPI launcher's job stays on MPI."""
    _start(lambda: _ext.init_in_store(store, rank, size), None)


def _start(start, process_sets):
    if _ext.is_initialized():
        return
    start()
    global_process_set.ranks = list(range(_ext.size()))
    _registered_sets.clear()
    _registered_sets[0] = global_process_set
    for ps in process_sets or []:
        add_process_set(ps)


def shutdown():
    """Stops Chorus on this rank; handles still pending fail. Safe to call twice."""
    _forget_handles_and_sets()
    _ext.shutdown()


def _forget_handles_and_sets():
    with _lock:
        _handles.clear()
    for ps in list(_registered_sets.values()):
        if ps is not global_process_set:
            ps.process_set_id = None
    _registered_sets.clear()


def elastic_reset():
    """An elastic worker's reset in place (chorus.torch.elastic's run, in a job chorusrun
    --gloo supervises): Chorus stops on this rank and starts again in the next round of the
    job's workers, whose rank() and size() it then has. Returns None, or why chorusrun dropped
    this worker from the job; raises CollectiveError when the reset itself failed."""
    _forget_handles_and_sets()
    left = _ext.elastic_reset()
    if left is None:
        global_process_set.ranks = list(range(_ext.size()))
        _registered_sets[0] = global_process_set
    return left


def is_initialized():
    return _ext.is_initialized()


def _checked(value):
    # This rank's place stays known until its own shutdown(), also once a peer's shutdown (or
    # a failure) stopped Chorus: a script that prints its rank after training still can.
    if _ext.rank() < 0:
        raise ValueError("Chorus has not been initialized; call hvd.init() first")
    return value


def size():
    return _checked(_ext.size())


def rank():
    return _checked(_ext.rank())


def local_size():
    return _checked(_ext.local_size())


def local_rank():
    return _checked(_ext.local_rank())


def cross_size():
    return _checked(_ext.cross_size())


def cross_rank():
    return _checked(_ext.cross_rank())


def is_homogeneous():
    """True when every host runs the same number of ranks."""
    return _checked(_ext.local_size() * _ext.cross_size() == _ext.size())


def mpi_threads_supported():
    """True on a job that MPI carries: Chorus's thread and the script's may both use MPI."""
    return _checked(_ext.controller() == "mpi")


# What this build supports, for scripts that branch on Horovod's build queries. Chorus is
# always built with MPI, and with Gloo where configure found it; it has no DDL, oneCCL or ROCm
# path. CUDA and NCCL come from the build (CHORUS_WITH_CUDA, CHORUS_WITH_NCCL). The *_built
# queries need no init(); the *_enabled ones say what carries the running job.

def mpi_built():
    """True: Chorus is always built with MPI."""
    return True


def mpi_enabled():
    """True where MPI carries the running job (an MPI launcher started it)."""
    return _ext.controller() == "mpi"


def gloo_built():
    """True where this build can run a job without MPI, on Gloo."""
    return bool(_ext.build_info["gloo"])


def gloo_enabled():
    """True where Gloo carries the running job (torchrun's variables, chorusrun --gloo, or
    the chorus backend's store)."""
    return _ext.controller() == "gloo"


def nccl_built():
    """The NCCL_VERSION_CODE Chorus was compiled against (e.g. 22809 for 2.28.9), 0 without
    NCCL: an int, truthy exactly when the NCCL backend is built, as in Horovod."""
    return int(_ext.build_info["nccl_version_code"])


def cuda_built():
    """True when Chorus was compiled with its CUDA paths (device tensors)."""
    return bool(_ext.build_info["cuda"])


def rocm_built():
    return False


def ddl_built():
    return False


def ccl_built():
    return False


def add_process_set(process_set):
    """Registers a ProcessSet (or a list of ranks) on every rank: collective, in the same
    order on all ranks. Returns the registered ProcessSet."""
    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    if ps.process_set_id is not None:
        raise ValueError(f"{ps} is already registered")
    ps.process_set_id = _ext.add_process_set(ps.ranks)
    _registered_sets[ps.process_set_id] = ps
    return ps


def remove_process_set(process_set):
    """Removes a registered set (collective over every rank). Returns True if it was removed,
    False for the global set or a set that is not registered."""
    if process_set is global_process_set or process_set.process_set_id in (None, 0):
        return False
    _ext.remove_process_set(process_set.process_set_id)
    _registered_sets.pop(process_set.process_set_id, None)
    process_set.process_set_id = None
    return True


def _set_id(process_set):
    if process_set is None:
        return 0
    return process_set._require_id()


def _set_rank(process_set):
    return _ext.process_set_rank(_set_id(process_set))


def _set_size(process_set):
    return _ext.process_set_size(_set_id(process_set))


def _set_ranks(process_set):
    """The set's global ranks in set-rank order."""
    _set_id(process_set)
    return (process_set or global_process_set).ranks


class _Handle(int):
    """The handle of an asynchronous collective: an int, as Horovod's, that can also be
    called to synchronize it (as Horovod's sparse_allreduce_async handle is)."""

    def __call__(self):
        return synchronize(self)


def _register(tensor_handle, finish):
    handle = _Handle(next(_handle_ids))
    with _lock:
        _handles[handle] = (tensor_handle, finish)
    return handle


def poll(handle):
    """True once the collective of ``handle`` has finished (successfully or not)."""
    with _lock:
        entry = _handles.get(handle)
    if entry is None:
        raise ValueError(f"unknown or already synchronized handle {handle!r}")
    return entry[0].poll()


def synchronize(handle):
    """Waits for the collective of ``handle`` and returns its result; the handle is then
    released. Raises HorovodInternalError if the collective failed."""
    with _lock:
        entry = _handles.pop(handle, None)
    if entry is None:
        raise ValueError(f"unknown or already synchronized handle {handle!r}")
    th, finish = entry
    return finish(th)


def start_timeline(file_path, mark_cycles=False):
    """Starts writing a Chrome-trace timeline to ``file_path`` (rank 0 writes; on the other
    ranks it does nothing). With ``{rank}`` in the path every rank that calls it writes its
    own file, the path with its rank there, and ``chorus-trace merge`` makes one trace of
    them. Not collective: any rank, any thread, any time after init().

    Returns once the change took effect, so collectives started afterwards are recorded. An
    active timeline (HOROVOD_TIMELINE / CHORUS_TIMELINE, or an earlier call) is closed first,
    a complete file, and replaced. ``mark_cycles`` adds a CYCLE_START mark for every
    cycle that ran a collective. A path rank 0 cannot create raises
    CollectiveError (a RuntimeError), and then no timeline is active."""
    _checked(None)
    _ext.start_timeline(os.fspath(file_path), bool(mark_cycles))


def stop_timeline():
    """Stops the active timeline and closes its file; nothing recorded after the call goes
    there. Does nothing when no timeline is active."""
    _checked(None)
    _ext.stop_timeline()


def mark_step():
    """Marks the end of a training step on this rank's timeline, so that ``chorus-trace
    summary`` splits each step into computing, waiting for peers and reducing.
    DistributedOptimizer marks its steps itself; a loop without it calls this after each
    step. Does nothing without an active timeline."""
    _ext.mark_step()
