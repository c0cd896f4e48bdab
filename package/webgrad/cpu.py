"""torch.cpu: the CPU device's module (what torch.get_device_module("cpu") returns). webgrad's CPU backend runs
each op to completion before returning, so there is nothing to wait for."""


def is_available():
    return True


def is_initialized():
    return True


def device_count():
    return 1


def current_device():
    return "cpu"


def set_device(device):
    """Accepted and ignored, as PyTorch's: there is one CPU device."""


def synchronize(device=None):
    """Returns at once: CPU ops have finished when they return."""
