#!/usr/bin/python3
"""Sharded data parallelism in Python: step time and the memory each rank holds.

One MLP (1024 inputs, three hidden layers of --width, 10 classes; float32), Adam (lr 1e-4),
random batches of --batch-size per rank, under one of:

  plain    hvd.DistributedOptimizer (each gradient its own allreduce, fused by the runtime)
  buckets  hvd.DistributedOptimizer(bucket_cap_mb=25): gradients as views into buckets
  stage1   hvd.ShardedOptimizer(stage=1)
  stage2   hvd.ShardedOptimizer(stage=2)
  ddp      torch DDP on gloo with torch.optim.Adam (no Chorus)
  zero     torch DDP on gloo with torch.distributed.optim.ZeroRedundancyOptimizer(Adam)

Rank 0 prints one RESULT line: the median step time over --steps timed steps (after
--warmup), the optimizer state and the gradients this rank holds between steps (bytes of
the tensors themselves), and the peak resident set of the largest rank (ru_maxrss).

  mpirun -np 4 --bind-to none /usr/bin/python3 bench/sharded_bench.py --mode stage2
"""

import argparse
import os
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CHORUS_MODES = ("plain", "buckets", "stage1", "stage2")


def mlp(width):
    return nn.Sequential(nn.Linear(1024, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))


def tensor_bytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors if torch.is_tensor(t))


def state_bytes(optimizer):
    inner = getattr(optimizer, "optim", optimizer)  # ZeroRedundancyOptimizer's local optimizer
    return tensor_bytes(v for st in inner.state.values() for v in st.values())


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=CHORUS_MODES + ("ddp", "zero"), required=True)
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=0)
    args = p.parse_args()

    if args.mode in CHORUS_MODES:
        import chorus.torch as hvd
        hvd.init()
        rank, size, local_size = hvd.rank(), hvd.size(), hvd.local_size()
    else:
        import torch.distributed as dist
        env = os.environ
        rank = int(env.get("OMPI_COMM_WORLD_RANK", env.get("RANK", "0")))
        size = int(env.get("OMPI_COMM_WORLD_SIZE", env.get("WORLD_SIZE", "1")))
        local_size = int(env.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1"))
        addr, port = env.get("MASTER_ADDR", "127.0.0.1"), env.get("MASTER_PORT", "29533")
        dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=rank,
                                world_size=size)
    threads = args.threads or max(1, len(os.sched_getaffinity(0)) // max(1, local_size))
    torch.set_num_threads(threads)

    torch.manual_seed(1)
    model = mlp(args.width)
    params = sum(t.numel() for t in model.parameters())
    if args.mode == "plain":
        opt = hvd.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=1e-4),
                                       named_parameters=model.named_parameters())
    elif args.mode == "buckets":
        opt = hvd.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=1e-4),
                                       named_parameters=model.named_parameters(),
                                       bucket_cap_mb=25)
    elif args.mode in ("stage1", "stage2"):
        opt = hvd.ShardedOptimizer(torch.optim.Adam(model.parameters(), lr=1e-4),
                                   named_parameters=model.named_parameters(),
                                   stage=int(args.mode[-1]))
    else:
        from torch.nn.parallel import DistributedDataParallel
        model = DistributedDataParallel(model)
        if args.mode == "ddp":
            opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        else:
            from torch.distributed.optim import ZeroRedundancyOptimizer
            opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam,
                                          lr=1e-4)

    torch.manual_seed(1000 + rank)
    x = torch.randn(args.batch_size, 1024)
    y = torch.randint(0, 10, (args.batch_size,))

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)

    if args.mode in CHORUS_MODES:
        grads = (opt.gradient_bytes() if args.mode.startswith("stage")
                 else tensor_bytes(p.grad for p in model.parameters()))
    else:
        grads = tensor_bytes(p.grad for p in model.parameters())
    local = torch.tensor([statistics.median(times), state_bytes(opt), grads,
                          resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0],
                         dtype=torch.float64)
    if args.mode in CHORUS_MODES:
        worst = hvd.allreduce(local, op=hvd.Max, name="bench.worst")
        hvd.shutdown()
    else:
        dist.all_reduce(local, op=dist.ReduceOp.MAX)
        worst = local
        dist.destroy_process_group()
    if rank == 0:
        step_ms, state, grad, rss = worst.tolist()
        print(f"RESULT impl=python mode={args.mode} np={size} width={args.width} "
              f"params={params} step_ms={step_ms:.2f} state_mb={state / 2**20:.2f} "
              f"grad_mb={grad / 2**20:.2f} peak_rss_mb={rss:.0f} threads={threads}",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
