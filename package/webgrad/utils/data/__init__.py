"""`from webgrad.utils.data import DataLoader` works as in PyTorch: the same objects as webgrad.data, with
PyTorch's submodule paths (torch.utils.data.dataloader, .sampler, .dataset, .distributed)."""

from ...data import (ChainDataset, ConcatDataset, DataLoader, Dataset, IterableDataset, StackDataset,  # noqa: F401
                     Subset, TensorDataset, default_collate, default_convert, get_worker_info, random_split)
from ...data import (BatchSampler, DistributedSampler, RandomSampler, Sampler, SequentialSampler,  # noqa: F401
                     SubsetRandomSampler, WeightedRandomSampler)
from . import dataloader, dataset, distributed, sampler  # noqa: F401,E402
