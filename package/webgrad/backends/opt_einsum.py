"""torch.backends.opt_einsum: whether einsum plans its contraction order with the opt_einsum package. webgrad's
einsum contracts in its own order and never uses the package, so is_available() is False and the switches,
settable and read back, change nothing (as PyTorch's without opt_einsum installed)."""

enabled = False
strategy = None


def is_available():
    return False


def get_opt_einsum():
    """The opt_einsum module einsum uses: None, webgrad uses none."""
    return None
