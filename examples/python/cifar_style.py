#!/usr/bin/env python3
"""The Horovod script of the Compute Canada PyTorch guide (a small LeNet-style CNN trained
with SGD, one DistributedSampler shard per rank, launched with `srun python ...`), written
for Fashion-MNIST from Debian's dataset-fashion-mnist instead of CIFAR-10. A horovod.torch
script: only the import names Chorus.

  srun python3 examples/python/cifar_style.py --batch_size 256
  mpirun -np 2 python3 examples/python/cifar_style.py --max_epochs 1
"""

import argparse
import datetime
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data.distributed
import torchvision.transforms as transforms
from torch.utils.data import DataLoader
from torchvision.datasets import FashionMNIST

import chorus.torch as hvd  # was: import horovod.torch as hvd

import fashion_data

parser = argparse.ArgumentParser(description="Fashion-MNIST classification, Horovod-style")
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--batch_size", type=int, default=128)
parser.add_argument("--max_epochs", type=int, default=1)
parser.add_argument("--num_workers", type=int, default=0)
parser.add_argument("--data_dir", default=None)
parser.add_argument("--limit", type=int, default=0, help="first N training images only")
parser.add_argument("--min_accuracy", type=float, default=0.0,
                    help="exit 1 when the final test accuracy (%%) is below this")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 4 * 4, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def train(epoch, net, criterion, optimizer, loader, rank, device):
    net.train()
    seen, correct, loss_sum = 0, 0, 0.0
    epoch_start = time.time()
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        outputs = net(inputs)
        loss = criterion(outputs, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss_sum += loss.item() * targets.size(0)
        seen += targets.size(0)
        correct += outputs.argmax(1).eq(targets).sum().item()
    elapsed = datetime.timedelta(seconds=time.time() - epoch_start)
    print(f"From Rank: {rank}, epoch {epoch}: training loss {loss_sum / seen:.4f}, "
          f"accuracy {100 * correct / seen:.1f}%, time {elapsed}", flush=True)


def evaluate(net, loader, device):
    net.eval()
    correct, total = torch.zeros(1), torch.zeros(1)
    with torch.no_grad():
        for inputs, targets in loader:
            outputs = net(inputs.to(device))
            correct += outputs.argmax(1).eq(targets.to(device)).sum().item()
            total += targets.size(0)
    # Sum the counts of every rank's shard of the test set.
    correct = hvd.allreduce(correct, op=hvd.Sum, name="test.correct")
    total = hvd.allreduce(total, op=hvd.Sum, name="test.total")
    return 100 * correct.item() / total.item()


def main():
    args = parser.parse_args()
    hvd.init()
    print("Starting...", flush=True)
    local_rank = hvd.local_rank()
    global_rank = hvd.rank()
    device = torch.device("cpu")
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    torch.set_num_threads(1)
    torch.manual_seed(1)

    net = Net().to(device)
    print(f"From Rank: {global_rank}, ==> Preparing data..", flush=True)
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])
    root = fashion_data.prepare(args.data_dir)
    dataset_train = FashionMNIST(root=root, train=True, download=False, transform=transform)
    if args.limit:
        dataset_train = torch.utils.data.Subset(dataset_train, range(args.limit))
    dataset_test = FashionMNIST(root=root, train=False, download=False, transform=transform)
    train_sampler = torch.utils.data.distributed.DistributedSampler(
        dataset_train, num_replicas=hvd.size(), rank=global_rank)
    train_loader = DataLoader(dataset_train, batch_size=args.batch_size,
                              num_workers=args.num_workers, sampler=train_sampler)
    test_sampler = torch.utils.data.distributed.DistributedSampler(
        dataset_test, num_replicas=hvd.size(), rank=global_rank, shuffle=False)
    test_loader = DataLoader(dataset_test, batch_size=1000, sampler=test_sampler)

    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=net.named_parameters())
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)

    for epoch in range(args.max_epochs):
        train_sampler.set_epoch(epoch)
        train(epoch, net, criterion, optimizer, train_loader, global_rank, device)
    accuracy = evaluate(net, test_loader, device)
    if global_rank == 0:
        print(f"final test accuracy: {accuracy:.2f}% ({hvd.size()} ranks)", flush=True)
    hvd.shutdown()
    return 0 if accuracy >= args.min_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
