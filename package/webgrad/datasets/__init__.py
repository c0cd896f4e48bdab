"""webgrad.datasets: ready-made datasets read from local files (webgrad never downloads)."""

from .cifar import CIFAR10, CIFAR100  # noqa: F401
from .folder import ImageFolder  # noqa: F401
from .mnist import MNIST, find_mnist  # noqa: F401
