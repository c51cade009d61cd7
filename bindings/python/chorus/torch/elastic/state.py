"""TorchState: models, optimizers and ElasticSampler objects, each kept by a handler of its
type, and any other picklable values, under ``horovod.torch.elastic``'s names and
behaviour. A commit copies each state_dict's tensors in memory; the commit's writer thread
turns that copy into bytes with ``torch.save``."""

import copy
import inspect
import io
import sys

import torch

from chorus.common.elastic import ObjectState
from chorus.torch.elastic.sampler import ElasticSampler
from chorus.torch.functions import broadcast_object, broadcast_optimizer_state, broadcast_parameters
from chorus.torch.mpi_ops import rank
from chorus.torch.sharded import ShardedOptimizerBase

# torch.load reads back any object a commit holds (ours, never a download); newer releases
# only read tensors unless told.
_LOAD_ARGS = ({"weights_only": False}
              if "weights_only" in inspect.signature(torch.load).parameters else {})


def _dumps(value):
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def _loads(data):
    # Onto the CPU: the writer's devices need not exist here, and load_state_dict copies each
    # tensor to its parameter's device.
    return torch.load(io.BytesIO(data), map_location="cpu", **_LOAD_ARGS)


def _copy(value, into=None):
    """A copy of a state_dict that shares no tensor with it: tensors cloned, containers
    rebuilt (with a module's ``_metadata``), anything else deep-copied (numbers, tuples of
    numbers). Faster than copy.deepcopy, which goes through each tensor's __deepcopy__.
    ``into``, an earlier copy of the same state that nothing else holds, lends its tensors
    where they fit (no new memory, whose first touch costs as much as the copy)."""
    if isinstance(value, torch.Tensor):
        if (isinstance(into, torch.Tensor) and into.shape == value.shape
                and into.dtype == value.dtype and into.device == value.device
                and into.stride() == value.stride()):
            with torch.no_grad():
                return into.copy_(value)
        return value.detach().clone()
    if isinstance(value, dict):
        if not isinstance(into, dict):
            into = {}
        copied = type(value)((key, _copy(item, into.get(key))) for key, item in value.items())
        metadata = getattr(value, "_metadata", None)
        if metadata is not None:
            copied._metadata = copy.deepcopy(metadata)
        return copied
    if isinstance(value, list):
        if not isinstance(into, list) or len(into) != len(value):
            into = [None] * len(value)
        return [_copy(item, old) for item, old in zip(value, into)]
    return copy.deepcopy(value)


class StateHandler:
    """Keeps one object's saved state: ``save``, ``restore`` and ``sync`` as the state
    object's, and ``saved``/``load_saved`` for the commit's bytes."""

    def __init__(self, value):
        self.value = value
        self._saved = _copy(self._state_of(value))
        self._spare = None

    def _state_of(self, value):
        return value.state_dict()

    def save(self):
        # Never into the copy saved last, which the commit's writer may still be saving: into
        # the one before, once nothing but this handler holds it (the writer let it go).
        spare = self._spare if self._spare is not None and sys.getrefcount(self._spare) <= 2 \
            else None
        self._spare = self._saved
        self._saved = _copy(self._state_of(self.value), spare)

    def restore(self):
        # From a copy: an optimizer's load_state_dict may keep the tensors it is given, and
        # the saved ones must not change (a later restore, a commit being written).
        self.value.load_state_dict(_copy(self._saved))

    def sync(self):
        raise NotImplementedError()

    def set_value(self, value):
        self.value = value
        self._spare = None
        self.save()

    def saved(self):
        return self._saved

    def load_saved(self, saved):
        self._saved = saved
        self._spare = None
        self.restore()


class ModelStateHandler(StateHandler):
    def restore(self):
        self.value.load_state_dict(self._saved)  # copied into the parameters

    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class OptimizerStateHandler(StateHandler):
    """An optimizer's state_dict and, for a DistributedOptimizer with PowerSGD, PowerSGD's step
    count and warm Qs (each rank's error feedback restarts from zero on restore)."""

    def _state_of(self, value):
        powersgd = getattr(value, "powersgd_state", None)
        return {"optimizer": value.state_dict(), "powersgd": powersgd() if powersgd else None}

    def restore(self):
        saved = _copy(self._saved)
        self.value.load_state_dict(saved["optimizer"])
        if saved["powersgd"] is not None:
            self.value.load_powersgd_state(saved["powersgd"])

    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)
        if getattr(self.value, "powersgd_state", None) and self.value.powersgd_state():
            self.value.load_powersgd_state(broadcast_object(self.value.powersgd_state()))


class ShardedOptimizerStateHandler(StateHandler):
    """A ShardedOptimizer's state is kept consolidated, by parameter name, so that a job that
    restarts on another number of ranks reshards it on restore. Saving is collective, as
    every commit is."""

    def _state_of(self, value):
        return value.consolidated_state_dict()

    def sync(self):
        self.value.load_state_dict(broadcast_object(self._saved))


class SamplerStateHandler(StateHandler):
    def sync(self):
        self.value.load_state_dict(broadcast_object(self.value.state_dict()))


_handler_registry = [
    (torch.nn.Module, ModelStateHandler),
    (ShardedOptimizerBase, ShardedOptimizerStateHandler),
    (torch.optim.Optimizer, OptimizerStateHandler),
    (ElasticSampler, SamplerStateHandler),
]


def get_handler_registry():
    return _handler_registry


def set_handler_registry(registry):
    global _handler_registry
    _handler_registry = registry


def _handler_for(value):
    for kind, handler in _handler_registry:
        if isinstance(value, kind):
            return handler(value)
    return None


class TorchState(ObjectState):
    """The training state: ``model``, ``optimizer`` and the keyword arguments, each an
    attribute. Modules, optimizers and ElasticSampler objects go through their handlers
    (their ``state_dict``); other values are kept as they are, and must pickle."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        handlers, plain = {}, {}
        for name, value in kwargs.items():
            handler = _handler_for(value)
            if handler is None:
                plain[name] = value
            else:
                handlers[name] = handler
        self._handlers = handlers
        for name, handler in handlers.items():
            setattr(self, name, handler.value)
        super().__init__(bcast_object=broadcast_object, get_rank=rank, dumps=_dumps, loads=_loads,
                         **plain)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        for handler in self._handlers.values():
            handler.sync()
        super().sync()

    def _saved(self):
        return {"handlers": {name: h.saved() for name, h in self._handlers.items()},
                "values": super()._saved()}

    def _load_saved(self, saved):
        for name, handler in self._handlers.items():
            handler.load_saved(saved["handlers"][name])
        super()._load_saved(saved["values"])

    def __setattr__(self, name, value):
        if name in getattr(self, "_handlers", {}) and hasattr(self, name):
            self._handlers[name].set_value(value)
        super().__setattr__(name, value)
