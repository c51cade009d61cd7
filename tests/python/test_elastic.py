"""chorus.torch.elastic in one launch, as horovod.torch.elastic's users observe it: the state
objects' save/restore/sync, ElasticSampler's split of an epoch and its resumption on
another number of ranks, the reset callbacks, and run() outside a supervised job (no
commit store, no host updates). The relaunches themselves are cluster.netns_elastic's."""

import pickle
import random

import pytest
import torch

import chorus.torch as hvd


class FakeDataset:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


def test_object_state_restores_and_syncs_from_rank_0():
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, epoch=1, seen=[1])
    state.epoch = 5
    state.save()
    state.epoch = 9
    state.restore()
    assert state.epoch == 5
    state.epoch = 100 + hvd.rank()
    state.save()
    state.sync()
    assert state.epoch == 100, "every rank takes rank 0's values"


def test_torch_state_restores_model_optimizer_and_values():
    torch.manual_seed(hvd.rank())  # different weights per rank, until sync
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    state = hvd.elastic.TorchState(model, optimizer, batch=0)
    state.sync()
    weights = [p.detach().clone() for p in model.parameters()]
    gathered = hvd.allgather(weights[0].reshape(1, -1))
    assert all(torch.equal(gathered[0], row) for row in gathered), "sync made them equal"
    state.commit()
    committed = {k: v["momentum_buffer"].clone()
                 for k, v in optimizer.state_dict()["state"].items() if "momentum_buffer" in v}
    model(torch.ones(4, 3)).sum().backward()
    optimizer.step()
    state.batch = 7
    assert not torch.equal(next(model.parameters()), weights[0])
    state.restore()
    assert all(torch.equal(p, w) for p, w in zip(model.parameters(), weights))
    assert state.batch == 0
    after = optimizer.state_dict()["state"]
    for k in set(after) | set(committed):
        assert torch.equal(after[k]["momentum_buffer"], committed[k]), \
            "the momentum of the step after the commit is gone"


def test_a_model_assigned_to_the_state_is_tracked():
    state = hvd.elastic.TorchState(torch.nn.Linear(2, 2), None)
    replacement = torch.nn.Linear(2, 2)
    state.model = replacement
    with torch.no_grad():
        replacement.weight.fill_(3.0)
    state.save()
    with torch.no_grad():
        replacement.weight.fill_(0.0)
    state.restore()
    assert torch.all(replacement.weight == 3.0)


@pytest.mark.parametrize("length", [100, 101, 7])
def test_sampler_splits_the_epoch_and_resumes_on_another_number_of_ranks(length):
    sampler = hvd.elastic.ElasticSampler(FakeDataset(length), shuffle=True, seed=3)
    sampler.set_epoch(2)
    mine = list(sampler)
    assert len(mine) == len(sampler) == -(-length // hvd.size())
    everyone = hvd.allgather_object(mine)
    covered = sorted(set(i for part in everyone for i in part))
    assert covered == list(range(length)), "every sample of the epoch goes to some rank"
    # Two batches of 2 processed on every rank, then a relaunch on one rank: the rest of the
    # epoch's order, none of the processed samples.
    batch = 2
    sampler.record_batch(0, batch)
    sampler.record_batch(1, batch)
    processed = sampler.state_dict()["processed_num"]
    assert processed == 2 * batch * hvd.size()
    order = list(range(length))
    random.Random(3 + 2).shuffle(order)
    resumed = hvd.elastic.ElasticSampler(FakeDataset(length), shuffle=True, seed=3)
    resumed.load_state_dict(pickle.loads(pickle.dumps(sampler.state_dict())))
    rest = sorted(set(i for part in hvd.allgather_object(list(resumed)) for i in part))
    assert rest == sorted(order[processed:])
    assert not set(rest) & set(order[:processed]), "no processed sample comes back"


def test_run_without_a_supervisor_calls_through_and_keeps_no_store():
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, step=hvd.rank())
    calls = []
    state.register_reset_callbacks([lambda: calls.append("reset")])

    @hvd.elastic.run
    def train(state, steps):
        for _ in range(steps):
            state.step += 1
            state.commit()
        return state.step

    assert train(state, 3) == 3, "run synced the state from rank 0 (step 0) first"
    assert calls == [], "no relaunch, so no reset"


def test_hosts_updated_interrupt_is_horovods_name():
    assert issubclass(hvd.HostsUpdatedInterrupt, RuntimeError)
    assert hvd.HostsUpdatedInterrupt(skip_sync=True).skip_sync


def test_without_chorusrun_gloo_a_failed_collective_ends_run_instead_of_resetting():
    assert hvd.elastic.start_number() == 0, "no supervisor started this job"
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, step=0)
    calls = []

    @hvd.elastic.run
    def train(state):
        calls.append("train")
        raise hvd.HorovodInternalError("a collective failed")

    with pytest.raises(hvd.HorovodInternalError, match="a collective failed"):
        train(state)
    assert calls == ["train"], "called once: only a job of chorusrun --gloo resets in place"


def test_a_commit_stored_by_the_writer_equals_the_one_in_memory(tmp_path, monkeypatch):
    """The commit's bytes are made on Chorus's writer thread while training goes on: after
    flush(), the node's store holds the state as it was at commit(), bit for bit."""
    import copy
    import threading

    from chorus._loader import ext
    from chorus.torch.elastic.state import _loads

    directory = hvd.broadcast_object(str(tmp_path / "store"), root_rank=0)
    monkeypatch.setattr(ext, "elastic_commit_dir", lambda: directory)
    torch.manual_seed(7)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    state = hvd.elastic.TorchState(model, optimizer, epoch=2)

    def step():
        optimizer.zero_grad()
        model(torch.randn(4, 6)).pow(2).sum().backward()
        optimizer.step()

    step()
    # The writer is kept busy with another store's commit until training changed the live
    # state, so that it pickles the commit's copy only then.
    busy = directory + "-busy"
    go = threading.Event()
    ext.elastic_store_commit_async(busy, 1, lambda: b"busy" if go.wait() else b"")
    state.commit()
    committed_model = {k: v.clone() for k, v in model.state_dict().items()}
    committed_optimizer = copy.deepcopy(optimizer.state_dict())
    for _ in range(3):
        step()
    state.epoch = 3
    go.set()
    state.flush()
    ext.elastic_remove_commits(busy)
    number, data = ext.elastic_newest_commit(directory)
    assert number == 1
    stored = _loads(data)
    in_memory = state._saved()
    for saved in (stored, in_memory):
        assert saved["values"]["epoch"] == 2
        assert saved["handlers"]["model"].keys() == committed_model.keys()
        for k, v in committed_model.items():
            assert torch.equal(saved["handlers"]["model"][k], v), k
        moments = saved["handlers"]["optimizer"]["optimizer"]["state"]
        assert moments.keys() == committed_optimizer["state"].keys()
        for k, v in committed_optimizer["state"].items():
            for name in ("exp_avg", "exp_avg_sq", "step"):
                assert torch.equal(torch.as_tensor(moments[k][name]),
                                   torch.as_tensor(v[name])), (k, name)
    hvd.barrier()
    ext.elastic_remove_commits(directory)
