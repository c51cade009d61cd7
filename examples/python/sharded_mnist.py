#!/usr/bin/env python3
"""mnist.py's network trained with sharded data parallelism: hvd.ShardedOptimizer keeps
Adam's state (stage 1), and the reduced gradients too (stage 2), for 1/P of the parameters
on each rank. After every epoch the ranks consolidate the optimizer's state and rank 0 saves
one checkpoint, which --resume reads on any number of ranks.

  mpirun -np 4 python3 examples/python/sharded_mnist.py --epochs 2 --stage 2
"""

import argparse
import os
import sys

import torch
import torch.optim as optim

import chorus.torch as hvd

import fashion_data
from mnist import Net, finish, loaders, test, train

parser = argparse.ArgumentParser(description="Sharded data-parallel Fashion-MNIST training")
parser.add_argument("--stage", type=int, default=2, choices=(1, 2))
parser.add_argument("--batch-size", type=int, default=64, help="training batch per rank")
parser.add_argument("--test-batch-size", type=int, default=1000)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.001, help="Adam's learning rate per rank")
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--log-interval", type=int, default=20, help="batches between logs")
parser.add_argument("--checkpoint", default="sharded-mnist-checkpoint.pt")
parser.add_argument("--resume", action="store_true")
fashion_data.add_arguments(parser)


def main():
    args = parser.parse_args()
    args.cuda = False
    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # one thread per rank: ranks share the host's cores

    train_loader, train_sampler, test_loader, test_sampler = loaders(args)

    model = Net()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    # Wrapped before its first step; from here on the optimizer's state is sharded.
    optimizer = hvd.ShardedOptimizer(optim.Adam(model.parameters(), lr=args.lr * hvd.size()),
                                     named_parameters=model.named_parameters(),
                                     stage=args.stage)
    first = 1
    if args.resume and os.path.exists(args.checkpoint):
        saved = torch.load(args.checkpoint)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])  # resharded onto this many ranks
        first = saved["epoch"] + 1
        if hvd.rank() == 0:
            print(f"resumed from {args.checkpoint} after epoch {saved['epoch']}", flush=True)

    accuracy = 0.0
    for epoch in range(first, args.epochs + 1):
        train(epoch, model, optimizer, train_loader, train_sampler, args)
        accuracy = test(model, test_loader, test_sampler, args)
        state = optimizer.consolidated_state_dict()  # collective: every rank calls it
        if hvd.rank() == 0:
            torch.save({"model": model.state_dict(), "optimizer": state, "epoch": epoch},
                       args.checkpoint)
    return finish(accuracy, args, f"{hvd.size()} ranks, stage {args.stage}")


if __name__ == "__main__":
    sys.exit(main())
