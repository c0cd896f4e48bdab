"""webgrad.utils: the module paths PyTorch users import from (torch.utils.data -> webgrad.utils.data)."""

from . import data  # noqa: F401
