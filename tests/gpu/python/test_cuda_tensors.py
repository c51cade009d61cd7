"""chorus.torch collectives on CUDA tensors, against references computed on the CPU in this
process from every rank's inputs (each rank can generate every other rank's tensor from its
seed). Every result must be on the input's device.

CTest runs them on one rank, where a build with NCCL takes NCCL, and on two ranks sharing
one GPU, which take the MPI path (as gpu.collectives.np1 and np2 do for the C++ API)."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import chorus.torch as hvd

OPS = {"sum": hvd.Sum, "average": hvd.Average}

# GPU clock cycles that torch.cuda._sleep spins before a write on a side stream: about a
# tenth of a second on current GPUs, long enough that a collective not ordered after that stream
# would read the tensor before the write.
SIDE_STREAM_DELAY_CYCLES = 200_000_000


def rank_tensor(r, shape, dtype, low=1, high=9):
    """Rank r's input, on the CPU: small integers so that sums stay exact in every dtype."""
    g = torch.Generator().manual_seed(1000 + r)
    return torch.randint(low, high, shape, generator=g).to(dtype)


def reference(op, tensors, dtype):
    total = torch.stack([t.double() for t in tensors]).sum(0)
    if op == hvd.Sum:
        return total
    out = total / len(tensors)
    return out if dtype.is_floating_point else torch.trunc(out)


def close(a, b, dtype):
    tol = 1e-2 if dtype == torch.float16 else 1e-6
    torch.testing.assert_close(a.cpu().double(), b.cpu().double(), rtol=tol, atol=tol)


def test_build_has_cuda(dev):
    assert hvd.cuda_built()
    assert dev.index == torch.cuda.current_device()


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.int32], ids=str)
@pytest.mark.parametrize("op", list(OPS))
def test_allreduce(dev, op, dtype):
    n, me = hvd.size(), hvd.rank()
    # Odd sizes: no multiple of a vector width or of the rank count.
    for shape in [(3, 5), (257, 129)]:
        everyone = [rank_tensor(r, shape, dtype) for r in range(n)]
        x = everyone[me].to(dev)
        out = hvd.allreduce(x, op=OPS[op], name=f"ar.{op}.{dtype}.{shape[0]}")
        assert out.device == dev and out.dtype == dtype and out.shape == x.shape
        close(out, reference(OPS[op], everyone, dtype), dtype)
        assert torch.equal(x.cpu(), everyone[me])  # out of place: the input is untouched


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
def test_allreduce_prescale_and_postscale(dev, dtype):
    n = hvd.size()
    x = torch.full((4099,), float(hvd.rank() + 1), dtype=dtype, device=dev)
    total = n * (n + 1) / 2
    out = hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.25)
    assert out.device == dev and out.dtype == dtype
    close(out, torch.full((4099,), total * 0.5), dtype)
    out = hvd.allreduce(x, op=hvd.Average, prescale_factor=3.0, postscale_factor=0.5)
    close(out, torch.full((4099,), total / n * 1.5), dtype)


def test_allreduce_in_place_and_non_contiguous(dev):
    n = hvd.size()
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4) * (hvd.rank() + 1)
    expected = torch.arange(12, dtype=torch.float32).reshape(3, 4) * (n * (n + 1) / 2)
    t = base.to(dev, copy=True)
    same = hvd.allreduce_(t, op=hvd.Sum)
    assert same is t and t.device == dev
    assert torch.equal(t.cpu(), expected)
    u = base.to(dev, copy=True).t()  # a transposed view: the result lands in the caller's strides
    assert not u.is_contiguous()
    hvd.allreduce_(u, op=hvd.Sum)
    assert u.device == dev and torch.equal(u.cpu(), expected.t())


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.int32], ids=str)
def test_allgather_uneven_first_dimension(dev, dtype):
    n = hvd.size()
    mine = rank_tensor(hvd.rank(), (hvd.rank() + 1, 3), dtype).to(dev)
    expected = torch.cat([rank_tensor(r, (r + 1, 3), dtype) for r in range(n)])
    out = hvd.allgather(mine, name=f"ag.{dtype}")
    assert out.device == dev and out.dtype == dtype
    assert torch.equal(out.cpu(), expected)


def test_broadcast_from_every_root(dev):
    for root in range(hvd.size()):
        mine = rank_tensor(hvd.rank(), (4, 2), torch.float32).to(dev)
        want = rank_tensor(root, (4, 2), torch.float32)
        out = hvd.broadcast(mine, root_rank=root, name=f"bc.{root}")
        assert out.device == dev and torch.equal(out.cpu(), want)
        assert torch.equal(mine.cpu(), rank_tensor(hvd.rank(), (4, 2), torch.float32))
        same = hvd.broadcast_(mine, root)
        assert same is mine and torch.equal(mine.cpu(), want)


def test_alltoall_with_and_without_splits(dev):
    n, me = hvd.size(), hvd.rank()
    # Rank r sends (r + d + 1) rows to rank d, each row filled with 100 * r + d.
    splits = [me + d + 1 for d in range(n)]
    rows = torch.cat([torch.full((me + d + 1, 2), float(100 * me + d)) for d in range(n)])
    out, received = hvd.alltoall(rows.to(dev), splits=splits)
    expected = torch.cat([torch.full((r + me + 1, 2), float(100 * r + me)) for r in range(n)])
    assert out.device == dev and torch.equal(out.cpu(), expected)
    assert received.tolist() == [r + me + 1 for r in range(n)]
    equal = (torch.arange(n * 2, dtype=torch.int64).reshape(n * 2, 1) + 10 * me).to(dev)
    out = hvd.alltoall(equal)
    assert out.device == dev
    assert out.view(-1).tolist() == [10 * r + 2 * me + k for r in range(n) for k in range(2)]


def test_reducescatter(dev):
    n, me = hvd.size(), hvd.rank()
    rows = 2 * n + 1  # uneven: the first rank gets one more row
    grid = torch.arange(rows * 3, dtype=torch.float32).reshape(rows, 3)
    total = sum(grid + r for r in range(n))
    counts = [rows // n + (1 if r < rows % n else 0) for r in range(n)]
    start = sum(counts[:me])
    mine = (grid + me).to(dev)
    out = hvd.reducescatter(mine, op=hvd.Sum)
    assert out.device == dev and torch.equal(out.cpu(), total[start:start + counts[me]])
    out = hvd.reducescatter(mine, op=hvd.Average)
    assert torch.allclose(out.cpu(), total[start:start + counts[me]] / n)


def test_grouped_allreduce(dev):
    n = hvd.size()
    ts = [torch.full((i + 1, 2), float(hvd.rank() + i), device=dev) for i in range(4)]
    outs = hvd.grouped_allreduce(ts, op=hvd.Sum, name="grp")
    for i, o in enumerate(outs):
        assert o.device == dev and o.shape == ts[i].shape
        assert torch.all(o.cpu() == sum(r + i for r in range(n)))
    copies = [t.clone() for t in ts]
    res = hvd.grouped_allreduce_(copies, op=hvd.Average)
    for i, c in enumerate(copies):
        assert res[i] is c
        assert torch.allclose(c.cpu(), torch.full(c.shape, sum(r + i for r in range(n)) / n))


def test_async_handles_poll_and_synchronize(dev):
    n = hvd.size()
    xs = [torch.full((1 << 16,), float(hvd.rank() + i), device=dev) for i in range(5)]
    handles = [hvd.allreduce_async(x, op=hvd.Sum, name=f"async.{i}") for i, x in enumerate(xs)]
    in_place = hvd.allreduce_async_(xs[0].clone(), op=hvd.Max, name="async.inplace")
    gathered = hvd.allgather_async(xs[1][:hvd.rank() + 1], name="async.ag")
    while not all(hvd.poll(h) for h in handles):
        pass
    for i, h in enumerate(handles):
        out = hvd.synchronize(h)
        assert out.device == dev and torch.all(out.cpu() == sum(r + i for r in range(n)))
    assert torch.all(hvd.synchronize(in_place).cpu() == n - 1)
    out = hvd.synchronize(gathered)
    assert out.tolist() == [float(r + 1) for r in range(n) for _ in range(r + 1)]


def test_allreduce_is_differentiable(dev):
    n = hvd.size()
    x = torch.full((3,), float(hvd.rank() + 1), device=dev, requires_grad=True)
    y = hvd.allreduce(x, op=hvd.Sum, name="diff")
    assert y.device == dev
    (y * (hvd.rank() + 1)).sum().backward()
    # d/dx_me of sum_r (r+1) * sum_k x_k = sum_r (r+1)
    assert x.grad.device == dev
    assert torch.allclose(x.grad.cpu(), torch.full((3,), float(n * (n + 1) / 2)))


@pytest.mark.parametrize("inplace", [False, True], ids=["out_of_place", "in_place"])
def test_input_written_on_a_side_stream(dev, inplace):
    """The input's last write is queued on a non-default stream behind a delay, and the
    collective is called on that stream: Chorus must order its read after torch's current
    stream, not after the default stream alone."""
    n = hvd.size()
    x = torch.zeros(1 << 20, device=dev)
    torch.cuda.synchronize(dev)
    side = torch.cuda.Stream(device=dev)
    with torch.cuda.stream(side):
        torch.cuda._sleep(SIDE_STREAM_DELAY_CYCLES)
        x.fill_(float(hvd.rank() + 1))
        name = f"side_stream.{inplace}"
        if inplace:
            out = hvd.synchronize(hvd.allreduce_async_(x, op=hvd.Sum, name=name))
        else:
            out = hvd.allreduce(x, op=hvd.Sum, name=name)
    torch.cuda.synchronize(dev)
    assert out.device == dev
    got = out.cpu()
    assert torch.all(got == n * (n + 1) / 2), f"values seen: {got.unique().tolist()}"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


PER_RANK = 4
STEPS = 3


def make_model():
    torch.manual_seed(7)
    return Net()


def global_batches(n):
    g = torch.Generator().manual_seed(42)
    return [(torch.randn(n * PER_RANK, 6, generator=g),
             torch.randint(0, 3, (n * PER_RANK,), generator=g)) for _ in range(STEPS)]


def sgd(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def adam(params):
    return torch.optim.Adam(params, lr=0.01)


@pytest.mark.parametrize("make_opt", [sgd, adam], ids=["sgd_momentum", "adam"])
def test_distributed_optimizer_on_cuda_matches_whole_batch_on_cpu(dev, make_opt):
    """STEPS steps of DistributedOptimizer on CUDA, each rank on its shard, against the same
    steps in one CPU process on the whole batch (float64)."""
    n, me = hvd.size(), hvd.rank()
    ref = make_model().double()
    ref_opt = make_opt(ref.parameters())
    for x, y in global_batches(n):
        ref_opt.zero_grad()
        F.cross_entropy(ref(x.double()), y).backward()
        ref_opt.step()

    model = make_model().to(dev)
    opt = hvd.DistributedOptimizer(make_opt(model.parameters()),
                                   named_parameters=model.named_parameters())
    lo = me * PER_RANK
    for x, y in global_batches(n):
        opt.zero_grad()
        F.cross_entropy(model(x[lo:lo + PER_RANK].to(dev)), y[lo:lo + PER_RANK].to(dev)
                        ).backward()
        opt.step()
    for p, e in zip(model.parameters(), ref.parameters()):
        assert p.device == dev and p.grad.device == dev
        torch.testing.assert_close(p.detach().cpu().double(), e.detach(), rtol=1e-4, atol=1e-5)
    flat = torch.cat([p.detach().view(-1) for p in model.parameters()]).unsqueeze(0)
    gathered = hvd.allgather(flat)
    assert all(torch.equal(gathered[0], g) for g in gathered)  # identical on every rank


def seeded_model(seed):
    """A model whose parameters and BatchNorm buffers follow from `seed`, on the CPU."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.Linear(5, 2))
    model(torch.randn(8, 4))  # the BatchNorm buffers move away from their defaults
    return model


def test_broadcast_parameters_from_cuda(dev):
    root = hvd.size() - 1
    model = seeded_model(100 + hvd.rank()).to(dev)  # every rank starts different
    want = seeded_model(100 + root).state_dict()
    hvd.broadcast_parameters(model.state_dict(), root_rank=root)
    for k, v in model.state_dict().items():
        assert v.device == dev, k
        assert torch.equal(v.cpu(), want[k]), k
    other = seeded_model(200 + hvd.rank()).to(dev)
    hvd.broadcast_parameters(list(other.named_parameters()), root_rank=0)
    for (k, v), w in zip(other.named_parameters(), seeded_model(200).parameters()):
        assert v.device == dev and torch.equal(v.detach().cpu(), w.detach()), k
