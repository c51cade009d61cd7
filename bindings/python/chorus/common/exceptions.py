"""Exceptions, under the names that Horovod scripts import.

``from chorus.common.exceptions import HorovodInternalError`` catches a failed collective
(ranks that disagreed on a shape, a stalled tensor, a shutdown while in flight) the way
a Horovod script catches Horovod's. It is ``CollectiveError``, a ``RuntimeError`` whose
message starts with the core's status code, e.g. ``"MISMATCH: allreduce 'w': ..."``.

``ArgumentError`` is the CollectiveError of bad arguments, and also a ``ValueError``, which
is what Horovod raises for them: raised at the call on the rank that made the mistake (a
name already in flight, splits that do not fit, a 0-d tensor to gather), and, for
arguments the ranks disagree on (shapes, dtypes, roots), on every rank when the handle is
synchronized. ``except ValueError`` and ``except HorovodInternalError`` both catch it.
"""

from chorus._loader import ext as _ext

CollectiveError = _ext.CollectiveError
ArgumentError = _ext.ArgumentError
HorovodInternalError = CollectiveError


class NotSupportedError(NotImplementedError):
    """A Horovod feature that Chorus deliberately does not provide (yet)."""


class HostsUpdatedInterrupt(RuntimeError):
    """Raised by ``state.commit()`` on every rank when the supervisor found hosts to grow
    onto (chorus.torch.elastic); ``run`` then stops the workers at that commit so that
    chorusrun relaunches the job on the larger set of hosts."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync
