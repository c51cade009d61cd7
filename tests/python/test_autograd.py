"""Gradients through the collectives, against torch.autograd in one process.

Every rank can build every rank's input and loss weights from its seed, so the reference is
the whole distributed computation written with plain torch ops in this process: the
collective's output on each rank, that rank's loss ``(weights_r * output_r).sum()``, and
torch.autograd.grad of the objective with respect to every rank's input. Which objective
follows Horovod: allgather, grouped_allgather and broadcast give the gradient of the mean of
the ranks' losses (their backward averages over the set); allreduce, grouped_allreduce and
alltoall give the gradient of the sum; reducescatter and grouped_reducescatter give the set
size times the gradient of the sum (Horovod's backward multiplies by the size for Sum and
leaves Average's 1/n out).

test_every_gradient_against_finite_differences checks the same conventions a second way,
without autograd: through the collectives themselves, with perturbed inputs.
"""

import pytest
import torch

import chorus.torch as hvd

TOL = dict(rtol=1e-12, atol=1e-12)


def value(r, shape, salt=0):
    """Rank r's input (or loss weights, with another salt), float64."""
    g = torch.Generator().manual_seed(7919 * r + 31 * salt + 5)
    return torch.randn(shape, generator=g, dtype=torch.float64)


def leaves(shapes):
    """Every rank's input as a fresh leaf of the reference graph."""
    return [value(r, shape).requires_grad_() for r, shape in enumerate(shapes)]


def reference_grads(inputs, outputs, weights, mean):
    losses = [(w * y).sum() for w, y in zip(weights, outputs)]
    objective = sum(losses) / (len(losses) if mean else 1)
    grads = torch.autograd.grad(objective, inputs, allow_unused=True)
    return [torch.zeros_like(x) if g is None else g for x, g in zip(inputs, grads)]


def distributed_grad(shape, collective, weight_shape=None):
    """This rank's input gradient: forward through ``collective``, this rank's loss, backward."""
    me = hvd.rank()
    x = value(me, shape).requires_grad_()
    y = collective(x)
    assert y.requires_grad and y.grad_fn is not None
    (value(me, weight_shape or y.shape, salt=1) * y).sum().backward()
    return x.grad


def test_allreduce_gradient_sum_and_average_with_scaling():
    n, me = hvd.size(), hvd.rank()
    for op, pre, post in [(hvd.Sum, 1.0, 1.0), (hvd.Average, 1.0, 1.0), (hvd.Sum, 0.5, 3.0)]:
        grad = distributed_grad((3, 2), lambda x: hvd.allreduce(
            x, op=op, prescale_factor=pre, postscale_factor=post, name=f"ag.ar.{op}.{pre}"))
        xs = leaves([(3, 2)] * n)
        total = sum(x * pre for x in xs) * post
        if op == hvd.Average:
            total = total / n
        ref = reference_grads(xs, [total] * n, [value(r, (3, 2), 1) for r in range(n)], False)
        torch.testing.assert_close(grad, ref[me], **TOL)


def test_grouped_allreduce_gradient():
    n, me = hvd.size(), hvd.rank()
    shapes = [(2,), (3, 2)]
    xs = [value(me, s, salt=10 + i).requires_grad_() for i, s in enumerate(shapes)]
    ys = hvd.grouped_allreduce(xs, op=hvd.Sum, name="ag.grouped")
    sum((value(me, s, salt=20 + i) * y).sum() for i, (s, y) in enumerate(zip(shapes, ys))
        ).backward()
    for i, s in enumerate(shapes):
        every = [value(r, s, salt=10 + i).requires_grad_() for r in range(n)]
        total = sum(every)
        ref = reference_grads(every, [total] * n, [value(r, s, salt=20 + i) for r in range(n)],
                              False)
        torch.testing.assert_close(xs[i].grad, ref[me], **TOL)


def test_allgather_gradient_uneven_rows():
    """Rank r contributes r + 1 rows: each rank must get back exactly its own rows."""
    n, me = hvd.size(), hvd.rank()
    shapes = [(r + 1, 3) for r in range(n)]
    total_rows = sum(s[0] for s in shapes)
    grad = distributed_grad(shapes[me], lambda x: hvd.allgather(x, name="ag.allgather"),
                            weight_shape=(total_rows, 3))
    xs = leaves(shapes)
    gathered = torch.cat(xs)
    ref = reference_grads(xs, [gathered] * n,
                          [value(r, (total_rows, 3), 1) for r in range(n)], mean=True)
    assert grad.shape == shapes[me]
    torch.testing.assert_close(grad, ref[me], **TOL)


def test_allgather_gradient_unnamed_and_in_a_process_set():
    """Unnamed, the backward collectives get generated names that agree across ranks; in a
    set, a rank's rows are found by its rank in the set, not its global rank."""
    n, me = hvd.size(), hvd.rank()
    grad = distributed_grad((2,), hvd.allgather, weight_shape=(2 * n,))
    xs = leaves([(2,)] * n)
    ref = reference_grads(xs, [torch.cat(xs)] * n, [value(r, (2 * n,), 1) for r in range(n)],
                          mean=True)
    torch.testing.assert_close(grad, ref[me], **TOL)

    members = list(range(1, n))  # every rank but 0
    ps = hvd.add_process_set(members)
    try:
        if me in members:
            shapes = {r: (r, 2) for r in members}
            rows = sum(s[0] for s in shapes.values())
            grad = distributed_grad(shapes[me], lambda x: hvd.allgather(
                x, name="ag.allgather.set", process_set=ps), weight_shape=(rows, 2))
            xs = [value(r, shapes[r]).requires_grad_() for r in members]
            ref = reference_grads(xs, [torch.cat(xs)] * len(members),
                                  [value(r, (rows, 2), 1) for r in members], mean=True)
            torch.testing.assert_close(grad, ref[members.index(me)], **TOL)
        hvd.barrier()
    finally:
        hvd.remove_process_set(ps)


def test_broadcast_gradient_from_every_root():
    n, me = hvd.size(), hvd.rank()
    for root in range(n):
        grad = distributed_grad((4, 2), lambda x: hvd.broadcast(x, root, name=f"ag.bc.{root}"))
        xs = leaves([(4, 2)] * n)
        ref = reference_grads(xs, [xs[root]] * n, [value(r, (4, 2), 1) for r in range(n)],
                              mean=True)
        torch.testing.assert_close(grad, ref[me], **TOL)
        if me != root:
            assert torch.count_nonzero(grad) == 0


def test_broadcast_gradient_in_a_process_set():
    """root_rank is a global rank, also in a set (as in Horovod), and so is the test for who
    keeps the gradient."""
    n, me = hvd.size(), hvd.rank()
    members = list(range(1, n))
    ps = hvd.add_process_set(members)
    try:
        if me in members:
            root = n - 1  # global rank; set rank len(members) - 1
            grad = distributed_grad((3,), lambda x: hvd.broadcast(x, root, name="ag.bc.set",
                                                                  process_set=ps))
            xs = [value(r, (3,)).requires_grad_() for r in members]
            ref = reference_grads(xs, [xs[members.index(root)]] * len(members),
                                  [value(r, (3,), 1) for r in members], mean=True)
            torch.testing.assert_close(grad, ref[members.index(me)], **TOL)
        hvd.barrier()
    finally:
        hvd.remove_process_set(ps)


@pytest.mark.parametrize("uneven", [False, True], ids=["equal_blocks", "splits"])
def test_alltoall_gradient(uneven):
    n, me = hvd.size(), hvd.rank()

    def splits_of(r):  # rows rank r sends to each rank
        return [(r + d) % 3 for d in range(n)] if uneven else [2] * n

    shapes = [(sum(splits_of(r)), 2) for r in range(n)]
    xs = leaves(shapes)
    blocks = [list(torch.split(x, splits_of(r))) for r, x in enumerate(xs)]
    outputs = [torch.cat([blocks[src][dst] for src in range(n)]) for dst in range(n)]
    ref = reference_grads(xs, outputs, [value(r, outputs[r].shape, 1) for r in range(n)], False)

    def collective(x):
        if not uneven:
            return hvd.alltoall(x, name="ag.a2a.equal")
        out, received = hvd.alltoall(x, splits=torch.tensor(splits_of(me), dtype=torch.int32),
                                     name="ag.a2a.splits")
        assert not received.requires_grad
        assert received.tolist() == [splits_of(src)[me] for src in range(n)]
        return out

    grad = distributed_grad(shapes[me], collective, weight_shape=outputs[me].shape)
    torch.testing.assert_close(grad, ref[me], **TOL)


@pytest.mark.parametrize("op,pre,post", [(hvd.Sum, 1.0, 1.0), (hvd.Average, 1.0, 1.0),
                                         (hvd.Average, 2.0, 0.25)],
                         ids=["sum", "average", "average_scaled"])
def test_reducescatter_gradient_uneven_blocks(op, pre, post):
    n, me = hvd.size(), hvd.rank()
    rows = 2 * n + 1  # the first rank gets one row more
    counts = [rows // n + (1 if r < rows % n else 0) for r in range(n)]
    grad = distributed_grad((rows, 2), lambda x: hvd.reducescatter(
        x, op=op, prescale_factor=pre, postscale_factor=post, name=f"ag.rs.{op}.{pre}"),
        weight_shape=(counts[me], 2))
    xs = leaves([(rows, 2)] * n)
    total = sum(x * pre for x in xs) * post
    if op == hvd.Average:
        total = total / n
    outputs = list(torch.split(total, counts))
    ref = reference_grads(xs, outputs, [value(r, (counts[r], 2), 1) for r in range(n)], False)
    torch.testing.assert_close(grad, n * ref[me], **TOL)


def test_reducescatter_gradient_of_ones_is_horovods():
    """Horovod's own check: a Sum over n ranks backward with ones gives n everywhere, an
    Average gives ones."""
    n = hvd.size()
    for op, want in [(hvd.Sum, float(n)), (hvd.Average, 1.0)]:
        x = torch.ones(4 * n, 3, dtype=torch.float64, requires_grad=True)
        hvd.reducescatter(x, op=op).backward(torch.ones(4, 3, dtype=torch.float64))
        torch.testing.assert_close(x.grad, torch.full((4 * n, 3), want, dtype=torch.float64))


def test_grouped_allgather_gradient():
    """Each tensor as allgather's gradient, uneven rows included."""
    n, me = hvd.size(), hvd.rank()
    shapes = [[(r + 1, 2) for r in range(n)], [(2, 3)] * n]
    xs = [value(me, s[me], salt=30 + i).requires_grad_() for i, s in enumerate(shapes)]
    ys = hvd.grouped_allgather(xs, name="ag.grouped_allgather")
    sum((value(me, y.shape, salt=40 + i) * y).sum() for i, y in enumerate(ys)).backward()
    for i, s in enumerate(shapes):
        every = [value(r, s[r], salt=30 + i).requires_grad_() for r in range(n)]
        gathered = torch.cat(every)
        ref = reference_grads(every, [gathered] * n,
                              [value(r, gathered.shape, salt=40 + i) for r in range(n)], True)
        torch.testing.assert_close(xs[i].grad, ref[me], **TOL)


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average], ids=["sum", "average"])
def test_grouped_reducescatter_gradient(op):
    n, me = hvd.size(), hvd.rank()
    shapes = [(n + 1, 2), (2 * n,)]
    xs = [value(me, s, salt=50 + i).requires_grad_() for i, s in enumerate(shapes)]
    ys = hvd.grouped_reducescatter(xs, op=op, prescale_factor=0.5, name=f"ag.grs.{op}")
    sum((value(me, y.shape, salt=60 + i) * y).sum() for i, y in enumerate(ys)).backward()
    for i, s in enumerate(shapes):
        every = [value(r, s, salt=50 + i).requires_grad_() for r in range(n)]
        total = sum(x * 0.5 for x in every) / (n if op == hvd.Average else 1)
        counts = [s[0] // n + (1 if r < s[0] % n else 0) for r in range(n)]
        outputs = list(torch.split(total, counts))
        ref = reference_grads(every, outputs,
                              [value(r, outputs[r].shape, salt=60 + i) for r in range(n)], False)
        torch.testing.assert_close(xs[i].grad, n * ref[me], **TOL)


# Each op, and how its gradient relates to the gradient of the sum of every rank's loss:
# 1, "mean" (1/n: the mean of the losses) or "size" (n, Horovod's reducescatter).
FINITE_DIFFERENCE_CASES = {
    "allreduce_sum": (lambda x, k: hvd.allreduce(x, op=hvd.Sum, name=f"fd.ar.{k}"), 1.0),
    "allreduce_average": (lambda x, k: hvd.allreduce(x, op=hvd.Average, name=f"fd.av.{k}"),
                          1.0),
    "grouped_allreduce": (lambda x, k: hvd.grouped_allreduce([x, 2 * x], op=hvd.Sum,
                                                             name=f"fd.gar.{k}"), 1.0),
    "allgather": (lambda x, k: hvd.allgather(x, name=f"fd.ag.{k}"), "mean"),
    "grouped_allgather": (lambda x, k: hvd.grouped_allgather([x, x[:1]], name=f"fd.gag.{k}"),
                          "mean"),
    "broadcast": (lambda x, k: hvd.broadcast(x, hvd.size() - 1, name=f"fd.bc.{k}"), "mean"),
    "alltoall": (lambda x, k: hvd.alltoall(x, name=f"fd.a2a.{k}"), 1.0),
    "reducescatter_sum": (lambda x, k: hvd.reducescatter(x, op=hvd.Sum, name=f"fd.rs.{k}"),
                          "size"),
    "reducescatter_average": (lambda x, k: hvd.reducescatter(x, op=hvd.Average,
                                                             name=f"fd.rsa.{k}"), "size"),
    "grouped_reducescatter": (lambda x, k: hvd.grouped_reducescatter(
        [x, 3 * x], op=hvd.Sum, name=f"fd.grs.{k}"), "size"),
}


@pytest.mark.parametrize("case", sorted(FINITE_DIFFERENCE_CASES))
def test_every_gradient_against_finite_differences(case):
    """The objective is the sum over ranks of each rank's (w_r * output_r).sum(), evaluated
    through the collectives themselves; every op is linear, so a difference quotient with a
    step of 1 in float64 is exact. Each element of each rank's input is perturbed in turn
    (every rank runs the same calls), and this rank's autograd gradient must equal the
    quotient times the op's convention: 1 (sum), 1/n (mean) or n (reducescatter)."""
    collective, convention = FINITE_DIFFERENCE_CASES[case]
    n, me = hvd.size(), hvd.rank()
    factor = {"mean": 1.0 / n, "size": float(n)}.get(convention, convention)
    shape = (n, 2)  # divisible by n: alltoall and reducescatter need no splits

    def outputs(x, key):
        out = collective(x, key)
        return list(out) if isinstance(out, (list, tuple)) else [out]

    def objective(x, key):
        local = sum((value(me, y.shape, salt=70 + i) * y).sum() for i, y in
                    enumerate(outputs(x, key)))
        return float(hvd.allreduce(local.reshape(1), op=hvd.Sum, name=f"fd.loss.{case}.{key}"))

    x = value(me, shape).requires_grad_()
    ys = outputs(x, "grad")
    sum((value(me, y.shape, salt=70 + i) * y).sum() for i, y in enumerate(ys)).backward()
    with torch.no_grad():
        base = objective(value(me, shape), "base")
        for r in range(n):
            for j in range(x.numel()):
                bumped = value(me, shape)
                if r == me:
                    bumped.view(-1)[j] += 1.0
                quotient = objective(bumped, f"{r}.{j}") - base
                if r == me:
                    assert abs(x.grad.view(-1)[j].item() - factor * quotient) < 1e-9, (
                        f"{case}: d/dx[{j}] on rank {me}: autograd {x.grad.view(-1)[j].item()}, "
                        f"finite difference {quotient} times {factor}")


def test_reducescatter_gradient_needs_sum_or_average():
    x = torch.ones(hvd.size(), 2, dtype=torch.float64, requires_grad=True)
    y = hvd.reducescatter(x, op=hvd.Max, name="ag.rs.max")
    with pytest.raises(hvd.NotSupportedError, match="Sum and hvd.Average"):
        y.sum().backward()


def test_compressed_allreduce_gradient_keeps_dtype():
    n = hvd.size()
    x = torch.full((4,), 1.5, dtype=torch.float32, requires_grad=True)
    y = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16, name="ag.fp16")
    assert y.dtype == torch.float32
    y.sum().backward()
    assert x.grad.dtype == torch.float32
    torch.testing.assert_close(x.grad, torch.full((4,), float(n)))


def test_in_place_and_async_forms_are_not_differentiable():
    x = torch.ones(2, 3, dtype=torch.float64, requires_grad=True)
    assert not hvd.synchronize(hvd.allgather_async(x, name="ag.nd.ag")).requires_grad
    assert not hvd.synchronize(hvd.broadcast_async(x, 0, name="ag.nd.bc")).requires_grad
    assert not hvd.synchronize(hvd.allreduce_async(x, name="ag.nd.ar")).requires_grad
    out, _ = hvd.synchronize(hvd.alltoall_async(x.detach().repeat(hvd.size(), 1),
                                                name="ag.nd.a2a"))
    assert not out.requires_grad
    # Without grad mode the differentiable forms make no graph either.
    with torch.no_grad():
        assert hvd.allgather(x, name="ag.nd.nograd").grad_fn is None


def test_second_order_through_allreduce():
    """create_graph=True: the collectives of the backward pass are differentiable too."""
    n, me = hvd.size(), hvd.rank()
    x = value(me, (3,)).requires_grad_()
    y = hvd.allreduce(x * x, op=hvd.Sum, name="ag.second")
    (g,) = torch.autograd.grad((y * y).sum(), x, create_graph=True)
    g.sum().backward()
    xs = leaves([(3,)] * n)
    total = sum(v * v for v in xs)
    first = torch.autograd.grad(sum((total * total).sum() for _ in range(n)), xs,
                                create_graph=True)
    ref = torch.autograd.grad(sum(f.sum() for f in first), xs)
    torch.testing.assert_close(g.detach(), first[me].detach(), **TOL)
    torch.testing.assert_close(x.grad, ref[me], **TOL)
