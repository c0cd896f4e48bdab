"""torch.utils.data.dataloader: webgrad.data's DataLoader under PyTorch's module path."""

from ...data.collate import default_collate, default_convert  # noqa: F401
from ...data.loader import DataLoader, get_worker_info  # noqa: F401
