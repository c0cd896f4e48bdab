"""webgrad.utils: the module paths PyTorch users import from (torch.utils.data -> webgrad.utils.data,
torch.utils.checkpoint)."""

from . import checkpoint, data  # noqa: F401
