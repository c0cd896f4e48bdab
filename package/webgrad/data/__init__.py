"""webgrad.data (also importable as webgrad.utils.data): datasets and batching, as torch.utils.data."""

from .collate import default_collate, default_convert  # noqa: F401
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset, Subset,  # noqa: F401
                      TensorDataset, random_split)
from .distributed import DistributedSampler  # noqa: F401
from .loader import DataLoader, get_worker_info  # noqa: F401
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,  # noqa: F401
                      SubsetRandomSampler, WeightedRandomSampler)
