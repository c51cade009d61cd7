"""chorus.torch.reduce (which horovod.torch lacks; torch.distributed has it): the root's
result against a reference built in this process from every rank's input, the other ranks'
tensors left as they were, the allreduce's bits, and the gradient against torch.autograd.
Runs in the folder's runs at 2 and 3 ranks, and alone at 1 and 4."""

import pytest
import torch

import chorus.torch as hvd


def value(r, shape, salt=0):
    """Rank r's input (or loss weights, with another salt), float64."""
    g = torch.Generator().manual_seed(104729 * r + 31 * salt + 11)
    return torch.randn(shape, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average, hvd.Min, hvd.Max])
def test_reduce_to_every_root(op):
    n, me = hvd.size(), hvd.rank()
    every = [value(r, (5, 3)) for r in range(n)]
    stacked = torch.stack(every)
    want = {hvd.Sum: stacked.sum(0), hvd.Average: stacked.mean(0),
            hvd.Min: stacked.min(0).values, hvd.Max: stacked.max(0).values}[op]
    for root in range(n):
        mine = every[me].clone()
        out = hvd.reduce(mine, root, op=op, name=f"rd.{op}.{root}")
        assert torch.equal(mine, every[me])  # out of place
        if me == root:
            torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-12)
        else:
            assert torch.equal(out, every[me])
        same = hvd.reduce_(mine, root, op=op)
        assert same is mine
        assert torch.equal(mine, out)


def test_reduce_gives_the_allreduce_bits_in_float32():
    me = hvd.rank()
    x = value(me, (2000,)).float()
    root = hvd.size() - 1
    reduced = hvd.synchronize(hvd.reduce_async(x, root, prescale_factor=0.3,
                                               postscale_factor=3.0))
    everywhere = hvd.allreduce(x, prescale_factor=0.3, postscale_factor=3.0)
    assert torch.equal(reduced, everywhere if me == root else x)


def test_reduce_in_place_on_a_non_contiguous_view():
    me, root = hvd.rank(), 0
    base = value(me, (4, 6))
    view = base.t()
    before = view.clone()
    hvd.synchronize(hvd.reduce_async_(view, root, op=hvd.Sum))
    if me == root:
        want = sum(value(r, (4, 6)) for r in range(hvd.size())).t()
        torch.testing.assert_close(view, want, rtol=1e-12, atol=1e-12)
    else:
        assert torch.equal(view, before)


@pytest.mark.parametrize("op, pre, post", [(hvd.Sum, 1.0, 1.0), (hvd.Average, 0.5, 3.0)])
def test_reduce_gradient_against_autograd(op, pre, post):
    n, me = hvd.size(), hvd.rank()
    root = n // 2
    x = value(me, (3, 2)).requires_grad_()
    y = hvd.reduce(x, root, op=op, prescale_factor=pre, postscale_factor=post,
                   name=f"rd.grad.{op}")
    (value(me, (3, 2), salt=1) * y).sum().backward()
    # The whole computation in this process: the root's output is the reduction, every
    # other rank's is its own input; the objective is the sum of the ranks' losses.
    xs = [value(r, (3, 2)).requires_grad_() for r in range(n)]
    total = sum(v * pre for v in xs) * post / (n if op == hvd.Average else 1)
    outputs = [total if r == root else xs[r] for r in range(n)]
    objective = sum((value(r, (3, 2), salt=1) * y_r).sum() for r, y_r in enumerate(outputs))
    want = torch.autograd.grad(objective, xs)[me]
    torch.testing.assert_close(x.grad, want, rtol=1e-12, atol=1e-12)


def test_reduce_gradient_needs_sum_or_average():
    x = value(hvd.rank(), (2,)).requires_grad_()
    with pytest.raises(hvd.NotSupportedError, match="gradient of reduce"):
        hvd.reduce(x, 0, op=hvd.Max)


def test_a_root_outside_the_set_raises_at_the_call():
    with pytest.raises(ValueError, match="root_rank"):
        hvd.reduce(torch.ones(2), hvd.size())
