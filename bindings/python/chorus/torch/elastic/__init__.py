"""Horovod's elastic training is not provided by Chorus: a job runs on the ranks it started
with. Every entry point here raises NotSupportedError saying so, so that a script fails at
once with a clear message rather than deep inside a recovery path."""

from chorus.common.exceptions import NotSupportedError

_MESSAGE = ("hvd.elastic.{} is not provided: Chorus has no elastic mode (a job keeps the ranks "
            "it was launched with); run the script without elastic, or restart the job from a "
            "checkpoint")


def _unsupported(what):
    raise NotSupportedError(_MESSAGE.format(what))


def run(func):
    _unsupported("run")


class State:
    def __init__(self, *args, **kwargs):
        _unsupported(type(self).__name__)


class ObjectState(State):
    pass


class TorchState(State):
    pass


class ElasticSampler:
    def __init__(self, *args, **kwargs):
        _unsupported("ElasticSampler")
