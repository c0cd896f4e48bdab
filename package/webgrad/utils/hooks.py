"""webgrad.utils.hooks, as torch.utils.hooks: the handle every register_*hook call returns."""

from .._autograd import RemovableHandle  # noqa: F401
