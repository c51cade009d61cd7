"""Exceptions, under the names that Horovod scripts import.

``from chorus.common.exceptions import HorovodInternalError`` catches a failed collective
(ranks that disagreed on a shape, a stalled tensor, a shutdown while in flight) the way
a Horovod script catches Horovod's. It is ``CollectiveError``, a ``RuntimeError`` whose
message starts with the core's status code, e.g. ``"MISMATCH: allreduce 'w': ..."``.
"""

from chorus._loader import ext as _ext

CollectiveError = _ext.CollectiveError
HorovodInternalError = CollectiveError


class NotSupportedError(NotImplementedError):
    """A Horovod feature that Chorus deliberately does not provide (yet)."""


class HostsUpdatedInterrupt(RuntimeError):
    """Horovod's elastic-training signal. Chorus has no elastic mode, so it is never raised;
    it exists so that scripts naming it in an ``except`` clause still import."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync
