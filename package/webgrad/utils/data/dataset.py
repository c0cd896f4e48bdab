"""torch.utils.data.dataset: webgrad.data's datasets under PyTorch's module path."""

from ...data.dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset,  # noqa: F401
                             Subset, TensorDataset, random_split)
