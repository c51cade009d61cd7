"""DistributedOptimizer(powersgd=hvd.PowerSGD(...)) against the algorithm written out here
from every rank's own gradients (gathered; a twin model gives each rank's gradient before the
reducer touches it): plain averages before start_powerSGD_iter and for vectors, a rank-r
approximation at the first compressed step, and from the second on P = sum of M_r Q
(orthogonalized), Q = mean of M_r^T P, M = P Q^T with each rank's error fed back; the same
bits on every rank; and PowerSGD's state through TorchState's commit and restore."""

import copy

import pytest
import torch
import torch.nn as nn

import chorus.torch as hvd


def orthogonalize(m):
    for i in range(m.shape[1]):
        m[:, i] /= m[:, i].norm()
        for j in range(i + 1, m.shape[1]):
            m[:, j] -= (m[:, i] * m[:, j]).sum() * m[:, i]
    return m


def qs_by_parameter(model, state):
    """PowerSGD's Qs by parameter name: the state names them after the reductions,
    "<the wrapper's prefix><name>.q"."""
    out = {}
    for name, _ in model.named_parameters():
        for key, q in state["qs"].items():
            if key.endswith("." + name + ".q"):
                out[name] = q.double()
    return out


def make(rank=1):
    torch.manual_seed(11)  # the same model on every rank
    model = nn.Sequential(nn.Linear(12, 10), nn.Tanh(), nn.Linear(10, 3))
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05), named_parameters=model.named_parameters(),
        powersgd=hvd.PowerSGD(matrix_approximation_rank=rank, start_powerSGD_iter=2))
    return model, opt


class Reference:
    """The set's PowerSGD, step by step: each rank's error and the shared Q."""

    def __init__(self, model, opt, rank):
        self.model, self.opt, self.rank = model, opt, rank
        self.twin = copy.deepcopy(model)
        self.errors, self.q = {}, {}

    def step(self, step, knows_q):
        n, me = hvd.size(), hvd.rank()
        g = torch.Generator().manual_seed(1000 * step + me)
        x, y = torch.randn(16, 12, generator=g), torch.randn(16, 3, generator=g)
        with torch.no_grad():
            for p, t in zip(self.model.parameters(), self.twin.parameters()):
                t.copy_(p)
        self.twin.zero_grad()
        nn.functional.mse_loss(self.twin(x), y).backward()
        self.opt.zero_grad()
        nn.functional.mse_loss(self.model(x), y).backward()
        self.opt.synchronize()
        for (name, p), t in zip(self.model.named_parameters(), self.twin.parameters()):
            own = hvd.allgather(t.grad.unsqueeze(0), name=f"own.{step}.{name}").double()
            got = p.grad.double()
            rows, cols = p.shape[0], p.numel() // p.shape[0]
            compressed = p.dim() >= 2 and (rows + cols) * self.rank * 2 < rows * cols
            if step < 2 or not compressed:  # min_compression_rate 2
                torch.testing.assert_close(got, own.mean(0), rtol=1e-5, atol=1e-7)
                continue
            m = [own[r] + self.errors.get(name, [0] * n)[r] for r in range(n)]
            if knows_q:
                q = orthogonalize(self.q[name].clone())
                pm = orthogonalize(sum(mr @ q for mr in m))
                approx = pm @ (sum(mr.t() @ pm for mr in m) / n).t()
                torch.testing.assert_close(got, approx, rtol=1e-4, atol=1e-6)
            else:
                approx = got  # a random Q: only the rank can be checked
                s = torch.linalg.svdvals(approx)
                assert s[self.rank] < 1e-5 * s[0], s
            self.errors[name] = [mr - approx for mr in m]
            every = hvd.allgather(p.grad.unsqueeze(0), name=f"bits.{step}.{name}")
            assert all(torch.equal(every[r], p.grad) for r in range(n))
        self.q = qs_by_parameter(self.model, self.opt.powersgd_state())
        with self.opt.skip_synchronize():
            self.opt.step()


@pytest.mark.parametrize("rank", [1, 2])
def test_follows_the_algorithm(rank):
    model, opt = make(rank)
    ref = Reference(model, opt, rank)
    for step in range(5):
        ref.step(step, knows_q=step >= 3)
    assert opt.powersgd_state()["iteration"] == 5


def test_state_survives_commit_and_restore():
    model, opt = make()
    ref = Reference(model, opt, 1)
    for step in range(3):
        ref.step(step, knows_q=False)
    state = hvd.elastic.TorchState(model, opt)
    state.commit()
    committed = opt.powersgd_state()
    ref.step(3, knows_q=True)
    assert opt.powersgd_state()["iteration"] == 4
    state.restore()
    restored = opt.powersgd_state()
    assert restored["iteration"] == committed["iteration"] == 3
    assert all(torch.equal(restored["qs"][k], committed["qs"][k]) for k in committed["qs"])
    # The errors restarted from zero, the Qs carry on.
    ref.errors = {}
    ref.q = qs_by_parameter(model, restored)
    ref.step(3, knows_q=True)


def test_refusals():
    model = nn.Linear(4, 3)
    with pytest.raises(hvd.HorovodInternalError, match="op average"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Sum,
                                 powersgd=hvd.PowerSGD())
    with pytest.raises(ValueError, match="matrix_approximation_rank"):
        hvd.PowerSGD(matrix_approximation_rank=0)
