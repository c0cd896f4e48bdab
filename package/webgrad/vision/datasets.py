"""torchvision.datasets on webgrad, read from local files (webgrad never downloads: download=True only adds that
hint to the error when the files are missing).

- MNIST, FashionMNIST, KMNIST: IDX files in root, root/<Name>/raw (torchvision's layout) or root/data. An item is
  (float image [1, 28, 28], int); with a transform, the transform gets the uint8 image [28, 28] (torchvision's gets
  a PIL image of the same pixels; ToTensor makes both [1, 28, 28] in [0, 1]).
- CIFAR10, CIFAR100: torchvision's python or binary archives or folders; the transform gets uint8 [3, 32, 32].
- ImageFolder, DatasetFolder: class folders read lazily, each item loader(path) (a PIL RGB image by default, as
  torchvision's) and the class index; webgrad.datasets.ImageFolder is the variant that decodes everything once
  and gathers batches on the GPU.
- FakeData: random images generated per index from a seed, as torchvision's.
"""

import os

import webgrad

from .. import datasets as _datasets
from .. import dtypes
from ..data.dataset import Dataset
from ..datasets.folder import IMG_EXTENSIONS, find_classes, pil_loader
from ..random import get_rng_state, manual_seed, set_rng_state

__all__ = ["VisionDataset", "MNIST", "FashionMNIST", "KMNIST", "CIFAR10", "CIFAR100", "DatasetFolder", "ImageFolder",
           "FakeData", "IMG_EXTENSIONS", "default_loader"]

MNIST = _datasets.MNIST
CIFAR10 = _datasets.CIFAR10
CIFAR100 = _datasets.CIFAR100
default_loader = pil_loader


class FashionMNIST(MNIST):
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
               "Ankle boot"]
    _folder = "FashionMNIST"


class KMNIST(MNIST):
    classes = ["o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"]
    _folder = "KMNIST"


class VisionDataset(Dataset):
    """torchvision's base: root, and transform / target_transform (or a joint `transforms`) applied to items."""

    def __init__(self, root=None, transforms=None, transform=None, target_transform=None):
        self.root = os.fspath(root) if root is not None else None
        if transforms is not None and (transform is not None or target_transform is not None):
            raise ValueError("Only transforms or transform/target_transform can be passed as argument")
        self.transform, self.target_transform = transform, target_transform
        self.transforms = transforms

    def _apply(self, sample, target):
        if self.transforms is not None:
            return self.transforms(sample, target)
        if self.transform is not None:
            sample = self.transform(sample)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return sample, target

    def __repr__(self):
        lines = [f"Dataset {type(self).__name__}", f"    Number of datapoints: {len(self)}"]
        if self.root is not None:
            lines.append(f"    Root location: {self.root}")
        if self.transform is not None:
            lines.append(f"    StandardTransform\nTransform: {self.transform!r}")
        return "\n".join(lines)


class DatasetFolder(VisionDataset):
    """root/<class>/**/<file>: samples found in sorted order; an item is (loader(path), class index)."""

    def __init__(self, root, loader, extensions=None, transform=None, target_transform=None, is_valid_file=None,
                 allow_empty=False):
        super().__init__(root, transform=transform, target_transform=target_transform)
        if (extensions is None) == (is_valid_file is None):
            raise ValueError("Both extensions and is_valid_file cannot be None or not None at the same time")
        if is_valid_file is None:
            lowered = tuple(e.lower() for e in extensions)

            def is_valid_file(path):
                return path.lower().endswith(lowered)
        self.classes, self.class_to_idx = find_classes(self.root)
        self.samples, _ = _datasets.ImageFolder.make_dataset(self.root, self.class_to_idx, is_valid_file,
                                                             allow_empty)
        self.loader, self.extensions = loader, extensions
        self.targets = [target for _, target in self.samples]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        path, target = self.samples[index]
        return self._apply(self.loader(path), target)


class ImageFolder(DatasetFolder):
    def __init__(self, root, transform=None, target_transform=None, loader=default_loader, is_valid_file=None,
                 allow_empty=False):
        super().__init__(root, loader, IMG_EXTENSIONS if is_valid_file is None else None, transform,
                         target_transform, is_valid_file, allow_empty)
        self.imgs = self.samples


class FakeData(VisionDataset):
    """`size` random uint8 images [C, H, W] (normal noise clamped to [0, 1], scaled by 255) with random labels,
    item i drawn from seed i + random_offset without touching the global generator's state."""

    def __init__(self, size=1000, image_size=(3, 224, 224), num_classes=10, transform=None, target_transform=None,
                 random_offset=0):
        super().__init__(None, transform=transform, target_transform=target_transform)
        self.size, self.num_classes = size, num_classes
        self.image_size, self.random_offset = tuple(image_size), random_offset

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        if index >= len(self):
            raise IndexError(f"{type(self).__name__} index out of range")
        state = get_rng_state()
        try:
            manual_seed(index + self.random_offset)
            image = webgrad.randn(*self.image_size)
            target = int(webgrad.randint(0, self.num_classes, (1,)).item())
        finally:
            set_rng_state(state)
        image = image.clamp(0, 1).mul(255).to(dtypes.uint8)  # as ToPILImage stores a float image: x 255, truncated
        return self._apply(image, target)
