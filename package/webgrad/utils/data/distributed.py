"""torch.utils.data.distributed: DistributedSampler (webgrad.data.distributed) under PyTorch's module path."""

from ...data.distributed import DistributedSampler  # noqa: F401
