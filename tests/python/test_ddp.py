"""DistributedDataParallel on the ``chorus`` backend: its weights against a reference trained
in this process on every rank's batch, the same bits whatever the bucket size, and the DDP
features users turn on (find_unused_parameters, no_sync, static_graph, join for uneven inputs,
gradient_as_bucket_view, communication hooks), and ZeroRedundancyOptimizer. Runs in the
folder's runs at 2 and 3 ranks, and alone at 1 and 4."""

import pytest
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

import chorus.torch as hvd

pytestmark = pytest.mark.usefixtures("chorus_group")  # conftest.py


class Net(torch.nn.Module):
    """Several parameters of odd sizes; with `branch`, one more layer that only some steps
    use."""

    def __init__(self, branch=False):
        super().__init__()
        self.a = torch.nn.Linear(13, 31)
        self.b = torch.nn.Linear(31, 17)
        self.c = torch.nn.Linear(17, 5)
        if branch:
            self.unused = torch.nn.Linear(17, 5)

    def forward(self, x, use_branch=False):
        h = torch.tanh(self.b(torch.tanh(self.a(x))))
        return self.c(h) + (self.unused(h) if use_branch else 0)


def model(branch=False):
    torch.manual_seed(5)
    return Net(branch).double()


def batch(rank, step, rows=6):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(rows, 13, generator=g, dtype=torch.float64)


def loss_of(out):
    return (out ** 2).mean()


def train(net, steps, opt=None, **forward):
    opt = opt or torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    for step in range(steps):
        opt.zero_grad()
        loss_of(net(batch(dist.get_rank(), step), **forward)).backward()
        opt.step()
    return net


def weights(net):
    module = net.module if isinstance(net, DDP) else net
    return [p.detach().clone() for p in module.parameters()]


def reference(steps, branch=False, **forward):
    """One process, every rank's batch: the mean of the ranks' losses (DDP averages)."""
    net = model(branch)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    n = dist.get_world_size()
    for step in range(steps):
        opt.zero_grad()
        sum(loss_of(net(batch(r, step), **forward)) for r in range(n)).div(n).backward()
        opt.step()
    return weights(net)


def assert_same_on_every_rank(ws):
    flat = torch.cat([w.reshape(-1) for w in ws])
    gathered = [torch.zeros_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    for other in gathered:
        assert torch.equal(other, flat)


def test_ddp_trains_as_one_process_on_every_batch():
    got = weights(train(DDP(model()), steps=4))
    for g, w in zip(got, reference(4)):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12)
    assert_same_on_every_rank(got)


def test_the_bits_do_not_depend_on_the_buckets():
    """One bucket for the whole model against one per parameter (a tiny cap) and a few: every
    element is combined in the same order, so the weights are equal bit for bit. With the
    gradients as views of the buckets too, compared among themselves: DDP itself then divides
    each gradient by the world size where it otherwise multiplies by its inverse, which rounds
    differently when the size is not a power of two."""
    for views in (False, True):
        runs = [weights(train(DDP(model(), bucket_cap_mb=cap, gradient_as_bucket_view=views),
                              steps=3))
                for cap in (25, 0.0001, 0.003)]
        for other in runs[1:]:
            for a, b in zip(runs[0], other):
                assert torch.equal(a, b)


def test_find_unused_parameters():
    net = DDP(model(branch=True), find_unused_parameters=True)
    got = weights(train(net, steps=3))
    for g, w in zip(got, reference(3, branch=True)):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12)
    # The branch used on every rank in a later step.
    got = weights(train(net, steps=1, use_branch=True))
    assert_same_on_every_rank(got)


def test_static_graph():
    got = weights(train(DDP(model(), static_graph=True), steps=4))
    for g, w in zip(got, reference(4)):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12)


def test_no_sync_accumulates_then_reduces():
    net = DDP(model())
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    me, n = dist.get_rank(), dist.get_world_size()
    with net.no_sync():
        loss_of(net(batch(me, 0))).backward()
    loss_of(net(batch(me, 1))).backward()
    opt.step()
    ref = model()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    # The synced step reduces what each rank accumulated: the average over the ranks of
    # both their gradients.
    sum(loss_of(ref(batch(r, 0))) + loss_of(ref(batch(r, 1))) for r in range(n)).div(n).backward()
    ref_opt.step()
    for g, w in zip(weights(net), weights(ref)):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12)


def test_join_with_uneven_inputs():
    """Rank r trains on r + 2 batches; the ranks that finish early shadow the others."""
    net = DDP(model())
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    me = dist.get_rank()
    with net.join():
        for step in range(me + 2):
            opt.zero_grad()
            loss_of(net(batch(me, step))).backward()
            opt.step()
    assert_same_on_every_rank(weights(net))


@pytest.mark.parametrize("hook", ["allreduce", "fp16", "powersgd"])
def test_communication_hooks(hook):
    net = DDP(model())
    if hook == "allreduce":
        net.register_comm_hook(None, default_hooks.allreduce_hook)
    elif hook == "fp16":
        net.register_comm_hook(None, default_hooks.fp16_compress_hook)
    else:
        state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=2,
                                            start_powerSGD_iter=2, random_seed=3)
        net.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    got = weights(train(net, steps=4))
    assert_same_on_every_rank(got)
    # The allreduce hook is DDP's own reduction (divided, where DDP multiplies by the
    # inverse); the others compress the gradients.
    close = dict(rtol=1e-10, atol=1e-12) if hook == "allreduce" else dict(rtol=0.1, atol=0.05)
    for g, w in zip(got, reference(4)):
        torch.testing.assert_close(g, w, **close)


def test_zero_redundancy_optimizer_gives_the_unsharded_bits():
    net = DDP(model())
    zero = ZeroRedundancyOptimizer(net.parameters(), optimizer_class=torch.optim.SGD, lr=0.1,
                                   momentum=0.9)
    got = weights(train(net, steps=3, opt=zero))
    want = weights(train(DDP(model()), steps=3))
    for g, w in zip(got, want):
        assert torch.equal(g, w)
