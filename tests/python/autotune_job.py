#!/usr/bin/python3
"""A horovod.torch trainer with HOROVOD_AUTOTUNE=1, as a job script sets it, under mpirun.

The environment (tests/python/CMakeLists.txt) turns the autotuner on with Horovod's variables
and a short search. The script trains a small MLP with hvd.DistributedOptimizer for a fixed
number of steps, enough for the search to end, then checks:
  - every rank's weights are rank 0's, bit for bit: the ranks switched settings together
    (inproc.autotune_test checks each sum's bits against the combination order);
  - rank 0's HOROVOD_AUTOTUNE_LOG: its header, the warm-up rows, every sample scored by
    every rank, the rounds rising, the host algorithm never sampled (one host: shared
    memory moves no messages), and a last row naming the best-scored setting as the winner.
Exits 1 with the reason on the first failed check. The info line is checked by the test's
expect.sh.
"""
import csv
import os
import sys

import torch

import chorus.torch as hvd


def fail(why):
    print(f"autotune_job: rank {hvd.rank()}: {why}", flush=True)
    sys.exit(1)


def main():
    hvd.init()
    torch.manual_seed(42)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU())
                                  for _ in range(6)], torch.nn.Linear(256, 10))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
                                   named_parameters=model.named_parameters())
    gen = torch.Generator().manual_seed(hvd.rank())
    for _ in range(int(os.environ.get("AUTOTUNE_JOB_STEPS", "120"))):
        x = torch.randn(32, 256, generator=gen)
        y = torch.randint(0, 10, (32,), generator=gen)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    differ = 0
    for name, p in model.state_dict().items():
        if not torch.equal(hvd.broadcast(p, root_rank=0, name="check." + name), p):
            differ += 1
    if differ:
        fail(f"{differ} tensors differ from rank 0's after the autotuned steps")

    if hvd.rank() == 0:
        with open(os.environ["HOROVOD_AUTOTUNE_LOG"]) as f:
            rows = list(csv.reader(f))
        header = ["sample", "kind", "fusion_bytes", "host_algorithm", "cycle_ms", "mb_per_s",
                  "spread_mb_per_s", "ranks", "round", "gain_over_defaults"]
        if not rows or rows[0] != header:
            fail(f"log header {rows[:1]}")
        body, winner = rows[1:-1], rows[-1]
        warmup = int(os.environ["HOROVOD_AUTOTUNE_WARMUP_SAMPLES"])
        if [r[1] for r in body[:warmup]] != ["warmup"] * warmup:
            fail(f"the first {warmup} rows are not warm-up: {body[:warmup]}")
        samples = body[warmup:]
        if len(samples) < 2 or any(r[1] != "sample" for r in samples):
            fail(f"sample rows: {samples}")
        if winner[1] != "winner":
            fail(f"last row {winner}: the search did not end within the steps")
        if any(r[7] != str(hvd.size()) for r in body):
            fail("a sample not scored by every rank")
        rounds = [int(r[8]) for r in body]
        if rounds != sorted(set(rounds)):
            fail(f"rounds not rising: {rounds}")
        if any(r[3] != "auto" for r in body):
            fail("the host algorithm was sampled on one host")
        best = max(samples, key=lambda r: float(r[5]))
        if winner[2:5] != best[2:5] or abs(float(winner[5]) - float(best[5])) > 0.002:
            fail(f"winner {winner} is not the best sample {best}")
        print(f"autotune_job: {len(samples)} samples, winner {winner[2:5]} at {winner[5]} MB/s "
              f"({winner[9]} over the defaults)", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
