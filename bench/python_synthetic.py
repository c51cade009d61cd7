#!/usr/bin/python3
"""The synthetic trainer of examples/synthetic_benchmark.cc in Python under chorus.torch.

Same models as bench/ddp_synthetic.py (imported from it), same random 3x32x32 input, batch,
loss, optimizer (SGD lr 0.01, momentum 0.9), thread count and step counts, and the same
RESULT line (impl=chorus_py), so bench/run_torch_bench.sh compares it with the C++ trainer
and with DDP on gloo in one run. The script is a horovod.torch trainer; gradients are reduced
by the C++ GradientReducer under hvd.DistributedOptimizer.

--device cuda puts the model and the data on cuda:(local rank % device count); ranks may
share a GPU. Each timed step ends with torch.cuda.synchronize(). Without a CUDA device it
exits 77.

It also measures, after training, the enqueue overhead of one collective from Python:
hvd.allreduce_async on a 1-element tensor on the trainer's device (the cost that a script
pays per tensor when it drives collectives itself; DistributedOptimizer's per-gradient path
never enters Python).

  mpirun -np 2 --bind-to none /usr/bin/python3 bench/python_synthetic.py --model cnn
"""

import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ddp_synthetic import (CLASSES, IMAGE_SHAPE, NO_CUDA_EXIT, SyntheticCnn,  # noqa: E402
                           SyntheticMlp, cuda_missing, process_cpu_ns, step_boundary,
                           trainer_arguments, trainer_device)

import chorus.torch as hvd  # noqa: E402


def thread_cpu_ns(tid=None):
    """CPU ns of thread `tid` of this process (the calling thread when None)."""
    if tid is None:
        return time.clock_gettime_ns(time.CLOCK_THREAD_CPUTIME_ID)
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            return float(f.read().split()[0])
    except OSError:
        return float("nan")


def find_thread(name):
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() == name:
                    return int(tid)
        except OSError:
            pass
    return None


def enqueue_overhead_us(dev, count=2000):
    """Median over 5 rounds of the wall time of one allreduce_async call from Python (1-element
    float32 tensors on `dev`, distinct names), and of the whole round trip per tensor."""
    tensors = [torch.ones(1, device=dev) for _ in range(count)]
    enq, total = [], []
    for round_ in range(5):
        hvd.barrier()
        t0 = time.perf_counter()
        handles = [hvd.allreduce_async(t, name=f"enq.{round_}.{i}", op=hvd.Sum)
                   for i, t in enumerate(tensors)]
        t1 = time.perf_counter()
        for h in handles:
            hvd.synchronize(h)
        t2 = time.perf_counter()
        enq.append((t1 - t0) / count * 1e6)
        total.append((t2 - t0) / count * 1e6)
    return statistics.median(enq), statistics.median(total)


def main():
    p = trainer_arguments(__doc__.splitlines()[0])
    p.add_argument("--no-enqueue-probe", action="store_true")
    args = p.parse_args()
    if cuda_missing(args.device):  # before init: no rank has joined MPI yet
        return NO_CUDA_EXIT

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    threads = args.threads or max(1, len(os.sched_getaffinity(0)) // max(1, hvd.local_size()))
    torch.set_num_threads(threads)
    dev = trainer_device(args.device, hvd.local_rank())

    torch.manual_seed(1)
    model = SyntheticMlp() if args.model == "mlp" else SyntheticCnn()
    model.train()
    params = sum(t.numel() for t in model.parameters())
    model.to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())

    # Generated on the CPU, so that both devices train on the same data.
    torch.manual_seed(1000 + rank)
    images = torch.randn(args.batch_size, *IMAGE_SHAPE).to(dev)
    labels = torch.randint(0, CLASSES, (args.batch_size,)).to(dev)
    wait_ns = [0.0]

    def step(timed):
        opt.zero_grad()
        F.cross_entropy(model(images), labels).backward()
        t0 = time.perf_counter_ns()
        opt.synchronize()  # what step() would do first; timed apart
        if timed:
            wait_ns[0] += time.perf_counter_ns() - t0
        with opt.skip_synchronize():
            opt.step()

    if rank == 0:
        print(f"model {args.model}: {params} parameters, input 3x32x32, batch "
              f"{args.batch_size} per rank, SGD lr 0.01 momentum 0.9\n{size} rank(s), {threads} "
              f"intra-op thread(s) per rank, {args.warmup} warmup + {args.steps} timed steps "
              f"on {dev} (Python chorus.torch, torch {torch.__version__})", flush=True)
    for _ in range(args.warmup):
        step(False)

    bg = find_thread("chorus-bg")
    step_boundary(dev)
    hvd.barrier()
    bg0 = thread_cpu_ns(bg) if bg else float("nan")
    me0, proc0 = thread_cpu_ns(), process_cpu_ns()
    step_ms = []
    start = time.perf_counter()
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step(True)
        step_boundary(dev)
        step_ms.append((time.perf_counter() - t0) * 1e3)
    elapsed = time.perf_counter() - start
    per_step = 1e6 * args.steps
    bg_ms = (thread_cpu_ns(bg) - bg0) / per_step if bg else float("nan")
    me, proc = (thread_cpu_ns() - me0) / per_step, (process_cpu_ns() - proc0) / per_step

    sums = hvd.allreduce(torch.tensor([bg_ms, me, proc, wait_ns[0] / per_step],
                                      dtype=torch.float64), op=hvd.Sum, name="bench.sums")
    slowest = hvd.allreduce(torch.tensor([elapsed], dtype=torch.float64), op=hvd.Max,
                            name="bench.max").item()
    enq = None if args.no_enqueue_probe else enqueue_overhead_us(dev)
    hvd.shutdown()
    if rank != 0:
        return 0
    n = size
    total = size * args.batch_size * args.steps / slowest
    print(f"images/s per rank: {total / n:.1f}, total: {total:.1f} "
          f"(median step {statistics.median(step_ms):.1f} ms on rank 0)")
    print(f"CPU ms per step, mean over ranks: chorus-bg {sums[0] / n:.2f}, trainer thread "
          f"{sums[1] / n:.1f}, whole process {sums[2] / n:.1f}; synchronize() waited "
          f"{sums[3] / n:.2f} for reductions")
    if enq:
        print(f"ENQUEUE from Python: allreduce_async {enq[0]:.2f} us per tensor; enqueue + "
              f"synchronize of 2000 1-element tensors {enq[1]:.2f} us per tensor (rank 0)")
    print(f"RESULT impl=chorus_py model={args.model} ranks={size} threads={threads} "
          f"batch={args.batch_size} device={dev.type} ips_rank={total / n:.2f} "
          f"ips_total={total:.2f} "
          f"bg_cpu_ms={sums[0] / n:.3f} trainer_cpu_ms={sums[1] / n:.2f} "
          f"process_cpu_ms={sums[2] / n:.2f} sync_wait_ms={sums[3] / n:.3f}"
          + (f" enqueue_us={enq[0]:.3f}" if enq else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
