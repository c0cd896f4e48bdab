"""webgrad.utils: the module paths PyTorch users import from (torch.utils.data -> webgrad.utils.data,
torch.utils.checkpoint), and torch.utils.swap_tensors."""

from . import checkpoint, data  # noqa: F401
from .swap import swap_tensors  # noqa: F401
