"""torch.xpu: Intel's XPU device does not exist in webgrad (WebGPU reaches Intel GPUs: device "webgpu")."""


def is_available():
    return False


def device_count():
    return 0
