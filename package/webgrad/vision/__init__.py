"""torchvision's API on webgrad: ``import torchvision`` under webgrad.as_torch() where no torchvision is installed
(the browser, a notebook in Pyodide), so image scripts run unchanged.

    datasets    MNIST, FashionMNIST, KMNIST, CIFAR10/100 (local files), ImageFolder/DatasetFolder, FakeData
    transforms  Compose, ToTensor, Normalize, Resize, CenterCrop, RandomResizedCrop, RandomCrop, flips,
                ColorJitter, Grayscale, Pad, Lambda, RandomApply ... (and transforms.v2, transforms.functional)
    models      the ResNets, torchvision's architecture and state_dict keys (no pretrained downloads)
    utils       make_grid, save_image

Where a real torchvision is installed, as_torch() leaves ``import torchvision`` to it.
"""

from .. import __version__
from . import datasets, models, transforms, utils

__all__ = ["__version__", "datasets", "models", "transforms", "utils"]
