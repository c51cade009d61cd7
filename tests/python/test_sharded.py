"""ShardedOptimizer and DistributedOptimizer's gradient buckets: with an element-wise
optimizer the weights equal DistributedOptimizer's bit for bit at the same number of ranks,
each rank holds 1/P of the state, and checkpoints round-trip (a rank's shard, and the
consolidated state that reshards)."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import chorus.torch as hvd

STEPS = 4


class OddNet(nn.Module):
    """No parameter divides evenly among 2, 3 or 4 ranks."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(5, 7)
        self.fc2 = nn.Linear(7, 11)
        self.fc3 = nn.Linear(11, 3)

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))


def model(seed=42):
    torch.manual_seed(seed)
    return OddNet()


def batch(step):
    g = torch.Generator().manual_seed(100 + step)
    x = torch.randn(12, 5, generator=g)
    y = torch.randint(0, 3, (12,), generator=g)
    rows = 12 // hvd.size()
    lo = rows * hvd.rank()
    return x[lo:lo + rows], y[lo:lo + rows]


OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-3),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.05),
}


def train(net, opt, steps, first=0, passes=1):
    for step in range(first, first + steps):
        opt.zero_grad()
        for k in range(passes):
            x, y = batch(10 * step + k)
            F.cross_entropy(net(x), y).backward()
        opt.step()


def assert_same_bits(a, b):
    for (name, x), (_, y) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(x, y), f"{name} differs by {(x - y).abs().max().item()}"


@pytest.mark.parametrize("stage", [1, 2])
@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
@pytest.mark.parametrize("bucket_cap_mb", [25, 0.0001])
def test_same_bits_as_distributed_optimizer(stage, kind, bucket_cap_mb):
    reference, sharded = model(), model()
    plain = hvd.DistributedOptimizer(OPTIMIZERS[kind](reference.parameters()),
                                     named_parameters=reference.named_parameters())
    opt = hvd.ShardedOptimizer(OPTIMIZERS[kind](sharded.parameters()),
                               named_parameters=sharded.named_parameters(), stage=stage,
                               bucket_cap_mb=bucket_cap_mb)
    assert isinstance(opt, type(plain).__mro__[1])  # still the wrapped optimizer's class
    train(reference, plain, STEPS)
    train(sharded, opt, STEPS)
    assert_same_bits(reference, sharded)


@pytest.mark.parametrize("stage", [1, 2])
def test_compression_and_passes(stage):
    reference, sharded = model(3), model(3)
    plain = hvd.DistributedOptimizer(OPTIMIZERS["adam"](reference.parameters()),
                                     named_parameters=reference.named_parameters(),
                                     compression=hvd.Compression.fp16,
                                     backward_passes_per_step=2)
    opt = hvd.ShardedOptimizer(OPTIMIZERS["adam"](sharded.parameters()),
                               named_parameters=sharded.named_parameters(), stage=stage,
                               compression=hvd.Compression.fp16, backward_passes_per_step=2)
    train(reference, plain, STEPS, passes=2)
    train(sharded, opt, STEPS, passes=2)
    assert_same_bits(reference, sharded)


def test_gradient_buckets_same_bits_and_views():
    reference, bucketed = model(5), model(5)
    plain = hvd.DistributedOptimizer(OPTIMIZERS["sgd"](reference.parameters()),
                                     named_parameters=reference.named_parameters())
    opt = hvd.DistributedOptimizer(OPTIMIZERS["sgd"](bucketed.parameters()),
                                   named_parameters=bucketed.named_parameters(),
                                   bucket_cap_mb=25)
    train(reference, plain, STEPS)
    train(bucketed, opt, STEPS)
    assert_same_bits(reference, bucketed)
    # One bucket, in backward's order: fc3's weight right after fc3's bias.
    bias, weight = bucketed.fc3.bias.grad, bucketed.fc3.weight.grad
    assert weight.data_ptr() == bias.data_ptr() + 3 * bias.element_size()


@pytest.mark.parametrize("stage", [1, 2])
def test_each_rank_holds_its_shard(stage):
    torch.manual_seed(1)
    big = nn.Linear(256, 255)
    opt = hvd.ShardedOptimizer(torch.optim.Adam(big.parameters(), lr=0.01),
                               named_parameters=big.named_parameters(), stage=stage)
    opt.zero_grad()
    big(torch.randn(4, 256)).sum().backward()
    opt.step()
    whole = 256 * 255 + 255
    unit = 16 * hvd.size()
    shard = (whole + unit - 1) // unit * 16
    state = sum(v.numel() for st in opt.state.values() for k, v in st.items()
                if k in ("exp_avg", "exp_avg_sq"))
    assert state == 2 * shard
    assert opt.gradient_bytes() == 4 * (shard if stage == 2 else shard * hvd.size())
    assert (big.weight.grad is None) == (stage == 2)


@pytest.mark.parametrize("stage", [1, 2])
def test_clip_grad_norm_over_shards(stage):
    reference, sharded = model(21), model(21)
    plain = hvd.DistributedOptimizer(torch.optim.SGD(reference.parameters(), lr=0.5),
                                     named_parameters=reference.named_parameters())
    opt = hvd.ShardedOptimizer(torch.optim.SGD(sharded.parameters(), lr=0.5),
                               named_parameters=sharded.named_parameters(), stage=stage)
    x, y = batch(31)
    F.cross_entropy(reference(x), y).backward()
    F.cross_entropy(sharded(x), y).backward()
    plain.synchronize()
    want = torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.05).item()
    got = opt.clip_grad_norm(0.05)
    assert got == pytest.approx(want, rel=1e-5) and got > 0.05
    with plain.skip_synchronize():
        plain.step()
    opt.step()
    for (name, a), (_, b) in zip(reference.named_parameters(), sharded.named_parameters()):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-7), name


def plain_state_from_consolidated(consolidated, net, optimizer):
    """The consolidated state as a torch optimizer's state_dict over ``net``'s parameters."""
    names = [n for n, _ in net.named_parameters()]
    state = {names.index(n): st for n, st in consolidated["state"].items()}
    groups = [dict(g, params=[names.index(n) for n in g["params"]])
              for g in consolidated["param_groups"]]
    return {"state": state, "param_groups": groups}


@pytest.mark.parametrize("stage", [1, 2])
def test_checkpoints_round_trip(stage):
    net = model(8)
    opt = hvd.ShardedOptimizer(OPTIMIZERS["adam"](net.parameters()),
                               named_parameters=net.named_parameters(), stage=stage)
    train(net, opt, 2)
    shard_state = copy.deepcopy(opt.state_dict())  # torch's state_dict() shares the tensors
    consolidated = opt.consolidated_state_dict()
    weights = {k: v.clone() for k, v in net.state_dict().items()}
    train(net, opt, 2, first=2)

    # A rank's own shard, restored at the same number of ranks.
    again = model(8)
    again.load_state_dict(weights)
    opt2 = hvd.ShardedOptimizer(OPTIMIZERS["adam"](again.parameters()),
                                named_parameters=again.named_parameters(), stage=stage)
    opt2.load_state_dict(shard_state)
    train(again, opt2, 2, first=2)
    assert_same_bits(net, again)

    # The consolidated state, resharded into a fresh wrapper, and read by a plain optimizer
    # under DistributedOptimizer: all three continue to the same weights.
    third = model(8)
    third.load_state_dict(weights)
    opt3 = hvd.ShardedOptimizer(OPTIMIZERS["adam"](third.parameters()),
                                named_parameters=third.named_parameters(), stage=3 - stage)
    opt3.load_state_dict(consolidated)
    train(third, opt3, 2, first=2)
    assert_same_bits(net, third)

    fourth = model(8)
    fourth.load_state_dict(weights)
    inner = OPTIMIZERS["adam"](fourth.parameters())
    inner.load_state_dict(plain_state_from_consolidated(consolidated, fourth, inner))
    plain = hvd.DistributedOptimizer(inner, named_parameters=fourth.named_parameters())
    train(fourth, plain, 2, first=2)
    assert_same_bits(net, fourth)


def test_a_shard_refuses_another_layout():
    if hvd.size() == 1:
        pytest.skip("one rank has one shard")
    net = model()
    opt = hvd.ShardedOptimizer(OPTIMIZERS["sgd"](net.parameters()),
                               named_parameters=net.named_parameters())
    train(net, opt, 1)
    state = opt.state_dict()
    state["chorus_shard"]["rank"] = (hvd.rank() + 1) % hvd.size()
    with pytest.raises(ValueError, match="consolidated"):
        opt.load_state_dict(state)


def test_different_models_fail_on_every_rank():
    if hvd.size() == 1:
        pytest.skip("needs two ranks")
    torch.manual_seed(0)
    net = nn.Linear(4, 5 if hvd.rank() == hvd.size() - 1 else 4)
    with pytest.raises(hvd.ArgumentError, match="weight"):
        hvd.ShardedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1),
                             named_parameters=net.named_parameters())


def test_broadcast_parameters_after_wrapping():
    """Parameters that are views into the buckets take a broadcast in place: ranks that start
    from different weights train as one after broadcast_parameters."""
    reference, sharded = model(11), model(100 + hvd.rank())
    opt = hvd.ShardedOptimizer(OPTIMIZERS["adam"](sharded.parameters()),
                               named_parameters=sharded.named_parameters())
    hvd.broadcast_parameters(sharded.state_dict(), root_rank=0)
    reference.load_state_dict(hvd.broadcast_object(sharded.state_dict(), root_rank=0))
    plain = hvd.DistributedOptimizer(OPTIMIZERS["adam"](reference.parameters()),
                                     named_parameters=reference.named_parameters())
    train(reference, plain, 2)
    train(sharded, opt, 2)
    assert_same_bits(reference, sharded)


@pytest.mark.parametrize("stage", [1, 2])
def test_process_set(stage):
    if hvd.size() < 3:
        pytest.skip("needs a rank outside the set")
    pair = hvd.add_process_set([0, 1])
    try:
        if hvd.rank() < 2:
            reference, sharded = model(4), model(4)
            plain = hvd.DistributedOptimizer(OPTIMIZERS["adamw"](reference.parameters()),
                                             named_parameters=reference.named_parameters(),
                                             process_set=pair)
            opt = hvd.ShardedOptimizer(OPTIMIZERS["adamw"](sharded.parameters()),
                                       named_parameters=sharded.named_parameters(),
                                       stage=stage, process_set=pair)
            train(reference, plain, STEPS)
            train(sharded, opt, STEPS)
            assert_same_bits(reference, sharded)
        else:
            net = model(4)
            with pytest.raises(ValueError, match="not in the process set"):
                hvd.ShardedOptimizer(OPTIMIZERS["sgd"](net.parameters()), process_set=pair)
    finally:
        hvd.remove_process_set(pair)
