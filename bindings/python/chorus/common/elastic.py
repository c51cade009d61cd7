"""Elastic training's state and run loop, under the names of ``horovod.common.elastic``.

A job resets in two ways (docs/elastic.md):

- **In place**, on the Gloo world that ``chorusrun --gloo`` supervises: a failed collective
  (``HorovodInternalError``) or ``HostsUpdatedInterrupt`` resets the workers as Horovod's do.
  Chorus stops and starts again in the next round of the job's workers (the survivors, and
  those of added hosts), every rank takes the newest commit any of them holds in memory, the
  reset callbacks run, and ``func`` is called again, in the same processes.
- **By relaunch**, on MPI (``chorusrun --max-restarts`` with mpirun or srun): MPI is
  initialised once per process, so a failed collective ends the worker and the supervisor
  relaunches the job, whose workers resume from the newest commit some node stored;
  ``HostsUpdatedInterrupt`` ends the workers with status 85 at that commit.

On both: ``state.commit()`` saves the state in memory (``state.restore()`` returns to it),
and, in a job chorusrun supervises, hands that copy to Chorus's writer thread, which turns it
into bytes (``dumps``) and stores them in the node's commit store while training goes on;
then it asks whether hosts were added, and if so raises ``HostsUpdatedInterrupt`` on every
rank. Before
the first call of ``func`` the workers agree on the newest stored commit and load it (then
the reset callbacks run), and ``state.sync()`` makes every rank equal to rank 0. When
``func`` returns on every rank, the node's commits are removed: the training they served
has finished.
"""

import atexit
import functools
import pickle
import sys
import time

from chorus._loader import ext as _ext
from chorus.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt

# The status of workers that stop at a commit for hosts added (launch/supervisor.h).
HOSTS_CHANGED_STATUS = 85
# The status of a worker that chorusrun dropped from the job during a reset in place.
LEFT_JOB_STATUS = 86
# Failures during a reset itself that a worker meets in a row before it gives up.
_MOST_RESET_TRIES = 5


class State:
    """What a training function carries across restarts. ``bcast_object(obj)`` broadcasts
    from rank 0; ``get_rank()`` is this rank; ``dumps``/``loads`` turn the saved state into
    the bytes a commit stores and back."""

    def __init__(self, bcast_object, get_rank, dumps=pickle.dumps, loads=pickle.loads):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._dumps = dumps
        self._loads = loads
        self._reset_callbacks = []
        self._commit_number = 0

    def register_reset_callbacks(self, callbacks):
        """Functions called after the workers were relaunched on other hosts and before the
        training resumes, e.g. to scale the learning rate by the new ``size()``."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state in memory and hands it to the writer of the node's commit store,
        then stops every rank with ``HostsUpdatedInterrupt`` if the supervisor found hosts to
        grow onto. Raises for an earlier commit that could not be stored."""
        self.save()
        self._commit_number += 1
        # Asked before the hand-over: the writer then takes the GIL to pickle while this
        # thread goes on, rather than while it waits in the question's collective.
        added = _ext.elastic_hosts_added()
        directory = _ext.elastic_commit_dir()
        if directory:
            # Only the node's first local rank writes the node's copy; the others pass nothing.
            # The writer pickles what save() just made, which no later save changes.
            make = None
            if _ext.local_rank() == 0:
                saved, dumps = self._saved(), self._dumps
                make = lambda: dumps(saved)  # noqa: E731
                _flush_at_exit()
            _ext.elastic_store_commit_async(directory, self._commit_number, make)
        if added:
            # Every node holds this commit before the job is relaunched from it.
            if directory:
                _ext.elastic_flush_commits()
            raise HostsUpdatedInterrupt(skip_sync=False)

    def flush(self):
        """Waits until the commits handed to the writer are in the node's store."""
        if _ext.elastic_commit_dir():
            _ext.elastic_flush_commits()

    def check_host_updates(self):
        """Raises ``HostsUpdatedInterrupt`` on every rank when hosts were added (rank 0 asks
        the supervisor; every rank gets its answer), once this node stored the last commit."""
        if _ext.elastic_hosts_added():
            _ext.elastic_flush_commits()
            raise HostsUpdatedInterrupt(skip_sync=False)

    def save(self):
        """Saves the state in memory."""
        raise NotImplementedError()

    def restore(self):
        """Returns to the state saved last."""
        raise NotImplementedError()

    def sync(self):
        """Makes every rank's state rank 0's."""
        raise NotImplementedError()

    def reset(self):
        """Called after a relaunch, before the reset callbacks."""

    def _saved(self):
        """The state save() took, as one picklable value."""
        raise NotImplementedError()

    def _load_saved(self, saved):
        """Makes `saved` (a value of _saved()) the saved state and restores it."""
        raise NotImplementedError()

    def _resume_from_newest_commit(self):
        """Loads the newest commit some node holds; returns whether there was one."""
        directory = _ext.elastic_commit_dir()
        if not directory:
            return False
        start = time.monotonic()
        newest = _ext.elastic_newest_commit(directory)
        if newest is None:
            return False
        number, data = newest
        self._load_saved(self._loads(data))
        self._commit_number = number
        if self._rank() == 0:
            print("chorus.elastic: resumed from commit {} ({:.1f} MB) in {:.2f} s".format(
                number, len(data) / 1e6, time.monotonic() - start), file=sys.stderr, flush=True)
        return True

    def _restore_newest_held_commit(self):
        """After a reset in place: every rank takes the newest commit some rank holds in
        memory (sent by the lowest rank holding it where others lack it); returns whether
        there was one. Collective."""
        number, data = _ext.elastic_newest_held_commit(
            self._commit_number, lambda: self._dumps(self._saved()))
        if number == 0:
            self.restore()
            return False
        if data:
            self._load_saved(self._loads(data))
        else:
            self.restore()
        self._commit_number = number
        return True

    def _remove_commits(self):
        directory = _ext.elastic_commit_dir()
        if directory:
            _ext.elastic_remove_commits(directory)


_flush_registered = False


def _flush_at_exit():
    """The writer calls back into Python: what it holds is written before the interpreter
    goes, where a script ends without hvd.shutdown() (which writes it too)."""
    global _flush_registered
    if _flush_registered:
        return
    _flush_registered = True

    def flush():
        try:
            _ext.elastic_flush_commits()
        except Exception as error:  # noqa: BLE001 -- the interpreter is ending: say why
            print("chorus.elastic: {}".format(error), file=sys.stderr, flush=True)

    atexit.register(flush)


class ObjectState(State):
    """Picklable values, given as keyword arguments and kept as attributes."""

    def __init__(self, bcast_object, get_rank, dumps=pickle.dumps, loads=pickle.loads, **kwargs):
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object, get_rank, dumps, loads)

    def save(self):
        self._saved_state = {name: getattr(self, name) for name in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _saved(self):
        return self._saved_state

    def _load_saved(self, saved):
        self._saved_state = saved
        self.restore()

    def _set_attrs(self):
        for name, value in self._saved_state.items():
            setattr(self, name, value)


def _reset_in_place(reset, why):
    """Resets this worker (again after a failure during the reset itself); False when
    chorusrun dropped it from the job."""
    print("chorus.elastic: rank {} resets in place: {}".format(_ext.rank(), why),
          file=sys.stderr, flush=True)
    for tries in range(1, _MOST_RESET_TRIES + 1):
        start = time.monotonic()
        try:
            left = reset()
        except HorovodInternalError as e:
            if tries == _MOST_RESET_TRIES:
                raise
            print("chorus.elastic: the reset failed ({}); resetting again".format(e),
                  file=sys.stderr, flush=True)
            continue
        if left is not None:
            print("chorus.elastic: " + left, file=sys.stderr, flush=True)
            return False
        print("chorus.elastic: rank {} of {} after the reset ({:.2f} s)".format(
            _ext.rank(), _ext.size(), time.monotonic() - start), file=sys.stderr, flush=True)
        return True
    return False


def run_fn(func, shutdown, barrier, reset):
    """The elastic run loop around ``func(state, *args, **kwargs)``. ``shutdown()`` ends
    Chorus before a relaunched worker stops for added hosts, ``barrier()`` waits for every
    rank, and ``reset()`` resets a worker in place (None, or why it left the job)."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        in_place = _ext.elastic_resets_in_place()
        # A worker that joins a job resetting in place after its first round (an added
        # host's) takes the state the others agree on after their reset, as they do.
        was_reset = in_place and _ext.elastic_start_number() > 1
        if not was_reset and state._resume_from_newest_commit():
            state.on_reset()
        synced = False
        while True:
            try:
                if was_reset:
                    was_reset = False
                    if state._restore_newest_held_commit():
                        if _ext.rank() == 0:
                            print("chorus.elastic: resumed in place from commit {}".format(
                                state._commit_number), file=sys.stderr, flush=True)
                        state.on_reset()
                        synced = True
                    else:
                        state.on_reset()
                        synced = False
                if not synced:
                    state.sync()
                synced = True
                result = func(state, *args, **kwargs)
                # Every rank finished: a commit still being written lands (or its failure is
                # raised) before the store goes. A rank lost now resets the others, whose
                # func returns at once from the last commit.
                state.flush()
                barrier()
                break
            except HostsUpdatedInterrupt:
                # Every rank raised it at the same commit, which every node stored.
                if not in_place:
                    # The supervisor relaunches the job on the hosts it found.
                    shutdown()
                    sys.exit(HOSTS_CHANGED_STATUS)
                why = "hosts were added"
            except HorovodInternalError as e:
                if not in_place:
                    raise
                why = str(e)
            if not _reset_in_place(reset, why):
                sys.exit(LEFT_JOB_STATUS)
            was_reset = True
        state._remove_commits()
        return result

    return wrapper
