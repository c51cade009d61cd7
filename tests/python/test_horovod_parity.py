"""What scripts written for horovod.torch 0.28.1 rely on, one behaviour per test: 16-bit
integers, grouped allgather and reducescatter, names in flight, Horovod's integer scaling,
global root ranks in process sets, argument errors as ValueError, callable sparse handles,
sparse gradients from the first step, the optimizer's parameter names, optimizer state with
frozen parameters, and the warning of a step after synchronize()."""

import math
import warnings

import pytest
import torch
import torch.nn as nn

import chorus.torch as hvd

INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


@pytest.fixture
def odd_set():
    """The odd ranks (rank 1 alone at np 2, ranks 1 at np 3): root_rank 1 is global rank 1,
    set rank 0."""
    ps = hvd.add_process_set([r for r in range(hvd.size()) if r % 2 == 1])
    yield ps
    hvd.barrier()
    hvd.remove_process_set(ps)


def test_int16_in_every_collective():
    n, me = hvd.size(), hvd.rank()
    t = torch.arange(2 * n, dtype=torch.int16) * (me + 1)
    assert hvd.allreduce(t, op=hvd.Sum).tolist() == (torch.arange(2 * n) * n * (n + 1) // 2
                                                     ).tolist()
    assert hvd.allreduce(t, op=hvd.Sum).dtype == torch.int16
    assert hvd.allgather(t).tolist() == torch.cat(
        [torch.arange(2 * n, dtype=torch.int16) * (r + 1) for r in range(n)]).tolist()
    assert hvd.broadcast(t, root_rank=n - 1).tolist() == (torch.arange(2 * n) * n).tolist()
    got = hvd.alltoall(t)
    assert got.tolist() == [int(v) for r in range(n) for v in
                            (torch.arange(2 * n) * (r + 1))[2 * me:2 * me + 2]]
    block = hvd.reducescatter(t, op=hvd.Sum)
    assert block.tolist() == (torch.arange(2 * me, 2 * me + 2) * n * (n + 1) // 2).tolist()
    # Wrap-around as the type: 32767 + 1 on every rank.
    big = torch.full((3,), 32767, dtype=torch.int16)
    assert hvd.allreduce(big, op=hvd.Sum).tolist() == [
        torch.tensor(32767 * n, dtype=torch.int64).to(torch.int16).item()] * 3


@pytest.mark.parametrize("dtype", INT_DTYPES + [torch.float16, torch.bfloat16, torch.float32,
                                                torch.float64], ids=str)
def test_every_dtype_horovod_accepts_per_op(dtype):
    n = hvd.size()
    t = torch.ones(n, 2, dtype=dtype)
    assert hvd.allgather(t).shape == (n * n, 2)
    assert hvd.broadcast(t, root_rank=0).dtype == dtype
    assert hvd.alltoall(t).shape == (n, 2)
    assert hvd.allreduce(t, op=hvd.Sum).tolist() == (t * n).tolist()
    assert hvd.reducescatter(t, op=hvd.Sum).tolist() == [[n, n]]
    assert [x.dtype for x in hvd.grouped_allgather([t, t[:1]])] == [dtype, dtype]


def test_grouped_allgather_sync_async_and_process_set(odd_set):
    n, me = hvd.size(), hvd.rank()
    a = torch.full((me + 1, 2), float(me))
    b = torch.arange(3, dtype=torch.int16) + me
    out = hvd.grouped_allgather([a, b], name="parity.gag")
    assert out[0].tolist() == [[float(r)] * 2 for r in range(n) for _ in range(r + 1)]
    assert out[1].tolist() == [i + r for r in range(n) for i in range(3)]
    h = hvd.grouped_allgather_async([b, a])
    later = hvd.synchronize(h)
    assert [x.dtype for x in later] == [torch.int16, torch.float32]
    assert torch.equal(later[0], out[1]) and torch.equal(later[1], out[0])
    if odd_set.included():
        got = hvd.grouped_allgather([b], process_set=odd_set)
        assert got[0].tolist() == [i + r for r in odd_set.ranks for i in range(3)]


def test_grouped_reducescatter_ops_scaling_and_process_set(odd_set):
    n, me = hvd.size(), hvd.rank()
    x = torch.arange(2 * n, dtype=torch.float64) + me
    y = torch.arange(n * 3, dtype=torch.float64).reshape(n, 3) * (me + 1)
    summed = hvd.grouped_reducescatter([x, y], op=hvd.Sum, name="parity.grs")
    total_x = n * torch.arange(2 * n, dtype=torch.float64) + n * (n - 1) / 2
    total_y = torch.arange(n * 3, dtype=torch.float64).reshape(n, 3) * n * (n + 1) / 2
    assert summed[0].tolist() == total_x[2 * me:2 * me + 2].tolist()
    assert summed[1].tolist() == total_y[me:me + 1].tolist()
    averaged = hvd.synchronize(hvd.grouped_reducescatter_async(
        [x, y], op=hvd.Average, prescale_factor=2.0, postscale_factor=0.5))
    torch.testing.assert_close(averaged[0], total_x[2 * me:2 * me + 2] / n)
    torch.testing.assert_close(averaged[1], total_y[me:me + 1] / n)
    if odd_set.included():
        got = hvd.grouped_reducescatter([torch.ones(odd_set.size(), 2)], op=hvd.Sum,
                                        process_set=odd_set)
        assert got[0].tolist() == [[float(odd_set.size())] * 2]


def test_grouped_ops_refuse_scalars_at_the_call():
    for call in (lambda: hvd.grouped_allgather([torch.ones(2), torch.tensor(1.0)]),
                 lambda: hvd.grouped_reducescatter([torch.tensor(1.0)])):
        with pytest.raises(ValueError, match="at least one dimension"):
            call()
    # Every rank refused locally, and the names of later unnamed calls still agree.
    assert hvd.grouped_allgather([torch.ones(1)])[0].tolist() == [1.0] * hvd.size()


ASYNC_OPS = {
    "allreduce": lambda t, name: hvd.allreduce_async(t, name=name),
    "allgather": lambda t, name: hvd.allgather_async(t, name=name),
    "broadcast": lambda t, name: hvd.broadcast_async(t, 0, name=name),
    "reducescatter": lambda t, name: hvd.reducescatter_async(t, name=name),
    "alltoall": lambda t, name: hvd.alltoall_async(t, name=name),
}


@pytest.mark.parametrize("op", sorted(ASYNC_OPS))
def test_a_name_in_flight_raises_value_error_on_that_rank_alone(op):
    """Rank 0 starts the collective first; its second call with the name raises at the call
    while the first one cannot have completed (the others start theirs only after the
    barrier). The first one then completes normally, and so does the job."""
    n, me = hvd.size(), hvd.rank()
    start = ASYNC_OPS[op]
    t = torch.ones(n, 2)
    name = f"parity.dup.{op}"
    first = None
    if me == 0:
        first = start(t, name)
        with pytest.raises(ValueError, match="already in flight"):
            start(t, name)
    hvd.barrier()
    if me != 0:
        first = start(t, name)
    result = hvd.synchronize(first)
    result = result[0] if isinstance(result, tuple) else result
    assert result.numel() > 0
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == n  # the job goes on


def horovod_int(x):
    """Horovod's CPU scaling of an integer: the float64 product truncated toward zero."""
    return math.trunc(x)


@pytest.mark.parametrize("dtype", [torch.int16, torch.int32, torch.int64], ids=str)
def test_integer_prescale_and_postscale_as_horovod(dtype):
    n, me = hvd.size(), hvd.rank()
    values = [9, -9, 7, 3, -5, 11]
    t = torch.tensor(values, dtype=dtype) * (me + 1)
    for pre, post, op in [(1.5, 1.0, hvd.Sum), (1.0, 1.5, hvd.Sum), (0.7, 2.5, hvd.Sum),
                          (1.5, 1.0, hvd.Average), (1.0, 3.0, hvd.Average)]:
        got = hvd.allreduce(t, op=op, prescale_factor=pre, postscale_factor=post)
        want = []
        for v in values:
            total = sum(horovod_int(v * (r + 1) * pre) for r in range(n))
            if op == hvd.Average and post == 1.0:
                want.append(int(total / n) if total >= 0 else -int(-total / n))
            else:
                want.append(horovod_int(total * (post / (n if op == hvd.Average else 1))))
        assert got.tolist() == want, (pre, post, op)
    # 9 * 1.5 = 13.5 becomes 13 on every rank: 26 on two ranks (Horovod's figure).
    nine = torch.full((1,), 9, dtype=dtype)
    assert hvd.allreduce(nine, op=hvd.Sum, prescale_factor=1.5).item() == 13 * n
    rows = torch.full((n, 1), 9, dtype=dtype)
    assert hvd.reducescatter(rows, op=hvd.Sum, prescale_factor=1.5).tolist() == [[13 * n]]
    assert hvd.reducescatter(rows, op=hvd.Sum, postscale_factor=1.5).tolist() == [
        [horovod_int(9 * n * 1.5)]]


def test_root_rank_is_global_in_a_process_set(odd_set):
    me = hvd.rank()
    if odd_set.included():
        root = odd_set.ranks[-1]
        t = torch.full((3,), float(me))
        assert hvd.broadcast(t, root_rank=root, process_set=odd_set).tolist() == [root] * 3
        assert hvd.broadcast_object(f"from {me}", root_rank=root,
                                    process_set=odd_set) == f"from {root}"
        model = nn.Linear(2, 2)
        with torch.no_grad():
            model.weight.fill_(me)
        hvd.broadcast_parameters(model.state_dict(), root_rank=root, process_set=odd_set)
        assert model.weight.eq(root).all()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                       process_set=odd_set)
        model(torch.ones(1, 2)).sum().backward()
        opt.step()
        hvd.broadcast_optimizer_state(opt, root_rank=root, process_set=odd_set)
        with pytest.raises(ValueError, match="not a rank of the process set"):
            hvd.broadcast(t, root_rank=0, process_set=odd_set)


def test_optimizer_over_a_set_steps_alone_outside_it(odd_set):
    """Every rank wraps its optimizer over the odd ranks: they average, the others step on
    their own gradients."""
    me = hvd.rank()
    torch.manual_seed(me)
    model = nn.Linear(3, 2)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters(),
                                   process_set=odd_set)
    model(torch.full((1, 3), me + 1.0)).sum().backward()
    local = model.weight.grad.clone()
    opt.step()
    if odd_set.included():
        mean = sum(torch.full((2, 3), r + 1.0) for r in odd_set.ranks) / odd_set.size()
        torch.testing.assert_close(model.weight.grad, mean)
    else:
        torch.testing.assert_close(model.weight.grad, local)


def test_alltoall_argument_errors_raise_value_error_at_the_call():
    n = hvd.size()
    with pytest.raises(ValueError, match="divisible"):
        hvd.alltoall(torch.ones(n + 1))
    with pytest.raises(ValueError, match="sum to"):
        hvd.alltoall(torch.ones(n - 1), splits=torch.ones(n, dtype=torch.int32))
    with pytest.raises(ValueError, match="integers"):
        hvd.alltoall(torch.ones(n), splits=torch.ones(n, dtype=torch.float32))
    with pytest.raises(ValueError, match="integers"):
        hvd.alltoall(torch.ones(n), splits=[1.5] * n)
    with pytest.raises(ValueError, match="entries"):
        hvd.alltoall(torch.ones(n), splits=[1] * (n + 1))
    assert hvd.alltoall(torch.ones(n)).tolist() == [1.0] * n  # names still agree


def test_mismatches_are_both_horovod_internal_error_and_value_error():
    t = torch.ones(hvd.rank() + 1)
    with pytest.raises(hvd.HorovodInternalError) as caught:
        hvd.allreduce(t, name="parity.mismatch")
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, hvd.ArgumentError)


def test_sparse_allreduce_async_handle_is_callable():
    n, me = hvd.size(), hvd.rank()
    dense = torch.zeros(4, 2)
    dense[me % 4] = 1.0
    handle = hvd.sparse_allreduce_async(dense.to_sparse(1), name="parity.sparse", op=hvd.Sum)
    got = handle()
    want = sum(torch.zeros(4, 2).index_fill_(0, torch.tensor([r % 4]), 1.0) for r in range(n))
    assert torch.equal(got.to_dense(), want)
    other = hvd.allreduce_async(torch.ones(1), op=hvd.Sum)
    assert hvd.synchronize(other).item() == n  # plain handles still synchronize


def test_sparse_adam_steps_from_the_first_step():
    torch.manual_seed(3)
    emb = nn.Embedding(10, 4, sparse=True)
    hvd.broadcast_parameters(emb.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SparseAdam(emb.parameters(), lr=0.1),
                                   named_parameters=emb.named_parameters())
    for step in range(3):
        opt.zero_grad()
        emb(torch.tensor([hvd.rank() + step, 1])).sum().backward()
        opt.step()  # SparseAdam refuses dense gradients
        assert emb.weight.grad.is_sparse
    everyone = hvd.allgather(emb.weight.detach().unsqueeze(0))
    assert all(torch.equal(everyone[0], w) for w in everyone)


def test_parameter_names_without_named_parameters():
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 2))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(
        [{"params": model[0].parameters()}, {"params": model[1].parameters()}], lr=0.1))
    names = opt._parameter_names
    assert len(names) == 4 and len(set(names.values())) == 4
    assert set(names) == set(model.parameters())
    everyone = hvd.allgather_object(sorted(names.values()))
    assert all(x == everyone[0] for x in everyone)


def test_broadcast_optimizer_state_with_a_frozen_integer_parameter():
    class Frozen(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Parameter(torch.tensor([1, 3], dtype=torch.int32), requires_grad=False)
            self.b = nn.Parameter(torch.rand(4))

    model = Frozen()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert model.a.grad is None
    assert torch.equal(model.b.grad, torch.zeros(4))
    assert "momentum_buffer" in opt.state[model.b]
    everyone = hvd.allgather(model.b.detach().unsqueeze(0))
    assert all(torch.equal(everyone[0], w) for w in everyone)


def test_step_after_synchronize_warns_once_and_steps():
    torch.manual_seed(5)
    model = nn.Linear(2, 1, bias=False)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters())
    before = model.weight.detach().clone()
    model(torch.full((1, 2), float(hvd.rank() + 1))).sum().backward()
    opt.synchronize()
    reduced = model.weight.grad.clone()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.step()
    assert len(caught) == 1
    assert "optimizer.step() called without optimizer.skip_synchronize()" in str(
        caught[0].message)
    torch.testing.assert_close(model.weight.detach(), before - reduced)
    mean = sum(r + 1 for r in range(hvd.size())) / hvd.size()
    torch.testing.assert_close(reduced, torch.full((1, 2), mean))
