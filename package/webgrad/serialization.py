"""webgrad.serialization (torch.serialization under as_torch): save/load and the allowlist of weights-only loads
(add_safe_globals, safe_globals, get_safe_globals, clear_safe_globals); see webgrad.io.serialization."""

from .io.checkpoint import load, save  # noqa: F401
from .io.serialization import (add_safe_globals, clear_safe_globals, get_safe_globals,  # noqa: F401
                               safe_globals)

__all__ = ["load", "save", "add_safe_globals", "clear_safe_globals", "get_safe_globals", "safe_globals"]
