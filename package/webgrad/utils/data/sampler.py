"""torch.utils.data.sampler: webgrad.data's samplers under PyTorch's module path."""

from ...data.sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,  # noqa: F401
                             SubsetRandomSampler, WeightedRandomSampler)
