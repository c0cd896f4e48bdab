"""torchvision.datasets stand-in: MNIST, FashionMNIST, CIFAR10, ImageFolder and FakeData with torchvision's
constructor arguments, attributes and item types (PIL images, int targets), read from local files only."""

import gzip
import os
import pickle

import numpy as np
import torch
from PIL import Image


def _not_found(what, root):
    return RuntimeError(f"Dataset not found: {what} under {root!r} (the corpus stand-in never downloads; "
                        "tests/compat/corpus_data.py writes the files)")


def _read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


class VisionDataset(torch.utils.data.Dataset):
    def __init__(self, root, transform=None, target_transform=None):
        self.root = os.fspath(root) if root is not None else None
        self.transform, self.target_transform = transform, target_transform

    def _apply(self, image, target):
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target


class MNIST(VisionDataset):
    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five", "6 - six", "7 - seven",
               "8 - eight", "9 - nine"]

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        super().__init__(root, transform, target_transform)
        self.train = train
        raw = os.path.join(self.root, type(self).__name__, "raw")
        prefix = "train" if train else "t10k"
        paths = []
        for kind, ndim in (("images", 3), ("labels", 1)):
            name = os.path.join(raw, f"{prefix}-{kind}-idx{ndim}-ubyte")
            found = [p for p in (name, name + ".gz") if os.path.isfile(p)]
            if not found:
                raise _not_found(name, self.root)
            paths.append(found[0])
        self._images, self._labels = _read_idx(paths[0]), _read_idx(paths[1]).astype(np.int64)
        self.data = torch.tensor(self._images)
        self.targets = torch.tensor(self._labels)

    # torchvision's deprecated names, still used by older scripts
    train_data = property(lambda self: self.data)
    test_data = property(lambda self: self.data)
    train_labels = property(lambda self: self.targets)
    test_labels = property(lambda self: self.targets)

    @property
    def class_to_idx(self):
        return {c: i for i, c in enumerate(self.classes)}

    def __len__(self):
        return len(self._labels)

    def __getitem__(self, index):
        return self._apply(Image.fromarray(self._images[index]), int(self._labels[index]))


class FashionMNIST(MNIST):
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
               "Ankle boot"]


class CIFAR10(VisionDataset):
    base_folder = "cifar-10-batches-py"

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        super().__init__(root, transform, target_transform)
        self.train = train
        folder = os.path.join(self.root, self.base_folder)
        names = [f"data_batch_{i}" for i in range(1, 6)] if train else ["test_batch"]
        data, targets = [], []
        for name in names:
            path = os.path.join(folder, name)
            if not os.path.isfile(path):
                raise _not_found(path, self.root)
            with open(path, "rb") as f:
                entry = pickle.load(f, encoding="latin1")
            data.append(entry["data"])
            targets.extend(entry["labels"] if "labels" in entry else entry["fine_labels"])
        self.data = np.vstack(data).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)  # HWC, as torchvision keeps it
        self.targets = targets
        with open(os.path.join(folder, "batches.meta"), "rb") as f:
            self.classes = pickle.load(f, encoding="latin1")["label_names"]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        return self._apply(Image.fromarray(self.data[index]), self.targets[index])


IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def pil_loader(path):
    with open(path, "rb") as f:
        return Image.open(f).convert("RGB")


class ImageFolder(VisionDataset):
    def __init__(self, root, transform=None, target_transform=None, loader=pil_loader, is_valid_file=None):
        super().__init__(root, transform, target_transform)
        if not os.path.isdir(self.root):
            raise FileNotFoundError(f"Couldn't find any class folder in {self.root}.")
        self.classes = sorted(e.name for e in os.scandir(self.root) if e.is_dir())
        if not self.classes:
            raise FileNotFoundError(f"Couldn't find any class folder in {self.root}.")
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        valid = is_valid_file or (lambda p: p.lower().endswith(IMG_EXTENSIONS))
        self.samples = [(os.path.join(self.root, c, name), self.class_to_idx[c])
                        for c in self.classes for name in sorted(os.listdir(os.path.join(self.root, c)))
                        if valid(os.path.join(self.root, c, name))]
        self.imgs = self.samples
        self.targets = [t for _, t in self.samples]
        self.loader = loader

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        path, target = self.samples[index]
        return self._apply(self.loader(path), target)


class FakeData(VisionDataset):
    """Random images, the same for a given index on every run (NumPy generator seeded by index + random_offset)."""

    def __init__(self, size=1000, image_size=(3, 224, 224), num_classes=10, transform=None, target_transform=None,
                 random_offset=0):
        super().__init__(None, transform, target_transform)
        self.size, self.image_size, self.num_classes = size, tuple(image_size), num_classes
        self.random_offset = random_offset

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        if index >= len(self):
            raise IndexError(f"{type(self).__name__} index out of range")
        rng = np.random.RandomState(index + self.random_offset)
        c, h, w = self.image_size
        pixels = rng.randint(0, 256, size=(h, w, c), dtype=np.uint8)
        image = Image.fromarray(pixels[:, :, 0] if c == 1 else pixels)
        return self._apply(image, int(rng.randint(self.num_classes)))
