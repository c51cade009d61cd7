"""DistributedOptimizer(op=hvd.Adasum): what is reduced is the optimizer's step, not the gradient.

Each rank runs the wrapped optimizer on its own gradients, from the parameters every rank
shares; the change that local step made to each parameter (its delta) is reduced with
Adasum, and every rank applies the combined delta to the shared parameters. So the
optimizer's own state (momentum, Adam's moments) follows the rank's gradients, and the
combination adapts to how much the ranks' steps agree: orthogonal steps add, parallel ones
average. That is Horovod's definition; Chorus runs it at any number of ranks and over any
process set, and reduces the deltas when step() is called, as one fused batch, where Horovod
steps each parameter from its gradient hook.

Learning rate: the combined step is about the size of one rank's step when the ranks agree
and grows up to their sum when they do not, so the learning rate is not scaled by the number
of ranks (Horovod advises the same for Adasum on host memory; with GPUs Horovod averages
within a host first and advises scaling by ``local_size()``, where Chorus combines every rank
with Adasum on both memories).
"""

import contextlib

import torch

from chorus.torch import mpi_ops
from chorus.torch.mpi_ops import Adasum


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    _chorus_distributed = True  # functions._make_state steps the wrapped optimizer instead

    def __init__(self, optimizer, pairs, compression, backward_passes_per_step, process_set):
        super(self.__class__, self).__init__(optimizer.param_groups)
        self.state = optimizer.state  # keep whatever state the wrapped optimizer had
        # Horovod's attribute, read by scripts: parameter -> the name it is reduced under.
        self._parameter_names = {p: n for n, p in pairs}
        self._pairs = pairs
        self._compression = compression
        # Gradients accumulate over the passes as they do unwrapped; step() comes after the last.
        self.backward_passes_per_step = backward_passes_per_step
        self.process_set = process_set
        self._reduces = process_set.included() is not False
        set_id = mpi_ops._set_id(process_set)
        self._prefix = f"delta.set{set_id}."
        # Where each parameter stood before the local step: kept from step to step.
        self._starts = {}

    def synchronize(self):
        """Nothing to wait for: with Adasum the gradients stay local, and step() reduces the
        optimizer's delta."""

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Accepted for scripts that clip gradients: the local gradients are what step()
        uses either way."""
        yield

    def step(self, closure=None):
        if not self._reduces:  # a rank outside the set steps on its own, as in Horovod
            return super(self.__class__, self).step(closure)
        starts = []
        for _, p in self._pairs:
            start = self._starts.get(p)
            if start is None or start.shape != p.shape or start.dtype != p.dtype:
                start = self._starts[p] = torch.empty_like(p, memory_format=torch.contiguous_format)
            start.copy_(p.detach())
            starts.append(start)
        result = super(self.__class__, self).step(closure)
        pending = []
        with torch.no_grad():
            for (name, p), start in zip(self._pairs, starts):
                delta = p.detach() - start
                wire, ctx = self._compression.compress(delta)
                wire = wire.contiguous()
                handle = mpi_ops.allreduce_async_(wire, name=self._prefix + name, op=Adasum,
                                                  process_set=self.process_set)
                pending.append((p, start, wire, ctx, handle))
            for p, start, wire, ctx, handle in pending:
                mpi_ops.synchronize(handle)
                p.copy_(start.add_(self._compression.decompress(wire, ctx)))
        mpi_ops.mark_step()  # the step's end on this rank's timeline, for chorus-trace summary
        return result

    def _reductions_started(self):
        return 0


def make(optimizer, pairs, compression, backward_passes_per_step, process_set):
    """The Adasum wrapper of ``optimizer``: a subclass of its own class, as
    DistributedOptimizer makes."""
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedAdasumOptimizer.__dict__))
    return cls(optimizer, pairs, compression, backward_passes_per_step, process_set)
