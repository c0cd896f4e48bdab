"""webgrad.datasets: ready-made datasets read from local files (webgrad never downloads)."""

from .mnist import MNIST, find_mnist  # noqa: F401
