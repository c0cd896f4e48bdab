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
