#!/usr/bin/env python3
"""A PyTorch DistributedDataParallel script of the kind cluster guides give (a small CNN on
Fashion-MNIST, a DistributedSampler shard per rank, SGD with momentum), on the
torch.distributed backend that `import chorus.torch` registers. Only the backend's name and
that import say Chorus; --backend gloo runs the same script on PyTorch's own backend.

  mpirun -np 2 python3 examples/python/ddp_mnist.py --epochs 1
  mpirun -np 2 python3 examples/python/ddp_mnist.py --epochs 1 --backend gloo
  srun -N 2 --ntasks-per-node 2 --mpi=pmix python3 examples/python/ddp_mnist.py

The rank and the world size come from the launcher: RANK and WORLD_SIZE (torchrun), else
OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE (mpirun), else SLURM_PROCID and SLURM_NTASKS
(srun). The backend chorus needs a job that mpirun or srun started, whose ranks are these.
With the default --init-method env://, the ranks meet at MASTER_ADDR:MASTER_PORT, which
default to 127.0.0.1 and --port.
"""

import argparse
import gc
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data.distributed

import fashion_data

parser = argparse.ArgumentParser(description="DDP Fashion-MNIST training")
parser.add_argument("--backend", default="chorus", help="torch.distributed backend (chorus, gloo)")
parser.add_argument("--init-method", default="env://",
                    help="where the ranks meet (env://, tcp://HOST:PORT, file://PATH)")
parser.add_argument("--port", type=int, default=29500,
                    help="MASTER_PORT for env:// when the environment has none")
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--batch-size", type=int, default=64, help="training batch per rank")
parser.add_argument("--test-batch-size", type=int, default=1000)
parser.add_argument("--lr", type=float, default=0.05,
                    help="learning rate (DDP averages gradients: not scaled by the ranks)")
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--log-interval", type=int, default=20, help="batches between logs")
fashion_data.add_arguments(parser)


class Net(nn.Module):
    """Two 5x5 convolutions and two linear layers (about 80,000 parameters)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5)
        self.conv2 = nn.Conv2d(16, 32, 5)
        self.fc1 = nn.Linear(32 * 4 * 4, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def launcher_ranks():
    """(rank, world size) from the first launcher whose variables are set; (0, 1) alone."""
    env = os.environ
    for rank, size in [("RANK", "WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                       ("SLURM_PROCID", "SLURM_NTASKS")]:
        if rank in env and size in env:
            return int(env[rank]), int(env[size])
    return 0, 1


def train(epoch, model, optimizer, loader, sampler, rank, args):
    """One epoch; returns its wall time in seconds."""
    model.train()
    sampler.set_epoch(epoch)
    start = time.perf_counter()
    for batch_idx, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()  # DDP averages the gradients over the ranks inside backward
        optimizer.step()
        if batch_idx % args.log_interval == 0 and rank == 0:
            print(f"epoch {epoch} [{batch_idx * len(data)}/{len(sampler)} on rank 0]  "
                  f"loss {loss.item():.4f}", flush=True)
    return time.perf_counter() - start


def test(model, loader, held):
    """Test accuracy in percent over every rank's shard; the reduced tensor goes into `held`."""
    model.eval()
    counts = torch.zeros(2, dtype=torch.float64)  # correct, seen
    held.append(counts)
    with torch.no_grad():
        for data, target in loader:
            counts[0] += model(data).argmax(1).eq(target).sum().item()
            counts[1] += len(target)
    dist.all_reduce(counts)
    return 100 * (counts[0] / counts[1]).item()


def same_weights(model, world_size, held):
    """True when every rank holds rank 0's weights, as DDP promises (gathered, not reduced,
    so that an allreduce that did not reduce cannot hide the ranks' divergence)."""
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(world_size)]
    held.extend([flat] + gathered)
    dist.all_gather(gathered, flat)
    return all(torch.equal(g, gathered[0]) for g in gathered)


def main():
    args = parser.parse_args()
    rank, world_size = launcher_ranks()
    if args.init_method == "env://":
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(args.port))
    if args.backend == "chorus":
        import chorus.torch  # noqa: F401  registers the backend "chorus"
    dist.init_process_group(args.backend, init_method=args.init_method, rank=rank,
                            world_size=world_size)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # one thread per rank: ranks share the host's cores

    train_set = fashion_data.normalized(args.data_dir, train=True, limit=args.limit)
    test_set = fashion_data.normalized(args.data_dir, train=False)
    train_sampler = torch.utils.data.distributed.DistributedSampler(train_set)
    test_sampler = torch.utils.data.distributed.DistributedSampler(test_set, shuffle=False)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size,
                                               sampler=train_sampler)
    test_loader = torch.utils.data.DataLoader(test_set, batch_size=args.test_batch_size,
                                              sampler=test_sampler)

    model = nn.parallel.DistributedDataParallel(Net())  # broadcasts rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    if rank == 0:
        print(f"DDP on {args.backend}, {world_size} ranks, {len(train_set)} training images, "
              f"batch {args.batch_size} per rank, epochs 1..{args.epochs}", flush=True)
    held = []  # the tensors of the script's own collectives, kept until the teardown
    accuracy = 0.0
    for epoch in range(1, args.epochs + 1):
        seconds = train(epoch, model, optimizer, train_loader, train_sampler, rank, args)
        accuracy = test(model, test_loader, held)
        if rank == 0:
            images = len(train_sampler) * world_size
            print(f"epoch {epoch}  test accuracy {accuracy:.2f}%  {images / seconds:.0f} "
                  f"images/s  {seconds:.1f} s", flush=True)
    consistent = same_weights(model, world_size, held)
    if rank == 0:
        print(f"final test accuracy: {accuracy:.2f}% ({world_size} ranks, {args.backend})",
              flush=True)
    status = 0
    if not consistent:
        print(f"rank {rank}: the ranks' weights differ after training", file=sys.stderr)
        status = 1
    if accuracy < args.min_accuracy:
        print(f"accuracy {accuracy:.2f}% is below the floor {args.min_accuracy}%",
              file=sys.stderr)
        status = 1
    # The teardown, in this order for torch 1.13: destroying a group joins its threads (gloo's
    # and chorus's alike), and a thread that drops the last reference to a tensor Python has
    # let go of waits for the GIL, which the destroying thread holds. So the group goes, with
    # DDP that holds it, while `held` still holds the tensors of the last calls.
    dist.destroy_process_group()
    del model, optimizer
    gc.collect()
    return status


if __name__ == "__main__":
    sys.exit(main())
