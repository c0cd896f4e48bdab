"""torch.accelerator: the current accelerator is the WebGPU device when an adapter exists.

    device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else "cpu"

picks `device(type='webgpu')` on a machine (or browser) with WebGPU, as PyTorch picks "cuda" or "mps".
"""

from . import webgpu as _webgpu
from .devices import device as _device


def is_available():
    """True when a WebGPU adapter can be used (asking for the device the first time)."""
    return _webgpu.is_available()


def current_accelerator(check_available=False):
    """device("webgpu") if WebGPU is available, else None (as torch.accelerator.current_accelerator).
    check_available is accepted for PyTorch's signature; the answer is always checked here."""
    return _device("webgpu") if is_available() else None


def device_count():
    """1 with WebGPU (webgrad drives one adapter), else 0."""
    return 1 if is_available() else 0


def current_device_index():
    return 0 if is_available() else -1


def synchronize(device=None):
    """Wait until all queued GPU work has finished."""
    _webgpu.synchronize()
