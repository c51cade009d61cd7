"""ElasticSampler: a DistributedSampler that counts the samples the job has processed in
the epoch and, after a relaunch on another number of ranks, splits only the rest of the
epoch's permutation among them, as ``horovod.torch.elastic.ElasticSampler`` does.

The epoch's order is a fixed shuffle of every index (seeded by ``seed + epoch``); the
processed count is global (``record_batch`` adds a batch from every rank), so a commit
holds the same count on every rank, and the samples after it are those of the permutation
from that count on, dealt round-robin to the ranks and padded to an even split."""

import math
import random

import torch.utils.data

from chorus.torch.mpi_ops import rank, size


class ElasticSampler(torch.utils.data.Sampler):
    """``dataset`` of constant length; ``shuffle`` and ``seed`` as DistributedSampler's.
    Put it in the TorchState, call ``record_batch`` after each batch, and ``set_epoch`` when
    an epoch ends (it clears the count)."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0
        self.num_replicas = 0
        self.rank = 0
        self.remaining_indices = []
        self.num_samples = 0
        self.total_size = 0
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch ``epoch`` with nothing processed; call it at the end of an epoch."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Counts a batch of ``batch_size`` samples on every rank as processed."""
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def reset(self):
        """Splits the epoch's unprocessed samples among the job's ranks now."""
        self.num_replicas = size()
        self.rank = rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        dealt = self.remaining_indices[:]
        dealt += dealt[:self.total_size - len(dealt)]
        return iter(dealt[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples
