"""DistributedOptimizer (over the C++ GradientReducer), state broadcast and SyncBatchNorm.

The reference for data-parallel training is one process that sees the whole global batch:
k steps of DistributedOptimizer on per-rank shards (loss averaged over each shard, gradients
averaged over ranks) must give the parameters of k steps on the concatenated batch."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import chorus.torch as hvd

PER_RANK = 4
STEPS = 3


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def make_model(seed=7):
    torch.manual_seed(seed)
    return Net().double()


def global_batches(n):
    g = torch.Generator().manual_seed(42)
    return [(torch.randn(n * PER_RANK, 6, generator=g, dtype=torch.float64),
             torch.randint(0, 3, (n * PER_RANK,), generator=g)) for _ in range(STEPS)]


def shard(batch):
    x, y = batch
    lo = hvd.rank() * PER_RANK
    return x[lo:lo + PER_RANK], y[lo:lo + PER_RANK]


def reference_params(make_opt, clip=None):
    model = make_model()
    opt = make_opt(model.parameters())
    for x, y in global_batches(hvd.size()):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def sgd(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def adam(params):
    return torch.optim.Adam(params, lr=0.01)


def train_distributed(make_opt, passes=1, loss_scale=1.0, **kwargs):
    model = make_model()
    opt = hvd.DistributedOptimizer(make_opt(model.parameters()),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=passes, **kwargs)
    for batch in global_batches(hvd.size()):
        x, y = shard(batch)
        opt.zero_grad()
        for xs, ys in zip(x.chunk(passes), y.chunk(passes)):
            (loss_scale * F.cross_entropy(model(xs), ys) / passes).backward()
        opt.step()
    return model, opt


def assert_params(model, expected, tol=1e-10):
    for p, e in zip(model.parameters(), expected):
        torch.testing.assert_close(p.detach(), e, rtol=tol, atol=tol)


@pytest.mark.parametrize("make_opt", [sgd, adam], ids=["sgd_momentum", "adam"])
def test_shards_equal_whole_batch(make_opt):
    model, opt = train_distributed(make_opt)
    assert isinstance(opt, type(make_opt(make_model().parameters())))
    assert_params(model, reference_params(make_opt))


@pytest.mark.parametrize("kwargs", [
    dict(passes=2),
    dict(groups=2),
    dict(gradient_predivide_factor=2.0),
    dict(op=hvd.Sum, loss_scale=None),
], ids=["backward_passes_2", "groups_2", "predivide_2", "op_sum"])
def test_options_keep_equivalence(kwargs):
    if kwargs.get("loss_scale", 1.0) is None:
        kwargs["loss_scale"] = 1.0 / hvd.size()  # a sum of losses / n == the mean
    model, _ = train_distributed(sgd, **kwargs)
    assert_params(model, reference_params(sgd))


def test_groups_as_parameter_lists_and_fp16_compression():
    model = make_model()
    params = list(model.parameters())
    opt = hvd.DistributedOptimizer(sgd(params), named_parameters=model.named_parameters(),
                                   groups=[params[:2], params[2:]],
                                   compression=hvd.Compression.fp16)
    for batch in global_batches(hvd.size()):
        x, y = shard(batch)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    assert_params(model, reference_params(sgd), tol=2e-3)


def test_synchronize_then_clip_then_step():
    model = make_model()
    opt = hvd.DistributedOptimizer(sgd(model.parameters()),
                                   named_parameters=model.named_parameters())
    for batch in global_batches(hvd.size()):
        x, y = shard(batch)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        # Reductions started from the C++ hooks during backward, before any synchronize.
        assert opt._reductions_started() > 0
        opt.synchronize()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05)
        with opt.skip_synchronize():
            opt.step()
    assert_params(model, reference_params(sgd, clip=0.05))


def test_parameter_unused_on_some_ranks():
    model = make_model()
    extra = nn.Linear(6, 3).double()
    params = list(model.parameters()) + list(extra.parameters())
    named = list(model.named_parameters()) + [("extra." + n, p)
                                               for n, p in extra.named_parameters()]
    opt = hvd.DistributedOptimizer(torch.optim.SGD(params, lr=0.1), named_parameters=named)
    x, y = shard(global_batches(hvd.size())[0])
    opt.zero_grad()
    out = model(x)
    if hvd.rank() == 0:  # only rank 0 takes the branch
        out = out + extra(x)
    F.cross_entropy(out, y).backward()
    opt.synchronize()  # must not hang
    grad = extra.weight.grad.clone()
    everyone = hvd.allgather(grad.unsqueeze(0))
    assert all(torch.equal(everyone[0], g) for g in everyone)  # same on every rank
    with opt.skip_synchronize():
        opt.step()


def test_layout_mismatch_raises_on_every_rank():
    width = 4 if hvd.rank() == 0 else 5
    model = nn.Linear(width, 2)
    with pytest.raises(hvd.HorovodInternalError):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=model.named_parameters())


def test_argument_errors():
    model = make_model()
    with pytest.raises(ValueError, match="not in it"):
        hvd.DistributedOptimizer(sgd(model.parameters()),
                                 named_parameters=list(model.named_parameters())[:1])
    with pytest.raises(ValueError, match="Average or hvd.Sum"):
        hvd.DistributedOptimizer(sgd(model.parameters()), op=hvd.Max)


def test_broadcast_parameters_state_dict_and_named_list():
    torch.manual_seed(100 + hvd.rank())  # every rank starts different
    model = nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.Linear(5, 2))
    model(torch.randn(8, 4))  # BatchNorm buffers move away from their defaults
    root = hvd.size() - 1
    root_state = hvd.broadcast_object({k: v.clone() for k, v in model.state_dict().items()},
                                      root_rank=root)
    hvd.broadcast_parameters(model.state_dict(), root_rank=root)
    for k, v in model.state_dict().items():
        assert torch.equal(v, root_state[k]), k
    torch.manual_seed(200 + hvd.rank())
    other = nn.Linear(3, 3)
    hvd.broadcast_parameters(list(other.named_parameters()), root_rank=0)
    gathered = hvd.allgather(other.weight.detach().unsqueeze(0))
    assert all(torch.equal(gathered[0], g) for g in gathered)


@pytest.mark.parametrize("make_opt", [sgd, adam], ids=["sgd_momentum", "adam"])
def test_broadcast_optimizer_state_to_ranks_without_state(make_opt):
    model = make_model()
    opt = make_opt(model.parameters())
    if hvd.rank() == 0:  # only the root has stepped (e.g. it loaded a checkpoint)
        x, y = shard(global_batches(hvd.size())[0])
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.param_groups[0]["lr"] = 0.05
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]["lr"] == 0.05
    mine = opt.state_dict()
    root = hvd.broadcast_object(mine, root_rank=0)
    assert len(mine["state"]) == len(root["state"]) == len(list(model.parameters()))
    for k, s in root["state"].items():
        for name, v in s.items():
            mv = mine["state"][k][name]
            assert torch.equal(torch.as_tensor(mv), torch.as_tensor(v)), (k, name)
    # Identical state and parameters: one more identical step stays identical.
    x, y = global_batches(hvd.size())[1]
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
    flat = torch.cat([p.detach().view(-1) for p in model.parameters()]).unsqueeze(0)
    gathered = hvd.allgather(flat)
    assert all(torch.equal(gathered[0], g) for g in gathered)


def test_distributed_optimizer_state_round_trip():
    model, opt = train_distributed(adam)
    saved = copy.deepcopy(opt.state_dict())
    fresh_model = make_model()
    fresh = hvd.DistributedOptimizer(adam(fresh_model.parameters()),
                                     named_parameters=fresh_model.named_parameters())
    fresh.load_state_dict(saved)
    hvd.broadcast_optimizer_state(fresh, root_rank=0)
    for k, s in fresh.state_dict()["state"].items():
        for name, v in s.items():
            assert torch.equal(torch.as_tensor(v), torch.as_tensor(saved["state"][k][name]))


@pytest.mark.parametrize("dims", [2, 4], ids=["1d", "2d"])
def test_sync_batch_norm_matches_batch_norm_on_concatenated_batch(dims):
    n, me, c = hvd.size(), hvd.rank(), 3
    shape = (PER_RANK, c) if dims == 2 else (PER_RANK, c, 5, 4)
    g = torch.Generator().manual_seed(5)
    full = torch.randn((n * PER_RANK,) + shape[1:], generator=g, dtype=torch.float64) * 3 + 1
    weights = torch.randn((n * PER_RANK,) + shape[1:], generator=g, dtype=torch.float64)

    ref = (nn.BatchNorm1d if dims == 2 else nn.BatchNorm2d)(c).double()
    with torch.no_grad():
        ref.weight.uniform_(0.5, 1.5)
        ref.bias.uniform_(-0.5, 0.5)
    sync = hvd.SyncBatchNorm(c).double()
    sync.load_state_dict(ref.state_dict())

    x_ref = full.clone().requires_grad_()
    y_ref = ref(x_ref)
    (y_ref * weights).sum().backward()

    lo = me * PER_RANK
    x = full[lo:lo + PER_RANK].clone().requires_grad_()
    y = sync(x)
    (y * weights[lo:lo + PER_RANK]).sum().backward()

    tol = dict(rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(y, y_ref[lo:lo + PER_RANK], **tol)
    torch.testing.assert_close(x.grad, x_ref.grad[lo:lo + PER_RANK], **tol)
    torch.testing.assert_close(sync.running_mean, ref.running_mean, **tol)
    torch.testing.assert_close(sync.running_var, ref.running_var, **tol)
    torch.testing.assert_close(hvd.allreduce(sync.weight.grad, op=hvd.Sum), ref.weight.grad, **tol)
    torch.testing.assert_close(hvd.allreduce(sync.bias.grad, op=hvd.Sum), ref.bias.grad, **tol)
    sync.eval()
    ref.eval()
    torch.testing.assert_close(sync(full[:2]), ref(full[:2]), **tol)
