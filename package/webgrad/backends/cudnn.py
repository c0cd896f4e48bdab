"""torch.backends.cudnn: flags accepted and ignored, as PyTorch does on a machine without CUDA.

`torch.backends.cudnn.benchmark = True` and `.deterministic = True` are common first lines of
training scripts. They can be set and read back; nothing in webgrad depends on them (webgrad's
kernels are deterministic and have no autotuner to switch).
"""

from ._switches import switched

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True
fp32_precision = "none"
_PRECISIONS = ("none", "ieee", "tf32")


class _Precision:
    """torch.backends.cudnn.conv / .rnn: the fp32_precision switch ("tf32" by default), checked as torch's."""

    def __init__(self):
        object.__setattr__(self, "fp32_precision", "tf32")

    def __setattr__(self, name, value):
        if name != "fp32_precision":
            raise AttributeError(f"Unknown attribute {name}")
        if value not in _PRECISIONS:
            raise RuntimeError(f"Unknown precision: {value}")
        object.__setattr__(self, name, value)


conv = _Precision()
rnn = _Precision()


def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False, allow_tf32=True,
          fp32_precision="none", depthwise_kernel="auto"):
    """Set the switches inside the block and restore them after, as torch.backends.cudnn.flags."""
    return switched(__name__, dict(enabled=enabled, benchmark=benchmark, benchmark_limit=benchmark_limit,
                                   deterministic=deterministic, allow_tf32=allow_tf32, fp32_precision=fp32_precision))


def is_available():
    return False


def version():
    return None
