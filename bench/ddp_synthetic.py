#!/usr/bin/python3
"""The synthetic trainer of examples/synthetic_benchmark.cc under PyTorch DDP (gloo, or nccl).

Same models (layers, parameter counts), same random 3x32x32 input, batch, loss, optimizer
(SGD lr 0.01, momentum 0.9), thread count and step counts as the Chorus program, and the
same output lines, so bench/run_torch_bench.sh can compare the two.

--device cuda puts the model and the data on cuda:(local rank % device count) and uses the
nccl process-group backend instead of gloo. NCCL takes one GPU per rank, so it needs as many
devices as ranks on each host (it exits 2 otherwise). Each timed step ends with
torch.cuda.synchronize(). Without a CUDA device it exits 77.

Launch with mpirun, like the Chorus program (rank and size come from Open MPI's
variables; the ranks meet at MASTER_ADDR:MASTER_PORT, default 127.0.0.1:29533):

  mpirun -np 2 --bind-to none /usr/bin/python3 bench/ddp_synthetic.py --model cnn

Without mpirun it runs as a single rank. Needs only Debian's python3-torch (on the CPU).
"""

import argparse
import os
import resource
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

IMAGE_SHAPE = (3, 32, 32)
CLASSES = 10
# The exit code of --device cuda without a CUDA device (CTest's skip code in Chorus's tests).
NO_CUDA_EXIT = 77


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and an identity or 1x1-projection shortcut."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.shortcut is None else self.shortcut(x)))


class SyntheticCnn(nn.Module):
    """examples/synthetic_models.cc's "cnn": 4,906,282 parameters."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 32, 3, 1, 1, bias=False)
        self.stem_bn = nn.BatchNorm2d(32)
        blocks, cin = [], 32
        for i, width in enumerate([32, 64, 128, 256]):
            blocks.append(BasicBlock(cin, width, 1 if i == 0 else 2))
            cin = width
        self.blocks = nn.Sequential(*blocks)
        self.fc1 = nn.Linear(256 * 4 * 4, 896)
        self.fc2 = nn.Linear(896, CLASSES)

    def forward(self, x):
        x = self.blocks(F.relu(self.stem_bn(self.stem(x))))
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class SyntheticMlp(nn.Module):
    """examples/synthetic_models.cc's "mlp": 3072-2048-2048-2048-10, 14,706,698 parameters."""

    def __init__(self):
        super().__init__()
        widths = [3 * 32 * 32, 2048, 2048, 2048, CLASSES]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:]))

    def forward(self, x):
        x = x.flatten(1)
        for layer in self.layers[:-1]:
            x = F.relu(layer(x))
        return self.layers[-1](x)


def thread_cpu_ns():
    """CPU time of the calling thread (Linux)."""
    return time.clock_gettime_ns(time.CLOCK_THREAD_CPUTIME_ID)


def process_cpu_ns():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return (u.ru_utime + u.ru_stime) * 1e9


def trainer_arguments(description):
    """The options every synthetic trainer script shares (run_torch_bench.sh passes all of
    them but --device, which stays cpu there)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--model", choices=["mlp", "cnn"], default="cnn")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=0,
                   help="intra-op threads per rank (default: cores / ranks on this host)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cuda: model and data on cuda:(local rank %% device count)")
    return p


def cuda_missing(device):
    """True, after saying why on stderr, when `device` is "cuda" and torch sees no CUDA
    device. Callers return NO_CUDA_EXIT before any rendezvous, so every rank exits alike."""
    if device != "cuda" or torch.cuda.is_available():
        return False
    print(f"{os.path.basename(sys.argv[0])}: --device cuda: no CUDA device (torch "
          f"{torch.__version__}, built for CUDA {torch.version.cuda or 'none'})",
          file=sys.stderr, flush=True)
    return True


def trainer_device(device, local_rank):
    """The torch.device of --device: the CPU, or this rank's GPU (made current)."""
    if device == "cpu":
        return torch.device("cpu")
    dev = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    return dev


def step_boundary(dev):
    """Waits for the GPU's queued work, so that a step's wall time includes it."""
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def main():
    p = trainer_arguments(__doc__.splitlines()[0])
    p.add_argument("--baseline-ips", type=float, default=0.0)
    args = p.parse_args()
    if cuda_missing(args.device):
        return NO_CUDA_EXIT

    env = os.environ
    rank = int(env.get("OMPI_COMM_WORLD_RANK", env.get("RANK", "0")))
    size = int(env.get("OMPI_COMM_WORLD_SIZE", env.get("WORLD_SIZE", "1")))
    local_rank = int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", env.get("LOCAL_RANK", "0")))
    local_size = int(env.get("OMPI_COMM_WORLD_LOCAL_SIZE", env.get("LOCAL_WORLD_SIZE", "1")))
    threads = args.threads or max(1, len(os.sched_getaffinity(0)) // max(1, local_size))
    torch.set_num_threads(threads)
    dev = trainer_device(args.device, local_rank)
    cuda = dev.type == "cuda"
    backend = "nccl" if cuda else "gloo"
    if cuda and local_size > torch.cuda.device_count():
        print(f"ddp_synthetic.py: nccl takes one GPU per rank: {local_size} ranks on this host, "
              f"{torch.cuda.device_count()} CUDA device(s)", file=sys.stderr, flush=True)
        return 2

    addr = env.get("MASTER_ADDR", "127.0.0.1")
    port = env.get("MASTER_PORT", "29533")
    dist.init_process_group(backend, init_method=f"tcp://{addr}:{port}", rank=rank,
                            world_size=size)

    torch.manual_seed(1)
    model = SyntheticMlp() if args.model == "mlp" else SyntheticCnn()
    model.train()
    params = sum(t.numel() for t in model.parameters())
    model.to(dev)
    on_gpu = dict(device_ids=[dev.index], output_device=dev.index) if cuda else {}
    ddp = nn.parallel.DistributedDataParallel(model, **on_gpu)  # broadcasts rank 0's parameters
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)

    # Generated on the CPU, so that both devices train on the same data.
    torch.manual_seed(1000 + rank)
    images = torch.randn(args.batch_size, *IMAGE_SHAPE).to(dev)
    labels = torch.randint(0, CLASSES, (args.batch_size,)).to(dev)

    def step():
        opt.zero_grad()
        F.cross_entropy(ddp(images), labels).backward()  # DDP reduces inside backward
        opt.step()

    if rank == 0:
        print(f"model {args.model}: {params} parameters, input 3x32x32, batch "
              f"{args.batch_size} per rank, SGD lr 0.01 momentum 0.9\n{size} rank(s), {threads} "
              f"intra-op thread(s) per rank, {args.warmup} warmup + {args.steps} timed steps "
              f"on {dev} (PyTorch {torch.__version__} DDP, {backend})", flush=True)
    for _ in range(args.warmup):
        step()

    step_boundary(dev)
    dist.barrier(**({"device_ids": [dev.index]} if cuda else {}))
    me0, proc0 = thread_cpu_ns(), process_cpu_ns()
    step_ms = []
    start = time.perf_counter()
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        step_boundary(dev)
        step_ms.append((time.perf_counter() - t0) * 1e3)
    elapsed = time.perf_counter() - start
    per_step = 1e6 * args.steps
    me, proc = (thread_cpu_ns() - me0) / per_step, (process_cpu_ns() - proc0) / per_step

    # nccl reduces device tensors only.
    sums = torch.tensor([me, proc], dtype=torch.float64, device=dev)
    dist.all_reduce(sums)
    slowest = torch.tensor([elapsed], dtype=torch.float64, device=dev)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    sums, slowest = sums.cpu(), slowest.cpu()
    if rank != 0:
        return 0

    total = size * args.batch_size * args.steps / slowest.item()
    print(f"images/s per rank: {total / size:.1f}, total: {total:.1f} "
          f"(median step {statistics.median(step_ms):.1f} ms on rank 0)")
    if args.baseline_ips > 0:
        print(f"scaling: {total / args.baseline_ips:.3f}x the 1-rank {args.baseline_ips:.1f} "
              f"images/s; efficiency {100 * total / (size * args.baseline_ips):.1f}% of {size} "
              f"x 1-rank (on one host the ranks share the cores the 1-rank run had: there 1.0x "
              f"is ideal)")
    print(f"CPU ms per step, mean over ranks: trainer thread {sums[0] / size:.1f}, whole "
          f"process {sums[1] / size:.1f} ({backend}'s threads included)")
    print(f"RESULT impl=ddp model={args.model} ranks={size} threads={threads} "
          f"batch={args.batch_size} device={dev.type} ips_rank={total / size:.2f} "
          f"ips_total={total:.2f} "
          f"bg_cpu_ms=nan trainer_cpu_ms={sums[0] / size:.2f} "
          f"process_cpu_ms={sums[1] / size:.2f} sync_wait_ms=nan", flush=True)
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    # Skip the interpreter's teardown: with PyTorch 1.13, destroying the DDP reducer's gloo
    # process group at exit can deadlock (its worker thread waits for the GIL that the
    # exiting main thread holds while joining it).
    os._exit(status)
