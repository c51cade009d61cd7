"""The cost of an elastic commit in Python (chorus.torch.elastic.TorchState.commit) against the
training step it interrupts: bench/commit_bench.cc's table for TorchState with an MLP and
Adam. The commit's time on the training thread (copies of the state_dicts, the hand-over to
the writer, the question for host updates), per MB of state; with CHORUS_ELASTIC_JOB set, the
time until the writer thread stored the torch.save bytes in /dev/shm (commit, then flush);
the median training step (forward, backward with DistributedOptimizer's allreduces, Adam) of
a batch of 32; a commit's share of the time at one commit per step and per 100 steps.

    CHORUS_ELASTIC_JOB=bench mpirun -np 2 python3 bench/commit_bench.py [--reps N] [--deepcopy]

--deepcopy copies the state_dicts with copy.deepcopy instead (the comparison that chose the
copy). Printed by rank 0; every rank takes part.
"""

import argparse
import copy
import os
import statistics
import time

import torch

import chorus.torch as hvd
from chorus._loader import ext
from chorus.torch.elastic import state as state_module


def run_width(width, reps):
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, 10))
    adam = torch.optim.Adam(model.parameters(), lr=1e-4)
    optimizer = hvd.DistributedOptimizer(
        adam, named_parameters=[("w{}.{}".format(width, n), p)
                                for n, p in model.named_parameters()])
    state = hvd.elastic.TorchState(model, optimizer, step=0)
    x = torch.randn(32, width)
    y = torch.randint(0, 10, (32,))

    def train_step():
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        state.step += 1

    train_step()  # Adam's moments exist from the first step on
    steps, commits, stored = [], [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        train_step()
        steps.append(time.perf_counter() - t0)
        hvd.barrier()
        t0 = time.perf_counter()
        state.commit()
        commits.append(time.perf_counter() - t0)
        state.flush()
        stored.append(time.perf_counter() - t0)
    mb = 3 * sum(p.numel() for p in model.parameters()) * 4 / 1e6
    directory = ext.elastic_commit_dir()
    if directory:  # the next model's commits start again from 1
        ext.elastic_remove_commits(directory)
    commit_s, stored_s, step_s = (statistics.median(v) for v in (commits, stored, steps))
    hvd.barrier()  # rank 0 prints while every rank is still in the job
    if hvd.rank() == 0:
        print("{:8d} {:10.1f} {:12.2f} {:10.3f} {:12.1f} {:12.2f} {:12.2f}% {:12.2f}%".format(
            width, mb, commit_s * 1e3, commit_s * 1e3 / mb, stored_s * 1e3, step_s * 1e3,
            100 * commit_s / (step_s + commit_s), 100 * commit_s / (100 * step_s + commit_s)),
            flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--deepcopy", action="store_true")
    parser.add_argument("--widths", default="256,1024,2048,4096")
    args = parser.parse_args()
    if args.deepcopy:
        state_module._copy = copy.deepcopy
    torch.set_num_threads(1)
    hvd.init()
    if hvd.rank() == 0:
        print("TorchState commit on {} ranks, {}, state_dicts copied by {}; median of {}".format(
            hvd.size(),
            "stored in each node's /dev/shm by the writer (CHORUS_ELASTIC_JOB set)"
            if os.environ.get("CHORUS_ELASTIC_JOB") else "in memory only (CHORUS_ELASTIC_JOB unset)",
            "copy.deepcopy" if args.deepcopy else "clones", args.reps))
        print("{:>8} {:>10} {:>12} {:>10} {:>12} {:>12} {:>13} {:>13}".format(
            "width", "state MB", "commit ms", "ms/MB", "stored ms", "step ms", "share @1/1",
            "share @1/100"))
    for width in (int(w) for w in args.widths.split(",")):
        run_width(width, args.reps)
    hvd.shutdown()


if __name__ == "__main__":
    main()
