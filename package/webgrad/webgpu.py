"""WebGPU status and control: is it available, what is the adapter, wait for queued work.

In the browser (Pyodide) the GPU is reached through ``navigator.gpu``; natively through wgpu-py. Where
Python cannot block on a JS promise (Pyodide without JSPI), call ``await webgrad.webgpu.init_async()``
once before using the "webgpu" device, and read results with the async methods.

``Kernel`` runs WGSL you write on webgrad tensors (backends/webgpu/custom.py); pair a forward and a
backward kernel in a ``webgrad.autograd.Function`` to make it differentiable.
"""

import sys

from . import devices as _devices
from ._backends.webgpu import runtime as _runtime
from ._backends.webgpu.custom import Kernel  # noqa: F401  (your own WGSL on tensors; see its docstring)


def is_available():
    """True if a WebGPU device can be used (creating it on first call)."""
    try:
        _runtime.default_runtime()
        return True
    except RuntimeError:
        if sys.platform == "emscripten":
            from ._backends.webgpu.browser import has_webgpu

            return has_webgpu()  # present, but only reachable through init_async()
        return False


async def init_async():
    """Create the WebGPU device without blocking (required in a browser without JSPI)."""
    await _runtime.default_runtime_async()


def adapter_info():
    """A dict describing the adapter: vendor, architecture, device, description, backend, limits."""
    return _runtime.default_runtime().binding.info()


def synchronize():
    """Submit all queued GPU work and wait until it has finished."""
    if _runtime._default_runtime is not None:
        _runtime._default_runtime.synchronize()


def reset():
    """Let go of the WebGPU device: the next "webgpu" tensor opens a new one. For recovering from a lost
    device (a GPU reset, a driver update). Tensors made before live on the old device: make them again."""
    _runtime.reset_default_runtime()
    _devices.forget("webgpu")
