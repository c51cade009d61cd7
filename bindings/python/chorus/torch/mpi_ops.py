"""Tensor collectives with horovod.torch's names, arguments and defaults.

Every collective goes to the C++ LibTorch adapter (Chorus::torch) through chorus._ext: the
``*_async`` functions enqueue and return an integer handle at once; ``synchronize(handle)``
(or calling the handle) waits and returns the result, ``poll(handle)`` says whether it is
done. A failed collective (a shutdown while in flight, a stall) raises
``HorovodInternalError`` (``chorus.common.exceptions.CollectiveError``, a RuntimeError) on
every rank when its handle is synchronized; ranks that disagree on a shape, a dtype or a
root raise ``ArgumentError``, which is both that and a ValueError. Bad arguments on one rank
(a name already in flight, splits that do not fit) raise ``ArgumentError`` at the call, on
that rank alone.

Unnamed collectives get a generated name at the start of the call, before any check, so a
call that fails on every rank, or on some, uses up its name everywhere and the names of
later unnamed calls still agree across ranks.

``root_rank`` is a global rank, also within a process set (as in Horovod).

The synchronous out-of-place collectives (``allreduce``, ``grouped_allreduce``,
``allgather``, ``grouped_allgather``, ``broadcast``, ``alltoall``, ``reducescatter``,
``grouped_reducescatter``) are differentiable with Horovod's gradients; the in-place
(``*_``) and ``*_async`` forms are not. A backward pass
runs collectives too, so every rank of the set must run it (names derive from the forward
name: ``<name>.grad``).

Runtime control (init, topology and build queries, process sets, poll/synchronize, the
timeline) lives in chorus.torch.runtime and is re-exported here, so ``mpi_ops`` offers the
whole of Horovod's module of that name.
"""

import collections
import itertools
import numbers
import warnings

import torch

from chorus.common.exceptions import (ArgumentError, HorovodInternalError,  # noqa: F401
                                      NotSupportedError)
from chorus._loader import ext as _ext
from chorus.torch.compression import Compression
from chorus.torch.runtime import (  # noqa: F401
    ProcessSet, _register, _set_id, _set_rank, _set_ranks, _set_size, add_process_set,
    ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled,
    global_process_set, init, is_homogeneous, is_initialized, local_rank, local_size,
    mark_step, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built, poll, rank, remove_process_set,
    rocm_built, shutdown, size, start_timeline, stop_timeline, synchronize)

# Reduction ops. The values are the core's ReduceOp numbering. Adasum (floating-point
# allreduces only) gives every rank the same bits at any number of ranks.
Sum = 0
Average = 1
Min = 2
Max = 3
Product = 4
Adasum = 5

_OP_NAMES = {Sum: "Sum", Average: "Average", Min: "Min", Max: "Max", Product: "Product",
             Adasum: "Adasum"}


def _grad_name(name, suffix="grad"):
    """The name of a collective that a backward pass runs for the forward one ``name``."""
    return f"{name}.{suffix}"


def _differentiable(*tensors):
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _resolve_op(op, average):
    if average is not None:
        if op is not None:
            raise ValueError("give op or the deprecated average, not both")
        warnings.warn("average is deprecated: use op=hvd.Average or op=hvd.Sum",
                      DeprecationWarning, stacklevel=3)
        op = Average if average else Sum
    if op is None:
        op = Average
    if op not in _OP_NAMES:
        raise ValueError(f"unknown reduction op {op!r}")
    return op


_name_counters = collections.defaultdict(itertools.count)


def _op_name(kind, name, process_set):
    """``name``, or for an unnamed call the next generated name of ``kind`` in the set,
    taken at the start of every public call so that failed calls use one up too."""
    if name is not None:
        return str(name)
    set_id = 0 if process_set is None else process_set.process_set_id
    return f"chorus.py.set{set_id}.{kind}.{next(_name_counters[(kind, set_id)])}"


def _set_root(root_rank, process_set):
    """The set rank of the global rank ``root_rank`` (what the core takes)."""
    ranks = _set_ranks(process_set)
    if isinstance(root_rank, bool) or not isinstance(root_rank, numbers.Integral):
        raise ValueError(f"root_rank must be an integer rank, got {root_rank!r}")
    if int(root_rank) not in ranks:
        raise ValueError(f"root_rank {root_rank} is not a rank of the process set "
                         f"{process_set} (root_rank is a global rank)")
    return ranks.index(int(root_rank))


def _first(th):
    return th.wait()


# --- allreduce ------------------------------------------------------------------------------

def _allreduce_async(tensor, name, op, prescale_factor, postscale_factor, process_set, inplace):
    th = _ext.allreduce_async(tensor, name, op, float(prescale_factor),
                              float(postscale_factor), _set_id(process_set), inplace)
    return _register(th, _first)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts an allreduce of ``tensor`` into a new tensor; returns a handle."""
    name = _op_name("allreduce", name, process_set)
    op = _resolve_op(op, average)
    return _allreduce_async(tensor, name, op, prescale_factor, postscale_factor, process_set,
                            False)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts an allreduce whose result lands in ``tensor``; returns a handle."""
    name = _op_name("allreduce", name, process_set)
    op = _resolve_op(op, average)
    return _allreduce_async(tensor, name, op, prescale_factor, postscale_factor, process_set,
                            True)


class _AllreduceFunction(torch.autograd.Function):
    """Differentiable allreduce: the gradient is the same reduction of the output's gradient."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale, process_set):
        ctx.args = (name, op, prescale, postscale, process_set)
        return synchronize(_allreduce_async(tensor, name, op, prescale, postscale, process_set,
                                            False))

    @staticmethod
    def backward(ctx, grad_output):
        name, op, prescale, postscale, process_set = ctx.args
        grad = allreduce(grad_output.contiguous(), name=_grad_name(name), op=op,
                         prescale_factor=prescale, postscale_factor=postscale,
                         process_set=process_set)
        return grad, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces ``tensor`` over the process set (Average by default) into a new tensor.
    Differentiable: the gradient is reduced the same way."""
    name = _op_name("allreduce", name, process_set)
    op = _resolve_op(op, average)
    wire, ctx = compression.compress(tensor)
    if _differentiable(wire):
        out = _AllreduceFunction.apply(wire, name, op, prescale_factor, postscale_factor,
                                       process_set)
    else:
        out = synchronize(_allreduce_async(wire, name, op, prescale_factor, postscale_factor,
                                           process_set, False))
    return compression.decompress(out, ctx)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """Reduces ``tensor`` in place and returns it."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


# --- grouped allreduce ----------------------------------------------------------------------

def _group_names(name, count):
    return [f"{name}.{i}" for i in range(count)]


def _all(th):
    return th.wait_all()


def _grouped_async(tensors, average, name, op, prescale_factor, postscale_factor, process_set,
                   inplace):
    name = _op_name("grouped_allreduce", name, process_set)
    op = _resolve_op(op, average)
    tensors = list(tensors)
    th = _ext.grouped_allreduce_async(tensors, _group_names(name, len(tensors)), op,
                                      float(prescale_factor), float(postscale_factor),
                                      _set_id(process_set), inplace)
    return _register(th, _all)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Starts one allreduce of a list of tensors, negotiated and fused as a unit."""
    return _grouped_async(tensors, average, name, op, prescale_factor, postscale_factor,
                          process_set, False)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    return _grouped_async(tensors, average, name, op, prescale_factor, postscale_factor,
                          process_set, True)


class _GroupedAllreduceFunction(torch.autograd.Function):
    """Differentiable grouped allreduce: the gradients are one grouped reduction, with the
    forward's op and scale factors."""

    @staticmethod
    def forward(ctx, name, op, prescale, postscale, process_set, *tensors):
        ctx.args = (name, op, prescale, postscale, process_set)
        return tuple(synchronize(_grouped_async(tensors, None, name, op, prescale, postscale,
                                                process_set, False)))

    @staticmethod
    def backward(ctx, *grads):
        name, op, prescale, postscale, process_set = ctx.args
        reduced = grouped_allreduce([g.contiguous() for g in grads], name=_grad_name(name),
                                    op=op, prescale_factor=prescale,
                                    postscale_factor=postscale, process_set=process_set)
        return (None, None, None, None, None, *reduced)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces a list of tensors as one unit; returns the list of results. Differentiable:
    the gradients are reduced the same way, as one group."""
    name = _op_name("grouped_allreduce", name, process_set)
    wires, ctxs = zip(*[compression.compress(t) for t in tensors]) if tensors else ((), ())
    if _differentiable(*wires):
        op = _resolve_op(op, average)
        outs = _GroupedAllreduceFunction.apply(name, op, prescale_factor, postscale_factor,
                                               process_set, *wires)
    else:
        outs = synchronize(_grouped_async(wires, average, name, op, prescale_factor,
                                          postscale_factor, process_set, False))
    return [compression.decompress(o, c) for o, c in zip(outs, ctxs)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    """Reduces a list of tensors in place; returns the list."""
    return synchronize(_grouped_async(tensors, average, name, op, prescale_factor,
                                      postscale_factor, process_set, True))


# --- allgather, broadcast, alltoall, reducescatter -------------------------------------------

def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts an allgather (concatenation along dimension 0 in rank order)."""
    name = _op_name("allgather", name, process_set)
    return _register(_ext.allgather_async(tensor, name, _set_id(process_set)), _first)


class _AllgatherFunction(torch.autograd.Function):
    """Differentiable allgather, with Horovod's gradient: the output's gradient is averaged
    over the set (each rank's loss counts 1/n, as in data-parallel training) and each rank
    keeps the rows it contributed. Ranks may contribute different numbers of rows, so the
    backward pass first gathers every rank's row count."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.shape, ctx.name, ctx.process_set = tensor.shape, name, process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        averaged = allreduce(grad_output.contiguous(), name=_grad_name(ctx.name), op=Average,
                             process_set=ctx.process_set)
        rows = ctx.shape[0] if len(ctx.shape) else 1
        counts = synchronize(allgather_async(torch.tensor([rows], dtype=torch.int64),
                                             _grad_name(ctx.name, "grad.rows"), ctx.process_set))
        offset = int(counts[:_set_rank(ctx.process_set)].sum())
        return averaged.narrow(0, offset, rows).reshape(ctx.shape), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Every rank's ``tensor`` concatenated along dimension 0, in rank order. The first
    dimension may differ per rank. Differentiable: a rank's gradient is its rows of the
    output's gradient averaged over the set."""
    name = _op_name("allgather", name, process_set)
    if _differentiable(tensor):
        return _AllgatherFunction.apply(tensor, name, process_set)
    return synchronize(allgather_async(tensor, name, process_set))


def sparse_allreduce_async(tensor, name=None, op=Average, process_set=global_process_set):
    """Starts the reduction of a sparse COO ``tensor`` (an ``nn.Embedding(sparse=True)``
    gradient); ``synchronize(handle)``, or ``handle()`` as in Horovod, returns the coalesced
    sparse sum over the set (divided by the set's size for Average, truncated for integer
    values as dense Average does).

    Ranks' tensors must have the same size, sparse and dense dimensions, and dtype; their
    non-zero counts may differ, 0 included. The indices and values travel as one grouped
    allgather named ``<name>.layout``, ``<name>.indices`` and ``<name>.values``; duplicates
    are summed by
    coalescing, so the traffic grows with the total number of non-zeros, not with the
    tensor's size."""
    name = _op_name("sparse_allreduce", name, process_set)
    if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.sparse_coo:
        raise ValueError("sparse_allreduce_async takes a sparse COO tensor; use "
                         "allreduce_async for dense tensors")
    op = _resolve_op(op, None)
    if op not in (Sum, Average):
        raise ValueError(f"sparse_allreduce_async supports hvd.Sum and hvd.Average, not "
                         f"{_OP_NAMES[op]}")
    th = _ext.sparse_allreduce_async(tensor, name, op, _set_id(process_set))
    return _register(th, _first)


def _broadcast_async(tensor, root_rank, name, process_set, inplace):
    name = _op_name("broadcast", name, process_set)
    th = _ext.broadcast_async(tensor, _set_root(root_rank, process_set), name,
                              _set_id(process_set), inplace)
    return _register(th, _first)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts a broadcast from ``root_rank`` (a global rank) into a new tensor."""
    return _broadcast_async(tensor, root_rank, name, process_set, False)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts a broadcast from ``root_rank`` (a global rank) into ``tensor`` itself."""
    return _broadcast_async(tensor, root_rank, name, process_set, True)


class _BroadcastFunction(torch.autograd.Function):
    """Differentiable broadcast, with Horovod's gradient: the root receives the output's
    gradient averaged over the set; the other ranks' inputs did not reach the output and get
    zeros."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank, ctx.name, ctx.process_set = root_rank, name, process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        averaged = allreduce(grad_output.contiguous(), name=_grad_name(ctx.name), op=Average,
                             process_set=ctx.process_set)
        if rank() != ctx.root_rank:
            averaged = torch.zeros_like(averaged)
        return averaged, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """``root_rank``'s ``tensor`` on every rank, as a new tensor. Differentiable: the root's
    gradient is the output's gradient averaged over the set, the other ranks' is zero."""
    name = _op_name("broadcast", name, process_set)
    _set_root(root_rank, process_set)  # a bad root raises here, not in the autograd function
    if _differentiable(tensor):
        return _BroadcastFunction.apply(tensor, int(root_rank), name, process_set)
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites ``tensor`` with ``root_rank``'s, in place; returns it."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def _reduce_async(tensor, root_rank, name, op, prescale_factor, postscale_factor, process_set,
                  inplace):
    op = _resolve_op(op, None)
    th = _ext.reduce_async(tensor, _set_root(root_rank, process_set), name, op,
                           float(prescale_factor), float(postscale_factor),
                           _set_id(process_set), inplace)
    return _register(th, _first)


def reduce_async(tensor, root_rank, name=None, op=Average, prescale_factor=1.0,
                 postscale_factor=1.0, process_set=global_process_set):
    """Starts a reduce to ``root_rank`` (a global rank) into a new tensor; the other ranks get
    a copy of their own tensor."""
    name = _op_name("reduce", name, process_set)
    return _reduce_async(tensor, root_rank, name, op, prescale_factor, postscale_factor,
                         process_set, False)


def reduce_async_(tensor, root_rank, name=None, op=Average, prescale_factor=1.0,
                  postscale_factor=1.0, process_set=global_process_set):
    """Starts a reduce whose result lands in ``tensor`` on ``root_rank``; the other ranks'
    ``tensor`` is left as it is."""
    name = _op_name("reduce", name, process_set)
    return _reduce_async(tensor, root_rank, name, op, prescale_factor, postscale_factor,
                         process_set, True)


class _ReduceFunction(torch.autograd.Function):
    """Differentiable reduce (Sum or Average). The root's output is the reduction of every
    rank's input, so each input's gradient holds the root's output gradient, broadcast and
    scaled as the forward scaled it; a rank other than the root also returned its input
    itself, whose gradient is its own output's."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, op, prescale, postscale, process_set):
        ctx.args = (root_rank, name, op, prescale, postscale, process_set)
        return synchronize(_reduce_async(tensor, root_rank, name, op, prescale, postscale,
                                         process_set, False))

    @staticmethod
    def backward(ctx, grad_output):
        root_rank, name, op, prescale, postscale, process_set = ctx.args
        scale = prescale * postscale / (_set_size(process_set) if op == Average else 1)
        grad = broadcast(grad_output.contiguous(), root_rank, name=_grad_name(name),
                         process_set=process_set) * scale
        if rank() != root_rank:
            grad = grad + grad_output
        return grad, None, None, None, None, None, None


def reduce(tensor, root_rank, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0,
           process_set=global_process_set):
    """The reduction of ``tensor`` over the process set (Average by default) on ``root_rank``
    (a global rank), as a new tensor, with the bits allreduce gives; the other ranks get a
    copy of their own tensor. Differentiable for Sum and Average (_ReduceFunction): its
    backward is a collective too, so every rank of the set must run it, the ranks other than
    the root included (a loss that uses the output on the root alone still backpropagates
    through it everywhere, with a zero gradient where it is unused)."""
    name = _op_name("reduce", name, process_set)
    if _differentiable(tensor):
        op = _resolve_op(op, None)
        if op not in (Sum, Average):
            raise NotSupportedError(f"the gradient of reduce is defined for hvd.Sum and "
                                    f"hvd.Average, not {_OP_NAMES[op]}")
        _set_root(root_rank, process_set)  # a bad root raises here, not in the function
        return _ReduceFunction.apply(tensor, int(root_rank), name, op, float(prescale_factor),
                                     float(postscale_factor), process_set)
    return synchronize(_reduce_async(tensor, root_rank, name, op, prescale_factor,
                                     postscale_factor, process_set, False))


def reduce_(tensor, root_rank, name=None, op=Average, prescale_factor=1.0,
            postscale_factor=1.0, process_set=global_process_set):
    """Reduces ``tensor`` into itself on ``root_rank``; the other ranks' is left as it is.
    Returns it."""
    return synchronize(reduce_async_(tensor, root_rank, name, op, prescale_factor,
                                     postscale_factor, process_set))


def _alltoall_finish(th):
    out = th.wait()
    return out, torch.tensor(th.received_splits(), dtype=torch.int32)


def _split_list(tensor, splits, process_set):
    """``splits`` as a list of ints, checked against ``tensor``; ValueError if they cannot
    work (on this rank, at the call)."""
    n = _set_size(process_set)
    if tensor.dim() == 0:
        raise ValueError("alltoall needs a tensor with at least one dimension, got a 0-d one")
    rows = tensor.shape[0]
    if splits is None:
        if rows % n:
            raise ValueError(f"alltoall without splits needs a first dimension divisible by "
                             f"the {n} ranks of the set, got {rows}")
        return []
    if isinstance(splits, torch.Tensor):
        if splits.is_floating_point() or splits.is_complex() or splits.dtype == torch.bool:
            raise ValueError(f"alltoall splits must hold integers, got a {splits.dtype} tensor")
        values = splits.reshape(-1).tolist()
    else:
        values = list(splits)
        if any(isinstance(s, bool) or not isinstance(s, numbers.Integral) for s in values):
            raise ValueError(f"alltoall splits must be integers, got {values}")
    values = [int(s) for s in values]
    if len(values) != n:
        raise ValueError(f"alltoall splits has {len(values)} entries for the {n} ranks of the "
                         f"set")
    if any(s < 0 for s in values):
        raise ValueError(f"alltoall splits must not be negative, got {values}")
    if sum(values) != rows:
        raise ValueError(f"alltoall splits sum to {sum(values)}, but the tensor has {rows} "
                         f"rows")
    return values


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts an alltoall; synchronize() returns (output, received_splits)."""
    name = _op_name("alltoall", name, process_set)
    split_list = _split_list(tensor, splits, process_set)
    th = _ext.alltoall_async(tensor, split_list, name, _set_id(process_set))
    return _register(th, _alltoall_finish)


class _AlltoallFunction(torch.autograd.Function):
    """Differentiable alltoall: the gradient goes back the way the rows came, an alltoall of
    the output's gradient with the received splits."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.received, ctx.name, ctx.process_set = received, name, process_set
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, _grad_received):
        grad, _ = alltoall(grad_output.contiguous(), splits=ctx.received,
                           name=_grad_name(ctx.name), process_set=ctx.process_set)
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends ``splits[i]`` rows of ``tensor`` to rank i (equal blocks when splits is None).

    Returns the received rows in rank order; when ``splits`` was given, also an int32 tensor
    of how many rows came from each rank (Horovod's return convention). Differentiable: the
    gradient is the alltoall of the output's gradient back to where the rows came from."""
    name = _op_name("alltoall", name, process_set)
    if _differentiable(tensor):
        output, received = _AlltoallFunction.apply(tensor, splits, name, process_set)
    else:
        output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
    return output if splits is None else (output, received)


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts a reducescatter; synchronize() returns this rank's block."""
    name = _op_name("reducescatter", name, process_set)
    op = _resolve_op(op, None)
    th = _ext.reducescatter_async(tensor, name, op, float(prescale_factor),
                                  float(postscale_factor), _set_id(process_set))
    return _register(th, _first)


def _reducescatter_grad_scale(op, process_set, prescale, postscale):
    """Horovod's gradient of reducescatter: the allgather of the output's gradient, times the
    set's size for Sum (times 1 for Average), prescale and postscale. With that convention
    the gradient is the set size times the gradient of the sum of every rank's loss."""
    if op not in (Sum, Average):
        raise NotSupportedError(f"the gradient of reducescatter is defined for hvd.Sum and "
                                f"hvd.Average, not {_OP_NAMES[op]}")
    return (_set_size(process_set) if op == Sum else 1) * prescale * postscale


class _ReducescatterFunction(torch.autograd.Function):
    """Differentiable reducescatter (Sum or Average), with Horovod's gradient
    (_reducescatter_grad_scale)."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale, postscale):
        ctx.args = (name, op, process_set, prescale, postscale)
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale,
                                               postscale))

    @staticmethod
    def backward(ctx, grad_output):
        name, op, process_set, prescale, postscale = ctx.args
        scale = _reducescatter_grad_scale(op, process_set, prescale, postscale)
        grad = allgather(grad_output.contiguous() * scale, name=_grad_name(name),
                         process_set=process_set)
        return grad, None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces ``tensor`` over the set; rank r gets block r of dimension 0 (dim0 / n rows, the
    first dim0 % n ranks one more). Differentiable for Sum and Average, with Horovod's
    gradient: the allgather of the blocks' gradients, times the set size for Sum, and times
    the scale factors."""
    name = _op_name("reducescatter", name, process_set)
    wire, ctx = compression.compress(tensor)
    if _differentiable(wire):
        out = _ReducescatterFunction.apply(wire, name, _resolve_op(op, None), process_set,
                                           float(prescale_factor), float(postscale_factor))
    else:
        out = synchronize(reducescatter_async(wire, name, op, process_set, prescale_factor,
                                              postscale_factor))
    return compression.decompress(out, ctx)


# --- grouped allgather and reducescatter ----------------------------------------------------

def _tensor_list(tensors, what):
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"{what} needs at least one tensor")
    return tensors


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Starts the allgather of every tensor of the list, negotiated as one unit;
    synchronize() returns the list of results (each as ``allgather`` would give it)."""
    name = _op_name("grouped_allgather", name, process_set)
    tensors = _tensor_list(tensors, "grouped_allgather")
    th = _ext.grouped_allgather_async(tensors, _group_names(name, len(tensors)),
                                      _set_id(process_set))
    return _register(th, _all)


class _GroupedAllgatherFunction(torch.autograd.Function):
    """Differentiable grouped allgather: each input's gradient is taken as allgather's
    (its rows of the output's gradient averaged over the set), all in one grouped
    allreduce and one grouped allgather of the row counts."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.rows = [t.shape[0] for t in tensors]
        ctx.shapes = [t.shape for t in tensors]
        ctx.name, ctx.process_set = name, process_set
        return tuple(synchronize(grouped_allgather_async(tensors, name, process_set)))

    @staticmethod
    def backward(ctx, *grads):
        averaged = grouped_allreduce([g.contiguous() for g in grads], name=_grad_name(ctx.name),
                                     op=Average, process_set=ctx.process_set)
        counts = grouped_allgather([torch.tensor([r], dtype=torch.int64) for r in ctx.rows],
                                   name=_grad_name(ctx.name, "grad.rows"),
                                   process_set=ctx.process_set)
        me = _set_rank(ctx.process_set)
        out = []
        for g, c, rows, shape in zip(averaged, counts, ctx.rows, ctx.shapes):
            out.append(g.narrow(0, int(c[:me].sum()), rows).reshape(shape))
        return (None, None, *out)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Every tensor of the list allgathered (concatenated along dimension 0 in rank order),
    negotiated as one unit; returns the list of results. Differentiable as ``allgather``."""
    name = _op_name("grouped_allgather", name, process_set)
    tensors = _tensor_list(tensors, "grouped_allgather")
    if _differentiable(*tensors):
        return list(_GroupedAllgatherFunction.apply(name, process_set, *tensors))
    return synchronize(grouped_allgather_async(tensors, name, process_set))


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Starts the reducescatter of every tensor of the list, negotiated as one unit;
    synchronize() returns the list of this rank's blocks."""
    name = _op_name("grouped_reducescatter", name, process_set)
    op = _resolve_op(op, None)
    tensors = _tensor_list(tensors, "grouped_reducescatter")
    th = _ext.grouped_reducescatter_async(tensors, _group_names(name, len(tensors)), op,
                                          float(prescale_factor), float(postscale_factor),
                                          _set_id(process_set))
    return _register(th, _all)


class _GroupedReducescatterFunction(torch.autograd.Function):
    """Differentiable grouped reducescatter, with reducescatter's gradient for every tensor
    (one grouped allgather)."""

    @staticmethod
    def forward(ctx, name, op, process_set, prescale, postscale, *tensors):
        ctx.args = (name, op, process_set, prescale, postscale)
        return tuple(synchronize(grouped_reducescatter_async(tensors, name, op, process_set,
                                                             prescale, postscale)))

    @staticmethod
    def backward(ctx, *grads):
        name, op, process_set, prescale, postscale = ctx.args
        scale = _reducescatter_grad_scale(op, process_set, prescale, postscale)
        gathered = grouped_allgather([g.contiguous() * scale for g in grads],
                                     name=_grad_name(name), process_set=process_set)
        return (None, None, None, None, None, *gathered)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """Every tensor of the list reduce-scattered, negotiated as one unit; returns the list
    of this rank's blocks. Differentiable for Sum and Average, as ``reducescatter``."""
    name = _op_name("grouped_reducescatter", name, process_set)
    tensors = _tensor_list(tensors, "grouped_reducescatter")
    wires, ctxs = zip(*[compression.compress(t) for t in tensors])
    if _differentiable(*wires):
        outs = _GroupedReducescatterFunction.apply(name, _resolve_op(op, None), process_set,
                                                   float(prescale_factor),
                                                   float(postscale_factor), *wires)
    else:
        outs = synchronize(grouped_reducescatter_async(wires, name, op, process_set,
                                                       prescale_factor, postscale_factor))
    return [compression.decompress(o, c) for o, c in zip(outs, ctxs)]


def barrier(process_set=global_process_set):
    """Returns once every rank of the set called barrier()."""
    _ext.barrier(_set_id(process_set))


def join(device=-1):
    """This rank has no more data: until every rank joined it takes part in the others'
    allreduces with zeros. Returns the rank that joined last. ``device`` is accepted for
    compatibility and ignored."""
    return _ext.join()
