"""DistributedSampler, as torch.utils.data.distributed: each process of a distributed run reads its own
share of the dataset (every num_replicas-th index from `rank`), padded or trimmed to equal shares.

num_replicas and rank default to webgrad.distributed's world: one process, which reads everything. The
order of an epoch comes from seed + epoch (call set_epoch(epoch) each epoch to reshuffle), the same on
every process, drawn as webgrad's other samplers draw (not PyTorch's random stream).
"""

import math

from .. import distributed
from .. import random as _random
from .sampler import Sampler


class DistributedSampler(Sampler):
    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        num_replicas = distributed.get_world_size() if num_replicas is None else num_replicas
        rank = distributed.get_rank() if rank is None else rank
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.epoch, self.shuffle, self.seed, self.drop_last = 0, shuffle, seed, drop_last
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)  # drop the tail
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        indices = list(range(len(self.dataset)))
        if self.shuffle:
            _random.Generator().manual_seed(self.seed + self.epoch).python_random().shuffle(indices)
        if self.drop_last:
            indices = indices[:self.total_size]
        elif len(indices) < self.total_size:  # repeat from the start to make the shares equal
            padding = self.total_size - len(indices)
            indices += (indices * math.ceil(padding / len(indices)))[:padding]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        self.epoch = epoch
