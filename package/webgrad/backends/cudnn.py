"""torch.backends.cudnn: flags accepted and ignored, as PyTorch does on a machine without CUDA.

`torch.backends.cudnn.benchmark = True` and `.deterministic = True` are common first lines of
training scripts. They can be set and read back; nothing in webgrad depends on them (webgrad's
kernels are deterministic and have no autotuner to switch).
"""

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available():
    return False


def version():
    return None
