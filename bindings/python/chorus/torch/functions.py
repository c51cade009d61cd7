"""Making every rank start from the same state: parameters, optimizer state, Python objects."""

import io
import pickle

import torch

from chorus.torch import mpi_ops
from chorus.torch.mpi_ops import global_process_set


def _flat_view(t):
    # The core takes tensors of any rank, but a 1-D view of a 0-d tensor (step counters,
    # num_batches_tracked) keeps every path on the plain dense layout.
    return t.view(1) if t.dim() == 0 else t


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Overwrites, in place, every tensor of ``params`` with ``root_rank``'s.

    ``params`` is a ``state_dict()`` (parameters and buffers, sent in sorted key order) or a
    list of (name, tensor) pairs such as ``list(model.named_parameters())``. Collective:
    every rank passes the same names in the same structure.
    """
    if isinstance(params, dict):
        items = sorted(params.items())
    elif isinstance(params, (list, tuple)) or hasattr(params, "__iter__"):
        items = list(params)
        if any(not isinstance(i, tuple) or len(i) != 2 for i in items):
            raise ValueError("broadcast_parameters takes a state_dict or (name, tensor) pairs")
    else:
        raise ValueError(f"broadcast_parameters: invalid params of type {type(params)}")
    handles = []
    for name, p in items:
        if p is None:
            continue
        if not isinstance(p, torch.Tensor):
            raise ValueError(f"broadcast_parameters: '{name}' is a {type(p).__name__}, "
                             f"not a tensor")
        handles.append(mpi_ops.broadcast_async_(_flat_view(p.detach()), root_rank,
                                                name=f"broadcast_parameters.{name}",
                                                process_set=process_set))
    for h in handles:
        mpi_ops.synchronize(h)


def _pickle_tensor(obj):
    buf = io.BytesIO()
    pickle.dump(obj, buf, protocol=pickle.HIGHEST_PROTOCOL)
    return torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """``root_rank``'s ``obj`` on every rank (pickled; tensors inside travel with it).
    ``root_rank`` is a global rank, also within a process set."""
    name = name or "broadcast_object"
    is_root = mpi_ops.rank() == root_rank
    payload = _pickle_tensor(obj) if is_root else torch.empty(0, dtype=torch.uint8)
    length = torch.tensor([payload.numel()], dtype=torch.int64)
    mpi_ops.broadcast_(length, root_rank, name=f"{name}.size", process_set=process_set)
    if not is_root:
        payload = torch.empty(int(length.item()), dtype=torch.uint8)
    mpi_ops.broadcast_(payload, root_rank, name=f"{name}.data", process_set=process_set)
    if is_root:
        return obj
    return pickle.loads(payload.numpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """The list of every rank's ``obj``, in rank order (pickled)."""
    name = name or "allgather_object"
    payload = _pickle_tensor(obj)
    sizes = mpi_ops.allgather(torch.tensor([payload.numel()], dtype=torch.int64),
                              name=f"{name}.size", process_set=process_set)
    data = mpi_ops.allgather(payload, name=f"{name}.data", process_set=process_set)
    out, offset = [], 0
    for n in sizes.tolist():
        out.append(pickle.loads(data[offset:offset + n].numpy().tobytes()))
        offset += n
    return out


class _TensorSlot:
    """Stands for a state tensor in the skeleton of an optimizer state_dict."""

    def __init__(self, index, t):
        self.index, self.shape, self.dtype = index, tuple(t.shape), t.dtype


def _skeleton(value, tensors):
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return _TensorSlot(len(tensors) - 1, value)
    if isinstance(value, dict):
        return {k: _skeleton(v, tensors) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_skeleton(v, tensors) for v in value)
    return value


def _fill(value, tensors):
    if isinstance(value, _TensorSlot):
        return tensors[value.index]
    if isinstance(value, dict):
        return {k: _fill(v, tensors) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_fill(v, tensors) for v in value)
    return value


def _make_state(optimizer):
    """Creates an optimizer's per-parameter state as Horovod does: every parameter that
    requires a gradient gets a zero one (sparse for SparseAdam; a gradient it had is
    replaced), then the optimizer's own step() runs once, never a DistributedOptimizer's
    (whose step would reduce). Parameters without requires_grad keep ``.grad = None``. As in
    Horovod, weight decay in that step does move the parameters, the same way on every rank
    whose parameters are the same."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad:
                p.grad = torch.zeros_like(p)
                if isinstance(optimizer, torch.optim.SparseAdam):
                    p.grad = p.grad.to_sparse()
    if getattr(optimizer, "_chorus_distributed", False):
        super(type(optimizer), optimizer).step()
    else:
        optimizer.step()


def broadcast_optimizer_state(optimizer, root_rank, process_set=global_process_set):
    """Gives every rank ``root_rank``'s optimizer state: the hyperparameters of each
    parameter group and the per-parameter state (momentum buffers, Adam's moments and step
    counts, ...), also on ranks whose optimizer has no state yet.

    The structure of the root's ``state_dict()`` travels pickled, with its tensors replaced by
    placeholders; the tensors themselves travel as broadcasts; the other ranks then
    ``load_state_dict()`` the result. Works for any torch.optim optimizer (and a
    DistributedOptimizer) over the same parameters on every rank. When the root's optimizer
    has no state yet, every rank first creates it as Horovod does (_make_state).
    ``root_rank`` is a global rank, also within a process set.
    """
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("broadcast_optimizer_state does not support torch.optim.LBFGS")
    is_root = mpi_ops.rank() == root_rank
    root_has_state = broadcast_object(bool(optimizer.state_dict()["state"]) if is_root else None,
                                      root_rank, name="broadcast_optimizer_state.has_state",
                                      process_set=process_set)
    if not root_has_state:
        _make_state(optimizer)
    tensors = []
    skeleton = _skeleton(optimizer.state_dict(), tensors) if is_root else None
    skeleton = broadcast_object(skeleton, root_rank, name="broadcast_optimizer_state.skeleton",
                                process_set=process_set)
    if not is_root:
        tensors = []

        def collect(v):
            if isinstance(v, _TensorSlot):
                tensors.append(torch.empty(v.shape, dtype=v.dtype))
            elif isinstance(v, dict):
                for x in v.values():
                    collect(x)
            elif isinstance(v, (list, tuple)):
                for x in v:
                    collect(x)

        collect(skeleton)
    handles = [
        mpi_ops.broadcast_async_(_flat_view(t), root_rank,
                                 name=f"broadcast_optimizer_state.{i}", process_set=process_set)
        for i, t in enumerate(tensors)
    ]
    for h in handles:
        mpi_ops.synchronize(h)
    if not is_root:
        optimizer.load_state_dict(_fill(skeleton, tensors))
