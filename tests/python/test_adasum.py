"""op=hvd.Adasum: the allreduce against the paper's formula written out here (every rank's
input known in this process), in every floating dtype, fused or alone, the same bits on every
rank; orthogonal inputs add and parallel ones average, exactly; DistributedOptimizer with
Adasum reduces the optimizer's delta, checked against the same formula. Runs in the folder's
runs at 2 and 3 ranks, and alone at 1, 4 and 5."""

import copy

import pytest
import torch
import torch.nn as nn

import chorus.torch as hvd

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 2e-6,
             torch.float64: 1e-13}


def value(r, n, dtype, salt=0):
    """Rank r's input: a part every rank shares and a part of its own, in the dtype."""
    shared = torch.Generator().manual_seed(7919 + salt)
    own = torch.Generator().manual_seed(104729 * r + 31 * salt + 11)
    x = 0.5 * torch.rand(n, generator=shared, dtype=torch.float64) - 0.25
    x += 0.5 * torch.rand(n, generator=own, dtype=torch.float64) - 0.25
    return x.to(dtype)


def combine(a, b, wa, wb):
    """The paper's combination of two vectors, each side's dot product weighed by the share of
    the ranks it covers (1/2 each in the paper); a zero vector's coefficient is 1."""
    ab, aa, bb = float(a @ b), float(a @ a), float(b @ b)
    ca = 1.0 if aa == 0 else 1.0 - wa * ab / aa
    cb = 1.0 if bb == 0 else 1.0 - wb * ab / bb
    return ca * a + cb * b


def adasum(by_rank, lo=0, hi=None):
    """The tree Chorus documents: ranks [lo, hi) split into the first ceil(n/2) and the rest."""
    hi = len(by_rank) if hi is None else hi
    if hi - lo == 1:
        return by_rank[lo]
    mid = lo + (hi - lo + 1) // 2
    return combine(adasum(by_rank, lo, mid), adasum(by_rank, mid, hi), (mid - lo) / (hi - lo),
                   (hi - mid) / (hi - lo))


def same_on_every_rank(t):
    gathered = hvd.allgather(t.reshape(1, -1))
    return all(torch.equal(gathered[0], gathered[r]) for r in range(hvd.size()))


@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_matches_the_definition_fused_or_alone(dtype):
    n, me = hvd.size(), hvd.rank()
    sizes = [1, 37, 1001]
    mine = [value(me, k, dtype, salt) for salt, k in enumerate(sizes)]
    fused = hvd.grouped_allreduce([t.clone() for t in mine], op=hvd.Adasum,
                                  name=f"ada.fused.{dtype}")
    for salt, k in enumerate(sizes):
        alone = hvd.allreduce(mine[salt], op=hvd.Adasum, name=f"ada.alone.{dtype}.{salt}")
        assert torch.equal(alone, fused[salt]), "fusion changed the bits"
        assert same_on_every_rank(alone)
        want = adasum([value(r, k, dtype, salt).double() for r in range(n)])
        err = (alone.double() - want).abs().max().item()
        assert err <= TOLERANCE[dtype] * want.abs().max().item(), (dtype, k, err)


@pytest.mark.parametrize("dtype", DTYPES)
def test_orthogonal_inputs_add_and_parallel_ones_average(dtype):
    n, me = hvd.size(), hvd.rank()
    count = 4 * n + 3
    index = torch.arange(count)
    orthogonal = torch.where(index % n == me, 1.0 + index.double(), torch.zeros(count))
    total = hvd.allreduce(orthogonal.to(dtype), op=hvd.Adasum, name=f"ada.orth.{dtype}")
    assert torch.equal(total, (1.0 + index.double()).to(dtype))
    parallel = value(0, count, dtype, salt=99)
    got = hvd.allreduce(parallel, op=hvd.Adasum, name=f"ada.par.{dtype}")
    if n & (n - 1) == 0 or dtype != torch.float64:
        assert torch.equal(got, parallel)
    else:  # uneven halves: float64 keeps the rounding of weights such as 2/3
        torch.testing.assert_close(got, parallel, rtol=1e-15, atol=0)


def test_parallel_inputs_of_any_length_average_over_every_rank():
    n, me = hvd.size(), hvd.rank()
    shared = value(0, 257, torch.float64, salt=5)
    got = hvd.allreduce((me + 1) * shared, op=hvd.Adasum, name="ada.lengths")
    torch.testing.assert_close(got, (n + 1) / 2 * shared, rtol=0, atol=1e-12)


def test_refusals_name_the_fault():
    with pytest.raises(hvd.HorovodInternalError, match="Adasum combines floating-point"):
        hvd.allreduce(torch.ones(3, dtype=torch.int32), op=hvd.Adasum)
    with pytest.raises(hvd.HorovodInternalError, match="Adasum is an allreduce"):
        hvd.reducescatter(torch.ones(2 * hvd.size()), op=hvd.Adasum)
    model = nn.Linear(3, 2)
    with pytest.raises(ValueError, match="gradient_predivide_factor"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 op=hvd.Adasum, gradient_predivide_factor=2.0)
    with pytest.raises(ValueError, match="bucket_cap_mb"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 op=hvd.Adasum, bucket_cap_mb=1)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_optimizer_reduces_the_delta_of_the_local_step(momentum):
    n, me = hvd.size(), hvd.rank()
    torch.manual_seed(5)  # the same model on every rank
    model = nn.Sequential(nn.Linear(6, 4), nn.Tanh(), nn.Linear(4, 1))
    # What this rank's optimizer would do alone, stepped beside the wrapped one.
    twin = copy.deepcopy(model)
    twin_opt = torch.optim.SGD(twin.parameters(), lr=0.1, momentum=momentum)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=momentum),
                                   named_parameters=model.named_parameters(), op=hvd.Adasum)
    g = torch.Generator().manual_seed(300 + me)
    for step in range(3):
        x, y = torch.randn(8, 6, generator=g), torch.randn(8, 1, generator=g)
        with torch.no_grad():
            for p, q in zip(model.parameters(), twin.parameters()):
                q.copy_(p)
        before = [p.detach().clone() for p in model.parameters()]
        for m, o in ((model, opt), (twin, twin_opt)):
            o.zero_grad()
            nn.functional.mse_loss(m(x), y).backward()
            o.step()
        for k, (p, q, start) in enumerate(zip(model.parameters(), twin.parameters(), before)):
            delta = (q.detach() - start).reshape(1, -1)
            every = hvd.allgather(delta, name=f"ada.opt.{momentum}.{step}.{k}")
            want = start.double() + adasum([every[r].double() for r in range(n)]).reshape(p.shape)
            torch.testing.assert_close(p.detach().double(), want, rtol=0, atol=1e-6)
            assert same_on_every_rank(p.detach())
