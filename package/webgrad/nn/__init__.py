"""Neural-network building blocks (webgrad.nn), as torch.nn."""

from . import functional  # noqa: F401
