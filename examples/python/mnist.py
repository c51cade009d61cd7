#!/usr/bin/env python3
"""The classic Horovod PyTorch MNIST example, written for Fashion-MNIST (Debian's
dataset-fashion-mnist). It is a horovod.torch script: only the import names Chorus.

  mpirun -np 2 python3 examples/python/mnist.py --epochs 1
  srun -N 2 --ntasks-per-node 2 --mpi=pmix python3 examples/python/mnist.py
"""

import argparse
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data.distributed

import chorus.torch as hvd  # was: import horovod.torch as hvd

import fashion_data

parser = argparse.ArgumentParser(description="Horovod-style Fashion-MNIST training")
parser.add_argument("--batch-size", type=int, default=64, help="training batch per rank")
parser.add_argument("--test-batch-size", type=int, default=1000)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.01, help="learning rate per rank")
parser.add_argument("--momentum", type=float, default=0.5)
parser.add_argument("--no-cuda", action="store_true", default=False)
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--log-interval", type=int, default=20, help="batches between logs")
parser.add_argument("--fp16-allreduce", action="store_true", default=False)
parser.add_argument("--use-adasum", action="store_true", default=False)
parser.add_argument("--gradient-predivide-factor", type=float, default=1.0)
parser.add_argument("--powersgd", type=int, default=0, metavar="R",
                    help="Chorus's: gradients of matrix-shaped parameters travel as rank-R "
                         "PowerSGD factors (0: off)")
parser.add_argument("--powersgd-start", type=int, default=100,
                    help="steps averaged uncompressed before PowerSGD starts")
fashion_data.add_arguments(parser)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        return F.log_softmax(self.fc2(x), dim=1)


def metric_average(value, name):
    return hvd.allreduce(torch.tensor(value), name=name).item()


def train(epoch, model, optimizer, loader, sampler, args):
    model.train()
    sampler.set_epoch(epoch)
    for batch_idx, (data, target) in enumerate(loader):
        if args.cuda:
            data, target = data.cuda(), target.cuda()
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0 and hvd.rank() == 0:
            print(f"epoch {epoch} [{batch_idx * len(data)}/{len(sampler)} on rank 0]  "
                  f"loss {loss.item():.4f}", flush=True)


def test(model, loader, sampler, args):
    model.eval()
    loss_sum, correct = 0.0, 0.0
    with torch.no_grad():
        for data, target in loader:
            if args.cuda:
                data, target = data.cuda(), target.cuda()
            output = model(data)
            loss_sum += F.nll_loss(output, target, reduction="sum").item()
            correct += output.argmax(1).eq(target).sum().item()
    # Each rank saw its shard: average the per-rank means over the ranks.
    loss = metric_average(loss_sum / len(sampler), "avg_loss")
    accuracy = metric_average(correct / len(sampler), "avg_accuracy")
    if hvd.rank() == 0:
        print(f"test set: average loss {loss:.4f}, accuracy {100 * accuracy:.2f}%", flush=True)
    return 100 * accuracy


def loaders(args):
    """This rank's training and test loaders, and their samplers."""
    train_set = fashion_data.normalized(args.data_dir, train=True, limit=args.limit)
    test_set = fashion_data.normalized(args.data_dir, train=False)
    train_sampler = torch.utils.data.distributed.DistributedSampler(
        train_set, num_replicas=hvd.size(), rank=hvd.rank())
    test_sampler = torch.utils.data.distributed.DistributedSampler(
        test_set, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=False)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size,
                                               sampler=train_sampler)
    test_loader = torch.utils.data.DataLoader(test_set, batch_size=args.test_batch_size,
                                              sampler=test_sampler)
    return train_loader, train_sampler, test_loader, test_sampler


def main():
    args = parser.parse_args()
    args.cuda = not args.no_cuda and torch.cuda.is_available()

    hvd.init()
    torch.manual_seed(args.seed)
    if args.cuda:
        torch.cuda.set_device(hvd.local_rank())
        torch.cuda.manual_seed(args.seed)
    torch.set_num_threads(1)  # one thread per rank: ranks share the host's cores

    train_loader, train_sampler, test_loader, test_sampler = loaders(args)

    model = Net()
    # Adasum needs no learning-rate scaling; averaging does (the global batch grows).
    lr_scaler = 1 if args.use_adasum else hvd.size()
    if args.cuda:
        model.cuda()
    optimizer = optim.SGD(model.parameters(), lr=args.lr * lr_scaler, momentum=args.momentum)

    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters(), compression=compression,
        op=hvd.Adasum if args.use_adasum else hvd.Average,
        gradient_predivide_factor=args.gradient_predivide_factor,
        powersgd=hvd.PowerSGD(matrix_approximation_rank=args.powersgd,
                              start_powerSGD_iter=args.powersgd_start) if args.powersgd else None)

    accuracy = 0.0
    for epoch in range(1, args.epochs + 1):
        train(epoch, model, optimizer, train_loader, train_sampler, args)
        accuracy = test(model, test_loader, test_sampler, args)
    return finish(accuracy, args, f"{hvd.size()} ranks")


def finish(accuracy, args, how):
    """Prints the final accuracy, shuts Chorus down, and returns the exit status: 1 below
    --min-accuracy."""
    if hvd.rank() == 0:
        print(f"final test accuracy: {accuracy:.2f}% ({how})", flush=True)
    hvd.shutdown()
    if accuracy < args.min_accuracy:
        print(f"accuracy {accuracy:.2f}% is below the floor {args.min_accuracy}%",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
