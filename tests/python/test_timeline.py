"""hvd.start_timeline / hvd.stop_timeline at run time: rank 0 writes the file, the other
ranks write nothing; a start while one is active switches files; a stop closes the file for
good and is a no-op when nothing is active."""

import json
import os

import pytest
import torch

import chorus.torch as hvd


def load(path):
    with open(path) as f:
        events = json.load(f)  # the file is a complete JSON array after stop and after a switch
    names = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    marks = sum(1 for e in events if e.get("name") == "CYCLE_START")
    return names, marks


def test_start_switch_stop(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    hvd.stop_timeline()  # nothing active: a no-op
    hvd.start_timeline(str(a))
    hvd.allreduce(torch.ones(4), name="py.tl.first")
    hvd.start_timeline(b, mark_cycles=True)  # a path-like object, and a switch
    hvd.allreduce(torch.ones(4), name="py.tl.second")
    hvd.stop_timeline()
    closed_b = b.read_bytes() if hvd.rank() == 0 else None
    hvd.allreduce(torch.ones(4), name="py.tl.after")
    hvd.stop_timeline()  # again: still a no-op
    if hvd.rank() != 0:
        assert not a.exists() and not b.exists()
        return
    assert b.read_bytes() == closed_b  # nothing written after stop_timeline returned

    names_a, marks_a = load(a)
    names_b, marks_b = load(b)
    assert "py.tl.first" in names_a and "py.tl.second" not in names_a
    assert "py.tl.second" in names_b and "py.tl.first" not in names_b
    assert "py.tl.after" not in names_a | names_b
    assert marks_a == 0 and marks_b >= 1


def test_unwritable_path_raises_on_rank_zero_only(tmp_path):
    bad = str(tmp_path / "no-such-dir" / "t.json")
    if hvd.rank() == 0:
        with pytest.raises(hvd.HorovodInternalError, match="no-such-dir"):
            hvd.start_timeline(bad)
    else:
        hvd.start_timeline(bad)  # other ranks write nothing, so there is nothing to fail
    hvd.stop_timeline()
    assert not os.path.exists(bad)


def steps_and_waits(path):
    with open(path) as f:
        events = json.load(f)
    trainer = [e for e in events if e.get("ph") == "X" and e["tid"] == 0]
    steps = [e["args"]["detail"] for e in trainer if e["name"] == "STEP"]
    labels = [e for e in events if e.get("name") == "process_labels"]
    return events, steps, labels


def test_every_rank_writes_its_own_file_with_the_optimizer_steps(tmp_path):
    pattern = str(tmp_path / "t.{rank}.json")
    mine = tmp_path / f"t.{hvd.rank()}.json"
    model = torch.nn.Linear(4, 2)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters())
    hvd.start_timeline(pattern)  # "{rank}": every rank writes, not only rank 0
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.ones(8, 4)).sum().backward()
        optimizer.step()  # marks the step's end
    hvd.mark_step()  # a loop without DistributedOptimizer marks its own
    hvd.stop_timeline()
    hvd.mark_step()  # no timeline: nothing happens
    events, steps, labels = steps_and_waits(mine)
    # Steps count this rank's marks since init (earlier tests marked some): four in a row.
    numbers = [int(s.split()[1]) for s in steps]
    assert len(numbers) == 4 and numbers == list(range(numbers[0], numbers[0] + 4)), steps
    assert {e["pid"] for e in events} == {hvd.rank()}
    # Ranks other than 0 say how their clock stands against rank 0's.
    assert len(labels) == (0 if hvd.rank() == 0 else 1)
    assert any(e["name"] == "NEGOTIATE" for e in events)
