"""torch.utils.data.dataset: webgrad.data's datasets under PyTorch's module path."""

from ...data.dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset,  # noqa: F401
                             TensorDataset, random_split)
