"""torch.backends.mps: Apple's Metal backend does not exist in webgrad (WebGPU covers Apple GPUs)."""


def is_available():
    return False


def is_built():
    return False
