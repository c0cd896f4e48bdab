"""torch.signal: window functions (webgrad.signal.windows)."""

from . import windows  # noqa: F401
