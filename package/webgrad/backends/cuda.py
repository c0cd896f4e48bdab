"""torch.backends.cuda: switches scripts set for CUDA's libraries, settable and read back as in PyTorch on a
machine without CUDA. Nothing in webgrad reads them: its matmuls compute in float32 (TF32 is CUDA's), and
scaled_dot_product_attention has one implementation on each device, so the SDPA backend switches choose
nothing.

    torch.backends.cuda.matmul.allow_tf32 = True      # accepted
    torch.backends.cuda.enable_flash_sdp(False)       # accepted; flash_sdp_enabled() then answers False
"""

import contextlib
import warnings


def is_built():
    """False: webgrad has no CUDA."""
    return False


class cuBLASModule:
    """torch.backends.cuda.matmul: cuBLAS switches with PyTorch's defaults; unknown names are refused."""

    _DEFAULTS = {"allow_tf32": False, "allow_fp16_reduced_precision_reduction": True,
                 "allow_bf16_reduced_precision_reduction": True, "allow_fp16_accumulation": False,
                 "fp32_precision": "none"}

    def __init__(self):
        self.__dict__.update(self._DEFAULTS)

    def __setattr__(self, name, value):
        if name not in self._DEFAULTS:
            raise AttributeError(f"Unknown attribute {name}")
        super().__setattr__(name, value)


matmul = cuBLASModule()

_SDP = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def enable_flash_sdp(enabled):
    _SDP["flash"] = bool(enabled)


def flash_sdp_enabled():
    return _SDP["flash"]


def enable_mem_efficient_sdp(enabled):
    _SDP["mem_efficient"] = bool(enabled)


def mem_efficient_sdp_enabled():
    return _SDP["mem_efficient"]


def enable_math_sdp(enabled):
    _SDP["math"] = bool(enabled)


def math_sdp_enabled():
    return _SDP["math"]


def enable_cudnn_sdp(enabled):
    _SDP["cudnn"] = bool(enabled)


def cudnn_sdp_enabled():
    return _SDP["cudnn"]


def is_flash_attention_available():
    return False


@contextlib.contextmanager
def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True, enable_cudnn=True):
    """The deprecated context manager: sets the four switches inside the block, restores them after."""
    warnings.warn("`torch.backends.cuda.sdp_kernel()` is deprecated. In the future, this context manager will be "
                  "removed. Please see `torch.nn.attention.sdpa_kernel()` for the new context manager, with updated "
                  "signature.", FutureWarning, stacklevel=3)
    saved = dict(_SDP)
    _SDP.update(flash=bool(enable_flash), math=bool(enable_math), mem_efficient=bool(enable_mem_efficient),
                cudnn=bool(enable_cudnn))
    try:
        yield
    finally:
        _SDP.update(saved)
