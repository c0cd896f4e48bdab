"""torch.nn.attention's sdpa_kernel and SDPBackend: backend selection for scaled_dot_product_attention.

webgrad has one attention implementation per device (the fused kernels of ops/attention.py, and their
composition where those do not apply), so the selection is checked and recorded, as PyTorch's, and
F.scaled_dot_product_attention runs as it always does inside the block.
"""

import contextlib
import enum


class SDPBackend(enum.IntEnum):
    """The attention backends PyTorch names, with its values."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4

    def __str__(self):
        return f"SDPBackend.{self.name}"


_ALL = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH,
        SDPBackend.OVERRIDEABLE]
_enabled = list(_ALL)


def _cur_sdpa_kernel_backends(with_priority=False):
    """The backends the innermost sdpa_kernel block enabled (all of them outside any)."""
    return list(_enabled)


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Select the backends of scaled_dot_product_attention for the block, as torch's (a backend or a list of
    them; anything else raises AssertionError). webgrad runs its own attention kernels whatever is selected."""
    if not isinstance(backends, (list, SDPBackend)):
        raise AssertionError("Backend must be an instance of SDPBackend or a list of SDPBackend instances, got "
                             f"{type(backends).__name__}")
    backends = list(dict.fromkeys([backends] if isinstance(backends, SDPBackend) else backends))
    previous = list(_enabled)
    _enabled[:] = backends
    try:
        yield {}
    finally:
        _enabled[:] = previous


__all__ = ["SDPBackend", "sdpa_kernel"]
