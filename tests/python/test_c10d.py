"""The torch.distributed backend ``chorus`` against c10d's documented results: every
operation on the dtypes torch gives it, every root, uneven all-to-alls, Work and futures, and
ranks that disagree failing together. Each expected value is built in this process from every
rank's input. Runs in the folder's runs at 2 and 3 ranks, and alone at 1 and 4."""

import warnings

import pytest
import torch
import torch.distributed as dist

import chorus.torch as hvd
from chorus.torch import distributed as chorus_distributed

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.int8, torch.uint8]


pytestmark = pytest.mark.usefixtures("chorus_group")  # conftest.py


def value(r, shape, dtype, salt=0):
    """Rank r's input: small integers, so that every dtype holds every sum exactly."""
    g = torch.Generator().manual_seed(7919 * r + 31 * salt + 3)
    return torch.randint(1, 5, shape, generator=g).to(dtype)


def every(shape, dtype, salt=0):
    return [value(r, shape, dtype, salt) for r in range(dist.get_world_size())]


def test_the_group_is_chorus():
    assert chorus_distributed.registered
    assert dist.get_backend() == "chorus"
    assert dist.get_rank() == hvd.rank() and dist.get_world_size() == hvd.size()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["SUM", "PRODUCT", "MIN", "MAX"])
def test_all_reduce(op, dtype):
    inputs = every((3, 5), dtype)
    if op == "PRODUCT":  # 1 and 2 only: a product of 4 ranks fits int8
        inputs = [(t.double() % 2 + 1).to(dtype) for t in inputs]
    stacked = torch.stack(inputs).double()
    want = {"SUM": stacked.sum(0), "PRODUCT": stacked.prod(0), "MIN": stacked.min(0).values,
            "MAX": stacked.max(0).values}[op].to(dtype)
    mine = inputs[dist.get_rank()].clone()
    dist.all_reduce(mine, op=getattr(dist.ReduceOp, op))
    assert torch.equal(mine, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_all_reduce_avg_and_premul_sum(dtype):
    inputs = every((7,), dtype)
    stacked = torch.stack(inputs)
    mine = inputs[dist.get_rank()].clone()
    dist.all_reduce(mine, op=dist.ReduceOp.AVG)
    torch.testing.assert_close(mine, stacked.mean(0))
    mine = inputs[dist.get_rank()].clone()
    dist.all_reduce(mine, op=dist._make_nccl_premul_sum(0.5))
    torch.testing.assert_close(mine, stacked.sum(0) * 0.5)


def test_all_reduce_bool_and_complex():
    n, me = dist.get_world_size(), dist.get_rank()
    flags = [torch.tensor([r == 0, True, False, r % 2 == 1]) for r in range(n)]
    for op, want in [(dist.ReduceOp.SUM, torch.stack(flags).any(0)),
                     (dist.ReduceOp.BOR, torch.stack(flags).any(0)),
                     (dist.ReduceOp.MAX, torch.stack(flags).any(0)),
                     (dist.ReduceOp.BAND, torch.stack(flags).all(0)),
                     (dist.ReduceOp.MIN, torch.stack(flags).all(0))]:
        mine = flags[me].clone()
        dist.all_reduce(mine, op=op)
        assert torch.equal(mine, want), op
    z = [torch.complex(value(r, (4,), torch.float64), value(r, (4,), torch.float64, 1))
         for r in range(n)]
    mine = z[me].clone()
    dist.all_reduce(mine)
    assert torch.equal(mine, torch.stack(z).sum(0))
    # torch hands these complex tensors to the backend as they are.
    for root in range(n):
        mine = z[me].clone()
        dist.reduce(mine, dst=root)
        if me == root:
            assert torch.equal(mine, torch.stack(z).sum(0))
    blocks = [torch.complex(value(r, (n, 2), torch.float64), value(r, (n, 2), torch.float64, 2))
              for r in range(n)]
    out = torch.zeros(2, dtype=torch.complex128)
    dist.reduce_scatter(out, list(blocks[me].unbind(0)))
    assert torch.equal(out, torch.stack(blocks).sum(0)[me])
    with pytest.raises(ValueError, match="PRODUCT of a complex tensor"):
        dist.reduce(z[me].clone(), dst=0, op=dist.ReduceOp.PRODUCT)


def test_all_reduce_of_a_non_contiguous_tensor():
    inputs = every((4, 6), torch.float32)
    mine = inputs[dist.get_rank()].clone().t()
    dist.all_reduce(mine)
    assert torch.equal(mine, torch.stack(inputs).sum(0).t())


def test_all_reduce_coalesced():
    a, b = every((3,), torch.float64), every((2, 2), torch.float64, 1)
    me = dist.get_rank()
    mine = [a[me].clone(), b[me].clone()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch says it will go; DDP's users still call it
        dist.all_reduce_coalesced(mine)
    assert torch.equal(mine[0], torch.stack(a).sum(0))
    assert torch.equal(mine[1], torch.stack(b).sum(0))


@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
def test_broadcast_from_every_root(dtype):
    for root in range(dist.get_world_size()):
        inputs = every((2, 3), dtype, salt=root)
        if dtype is torch.bool:
            inputs = [t > 2 for t in inputs]
        mine = inputs[dist.get_rank()].clone()
        dist.broadcast(mine, src=root)
        assert torch.equal(mine, inputs[root])


@pytest.mark.parametrize("op", ["SUM", "MAX"])
def test_reduce_to_every_root(op):
    for root in range(dist.get_world_size()):
        inputs = every((5,), torch.int64, salt=root)
        mine = inputs[dist.get_rank()].clone()
        dist.reduce(mine, dst=root, op=getattr(dist.ReduceOp, op))
        if dist.get_rank() == root:
            stacked = torch.stack(inputs)
            assert torch.equal(mine, stacked.sum(0) if op == "SUM" else stacked.max(0).values)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_all_gather(dtype):
    n = dist.get_world_size()
    inputs = [t > 2 if dtype is torch.bool else t for t in every((2, 3), dtype)]
    outputs = [torch.zeros((2, 3), dtype=dtype) for _ in range(n)]
    dist.all_gather(outputs, inputs[dist.get_rank()])
    for r in range(n):
        assert torch.equal(outputs[r], inputs[r])


def test_all_gather_of_scalars_and_objects():
    n = dist.get_world_size()
    outputs = [torch.zeros((), dtype=torch.int64) for _ in range(n)]
    dist.all_gather(outputs, torch.tensor(10 * dist.get_rank()))
    assert [int(o) for o in outputs] == [10 * r for r in range(n)]
    objects = [None] * n
    dist.all_gather_object(objects, {"rank": dist.get_rank()})
    assert objects == [{"rank": r} for r in range(n)]


def test_all_gather_into_tensor():
    n = dist.get_world_size()
    inputs = every((2, 3), torch.float32)
    flat = torch.zeros((2 * n, 3))
    dist.all_gather_into_tensor(flat, inputs[dist.get_rank()])
    assert torch.equal(flat, torch.cat(inputs))
    stacked = torch.zeros((n, 2, 3))
    dist.all_gather_into_tensor(stacked, inputs[dist.get_rank()])
    assert torch.equal(stacked, torch.stack(inputs))


def test_gather_and_scatter_at_every_root():
    n, me = dist.get_world_size(), dist.get_rank()
    for root in range(n):
        inputs = every((3,), torch.int32, salt=root)
        outputs = [torch.zeros(3, dtype=torch.int32) for _ in range(n)] if me == root else None
        dist.gather(inputs[me], gather_list=outputs, dst=root)
        if me == root:
            for r in range(n):
                assert torch.equal(outputs[r], inputs[r])
        received = torch.zeros(3, dtype=torch.int32)
        dist.scatter(received, scatter_list=inputs if me == root else None, src=root)
        assert torch.equal(received, inputs[me])


def test_reduce_scatter():
    n, me = dist.get_world_size(), dist.get_rank()
    # Rank r's list: one block per destination.
    lists = [[value(r, (4,), torch.float64, salt=d) for d in range(n)] for r in range(n)]
    out = torch.zeros(4, dtype=torch.float64)
    dist.reduce_scatter(out, lists[me])
    assert torch.equal(out, torch.stack([lists[r][me] for r in range(n)]).sum(0))


def test_reduce_scatter_tensor():
    n, me = dist.get_world_size(), dist.get_rank()
    inputs = every((2 * n, 3), torch.float32)
    out = torch.zeros((2, 3))
    dist.reduce_scatter_tensor(out, inputs[me])
    assert torch.equal(out, torch.stack(inputs).sum(0)[2 * me:2 * me + 2])


def test_all_to_all_single_equal_and_uneven():
    n, me = dist.get_world_size(), dist.get_rank()
    inputs = every((2 * n, 3), torch.float32)
    out = torch.zeros((2 * n, 3))
    dist.all_to_all_single(out, inputs[me])
    assert torch.equal(out, torch.cat([inputs[r][2 * me:2 * me + 2] for r in range(n)]))
    # Rank r sends r + d + 1 rows to rank d.
    rows = [[r + d + 1 for d in range(n)] for r in range(n)]
    uneven = [value(r, (sum(rows[r]), 2), torch.int64, salt=9) for r in range(n)]
    received = [rows[r][me] for r in range(n)]
    out = torch.zeros((sum(received), 2), dtype=torch.int64)
    dist.all_to_all_single(out, uneven[me], output_split_sizes=received,
                           input_split_sizes=rows[me])
    want = [uneven[r][sum(rows[r][:me]):sum(rows[r][:me + 1])] for r in range(n)]
    assert torch.equal(out, torch.cat(want))


def test_all_to_all_of_lists():
    n, me = dist.get_world_size(), dist.get_rank()
    # Rank r sends rank d a tensor of d + 1 elements.
    sent = [[value(r, (d + 1,), torch.float32, salt=d) for d in range(n)] for r in range(n)]
    outputs = [torch.zeros(me + 1) for _ in range(n)]
    dist.all_to_all(outputs, sent[me])
    for r in range(n):
        assert torch.equal(outputs[r], sent[r][me])


def test_work_and_future():
    n = dist.get_world_size()
    t = torch.ones(3)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    assert work.is_completed() and work.is_success()
    assert torch.equal(work.result()[0], torch.full((3,), float(n)))
    fut = dist.all_reduce(torch.ones(2), async_op=True).get_future()
    doubled = fut.then(lambda f: f.value()[0] * 2)
    assert torch.equal(doubled.wait(), torch.full((2,), 2.0 * n))
    dist.barrier()


def test_ranks_that_disagree_fail_together_and_the_group_goes_on():
    me = dist.get_rank()
    if dist.get_world_size() > 1:
        with pytest.raises(hvd.ArgumentError, match=r"disagree on shape: \[3\] on ranks \[0\]"):
            dist.all_reduce(torch.ones(3 if me == 0 else 4))
        work = (dist.all_reduce(torch.ones(3), async_op=True) if me == 0 else
                dist.broadcast(torch.ones(3), 0, async_op=True))
        with pytest.raises(hvd.ArgumentError,
                           match=r"disagree on the operation: allreduce on ranks \[0\]; "
                                 r"broadcast on ranks \[1"):
            work.wait()
    with pytest.raises(ValueError, match="BXOR is not a reduction Chorus has"):
        dist.all_reduce(torch.ones(2, dtype=torch.int32), op=dist.ReduceOp.BXOR)
    if dist.get_world_size() > 1:
        # A call that rank 0 alone refuses (two tensors, where the group takes one per rank):
        # the others' broadcast fails as a disagreement instead of waiting for rank 0.
        with pytest.raises(ValueError):
            if me == 0:
                dist.broadcast_multigpu([torch.ones(1), torch.ones(1)], 0)
            else:
                dist.broadcast(torch.ones(1), 0)
        # A barrier against a collective fails too, on every rank.
        work = (dist.barrier(async_op=True) if me == 0 else
                dist.all_reduce(torch.ones(1), async_op=True))
        with pytest.raises(hvd.ArgumentError, match="disagree on the operation"):
            work.wait()
    t = torch.ones(2)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((2,), float(dist.get_world_size())))


def test_send_and_recv_around_a_ring_by_tag_and_in_a_subgroup():
    """Each rank first sends to its next while that one first sends to its own: the pair that
    carries a message is made without waiting for the peer's first call. Messages of different
    tags match by tag, whatever order they are received in."""
    n, me = dist.get_world_size(), dist.get_rank()
    if n == 1:
        with pytest.raises(ValueError, match="rank 0 is not another rank of the group"):
            dist.send(torch.zeros(1), dst=0)
        return
    nxt, prev = (me + 1) % n, (me - 1) % n
    for dtype in [torch.float32, torch.int64, torch.bool]:
        out = value(me, (3, 4), dtype) > 2 if dtype is torch.bool else value(me, (3, 4), dtype)
        got = torch.zeros((3, 4), dtype=dtype)
        works = [dist.isend(out, nxt), dist.irecv(got, prev)]
        for w in works:
            w.wait()
        want = value(prev, (3, 4), dtype)
        assert torch.equal(got, want > 2 if dtype is torch.bool else want)
    sends = [dist.isend(value(me, (2,), torch.float64, salt=1), nxt, tag=1),
             dist.isend(value(me, (5,), torch.float64, salt=2), nxt, tag=2)]
    by_tag = {2: torch.zeros(5, dtype=torch.float64), 1: torch.zeros(2, dtype=torch.float64)}
    receives = [dist.irecv(by_tag[tag], prev, tag=tag) for tag in (2, 1)]
    for w in sends + receives:
        w.wait()
    assert torch.equal(by_tag[1], value(prev, (2,), torch.float64, salt=1))
    assert torch.equal(by_tag[2], value(prev, (5,), torch.float64, salt=2))
    # Blocking calls: rank 0 sends each other rank its own message, in rank order.
    if me == 0:
        for r in range(1, n):
            dist.send(value(0, (r,), torch.int32, salt=r), dst=r)
    else:
        got = torch.zeros(me, dtype=torch.int32)
        dist.recv(got, src=0)
        assert torch.equal(got, value(0, (me,), torch.int32, salt=me))
    # In a subgroup torch gives the peer as a global rank; a message in it does not stop
    # the group's own calls.
    group = dist.new_group(list(range(n)), backend="chorus")
    if me in (0, n - 1):
        peer = n - 1 - me
        got = torch.zeros(3)
        works = [dist.isend(torch.full((3,), float(me)), peer, group=group),
                 dist.irecv(got, peer, group=group)]
        for w in works:
            w.wait()
        assert torch.equal(got, torch.full((3,), float(peer)))
    t = torch.ones(1)
    dist.all_reduce(t, group=group)
    assert t.item() == n


def test_a_message_whose_tensors_disagree_fails_on_both_sides():
    n, me = dist.get_world_size(), dist.get_rank()
    if n == 1:
        pytest.skip("a message needs two ranks")
    if me in (0, 1):
        with pytest.raises(hvd.ArgumentError, match=r"disagree on shape: \[3\] on ranks \[0\]"):
            if me == 0:
                dist.send(torch.ones(3), dst=1)
            else:
                dist.recv(torch.ones(4), src=0)
        # The next message between them goes through.
        got = torch.zeros(2)
        if me == 0:
            dist.send(torch.full((2,), 5.0), dst=1)
        else:
            dist.recv(got, src=0)
            assert torch.equal(got, torch.full((2,), 5.0))


def test_subgroups_on_process_sets():
    """new_group on chorus: the members make a Chorus process set; torch translates roots from
    global ranks. Every rank calls new_group for every group, as torch requires."""
    n, me = dist.get_world_size(), dist.get_rank()
    evens = dist.new_group(list(range(0, n, 2)), backend="chorus")
    odds = dist.new_group(list(range(1, n, 2)), backend="chorus") if n > 1 else None
    mine, members = (evens, list(range(0, n, 2))) if me % 2 == 0 else (odds, list(range(1, n, 2)))
    t = torch.tensor([float(me)])
    dist.all_reduce(t, group=mine)
    assert t.item() == sum(members)
    b = torch.tensor([float(me)])
    dist.broadcast(b, src=members[-1], group=mine)
    assert b.item() == members[-1]
    gathered = [torch.zeros(1) for _ in members]
    dist.all_gather(gathered, torch.tensor([float(me)]), group=mine)
    assert [g.item() for g in gathered] == members
    # The whole job's group goes on beside them.
    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == n


def test_a_group_dropped_after_its_tensors_goes_at_once():
    """Destroying a group whose last call's tensors only its own threads still hold: the
    destroying thread holds the GIL, which freeing those tensors needs; a group that joined
    its threads there would never return (the test's hard timeout would end it)."""
    n = dist.get_world_size()
    for _ in range(5):
        group = dist.new_group(list(range(n)), backend="chorus")

        def gather():
            flat = torch.ones(1000)
            out = [torch.empty_like(flat) for _ in range(n)]
            dist.all_gather(out, flat, group=group)

        gather()
        dist.destroy_process_group(group)
