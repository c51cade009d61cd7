"""chorus.torch collectives against references computed in this process from every rank's
inputs (each rank can generate every other rank's tensor from its seed)."""

import os
import warnings

import pytest
import torch

import chorus.torch as hvd
from chorus.common.exceptions import HorovodInternalError

DTYPES = [torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64]
OPS = [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product]


def rank_tensor(r, shape, dtype, low=1, high=4):
    """Rank r's input: small values so that sums and products of any dtype stay exact."""
    g = torch.Generator().manual_seed(1000 + r)
    return torch.randint(low, high, shape, generator=g).to(dtype)


def reference(op, tensors, dtype):
    stacked = torch.stack([t.double() for t in tensors])
    if op == hvd.Sum:
        out = stacked.sum(0)
    elif op == hvd.Average:
        out = stacked.sum(0) / len(tensors)
        if not dtype.is_floating_point:
            out = torch.trunc(out)
    elif op == hvd.Min:
        out = stacked.min(0).values
    elif op == hvd.Max:
        out = stacked.max(0).values
    else:
        out = stacked.prod(0)
    return out


def close(a, b, dtype):
    tol = {torch.float16: 1e-2, torch.bfloat16: 3e-2}.get(dtype, 1e-6)
    torch.testing.assert_close(a.double(), b.double(), rtol=tol, atol=tol)


def test_topology_matches_launcher():
    """mpirun's variables, or torchrun's (chorusrun --gloo sets them): the job's world is
    MPI's under the first, Gloo's under the second."""
    assert hvd.is_initialized()
    env = os.environ
    on_mpi = "OMPI_COMM_WORLD_SIZE" in env
    names = (("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
              "OMPI_COMM_WORLD_LOCAL_RANK") if on_mpi
             else ("WORLD_SIZE", "RANK", "LOCAL_WORLD_SIZE", "LOCAL_RANK"))
    assert (hvd.size(), hvd.rank(), hvd.local_size(), hvd.local_rank()) == \
        tuple(int(env[n]) for n in names)
    assert hvd.cross_size() == 1 and hvd.cross_rank() == 0
    assert hvd.mpi_enabled() is on_mpi and hvd.gloo_enabled() is not on_mpi
    assert hvd.mpi_threads_supported() is on_mpi
    assert hvd.global_process_set.size() == hvd.size()
    assert hvd.global_process_set.rank() == hvd.rank()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allreduce_every_op_and_dtype(dtype):
    n = hvd.size()
    for op in OPS:
        shape = (3, 5)
        mine = rank_tensor(hvd.rank(), shape, dtype, 1, 3 if op == hvd.Product else 9)
        out = hvd.allreduce(mine, op=op, name=f"ar.{dtype}.{op}")
        assert out.dtype == dtype and out.shape == mine.shape
        everyone = [rank_tensor(r, shape, dtype, 1, 3 if op == hvd.Product else 9)
                    for r in range(n)]
        close(out, reference(op, everyone, dtype), dtype)
        # out of place: the input is untouched
        close(mine, rank_tensor(hvd.rank(), shape, dtype, 1, 3 if op == hvd.Product else 9),
              dtype)


def test_allreduce_default_is_average_and_scaling():
    x = torch.full((4,), float(hvd.rank() + 1), dtype=torch.float64)
    n = hvd.size()
    mean = (n + 1) / 2
    assert torch.allclose(hvd.allreduce(x), torch.full((4,), mean, dtype=torch.float64))
    out = hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5)
    assert torch.allclose(out, torch.full((4,), n * mean, dtype=torch.float64))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = hvd.allreduce(x, average=False)
    assert any(issubclass(i.category, DeprecationWarning) for i in w)
    assert torch.allclose(out, torch.full((4,), n * mean, dtype=torch.float64))
    with pytest.raises(ValueError):
        hvd.allreduce(x, average=True, op=hvd.Sum)


def test_allreduce_in_place_and_non_contiguous():
    n = hvd.size()
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4) * (hvd.rank() + 1)
    t = base.clone()
    same = hvd.allreduce_(t, op=hvd.Sum)
    assert same is t
    expected = torch.arange(12, dtype=torch.float32).reshape(3, 4) * (n * (n + 1) / 2)
    assert torch.equal(t, expected)
    # A transposed view: the result lands in the caller's strided tensor.
    u = base.clone().t()
    assert not u.is_contiguous()
    hvd.allreduce_(u, op=hvd.Sum)
    assert torch.equal(u, expected.t())
    v = base.clone().t()
    assert torch.equal(hvd.allreduce(v, op=hvd.Sum), expected.t())


def test_zero_dim_and_empty_tensors():
    n = hvd.size()
    s = torch.tensor(float(hvd.rank()))
    assert hvd.allreduce(s, op=hvd.Sum).item() == n * (n - 1) / 2
    e = torch.zeros(0, 3)
    assert hvd.allreduce(e).shape == (0, 3)


def test_async_handles_poll_and_synchronize():
    n = hvd.size()
    xs = [torch.full((1000,), float(hvd.rank() + i)) for i in range(5)]
    handles = [hvd.allreduce_async(x, op=hvd.Sum, name=f"async.{i}") for i, x in enumerate(xs)]
    assert all(isinstance(h, int) for h in handles)
    in_place = hvd.allreduce_async_(xs[0].clone(), op=hvd.Max, name="async.inplace")
    while not all(hvd.poll(h) for h in handles):
        pass
    for i, h in enumerate(handles):
        out = hvd.synchronize(h)
        assert torch.all(out == sum(r + i for r in range(n)))
    assert torch.all(hvd.synchronize(in_place) == n - 1)
    with pytest.raises(ValueError):
        hvd.synchronize(handles[0])  # already released
    with pytest.raises(ValueError):
        hvd.poll(123456789)


def test_grouped_allreduce():
    n = hvd.size()
    ts = [torch.full((i + 1, 2), float(hvd.rank() + i), dtype=torch.float64) for i in range(4)]
    outs = hvd.grouped_allreduce(ts, op=hvd.Sum, name="grp")
    for i, o in enumerate(outs):
        assert o.shape == ts[i].shape
        assert torch.all(o == sum(r + i for r in range(n)))
    copies = [t.clone() for t in ts]
    res = hvd.grouped_allreduce_(copies, op=hvd.Average)
    for i, c in enumerate(copies):
        assert res[i] is c
        assert torch.allclose(c, torch.full_like(c, sum(r + i for r in range(n)) / n))
    h = hvd.grouped_allreduce_async([t.float() for t in ts], op=hvd.Max)
    outs = hvd.synchronize(h)
    assert [float(o.max()) for o in outs] == [n - 1 + i for i in range(4)]
    h = hvd.grouped_allreduce_async_(copies, op=hvd.Min)
    hvd.synchronize(h)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allgather_uneven_first_dimension(dtype):
    n = hvd.size()
    mine = rank_tensor(hvd.rank(), (hvd.rank() + 1, 3), dtype)
    out = hvd.allgather(mine, name=f"ag.{dtype}")
    expected = torch.cat([rank_tensor(r, (r + 1, 3), dtype) for r in range(n)])
    assert out.dtype == dtype and torch.equal(out, expected)
    h = hvd.allgather_async(mine)
    assert torch.equal(hvd.synchronize(h), expected)


def test_broadcast_from_every_root():
    n = hvd.size()
    for root in range(n):
        mine = rank_tensor(hvd.rank(), (4, 2), torch.float32)
        before = mine.clone()
        out = hvd.broadcast(mine, root_rank=root, name=f"bc.{root}")
        assert torch.equal(out, rank_tensor(root, (4, 2), torch.float32))
        assert torch.equal(mine, before)  # out of place
        same = hvd.broadcast_(mine, root)
        assert same is mine and torch.equal(mine, rank_tensor(root, (4, 2), torch.float32))
        t = rank_tensor(hvd.rank(), (2, 3), torch.bfloat16).t()
        hvd.synchronize(hvd.broadcast_async_(t, root))
        assert torch.equal(t, rank_tensor(root, (2, 3), torch.bfloat16).t())
        assert torch.equal(hvd.synchronize(hvd.broadcast_async(mine, root)), mine)


def test_alltoall_with_and_without_splits():
    n, me = hvd.size(), hvd.rank()
    # Rank r sends (r + d + 1) rows to rank d, each row filled with 100 * r + d.
    splits = [me + d + 1 for d in range(n)]
    rows = [torch.full((me + d + 1, 2), float(100 * me + d)) for d in range(n)]
    out, received = hvd.alltoall(torch.cat(rows), splits=splits)
    assert received.dtype == torch.int32
    assert received.tolist() == [r + me + 1 for r in range(n)]
    expected = torch.cat([torch.full((r + me + 1, 2), float(100 * r + me)) for r in range(n)])
    assert torch.equal(out, expected)
    equal = torch.arange(n * 2, dtype=torch.int64).reshape(n * 2, 1) + 10 * me
    out = hvd.alltoall(equal)
    assert isinstance(out, torch.Tensor)
    assert out.view(-1).tolist() == [10 * r + 2 * me + k for r in range(n) for k in range(2)]
    out, received = hvd.synchronize(hvd.alltoall_async(torch.cat(rows), torch.tensor(splits)))
    assert torch.equal(out, expected)


def test_reducescatter():
    n, me = hvd.size(), hvd.rank()
    rows = 2 * n + 1  # uneven: the first rank gets one more row
    mine = torch.arange(rows * 3, dtype=torch.float32).reshape(rows, 3) + me
    total = sum(torch.arange(rows * 3, dtype=torch.float32).reshape(rows, 3) + r
                for r in range(n))
    counts = [rows // n + (1 if r < rows % n else 0) for r in range(n)]
    start = sum(counts[:me])
    out = hvd.reducescatter(mine, op=hvd.Sum)
    assert torch.equal(out, total[start:start + counts[me]])
    out = hvd.reducescatter(mine)  # Average by default
    assert torch.allclose(out, total[start:start + counts[me]] / n)
    out = hvd.synchronize(hvd.reducescatter_async(mine, op=hvd.Max))
    assert torch.equal(out, (mine - me + n - 1)[start:start + counts[me]])


def test_compression_fp16_and_bf16():
    x = torch.full((8,), 0.5 + hvd.rank(), dtype=torch.float32)
    n = hvd.size()
    for c in (hvd.Compression.fp16, hvd.Compression.bf16, hvd.Compression.none):
        out = hvd.allreduce(x, op=hvd.Sum, compression=c)
        assert out.dtype == torch.float32
        assert torch.allclose(out, torch.full((8,), sum(0.5 + r for r in range(n))))
    wire, ctx = hvd.Compression.fp16.compress(x)
    assert wire.dtype == torch.float16
    assert hvd.Compression.fp16.decompress(wire, ctx).dtype == torch.float32


def test_allreduce_is_differentiable():
    n = hvd.size()
    x = torch.full((3,), float(hvd.rank() + 1), requires_grad=True)
    y = hvd.allreduce(x, op=hvd.Sum, name="diff")
    (y * (hvd.rank() + 1)).sum().backward()
    # d/dx_me of sum_r (r+1) * sum_k x_k = sum_r (r+1)
    assert torch.allclose(x.grad, torch.full((3,), float(n * (n + 1) / 2)))


def test_barrier_and_join():
    hvd.barrier()
    last = hvd.join()
    assert 0 <= last < hvd.size()


def test_objects():
    obj = {"rank": hvd.rank(), "payload": list(range(hvd.rank() + 3))}
    for root in range(hvd.size()):
        got = hvd.broadcast_object(obj, root_rank=root)
        assert got == {"rank": root, "payload": list(range(root + 3))}
    everyone = hvd.allgather_object(obj)
    assert everyone == [{"rank": r, "payload": list(range(r + 3))} for r in range(hvd.size())]


def test_process_sets():
    n, me = hvd.size(), hvd.rank()
    ps = hvd.add_process_set(hvd.ProcessSet([0, n - 1]))
    assert ps.process_set_id not in (None, 0)
    members = [0, n - 1]
    assert ps.included() == (me in members)
    assert ps.size() == 2
    if me in members:
        assert ps.rank() == members.index(me)
        # Named: an unnamed collective takes a name from a per-rank counter, which only the
        # members would advance here.
        out = hvd.allreduce(torch.tensor([float(me)]), op=hvd.Sum, process_set=ps,
                            name="ps.sum")
        assert out.item() == float(n - 1)
        got = hvd.broadcast_object("from-last", root_rank=n - 1, process_set=ps)
        assert got == "from-last"
    else:
        assert ps.rank() == -1
    hvd.barrier()
    assert hvd.remove_process_set(ps) is True
    assert ps.process_set_id is None
    assert hvd.remove_process_set(hvd.global_process_set) is False
    with pytest.raises(ValueError):
        hvd.allreduce(torch.ones(1), process_set=ps)  # no longer registered


def test_mismatched_shapes_raise_on_every_rank():
    t = torch.ones(hvd.rank() + 2)
    with pytest.raises(HorovodInternalError, match="MISMATCH"):
        hvd.allreduce(t, name="mismatch.shape")
    with pytest.raises(hvd.HorovodInternalError):
        dtype = torch.float32 if hvd.rank() == 0 else torch.float64
        hvd.allreduce(torch.ones(3, dtype=dtype), name="mismatch.dtype")
    with pytest.raises(RuntimeError):  # HorovodInternalError is a RuntimeError
        hvd.broadcast(torch.ones(2), root_rank=hvd.rank(), name="mismatch.root")
    # The runtime still works afterwards.
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [hvd.size()] * 2


def test_bad_arguments_raise_locally():
    with pytest.raises(HorovodInternalError, match="does not support"):
        hvd.allreduce(torch.ones(2, dtype=torch.bool))
