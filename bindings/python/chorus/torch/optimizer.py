"""DistributedOptimizer: data-parallel training by wrapping the script's torch.optim optimizer.

The wrapper is an instance of a class made on the fly that derives from the wrapped
optimizer's own class, so isinstance() checks, state_dict(), param_groups, learning-rate
schedulers and checkpoints keep working. Its gradients are reduced by the C++
GradientReducer of Chorus::torch: a hook on every parameter's gradient accumulator starts
that gradient's allreduce the moment backward has accumulated it, without entering Python,
so communication overlaps the rest of backward exactly as in the C++ DistributedOptimizer.
step() waits for the reductions (synchronize()) and then runs the wrapped step().

Sparse gradients (``nn.Embedding(sparse=True)``) are reduced densely with
``sparse_as_dense=True``, otherwise with ``sparse_allreduce_async`` (an allgather of the
non-zeros), staying sparse for optimizers such as SparseAdam. Which parameters get sparse
gradients is only known once backward has run, and the C++ reducer reduces every gradient it
hooks, so the first synchronize() learns it: during that first step the C++ reducer reduces
every gradient as dense while a tensor hook on each parameter notes which ones arrive
sparse; at its end the ranks agree on that list (one small allreduce), those gradients are
turned back into sparse tensors, and from then on the C++ reducer leaves those parameters out
and a Python hook on each of them starts its sparse reduction once its gradient is
accumulated. A parameter whose first sparse gradient comes after the first step is reduced
as dense.
"""

import contextlib
import functools
import itertools
import warnings
import weakref

import torch

from chorus.common.exceptions import NotSupportedError
from chorus.torch import mpi_ops
from chorus._loader import ext as _ext
from chorus.torch.compression import Compression
from chorus.torch.mpi_ops import Average, Max, Sum, global_process_set

_optimizer_ids = itertools.count()


def _weak_hook(method):
    """A hook that calls ``method`` while its object lives and does nothing afterwards: the
    hooks stay on the parameters when the optimizer that placed them is gone (as the C++
    reducer's do), and must not keep it alive or keep starting reductions."""
    ref = weakref.WeakMethod(method)

    def hook(*args):
        bound = ref()
        return None if bound is None else bound(*args)

    return hook


class _SparseProbe:
    """Notes which parameters receive sparse gradients: a tensor hook on each sees the
    gradient before it is accumulated (and leaves it unchanged)."""

    def __init__(self, indexed_params):
        self.sparse_dims = {}  # parameter index -> sparse_dim of its gradient
        self.seen = False  # any gradient at all since the probe started
        see = _weak_hook(self._see)
        self._hooks = [p.register_hook(functools.partial(see, i))
                       for i, p in indexed_params if p.requires_grad]

    def _see(self, index, grad):
        self.seen = True
        if grad.is_sparse:
            self.sparse_dims[index] = grad.sparse_dim()

    def remove(self):
        for h in self._hooks:
            h.remove()
        self._hooks = []


class _SparseGradient:
    """One parameter whose gradient is sparse, reduced with sparse_allreduce_async.

    A hook on the parameter's gradient accumulator (called on the autograd thread once the
    gradient of a backward pass is accumulated) counts the passes and starts the reduction
    on the last one, as the C++ reducer does for dense gradients. finish() starts it if no
    gradient came on this rank (an empty one takes part, so no rank waits) and leaves the
    coalesced result in ``.grad``."""

    def __init__(self, name, param, sparse_dim, op, passes, process_set):
        self.name, self.param, self.sparse_dim = name, param, sparse_dim
        self.op, self.passes, self.process_set = op, passes, process_set
        self.passes_left, self.handle = passes, None
        with torch.enable_grad():
            # Kept alive here: the parameter itself holds its accumulator only weakly.
            self.accumulator = param.expand_as(param).grad_fn.next_functions[0][0]
        self.accumulator.register_hook(_weak_hook(self._accumulated))

    def _accumulated(self, grad_inputs, grad_outputs):
        if self.passes_left == 0:
            raise RuntimeError(f"gradient of '{self.name}' computed {self.passes + 1} times "
                               f"before step() or synchronize(); backward_passes_per_step is "
                               f"{self.passes}")
        self.passes_left -= 1
        if self.passes_left == 0:
            self.start()

    def start(self):
        # Every rank must send the same sparse layout. No gradient, or one that zero_grad()
        # emptied (torch then also resets its sparse_dim to the tensor's dim), goes as an
        # empty tensor of the layout; a dense one is converted.
        grad, p, dim = self.param.grad, self.param, self.sparse_dim
        if grad is None or (grad.is_sparse and grad._nnz() == 0):
            grad = torch.sparse_coo_tensor(
                torch.zeros(dim, 0, dtype=torch.int64, device=p.device),
                p.new_zeros((0,) + tuple(p.shape[dim:])), p.shape)
        elif not grad.is_sparse:
            grad = grad.to_sparse(dim)
        elif grad.sparse_dim() != dim:
            grad = grad.to_dense().to_sparse(dim)
        self.handle = mpi_ops.sparse_allreduce_async(grad, name=self.name, op=self.op,
                                                     process_set=self.process_set)

    def finish(self):
        if self.handle is None:
            self.start()
        handle, self.handle, self.passes_left = self.handle, None, self.passes
        self.param.grad = mpi_ops.synchronize(handle)


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


class _DistributedOptimizer(torch.optim.Optimizer):
    _chorus_distributed = True  # functions._make_state steps the wrapped optimizer instead

    def __init__(self, optimizer, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, groups, sparse_as_dense, process_set):
        super(self.__class__, self).__init__(optimizer.param_groups)
        self.state = optimizer.state  # keep whatever state the wrapped optimizer had

        params, seen = [], set()
        for group in self.param_groups:
            for p in group["params"]:
                if id(p) not in seen:
                    seen.add(id(p))
                    params.append(p)
        if named_parameters is not None:
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
            pairs = [(name_of[id(p)], p) for p in params]
        else:
            # The same on every rank: the optimizer's parameters in order.
            pairs = [(f"allreduce.noname.{i}", p) for i, p in enumerate(params)]
        # Horovod's attribute, read by scripts: parameter -> the name it is reduced under.
        self._parameter_names = {p: n for n, p in pairs}

        if op not in (Average, Sum):
            if op == mpi_ops.Adasum:
                raise NotSupportedError("DistributedOptimizer(op=hvd.Adasum) is not supported "
                                        "by Chorus; use hvd.Average or hvd.Sum")
            raise ValueError("DistributedOptimizer supports op=hvd.Average or hvd.Sum")
        if gradient_predivide_factor != 1.0 and op != Average:
            raise ValueError("gradient_predivide_factor needs op=hvd.Average")
        code = getattr(compression, "wire_code", None)
        if code is None:
            raise NotSupportedError(
                f"DistributedOptimizer(compression={getattr(compression, '__name__', compression)})"
                ": Chorus reduces gradients in C++ and supports Compression.none, "
                "Compression.fp16 and Compression.bf16 only")
        if backward_passes_per_step < 1:
            raise ValueError("backward_passes_per_step must be at least 1")

        self.backward_passes_per_step = backward_passes_per_step
        self.process_set = process_set
        self._should_synchronize = True
        self._synchronized = False
        # A prefix per wrapper, so that several optimizers of one script never share a name.
        self._prefix = f"grad.{next(_optimizer_ids)}."
        self._pairs = pairs
        self._op = op
        self._group_lists = _group_indices(groups, params)
        self._reducer_options = dict(
            op=op, gradient_predivide_factor=float(gradient_predivide_factor),
            backward_passes_per_step=int(backward_passes_per_step), compression=code,
            process_set=mpi_ops._set_id(process_set), name_prefix=self._prefix)
        self._sparse = []  # _SparseGradient of the parameters known to have sparse gradients
        # Without sparse_as_dense, the first step reduces everything as dense while the probe
        # learns which gradients are sparse (see the module's docstring). With it, the probe
        # watches nothing but still takes part in the agreement, which checks that every rank
        # chose the same.
        self._sparse_as_dense = bool(sparse_as_dense)
        self._reducer = self._make_reducer(range(len(pairs)), sparse_as_dense=True)
        self._probe = _SparseProbe([] if sparse_as_dense else enumerate(params))

    def _make_reducer(self, indices, sparse_as_dense):
        """A C++ GradientReducer over the parameters at ``indices`` (collective)."""
        keep = list(indices)
        position = {i: k for k, i in enumerate(keep)}
        groups = [[position[i] for i in g if i in position] for g in self._group_lists]
        return _ext.GradientReducer([self._pairs[i] for i in keep],
                                    groups=[g for g in groups if g],
                                    sparse_as_dense=sparse_as_dense, **self._reducer_options)

    def _end_probe(self):
        """After the first synchronize() that followed a backward pass on some rank: the ranks
        agree on which parameters have sparse gradients and those leave the C++ reducer."""
        n = len(self._pairs)
        # [sparse_dim per parameter..., seen, sparse_as_dense, not sparse_as_dense], by Max.
        local = torch.zeros(n + 3, dtype=torch.int64)
        for i, dim in self._probe.sparse_dims.items():
            local[i] = dim
        local[n] = int(self._probe.seen or self._sparse_as_dense)
        local[n + 1] = int(self._sparse_as_dense)
        local[n + 2] = int(not self._sparse_as_dense)
        agreed = mpi_ops.allreduce(local, name=self._prefix + "sparse_probe", op=Max,
                                   process_set=self.process_set).tolist()
        if agreed[n + 1] and agreed[n + 2]:
            self._probe.remove()
            self._probe = None
            raise ValueError("DistributedOptimizer: sparse_as_dense differs across ranks; "
                             "every rank must pass the same value")
        if not agreed[n]:
            return  # no rank has run backward yet: keep probing
        self._probe.remove()
        self._probe = None
        sparse = {i: dim for i, dim in enumerate(agreed[:n]) if dim > 0}
        if self._sparse_as_dense or not sparse:
            return
        for i, dim in sparse.items():
            name, p = self._pairs[i]
            if p.grad is not None and not p.grad.is_sparse:
                p.grad = p.grad.to_sparse(dim)  # this step's result, reduced as dense
            self._sparse.append(_SparseGradient(self._prefix + name, p, dim, self._op,
                                                self.backward_passes_per_step,
                                                self.process_set))
        # A gradient that first arrives sparse after this step is reduced as dense.
        self._reducer = self._make_reducer([i for i in range(n) if i not in sparse],
                                           sparse_as_dense=True)

    def synchronize(self):
        """Waits until every gradient is reduced (starting the reductions of gradients that
        backward did not produce on this rank) and leaves the results in ``.grad``. After it,
        step() does not synchronize again: clip or inspect gradients in between."""
        for g in self._sparse:
            if g.handle is None:
                g.start()
        errors = []
        try:
            self._reducer.synchronize()
        finally:  # every handle is waited for, even when a reduction failed
            for g in self._sparse:
                try:
                    g.finish()
                except RuntimeError as e:
                    errors.append(e)
        if errors:
            raise errors[0]
        if self._probe is not None:
            self._end_probe()
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
        return super(self.__class__, self).step(closure)

    def _reductions_started(self):
        """Gradient reductions started since the last synchronize()."""
        return (self._reducer.reductions_started()
                + sum(g.handle is not None for g in self._sparse))


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps ``optimizer`` so that step() applies gradients averaged (or summed) over the
    ranks of ``process_set``. Collective: every rank wraps the same parameters.

    named_parameters: (name, parameter) pairs, e.g. ``model.named_parameters()``; names the
        reductions (recommended). compression: Compression.none/fp16/bf16.
    backward_passes_per_step: gradients accumulate locally over that many backward passes
        and are reduced on the last one. op: hvd.Average or hvd.Sum.
    gradient_predivide_factor: with Average, divide by this before the sum and by
        size/factor after. groups: a number of groups or lists of parameters, each reduced
        as one grouped allreduce (num_groups is the deprecated spelling of an int).
    sparse_as_dense: reduce sparse gradients as dense tensors; otherwise they are reduced
        with sparse_allreduce_async and stay sparse (in the first step they travel dense:
        see the module's docstring).
    """
    if num_groups and groups is None:
        warnings.warn("num_groups is deprecated: use groups=<int>", DeprecationWarning,
                      stacklevel=2)
        groups = num_groups
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer, named_parameters, compression, backward_passes_per_step, op,
               gradient_predivide_factor, groups, sparse_as_dense, process_set)
