"""torch.cuda's discovery calls, answered truthfully: webgrad has no CUDA device.

Scripts written for PyTorch commonly start with

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

Here that picks "cpu". To train on the GPU, use `webgrad.accelerator.current_accelerator()` (the
WebGPU device when there is an adapter) or `device="webgpu"`.
"""


def is_available():
    """False: webgrad reaches GPUs through WebGPU (device "webgpu"), never through CUDA."""
    return False


def device_count():
    return 0


def is_initialized():
    return False


def manual_seed(seed):
    """Accepted, as torch.cuda.manual_seed on a machine without CUDA: there is no CUDA generator to seed."""


def manual_seed_all(seed):
    """Accepted, as torch.cuda.manual_seed_all on a machine without CUDA."""


def synchronize(device=None):
    """Nothing to wait for: there is no CUDA device. (webgrad.webgpu.synchronize waits for the GPU.)"""


def empty_cache():
    """Nothing to free: there is no CUDA device."""


def is_bf16_supported(including_emulation=True):
    """False: there is no CUDA device (webgrad's bfloat16 tensors live on the CPU and on WebGPU)."""
    return False


def _no_cuda(what):
    # PyTorch built without CUDA raises AssertionError("Torch not compiled with CUDA enabled") here
    return AssertionError(f"torch.cuda.{what}: webgrad has no CUDA device (torch.cuda.is_available() is False); "
                          "use device='webgpu' for the GPU")


def current_device():
    raise _no_cuda("current_device()")


def set_device(device):
    raise _no_cuda("set_device()")


def get_device_name(device=None):
    raise _no_cuda("get_device_name()")


def get_device_capability(device=None):
    raise _no_cuda("get_device_capability()")


def memory_allocated(device=None):
    """0, as PyTorch answers without CUDA: no CUDA memory is in use."""
    return 0


def max_memory_allocated(device=None):
    return 0


def memory_reserved(device=None):
    return 0


def max_memory_reserved(device=None):
    return 0


def reset_peak_memory_stats(device=None):
    """Nothing to reset: no CUDA memory is in use (memory_allocated() stays 0)."""


def reset_max_memory_allocated(device=None):
    """Nothing to reset, as reset_peak_memory_stats."""


def mem_get_info(device=None):
    raise _no_cuda("mem_get_info()")


def get_rng_state(device="cuda"):
    raise _no_cuda("get_rng_state()")


def get_rng_state_all():
    """[], as PyTorch without CUDA: one state per CUDA device, and there are none."""
    return []


def set_rng_state(new_state, device="cuda"):
    """Accepted, as torch.cuda.set_rng_state without CUDA (PyTorch queues it for a device that never comes)."""


def set_rng_state_all(new_states):
    """Accepted, as set_rng_state."""


def seed():
    """Accepted, as torch.cuda.seed without CUDA: there is no CUDA generator."""


def seed_all():
    """Accepted, as torch.cuda.seed_all without CUDA."""


def initial_seed():
    raise _no_cuda("initial_seed()")


# torch.cuda.FloatTensor and the like: `isinstance(t, torch.cuda.FloatTensor)` is False, and making one is an
# error naming the missing device (see webgrad._legacy).
from .._legacy import CUDA_TYPES as _CUDA_TYPES  # noqa: E402
BoolTensor, ByteTensor, DoubleTensor, FloatTensor, HalfTensor, IntTensor, LongTensor = (
    _CUDA_TYPES[n] for n in ("BoolTensor", "ByteTensor", "DoubleTensor", "FloatTensor", "HalfTensor", "IntTensor",
                             "LongTensor"))

from . import amp  # noqa: E402,F401  (torch.cuda.amp: deprecated aliases of webgrad.amp)

# torch.cuda.OutOfMemoryError is torch.OutOfMemoryError: scripts catch it to retry with a smaller batch
from ..devices import OutOfMemoryError  # noqa: E402,F401
