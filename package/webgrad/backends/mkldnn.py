"""torch.backends.mkldnn: oneDNN's switches, settable and read back; webgrad has no oneDNN (is_available() is
False) and nothing reads them."""

from ._switches import switched

enabled = True
deterministic = False
allow_tf32 = True
fp32_precision = "none"


def is_available():
    return False


def flags(enabled=False, deterministic=False, allow_tf32=True, fp32_precision="none"):
    """Set the switches inside the block and restore them after, as torch.backends.mkldnn.flags."""
    return switched(__name__, dict(enabled=enabled, deterministic=deterministic, allow_tf32=allow_tf32,
                                   fp32_precision=fp32_precision))
