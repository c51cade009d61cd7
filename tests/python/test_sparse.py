"""Sparse gradients: sparse_allreduce_async against the dense sum computed in this process,
and DistributedOptimizer on a model with nn.Embedding(sparse=True) against one process that
averages the ranks' shard losses (sparse_as_dense or not, SGD and SparseAdam)."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import chorus.torch as hvd

ROWS, WIDTH = 10, 3


def rank_sparse(r, nnz, dtype=torch.float64, size=(ROWS, WIDTH), sparse_dim=1):
    """Rank r's sparse tensor: ``nnz`` entries, repeated indices included, uncoalesced."""
    g = torch.Generator().manual_seed(300 + r)
    idx = torch.stack([torch.randint(0, size[d], (nnz,), generator=g)
                       for d in range(sparse_dim)])
    vals = torch.randint(-5, 6, (nnz,) + tuple(size[sparse_dim:]), generator=g).to(dtype)
    return torch.sparse_coo_tensor(idx, vals, size)


def nnz_of(r):
    return 0 if r == 1 else 2 * r + 3  # rank 1 contributes nothing


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average], ids=["sum", "average"])
@pytest.mark.parametrize("sparse_dim", [1, 2], ids=["rows", "elements"])
def test_sparse_allreduce_against_dense_sum(op, sparse_dim):
    n, me = hvd.size(), hvd.rank()
    mine = rank_sparse(me, nnz_of(me), sparse_dim=sparse_dim)
    h = hvd.sparse_allreduce_async(mine, name=f"sp.{op}.{sparse_dim}", op=op)
    assert isinstance(h, int)
    out = hvd.synchronize(h)
    assert out.is_sparse and out.is_coalesced()
    assert out.shape == mine.shape and out.sparse_dim() == sparse_dim
    expected = sum(rank_sparse(r, nnz_of(r), sparse_dim=sparse_dim).to_dense() for r in range(n))
    if op == hvd.Average:
        expected = expected / n
    torch.testing.assert_close(out.to_dense(), expected, rtol=1e-12, atol=1e-12)
    # Only indices that some rank sent appear.
    assert out._nnz() <= sum(nnz_of(r) for r in range(n))


def test_sparse_allreduce_integer_average_truncates_and_process_set():
    n, me = hvd.size(), hvd.rank()
    mine = rank_sparse(me, 4, dtype=torch.int64)
    out = hvd.synchronize(hvd.sparse_allreduce_async(mine, "sp.int", hvd.Average))
    expected = torch.trunc(sum(rank_sparse(r, 4, dtype=torch.int64).to_dense().double()
                               for r in range(n)) / n)
    assert out.dtype == torch.int64
    torch.testing.assert_close(out.to_dense().double(), expected, rtol=0, atol=0)

    members = list(range(1, n))
    ps = hvd.add_process_set(members)
    try:
        if me in members:
            out = hvd.synchronize(hvd.sparse_allreduce_async(mine, "sp.set", hvd.Sum, ps))
            expected = sum(rank_sparse(r, 4, dtype=torch.int64).to_dense() for r in members)
            assert torch.equal(out.to_dense(), expected)
        hvd.barrier()
    finally:
        hvd.remove_process_set(ps)


def test_sparse_allreduce_rejects_dense_and_other_ops():
    with pytest.raises(ValueError, match="sparse COO"):
        hvd.sparse_allreduce_async(torch.ones(3), "sp.dense", hvd.Sum)
    with pytest.raises(ValueError, match="Sum and hvd.Average"):
        hvd.sparse_allreduce_async(rank_sparse(0, 2), "sp.max", hvd.Max)


# --- DistributedOptimizer with sparse gradients --------------------------------------------

PER_RANK, STEPS, VOCAB, DIM = 4, 4, 12, 5


class Tagger(nn.Module):
    """An embedding bag of token ids (sparse gradient) and a dense head."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM, sparse=True)
        self.head = nn.Linear(DIM, 3)

    def forward(self, tokens, use_embedding=True):
        if use_embedding:
            h = self.emb(tokens).mean(1)
        else:  # a rank whose batch never touches the embedding
            h = torch.zeros(tokens.shape[0], DIM, dtype=self.head.weight.dtype)
        return self.head(torch.tanh(h))


def make_tagger():
    torch.manual_seed(11)
    return Tagger().double()


def batches(n):
    g = torch.Generator().manual_seed(77)
    # Each rank's tokens come from its own slice of the vocabulary, plus token 0, so some
    # rows are used by several ranks and some by none.
    out = []
    for _ in range(STEPS):
        tokens = torch.cat([torch.randint(1 + 2 * r, 3 + 2 * r, (PER_RANK, 2), generator=g)
                            % VOCAB for r in range(n)])
        tokens = torch.cat([tokens, torch.zeros(n * PER_RANK, 1, dtype=torch.int64)], 1)
        labels = torch.randint(0, 3, (n * PER_RANK,), generator=g)
        out.append((tokens, labels))
    return out


def uses_embedding(step, r):
    return not (step == 2 and r == 0)  # rank 0 skips the embedding in step 2


def shard(batch, r):
    tokens, labels = batch
    return tokens[r * PER_RANK:(r + 1) * PER_RANK], labels[r * PER_RANK:(r + 1) * PER_RANK]


def reference_model(make_opt):
    """One process: the gradient of the mean over ranks of each rank's shard loss."""
    n = hvd.size()
    model = make_tagger()
    opt = make_opt(model)
    for step, batch in enumerate(batches(n)):
        opt.zero_grad()
        loss = sum(F.cross_entropy(model(shard(batch, r)[0], uses_embedding(step, r)),
                                   shard(batch, r)[1]) for r in range(n)) / n
        loss.backward()
        opt.step()
    return model


def sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


class TwoOptimizers:
    """SparseAdam for the embedding (it takes only sparse gradients), Adam for the head."""

    def __init__(self, model, wrap=lambda opt, named: opt):
        self.opts = [wrap(torch.optim.SparseAdam(list(model.emb.parameters()), lr=0.1),
                          model.emb.named_parameters()),
                     wrap(torch.optim.Adam(model.head.parameters(), lr=0.1),
                          model.head.named_parameters())]

    def zero_grad(self):
        for o in self.opts:
            o.zero_grad()

    def step(self):
        for o in self.opts:
            o.step()


def train(make_opt, **kwargs):
    model = make_tagger()
    me = hvd.rank()
    opt = make_opt(model, **kwargs)
    grads_sparse = []
    for step, batch in enumerate(batches(hvd.size())):
        tokens, labels = shard(batch, me)
        opt.zero_grad()
        F.cross_entropy(model(tokens, uses_embedding(step, me)), labels).backward()
        opt.step()
        grads_sparse.append(model.emb.weight.grad.is_sparse)
    return model, grads_sparse


def distributed_sgd(model, sparse_as_dense):
    return hvd.DistributedOptimizer(sgd(model), named_parameters=model.named_parameters(),
                                    sparse_as_dense=sparse_as_dense)


def assert_same(model, ref):
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-10, atol=1e-10, msg=name)


@pytest.mark.parametrize("sparse_as_dense", [False, True], ids=["sparse", "as_dense"])
def test_optimizer_with_sparse_gradients_matches_one_process(sparse_as_dense):
    model, grads_sparse = train(distributed_sgd, sparse_as_dense=sparse_as_dense)
    assert_same(model, reference_model(sgd))
    # The gradient is sparse after every step: reduced sparse, or reduced dense and given
    # back sparse with sparse_as_dense (as Horovod does).
    assert grads_sparse == [True] * STEPS


def test_sparse_adam_gets_sparse_gradients():
    def wrapped(model):
        return TwoOptimizers(model, lambda opt, named: hvd.DistributedOptimizer(
            opt, named_parameters=named))

    model, grads_sparse = train(wrapped)
    assert all(grads_sparse)
    assert_same(model, reference_model(TwoOptimizers))


def test_sparse_gradients_with_backward_passes_per_step():
    n, me = hvd.size(), hvd.rank()
    model = make_tagger()
    opt = hvd.DistributedOptimizer(sgd(model), named_parameters=model.named_parameters(),
                                   backward_passes_per_step=2)
    ref = make_tagger()
    ref_opt = sgd(ref)
    for step, batch in enumerate(batches(n)):
        tokens, labels = shard(batch, me)
        opt.zero_grad()
        for half in range(2):  # two passes over halves of the shard, loss / 2 each
            rows = slice(half * PER_RANK // 2, (half + 1) * PER_RANK // 2)
            (F.cross_entropy(model(tokens[rows]), labels[rows]) / 2).backward()
        # Every gradient's reduction started during backward: the embedding's from the C++
        # reducer in the first step, from its Python hook after it.
        assert opt._reductions_started() == 3
        opt.step()
        ref_opt.zero_grad()
        (sum(F.cross_entropy(ref(shard(batch, r)[0]), shard(batch, r)[1])
             for r in range(n)) / n).backward()
        ref_opt.step()
    assert model.emb.weight.grad.is_sparse
    assert_same(model, ref)


def test_a_new_optimizer_on_the_same_model_replaces_the_old_hooks():
    """The sparse hooks of a discarded DistributedOptimizer stay on the embedding but do
    nothing: a second wrapper trains on as if it were the only one."""
    me = hvd.rank()
    model = make_tagger()
    for step, batch in enumerate(batches(hvd.size())):
        if step in (0, 2):  # two steps with each wrapper: each learns the sparse layout
            opt = distributed_sgd(model, sparse_as_dense=False)  # the old one goes here
        tokens, labels = shard(batch, me)
        opt.zero_grad()
        F.cross_entropy(model(tokens, uses_embedding(step, me)), labels).backward()
        opt.step()
    assert_same(model, reference_model(sgd))


class LateTagger(Tagger):
    """A second sparse embedding that no rank uses in the first step: its first gradient
    arrives after the ranks agreed on the sparse parameters, and is reduced as dense."""

    def __init__(self):
        super().__init__()
        self.late = nn.Embedding(VOCAB, DIM, sparse=True)

    def forward(self, tokens, use_embedding=True, use_late=True):
        h = super().forward(tokens, use_embedding)
        return h + self.head(self.late(tokens).mean(1)) if use_late else h


def test_a_gradient_first_sparse_after_the_first_step_is_reduced_as_dense():
    n, me = hvd.size(), hvd.rank()

    def make():
        torch.manual_seed(11)
        return LateTagger().double()

    def run(model, opt, ranks):
        for step, batch in enumerate(batches(n)):
            opt.zero_grad()
            loss = sum(F.cross_entropy(model(shard(batch, r)[0], uses_embedding(step, r),
                                             use_late=step > 0), shard(batch, r)[1])
                       for r in ranks) / len(ranks)
            loss.backward()
            opt.step()

    model = make()
    run(model, distributed_sgd(model, sparse_as_dense=False), [me])
    ref = make()
    run(ref, sgd(ref), range(n))
    assert model.emb.weight.grad.is_sparse
    assert not model.late.weight.grad.is_sparse
    assert_same(model, ref)


def test_sparse_as_dense_differing_across_ranks_fails_on_every_rank():
    """At the wrapper's construction, before any gradient could be reduced two ways."""
    model = make_tagger()
    with pytest.raises(ValueError, match="sparse_as_dense differs across ranks"):
        distributed_sgd(model, sparse_as_dense=hvd.rank() == 0)
