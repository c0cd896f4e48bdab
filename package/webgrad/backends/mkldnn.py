"""torch.backends.mkldnn: oneDNN's switches, settable and read back; webgrad has no oneDNN (is_available() is
False) and nothing reads them."""

import contextlib
import sys

enabled = True
deterministic = False
allow_tf32 = True
fp32_precision = "none"


def is_available():
    return False


@contextlib.contextmanager
def flags(enabled=False, deterministic=False, allow_tf32=True, fp32_precision="none"):
    """Set the switches inside the block and restore them after, as torch.backends.mkldnn.flags."""
    module = sys.modules[__name__]
    names = ("enabled", "deterministic", "allow_tf32", "fp32_precision")
    saved = {name: getattr(module, name) for name in names}
    for name, value in zip(names, (enabled, deterministic, allow_tf32, fp32_precision)):
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)
