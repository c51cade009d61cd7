"""SyncBatchNorm: batch normalization whose statistics cover the whole global batch.

In training, each rank computes the per-channel sum and sum of squares of its slice of the
batch and its element count; one allreduce (sum) of the three gives the mean and variance of
the concatenated batch. The allreduce is an autograd function whose backward is again an
allreduce-sum, so the input gradient on each rank is exactly that of BatchNorm applied to the
concatenated batch (with the ranks' losses summed); weight and bias gradients are this rank's
share, which DistributedOptimizer then reduces like any other gradient.
"""

import itertools

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from chorus.torch import mpi_ops
from chorus.torch.mpi_ops import Sum, global_process_set

_layer_ids = itertools.count()


class _AllreduceSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.name, ctx.process_set = name, process_set
        return mpi_ops.synchronize(mpi_ops._allreduce_async(tensor, name, Sum, 1.0, 1.0,
                                                            process_set, False))

    @staticmethod
    def backward(ctx, grad):
        out = mpi_ops.synchronize(mpi_ops._allreduce_async(grad.contiguous(), ctx.name + ".grad",
                                                           Sum, 1.0, 1.0, ctx.process_set,
                                                           False))
        return out, None, None


class SyncBatchNorm(_BatchNorm):
    """Drop-in for torch.nn.BatchNorm1d/2d/3d (input of 2 or more dimensions, channels in
    dimension 1) with statistics synchronized over ``process_set`` in training mode. In
    eval mode, or on a single rank, it is plain batch norm."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_set=global_process_set):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_set = process_set
        self._layer_id = next(_layer_ids)  # same on every rank: layers are built in order
        self._calls = itertools.count()

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def _run_average_factor(self):
        if self.momentum is not None:
            return self.momentum
        return 1.0 / float(self.num_batches_tracked)

    def forward(self, input):
        self._check_input_dim(input)
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
        if not self.training or self.process_set.size() == 1:
            use_batch = self.training or not self.track_running_stats
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight,
                                self.bias, use_batch, self._run_average_factor()
                                if self.training and self.track_running_stats else 0.0,
                                self.eps)

        c = input.shape[1]
        dims = [0] + list(range(2, input.dim()))
        x = input.float() if input.dtype in (torch.float16, torch.bfloat16) else input
        count = torch.full((1,), float(x.numel() // c), dtype=x.dtype, device=x.device)
        local = torch.cat([x.sum(dims), (x * x).sum(dims), count])
        name = f"sync_batch_norm.{self._layer_id}.{next(self._calls)}"
        total = _AllreduceSum.apply(local, name, self.process_set)
        n = total[2 * c]
        mean = total[:c] / n
        var = (total[c:2 * c] / n - mean * mean).clamp_min(0)

        if self.track_running_stats:
            with torch.no_grad():
                f = self._run_average_factor()
                unbiased = var * (n / (n - 1)) if n > 1 else var
                self.running_mean.mul_(1 - f).add_(mean.detach().to(self.running_mean.dtype),
                                                   alpha=f)
                self.running_var.mul_(1 - f).add_(unbiased.detach().to(self.running_var.dtype),
                                                  alpha=f)

        shape = [1, c] + [1] * (input.dim() - 2)
        y = (x - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        return y.to(input.dtype)
