"""`from webgrad.utils.data import DataLoader` works as in PyTorch: the same objects as webgrad.data."""

from ..data import DataLoader, Dataset, Subset, TensorDataset, default_collate, random_split  # noqa: F401
from ..data import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,  # noqa: F401
                    WeightedRandomSampler)
