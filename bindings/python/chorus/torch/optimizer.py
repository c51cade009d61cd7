"""DistributedOptimizer: data-parallel training by wrapping the script's torch.optim optimizer.

The wrapper is an instance of a class made on the fly that derives from the wrapped
optimizer's own class, so isinstance() checks, state_dict(), param_groups, learning-rate
schedulers and checkpoints keep working. Its gradients are reduced by the C++
GradientReducer of Chorus::torch: a hook on every parameter's gradient accumulator starts
that gradient's allreduce the moment backward has accumulated it, without entering Python,
so communication overlaps the rest of backward exactly as in the C++ DistributedOptimizer.
step() waits for the reductions (synchronize()) and then runs the wrapped step().

Sparse gradients (``nn.Embedding(sparse=True)``) are reduced densely with
``sparse_as_dense=True``; otherwise the C++ reducer sees at each gradient's hook, every step
from the first, that it is sparse and reduces it with a sparse allreduce (an allgather of
the non-zeros), so it stays sparse for optimizers such as SparseAdam.
"""

import collections
import contextlib
import itertools
import warnings

import torch

from chorus.common.exceptions import NotSupportedError
from chorus.torch import adasum, mpi_ops
from chorus._loader import ext as _ext
from chorus.torch.compression import Compression
from chorus.torch.mpi_ops import Average, Sum, global_process_set

# Wrappers counted per process set: only a set's members wrap optimizers over it.
_optimizer_ids = collections.defaultdict(itertools.count)


def _group_indices(groups, params):
    """Parameter index lists for GradientReducer from Horovod's ``groups`` argument: a
    number of groups (consecutive, nearly equal slices) or lists of parameters."""
    if groups is None or groups == 0:
        return []
    if isinstance(groups, int):
        if groups < 0:
            raise ValueError("groups must be a positive number or a list of parameter lists")
        n = len(params)
        bounds = [round(i * n / groups) for i in range(groups + 1)]
        return [list(range(a, b)) for a, b in zip(bounds, bounds[1:]) if b > a]
    index_of = {id(p): i for i, p in enumerate(params)}
    out = []
    for g in groups:
        members = []
        for p in g:
            if id(p) not in index_of:
                raise ValueError("groups names a tensor that the optimizer does not optimize")
            members.append(index_of[id(p)])
        out.append(members)
    return out


class PowerSGD:
    """PowerSGD low-rank compression of the gradients (Vogels et al., 2019) for
    DistributedOptimizer(powersgd=...), with the names and defaults of torch's
    ``PowerSGDState``: each matrix-shaped gradient is averaged as a rank
    ``matrix_approximation_rank`` product P Q^T, with error feedback and warm-started Q, after
    ``start_powerSGD_iter`` uncompressed steps; vectors and matrices too small to gain
    ``min_compression_rate`` are averaged as usual. The work is C++ (docs/torch.md)."""

    def __init__(self, matrix_approximation_rank=1, start_powerSGD_iter=1000,
                 min_compression_rate=2, use_error_feedback=True, warm_start=True,
                 orthogonalization_epsilon=0, random_seed=0):
        if int(matrix_approximation_rank) < 1:
            raise ValueError("matrix_approximation_rank must be at least 1")
        if int(start_powerSGD_iter) < 0:
            raise ValueError("start_powerSGD_iter must not be negative")
        self.options = _ext.PowerSgdOptions(
            matrix_approximation_rank=int(matrix_approximation_rank),
            start_iter=int(start_powerSGD_iter), min_compression_rate=float(min_compression_rate),
            error_feedback=bool(use_error_feedback), warm_start=bool(warm_start),
            orthogonalization_epsilon=float(orthogonalization_epsilon), seed=int(random_seed))


def _named_pairs(param_groups, named_parameters):
    """(name, parameter) for every parameter of the optimizer's groups, in their order: the
    names from ``named_parameters`` (checked), else names by position, the same on every
    rank."""
    params, seen = [], set()
    for group in param_groups:
        for p in group["params"]:
            if id(p) not in seen:
                seen.add(id(p))
                params.append(p)
    if named_parameters is None:
        return [(f"allreduce.noname.{i}", p) for i, p in enumerate(params)]
    named = list(named_parameters)
    if any(not isinstance(x, tuple) or len(x) != 2 for x in named):
        raise ValueError("named_parameters must be (name, tensor) pairs, e.g. "
                         "model.named_parameters()")
    names = [n for n, _ in named]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"named_parameters has duplicate names: {dup}")
    name_of = {}
    for n, p in named:
        name_of.setdefault(id(p), n)
    unnamed = [i for i, p in enumerate(params) if id(p) not in name_of]
    if unnamed:
        raise ValueError(f"named_parameters was given but {len(unnamed)} parameter(s) "
                         f"of the optimizer are not in it (first: index {unnamed[0]})")
    return [(name_of[id(p)], p) for p in params]


def _checked_reduction(op, gradient_predivide_factor, compression, backward_passes_per_step,
                       who):
    """Checks the gradients' reduction that a wrapper is asked for; returns the
    compression's code for the C++ engine."""
    if op not in (Average, Sum):
        raise ValueError(f"{who} supports op=hvd.Average or hvd.Sum" +
                         (" (and DistributedOptimizer hvd.Adasum)" if op == mpi_ops.Adasum else ""))
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor needs op=hvd.Average")
    code = getattr(compression, "wire_code", None)
    if code is None:
        raise NotSupportedError(
            f"{who}(compression={getattr(compression, '__name__', compression)})"
            ": Chorus reduces gradients in C++ and supports Compression.none, "
            "Compression.fp16 and Compression.bf16 only")
    if backward_passes_per_step < 1:
        raise ValueError("backward_passes_per_step must be at least 1")
    return code


class _DistributedOptimizer(torch.optim.Optimizer):
    _chorus_distributed = True  # functions._make_state steps the wrapped optimizer instead

    def __init__(self, optimizer, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, groups, sparse_as_dense, process_set, bucket_cap_mb,
                 powersgd):
        super(self.__class__, self).__init__(optimizer.param_groups)
        self.state = optimizer.state  # keep whatever state the wrapped optimizer had

        pairs = _named_pairs(self.param_groups, named_parameters)
        params = [p for _, p in pairs]
        # Horovod's attribute, read by scripts: parameter -> the name it is reduced under.
        self._parameter_names = {p: n for n, p in pairs}
        code = _checked_reduction(op, gradient_predivide_factor, compression,
                                  backward_passes_per_step, "DistributedOptimizer")
        if bucket_cap_mb and (groups or sparse_as_dense):
            raise ValueError("bucket_cap_mb lays out every gradient in buckets; groups and "
                             "sparse_as_dense do not apply with it")
        if powersgd is not None and not isinstance(powersgd, PowerSGD):
            raise ValueError("powersgd takes hvd.PowerSGD(...)")
        if powersgd is not None and bucket_cap_mb:
            raise ValueError("PowerSGD compresses each gradient on its own; bucket_cap_mb does "
                             "not apply with it")

        self.backward_passes_per_step = backward_passes_per_step
        self.process_set = process_set
        self._should_synchronize = True
        self._synchronized = False
        # A rank outside the process set steps on its own gradients, as in Horovod: no hooks,
        # no reductions.
        self._reducer = None
        self._powersgd = powersgd is not None
        if process_set.included() is False:
            return
        # A prefix per wrapper, so that several optimizers of one script never share a name.
        set_id = mpi_ops._set_id(process_set)
        prefix = f"grad.set{set_id}.{next(_optimizer_ids[set_id])}."
        if bucket_cap_mb:
            self._reducer = _ext.ShardedReducer(
                pairs, [], stage=0, bucket_bytes=int(bucket_cap_mb * 2**20), op=op,
                gradient_predivide_factor=float(gradient_predivide_factor),
                backward_passes_per_step=int(backward_passes_per_step), compression=code,
                process_set=set_id, name_prefix=prefix)
            return
        self._reducer = _ext.GradientReducer(
            pairs, op=op, gradient_predivide_factor=float(gradient_predivide_factor),
            backward_passes_per_step=int(backward_passes_per_step), compression=code,
            process_set=set_id, name_prefix=prefix,
            groups=_group_indices(groups, params), sparse_as_dense=bool(sparse_as_dense),
            **({"powersgd": powersgd.options} if powersgd is not None else {}))

    def powersgd_state(self):
        """PowerSGD's state for a checkpoint: ``{"iteration": steps, "qs": {name: Q}}`` (the
        warm-started Qs, the same on every rank), or None without PowerSGD. Each rank's error
        feedback is its own and is not kept: it restarts from zero after
        load_powersgd_state(). TorchState keeps it with the optimizer."""
        if not self._powersgd:
            return None
        if self._reducer is None:  # a rank outside the set: nothing compressed here
            return {"iteration": 0, "qs": {}}
        iteration, qs = self._reducer.powersgd_state()
        return {"iteration": iteration, "qs": dict(qs)}

    def load_powersgd_state(self, state):
        if self._reducer is not None and self._powersgd and state is not None:
            self._reducer.load_powersgd_state(int(state["iteration"]), list(state["qs"].items()))

    def zero_grad(self, set_to_none=None):
        # Gradients in buckets are zeroed in place, so that they stay views into the buckets.
        if isinstance(self._reducer, _ext.ShardedReducer):
            self._reducer.zero_grad()
        elif set_to_none is None:
            super(self.__class__, self).zero_grad()  # the wrapped optimizer's default
        else:
            super(self.__class__, self).zero_grad(set_to_none)

    def synchronize(self):
        """Waits until every gradient is reduced (starting the reductions of gradients that
        backward did not produce on this rank) and leaves the results in ``.grad``. After it,
        step() does not synchronize again: clip or inspect gradients in between."""
        if self._reducer is not None:
            self._reducer.synchronize()
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Inside this block step() does not synchronize; call synchronize() yourself first."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "after optimizer.synchronize(): the gradients are reduced "
                              "already and are not reduced again; put step() inside "
                              "`with optimizer.skip_synchronize():` to say so",
                              UserWarning, stacklevel=2)
            else:
                self.synchronize()
        elif not self._synchronized:
            warnings.warn("optimizer.step() inside skip_synchronize() without a prior "
                          "optimizer.synchronize(): the gradients are not reduced")
        self._synchronized = False
        result = super(self.__class__, self).step(closure)
        _ext.mark_step()  # the step's end on this rank's timeline, for chorus-trace summary
        return result

    def _reductions_started(self):
        """Gradient reductions started since the last synchronize()."""
        return 0 if self._reducer is None else self._reducer.reductions_started()


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set, bucket_cap_mb=0, powersgd=None):
    """Wraps ``optimizer`` so that step() applies gradients averaged (or summed) over the
    ranks of ``process_set``. Collective: every rank wraps the same parameters.

    named_parameters: (name, parameter) pairs, e.g. ``model.named_parameters()``; names the
        reductions (recommended). compression: Compression.none/fp16/bf16.
    backward_passes_per_step: gradients accumulate locally over that many backward passes
        and are reduced on the last one. op: hvd.Average, hvd.Sum, or hvd.Adasum, which
        reduces each local step's change to the parameters instead of the gradients (see
        chorus.torch.adasum; not with gradient_predivide_factor, groups or bucket_cap_mb).
    gradient_predivide_factor: with Average, divide by this before the sum and by
        size/factor after. groups: a number of groups or lists of parameters, each reduced
        as one grouped allreduce (num_groups is the deprecated spelling of an int).
    sparse_as_dense: reduce sparse gradients as dense tensors; otherwise they are reduced
        with a sparse allreduce and stay sparse, from the first step on.
    process_set: the ranks whose gradients are averaged; on a rank outside it the wrapper
        steps on the rank's own gradients (as in Horovod).
    bucket_cap_mb: Chorus's own (DDP's name); 0 reduces each gradient as its own collective,
        fused by the runtime. A positive size keeps the gradients in persistent flat buckets
        of at most that many MiB, each allreduced in place as soon as backward has produced
        its last gradient, with no pack and no unpack: ``p.grad`` is a view into its bucket,
        and zero_grad() zeroes the buckets in place. Not with groups or sparse_as_dense.
    powersgd: Chorus's, ``hvd.PowerSGD(...)``: low-rank compression of the matrix-shaped
        gradients (op Average, no compression to 16 bits, no groups, no bucket_cap_mb).
    """
    if num_groups and groups is None:
        warnings.warn("num_groups is deprecated: use groups=<int>", DeprecationWarning,
                      stacklevel=2)
        groups = num_groups
    if op == mpi_ops.Adasum:
        if gradient_predivide_factor != 1.0:
            raise ValueError("gradient_predivide_factor needs op=hvd.Average")
        if groups or bucket_cap_mb or powersgd is not None:
            raise ValueError("op=hvd.Adasum reduces each parameter's delta at step(); groups, "
                             "bucket_cap_mb and powersgd do not apply with it")
        if backward_passes_per_step < 1:
            raise ValueError("backward_passes_per_step must be at least 1")
        param_groups = optimizer.param_groups
        return adasum.make(optimizer, _named_pairs(param_groups, named_parameters),
                           compression, backward_passes_per_step, process_set)
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer, named_parameters, compression, backward_passes_per_step, op,
               gradient_predivide_factor, groups, sparse_as_dense, process_set, bucket_cap_mb,
               powersgd)
