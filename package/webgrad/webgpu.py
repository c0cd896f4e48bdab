"""WebGPU status and control: is it available, what is the adapter, wait for queued work.

In the browser (Pyodide) the GPU is reached through ``navigator.gpu``; natively through wgpu-py. Where
Python cannot block on a JS promise (Pyodide without JSPI), call ``await webgrad.webgpu.init_async()``
once before using the "webgpu" device, and read results with the async methods.

``memory_allocated()``, ``max_memory_allocated()``, ``reset_peak_memory_stats()``, ``memory_reserved()``
and ``empty_cache()`` report and release GPU memory as ``torch.cuda``'s functions of those names do.

``Kernel`` runs WGSL you write on webgrad tensors (custom_kernel.py); pair a forward and a
backward kernel in a ``webgrad.autograd.Function`` to make it differentiable.
"""

import sys

from . import devices as _devices
from ._backends.webgpu import runtime as _runtime
from .custom_kernel import Kernel  # noqa: F401  (your own WGSL on tensors; see its docstring)


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


# ------------------------------------------------------------------ memory, with torch.cuda's meanings
# Bytes of GPU buffers that hold tensors (pooled in size classes: 256 bytes, then steps of 1/8 of a power
# of two); the runtime's own small buffers (parameters, read-back staging) are not counted. `device` is
# accepted for PyTorch compatibility: there is one WebGPU device. Nothing is created to answer: before the
# device exists, every figure is 0.


def memory_allocated(device=None):
    """Bytes of GPU memory held by live tensors (and by graphs' tensors while those live)."""
    rt = _runtime._default_runtime
    return rt.pool.allocated if rt is not None else 0


def max_memory_allocated(device=None):
    """The highest memory_allocated() since the device was created or reset_peak_memory_stats()."""
    rt = _runtime._default_runtime
    return rt.pool.peak if rt is not None else 0


def reset_peak_memory_stats(device=None):
    """Start max_memory_allocated() again from the current memory_allocated()."""
    rt = _runtime._default_runtime
    if rt is not None:
        rt.pool.peak = rt.pool.allocated


def memory_reserved(device=None):
    """Bytes of GPU buffers the allocator holds: memory_allocated() plus its free, reusable buffers."""
    rt = _runtime._default_runtime
    return rt.pool.reserved if rt is not None else 0


def empty_cache():
    """Give the allocator's free buffers back to the GPU driver (memory_reserved() drops to about
    memory_allocated()). Tensors are untouched; later allocations create buffers again."""
    rt = _runtime._default_runtime
    if rt is not None:
        rt.empty_cache()


def synchronize():
    """Submit all queued GPU work and wait until it has finished."""
    if _runtime._default_runtime is not None:
        _runtime._default_runtime.synchronize()


def reset():
    """Let go of the WebGPU device: the next "webgpu" tensor opens a new one, compiling its shaders afresh.
    For recovering from a lost device (a GPU reset, a driver update), or after an op was added to the op
    table. Tensors made before live on the old device: make them again."""
    _runtime.reset_default_runtime()
    _devices.forget("webgpu")
