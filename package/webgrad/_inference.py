"""torch.inference_mode and torch.is_inference_mode_enabled.

Inside inference_mode() nothing is recorded for autograd, as under no_grad (webgrad's graph costs nothing
more than that to skip); inference_mode(False) turns recording back on, as PyTorch's does. Tensors made inside are
ordinary tensors: PyTorch's "inference tensors" (refused later by autograd) are not reproduced, and
Tensor.is_inference() is not provided.
"""

import functools
import threading

from . import _autograd

_state = threading.local()


def is_inference_mode_enabled():
    """True inside an inference_mode() block (or a function it decorates)."""
    return getattr(_state, "enabled", False)


class inference_mode:
    """Context manager and decorator: `with torch.inference_mode():`, `@torch.inference_mode()`,
    `@torch.inference_mode` and `inference_mode(mode=False)`."""

    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, bool):  # used bare as a decorator: @torch.inference_mode
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode=True):
        if not isinstance(mode, bool):
            raise TypeError(f"inference_mode(): mode must be a bool, got {type(mode).__name__}")
        self.mode = mode
        self._saved = []

    def __enter__(self):
        self._saved.append((is_inference_mode_enabled(), _autograd.is_grad_enabled()))
        _state.enabled = self.mode
        _autograd.set_grad_enabled(not self.mode)
        return self

    def __exit__(self, *exc):
        inference, grad = self._saved.pop()
        _state.enabled = inference
        _autograd.set_grad_enabled(grad)
        return False

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)
        return wrapper

    def clone(self):
        return inference_mode(self.mode)
