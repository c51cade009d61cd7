#!/usr/bin/python3
"""torch.distributed on the backend chorus against gloo, in one launch: a DDP trainer's
images/s and dist.all_reduce's latency and bandwidth.

Both process groups live in one process: the default group on chorus (init_process_group),
a second over every rank on gloo (dist.new_group), so both backends run on the same ranks,
cores and moment. Each measurement alternates the backends, the order turning from round to
round (or repeat to repeat) so that neither always goes first.

(a) DDP: two DistributedDataParallel copies of one synthetic model (bench/ddp_synthetic.py's
"mlp", 14.7M parameters, or "cnn", 4.9M), one per group, each with its own SGD (lr 0.01,
momentum 0.9) on the same random 3x32x32 batch. Per round and backend: --warmup steps, then
--steps timed steps; images/s from the slowest rank's time.
(b) dist.all_reduce (sum, in place, float32) of 4 B, 1 MiB and 64 MiB: per repeat a loop of
calls (more for small sizes) timed after a barrier, the slowest rank's mean per call; the
medians over --reps repeats. Bandwidth: size / time. Beside them, chorus.torch.allreduce_ of
the same tensors: Chorus without the process group, to show what c10d's path adds.

  mpirun --oversubscribe --bind-to none -np 2 -x PYTHONPATH /usr/bin/python3 bench/ddp_bench.py

PYTHONPATH must reach the chorus package (build/python). The ranks' gloo group meets at
MASTER_ADDR:MASTER_PORT (default 127.0.0.1 and a port from --port).
"""

import argparse
import datetime
import os
import resource
import statistics
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ddp_synthetic import CLASSES, IMAGE_SHAPE, SyntheticCnn, SyntheticMlp  # noqa: E402

import chorus.torch  # noqa: E402,F401  registers the backend "chorus"

BACKENDS = ("chorus", "gloo")
# The allreduce's ways: dist.all_reduce on each backend, and chorus.torch's own allreduce_
# (no c10d), which shows what the process group adds to Chorus.
WAYS = BACKENDS + ("chorus.torch",)
# (label, bytes, calls per timed repeat): enough calls that a repeat outlasts the timer.
SIZES = [("4 B", 4, 200), ("1 MiB", 1 << 20, 20), ("64 MiB", 64 << 20, 1)]

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
parser.add_argument("--batch-size", type=int, default=32, help="per rank")
parser.add_argument("--rounds", type=int, default=3, help="DDP rounds, each backend once")
parser.add_argument("--warmup", type=int, default=3, help="DDP steps before each timed round")
parser.add_argument("--steps", type=int, default=10, help="timed DDP steps per round")
parser.add_argument("--reps", type=int, default=15, help="all_reduce repeats per size")
parser.add_argument("--threads", type=int, default=0,
                    help="intra-op threads per rank (default: cores / ranks on this host)")
parser.add_argument("--port", type=int, default=29561)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def process_cpu_s():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def allreduce(way, t, groups):
    """Sum of `t` over the ranks, in place, the way `way` of WAYS does it."""
    if way == "chorus.torch":
        chorus.torch.allreduce_(t, op=chorus.torch.Sum, name="ddp_bench.allreduce")
    else:
        dist.all_reduce(t, group=groups[way])


def slowest(values, group, held):
    """Element-wise maximum over the ranks of a list of floats (its tensor goes into `held`)."""
    t = torch.tensor(values, dtype=torch.float64)
    held.append(t)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.tolist()


def ddp_rounds(args, groups, rank, size, held):
    """{backend: [images/s per round]} and {backend: [rank's process CPU s per step, per round]}."""
    images = torch.randn(args.batch_size, *IMAGE_SHAPE,
                         generator=torch.Generator().manual_seed(1000 + rank))
    labels = torch.randint(0, CLASSES, (args.batch_size,),
                           generator=torch.Generator().manual_seed(2000 + rank))
    trainers = {}
    for b in BACKENDS:
        torch.manual_seed(1)
        model = SyntheticMlp() if args.model == "mlp" else SyntheticCnn()
        ddp = nn.parallel.DistributedDataParallel(model, process_group=groups[b])
        trainers[b] = (ddp, torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9))

    def step(b):
        ddp, opt = trainers[b]
        opt.zero_grad()
        F.cross_entropy(ddp(images), labels).backward()  # DDP reduces inside backward
        opt.step()

    ips = {b: [] for b in BACKENDS}
    cpu = {b: [] for b in BACKENDS}
    for r in range(args.rounds):
        for b in BACKENDS[r % 2:] + BACKENDS[:r % 2]:
            for _ in range(args.warmup):
                step(b)
            dist.barrier(group=groups[b])
            c0, t0 = process_cpu_s(), time.perf_counter()
            for _ in range(args.steps):
                step(b)
            elapsed, c = time.perf_counter() - t0, process_cpu_s() - c0
            worst = slowest([elapsed], groups["gloo"], held)[0]
            ips[b].append(size * args.batch_size * args.steps / worst)
            cpu[b].append(c / args.steps)
            if rank == 0:
                print(f"  DDP round {r + 1} {b:6}: {ips[b][-1]:7.1f} images/s  "
                      f"(rank 0: {1e3 * elapsed / args.steps:.0f} ms/step, process CPU "
                      f"{1e3 * c / args.steps:.0f} ms/step; load {loadavg().split()[0]})",
                      flush=True)
    return ips, cpu


def allreduce_reps(args, groups, size, held):
    """{(label, way): [slowest rank's seconds per call, per repeat]}, for the ways of WAYS."""
    out = {}
    for label, nbytes, calls in SIZES:
        tensors = {}
        for w in WAYS:  # checked once, then timed on zeros: the values stay finite
            t = torch.ones(nbytes // 4)
            held.append(t)
            allreduce(w, t, groups)
            if not bool((t == size).all()):
                raise RuntimeError(f"{w}: allreduce of {label} of ones did not give {size}")
            tensors[w] = t.zero_()
            for _ in range(2):
                allreduce(w, t, groups)
        times = {w: [] for w in WAYS}
        for rep in range(args.reps):
            for w in WAYS[rep % len(WAYS):] + WAYS[:rep % len(WAYS)]:
                dist.barrier(group=groups["gloo" if w == "gloo" else "chorus"])
                t0 = time.perf_counter()
                for _ in range(calls):
                    allreduce(w, tensors[w], groups)
                times[w].append((time.perf_counter() - t0) / calls)
        for w in WAYS:
            out[(label, w)] = slowest(times[w], groups["gloo"], held)
    return out


def report(args, size, ips, cpu, lat):
    """The table: each backend's median, the speed-up of chorus over gloo, chorus.torch's own
    allreduce beside them, the spread; then one RESULT line for scripts."""
    med = statistics.median
    c, g = ips["chorus"], ips["gloo"]
    per_round = [a / b for a, b in zip(c, g)]  # each round's two runs were seconds apart
    print(f"{'':24} {'chorus':>9} {'gloo':>9} {'chorus/gloo':>12} {'chorus.torch':>13}  spread")
    print(f"{'DDP ' + args.model + ', images/s':24} {med(c):9.1f} {med(g):9.1f} "
          f"{med(per_round):12.2f} {'':>13}  per round: "
          + ", ".join(f"{r:.2f}" for r in per_round))
    print(f"{'  process CPU, ms/step':24} {1e3 * med(cpu['chorus']):9.0f} "
          f"{1e3 * med(cpu['gloo']):9.0f}")
    for label, nbytes, _ in SIZES:
        tc, tg, th = (lat[(label, w)] for w in WAYS)
        unit, scale = ("us", 1e6) if nbytes < (1 << 20) else ("ms", 1e3)
        print(f"{'all_reduce ' + label + ', ' + unit:24} {scale * med(tc):9.2f} "
              f"{scale * med(tg):9.2f} {med(tg) / med(tc):12.2f} {scale * med(th):13.2f}  "
              f"min {scale * min(tc):.2f}, {scale * min(tg):.2f}; "
              f"max {scale * max(tc):.2f}, {scale * max(tg):.2f}")
        if nbytes >= (1 << 20):
            print(f"{'  GB/s (size / time)':24} {nbytes / med(tc) / 1e9:9.2f} "
                  f"{nbytes / med(tg) / 1e9:9.2f} {'':12} {nbytes / med(th) / 1e9:13.2f}")
    print("\nchorus/gloo: the speed-up, >1 where chorus is faster (DDP: the median of the "
          "rounds' ratios;\nall_reduce: time over time). Medians over rounds and repeats of the "
          "slowest rank.\nchorus.torch: the same sums by chorus.torch.allreduce_, without c10d. "
          "A rank's process CPU\nincludes the other backend's idle threads.")
    print(f"RESULT model={args.model} ranks={size} ips_chorus={med(c):.2f} ips_gloo={med(g):.2f} "
          f"ddp_ratio={med(per_round):.3f} "
          + " ".join(f"us_{label.replace(' ', '')}_{w.replace('.', '_')}="
                     f"{1e6 * med(lat[(label, w)]):.2f}" for label, _, _ in SIZES for w in WAYS),
          flush=True)


def main():
    args = parser.parse_args()
    env = os.environ
    rank = int(env.get("OMPI_COMM_WORLD_RANK", env.get("RANK", "0")))
    size = int(env.get("OMPI_COMM_WORLD_SIZE", env.get("WORLD_SIZE", "1")))
    local_size = int(env.get("OMPI_COMM_WORLD_LOCAL_SIZE", env.get("LOCAL_WORLD_SIZE", "1")))
    env.setdefault("MASTER_ADDR", "127.0.0.1")
    env.setdefault("MASTER_PORT", str(args.port))
    threads = args.threads or max(1, len(os.sched_getaffinity(0)) // max(1, local_size))
    torch.set_num_threads(threads)

    dist.init_process_group("chorus", init_method="env://", rank=rank, world_size=size)
    groups = {"chorus": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}

    if rank == 0:
        try:
            commit = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)),
                                     "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            commit = ""
        params = sum(p.numel() for p in
                     (SyntheticMlp() if args.model == "mlp" else SyntheticCnn()).parameters())
        print(f"torch.distributed, chorus against gloo: {size} ranks, {threads} intra-op "
              f"thread(s) each, torch {torch.__version__}, commit {commit or '?'}\n"
              f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
              f"{os.cpu_count()} cores, load average at start {loadavg()}\n"
              f"DDP: model {args.model} ({params} parameters), batch {args.batch_size} per rank, "
              f"{args.rounds} rounds of {args.warmup} warmup + {args.steps} timed steps per "
              f"backend", flush=True)

    held = []  # every tensor this script hands a collective, kept until the teardown
    ips, cpu = ddp_rounds(args, groups, rank, size, held)
    if rank == 0:
        print(f"  all_reduce: {args.reps} repeats per size and backend", flush=True)
    lat = allreduce_reps(args, groups, size, held)

    if rank == 0:
        print(f"\nload average at end {loadavg()}\n")
        report(args, size, ips, cpu, lat)

    # The groups go while `held` still holds the tensors of their calls: with torch 1.13, a
    # group's thread that drops the last reference to a tensor Python has let go of waits for
    # the GIL, which the thread destroying the group holds (examples/python/ddp_mnist.py).
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
