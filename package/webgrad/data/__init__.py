"""webgrad.data (also importable as webgrad.utils.data): datasets and batching, as torch.utils.data."""

from .collate import default_collate  # noqa: F401
from .dataset import Dataset, Subset, TensorDataset, random_split  # noqa: F401
from .loader import DataLoader  # noqa: F401
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,  # noqa: F401
                      SubsetRandomSampler, WeightedRandomSampler)
