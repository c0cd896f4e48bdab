"""torch.mps: Apple's Metal device does not exist in webgrad (WebGPU reaches Apple GPUs: device "webgpu")."""


def is_available():
    return False


def device_count():
    return 0
