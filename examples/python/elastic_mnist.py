#!/usr/bin/env python3
"""Elastic Fashion-MNIST training in the form of Horovod's elastic PyTorch examples: the
training function under ``hvd.elastic.run``, a TorchState holding the model, the optimizer,
an ElasticSampler and the epoch, a commit every few batches. Only the import names Chorus.
Launched by the supervisor, it survives the loss of ranks and hosts:

  chorusrun --max-restarts 3 --min-np 2 -H a:2,b:2,c:2 python3 examples/python/elastic_mnist.py

A relaunched job resumes from the newest commit a node holds, on the ranks it has; the
reset callback scales the learning rate to the new number of ranks. If every node was lost,
the script's own checkpoint of the last finished epoch (--checkpoint) is the fallback.
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F
import torch.optim as optim

import chorus.torch as hvd  # was: import horovod.torch as hvd

import fashion_data
from mnist import Net  # the model of examples/python/mnist.py

parser = argparse.ArgumentParser(description="Horovod-style elastic Fashion-MNIST training")
parser.add_argument("--batch-size", type=int, default=64, help="training batch per rank")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.01, help="learning rate per rank")
parser.add_argument("--momentum", type=float, default=0.5)
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--batches-per-commit", type=int, default=20)
parser.add_argument("--log-interval", type=int, default=20, help="batches between logs")
parser.add_argument("--data-dir", default=None, help="cache for the uncompressed dataset")
parser.add_argument("--limit", type=int, default=0,
                    help="use only the first N training images (0: all)")
parser.add_argument("--checkpoint", default=None,
                    help="file for the on-disk checkpoint of each finished epoch")
parser.add_argument("--save-weights", default=None,
                    help="rank 0 writes the final model's state_dict here")
parser.add_argument("--sample-log", default=None,
                    help="directory where each rank records the samples of each batch it "
                         "trained on (rank<R>.log), to check a resumed epoch")


def main():
    args = parser.parse_args()
    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # one thread per rank: ranks share the host's cores

    train_set = fashion_data.normalized(args.data_dir, train=True, limit=args.limit)
    train_sampler = hvd.elastic.ElasticSampler(train_set, seed=args.seed)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size,
                                               sampler=train_sampler)

    model = Net()
    optimizer = optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=args.momentum)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    first_epoch = 1
    if args.checkpoint and os.path.exists(args.checkpoint):
        saved = torch.load(args.checkpoint)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        first_epoch = saved["epoch"] + 1
        if hvd.rank() == 0:
            print(f"resumed from the checkpoint of epoch {saved['epoch']}", flush=True)

    sample_log = None
    if args.sample_log:
        os.makedirs(args.sample_log, exist_ok=True)
        sample_log = open(os.path.join(args.sample_log, f"rank{hvd.rank()}.log"), "a")

    def train_epoch(state):
        state.model.train()
        order = list(state.train_sampler)  # this rank's samples, in the loader's order
        for batch_idx, (data, target) in enumerate(train_loader):
            state.optimizer.zero_grad()
            loss = F.nll_loss(state.model(data), target)
            loss.backward()
            state.optimizer.step()
            if sample_log:
                taken = order[batch_idx * args.batch_size:(batch_idx + 1) * args.batch_size]
                # Which start of the job trained it: a launch, or a round after a reset in place.
                sample_log.write(f"{max(hvd.elastic.start_number(), 1)} {state.epoch} {state.train_sampler.processed_num} "
                                 f"{hvd.size()} {' '.join(map(str, taken))}\n")
            state.batch = batch_idx
            state.train_sampler.record_batch(batch_idx, args.batch_size)
            if batch_idx % args.log_interval == 0 and hvd.rank() == 0:
                print(f"epoch {state.epoch} batch {batch_idx}/{len(train_loader)} "
                      f"({hvd.size()} ranks)  loss {loss.item():.4f}", flush=True)
            if (batch_idx + 1) % args.batches_per_commit == 0:
                if sample_log:
                    sample_log.flush()
                commit(state)

    def end_epoch(state):
        if args.checkpoint and hvd.rank() == 0:
            torch.save({"model": state.model.state_dict(),
                        "optimizer": state.optimizer.state_dict(), "epoch": state.epoch},
                       args.checkpoint + ".tmp")
            os.replace(args.checkpoint + ".tmp", args.checkpoint)
        state.epoch += 1
        state.batch = 0
        state.train_sampler.set_epoch(state.epoch)
        if sample_log:
            sample_log.flush()
        commit(state)

    def commit(state):
        # Dropout draws random numbers: the commit keeps the generator's state, so that a job
        # reset or relaunched from it draws what this one would have.
        state.rng = torch.get_rng_state()
        state.commit()

    @hvd.elastic.run
    def train(state):
        while state.epoch <= args.epochs:
            train_epoch(state)
            end_epoch(state)

    def on_state_reset():
        torch.set_rng_state(state.rng)
        for group in optimizer.param_groups:
            group["lr"] = args.lr * hvd.size()

    train_sampler.set_epoch(first_epoch)
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer, train_sampler=train_sampler,
                                   epoch=first_epoch, batch=0, rng=torch.get_rng_state())
    state.register_reset_callbacks([on_state_reset])
    train(state)

    if hvd.rank() == 0:
        print(f"finished {args.epochs} epochs on {hvd.size()} ranks", flush=True)
        if args.save_weights:
            torch.save(model.state_dict(), args.save_weights)
    if sample_log:
        sample_log.close()
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
