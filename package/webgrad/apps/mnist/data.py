"""The page's datasets, kept on the GPU as uint8 [N, C, H, W] with int32 labels: MNIST (the IDX files the
worker downloaded), CIFAR-10 (files the user picked, which the worker wrote into Pyodide's file system:
the binary tarball or the cifar-10-batches-bin files) and "your images" (a folder of one subfolder per
class, decoded and resized by the worker, handed over as one uint8 buffer).

DataLoader gathers every batch there, one index_select, then augments it (webgrad.transforms, on the GPU)
and turns it into normalised floats: no pixel crosses from Python to the GPU while training.

Everything that can be wrong with the user's files raises DataError with a message for the page; the App
then keeps the data it had.
"""

import copy

from webgrad import transforms as T
from webgrad import webgpu
from webgrad.data import DataLoader, Subset
from webgrad.datasets import CIFAR10, MNIST
from webgrad.datasets.images import DeviceImages

PIXELS = 28 * 28
TEST_EVERY = 5  # "your images": every 5th image of each class is held out for testing
MAX_SIDE = 2048  # the largest image side the page resizes to


class DataError(ValueError):
    """The user's data cannot be used (the message says why); the current data stays."""


def format_bytes(n):
    if n < 2 ** 20:
        return f"{n / 1024:.1f} KiB"
    if n < 2 ** 30:
        return f"{n / 2 ** 20:.1f} MiB"
    return f"{n / 2 ** 30:.2f} GiB"


def buffer_limit(device):
    """The most bytes one GPU buffer may hold on `device` (None: no limit known, e.g. the CPU). Each split
    of a dataset is one tensor, so one buffer: this is the size that decides whether it fits. (WebGPU does
    not tell how much memory the GPU has in all; the page reports what tensors hold as it trains.)"""
    if device != "webgpu":
        return None
    limits = webgpu.adapter_info()["limits"]
    return min(limits["max_storage_buffer_binding_size"], limits["max_buffer_size"])


def check_fits(nbytes, device, what):
    limit = buffer_limit(device)
    if limit is not None and nbytes > limit:
        raise DataError(f"{what} is too large for this GPU: its images need {format_bytes(nbytes)} of GPU memory "
                        f"in one buffer, and this GPU allows at most {format_bytes(limit)} per buffer "
                        "(maxStorageBufferBindingSize). Use fewer or smaller images.")


class Images(DeviceImages):
    """uint8 images [N, C, H, W] and int32 labels already on the device (webgrad.datasets' batch path)."""

    def __init__(self, data, targets, labels, classes, root):
        self.data, self.targets, self._labels, self.classes, self.root = data, targets, bytes(labels), classes, root
        self.transform = self.target_transform = None
        self._mean, self._std = (0.0,), (1.0,)

    @classmethod
    def from_bytes(cls, pixels, labels, shape, classes, root, device):
        self = cls.__new__(cls)
        self._store(pixels, bytes(labels), shape, device, None, None)
        self.classes, self.root = classes, root
        return self

    def view(self, transform=None, mean=(0.0,), std=(1.0,)):
        """The same images (shared tensors) with a batched transform, or normalised by mean/std."""
        out = copy.copy(self)
        out.transform, out._mean, out._std = transform, tuple(mean), tuple(std)
        return out


class Data:
    """A training and a test split on the device. name: "mnist" | "cifar10" | "images"; shape: (C, H, W)."""

    def __init__(self, name, label, train, test, notes="", rebuild=None):
        self.name, self.label, self.train, self.test, self.notes = name, label, train, test, notes
        self.classes = list(train.classes)
        self.shape = tuple(train.data.shape[1:])
        # MNIST trains on [0, 1] pixels (what the drawing area sends); colour images are centred
        c = self.shape[0]
        self.mean, self.std = ((0.0,), (1.0,)) if name == "mnist" else ((0.5,) * c, (0.25,) * c)
        self._rebuild = rebuild  # device -> a new Data with the same images (after a lost GPU device)

    def rebuild(self, device):
        return self._rebuild(device)

    # ------------------------------------------------------------------ the three sources

    @classmethod
    def mnist(cls, root, device):
        splits = []
        for train in (True, False):
            ds = MNIST(root, train=train, device=device)
            n = len(ds)
            splits.append(Images(ds.data.reshape(n, 1, 28, 28), ds.targets, ds._labels,
                                 [str(d) for d in range(10)], root))
        return cls("mnist", "MNIST", *splits, rebuild=lambda dev: cls.mnist(root, dev))

    @classmethod
    def cifar10(cls, root, device):
        """CIFAR-10 from the folder the worker wrote the user's files into."""
        splits = []
        for train in (True, False):
            try:
                ds = CIFAR10(root, train=train, device=device)  # 180 MB at most: it fits any GPU
            except (ValueError, FileNotFoundError, RuntimeError) as e:
                raise DataError(f"CIFAR-10: {_strip_root(str(e), root)}") from None
            splits.append(Images(ds.data, ds.targets, ds._labels, ds.classes, root))
        return cls("cifar10", "CIFAR-10", *splits, rebuild=lambda dev: cls.cifar10(root, dev))

    @classmethod
    def images(cls, pixels, labels, classes, size, device, skipped=0, resized=0, name="your images"):
        """The user's images: pixels uint8 N x 3 x size x size (planar RGB, as the worker decoded them),
        labels one byte per image (class index into `classes`)."""
        n, side = len(labels), int(size)
        classes = [str(c) for c in classes]
        if len(classes) < 2:
            raise DataError(f"{name}: found {len(classes)} class folder{'s' if len(classes) != 1 else ''} "
                            f"({', '.join(classes) or 'none'}); a classifier needs at least 2: put the images "
                            "of each class in a subfolder of their own (e.g. cats/, dogs/)")
        if not 8 <= side <= MAX_SIDE:
            raise DataError(f"{name}: image size {side} is not from 8 to {MAX_SIDE} pixels")
        if len(pixels) != n * 3 * side * side:
            raise DataError(f"{name}: {len(pixels)} bytes of pixels for {n} images of 3x{side}x{side}")
        counts = [0] * len(classes)
        for label in labels:
            if label >= len(classes):
                raise DataError(f"{name}: label {label} but only {len(classes)} classes")
            counts[label] += 1
        empty = [c for c, k in zip(classes, counts) if k == 0]
        if empty:
            raise DataError(f"{name}: no image in the class folder(s) {', '.join(empty)}")
        check_fits(len(pixels), device, name)
        # every TEST_EVERY-th image of each class is held out; a class of 2 to TEST_EVERY - 1 images gives its last
        seen, train_idx, test_idx = [0] * len(classes), [], []
        for i, label in enumerate(labels):
            k, total = seen[label], counts[label]
            held_out = k % TEST_EVERY == TEST_EVERY - 1 or (2 <= total < TEST_EVERY and k == total - 1)
            (test_idx if held_out else train_idx).append(i)
            seen[label] += 1
        if not test_idx:
            test_idx = train_idx[-1:]
        per = 3 * side * side
        view = memoryview(pixels)

        def split(idx):
            return (b"".join(view[i * per:(i + 1) * per] for i in idx), bytes(labels[i] for i in idx))

        parts = []
        for idx in (train_idx, test_idx):
            px, lab = split(idx)
            parts.append(Images.from_bytes(px, lab, (len(idx), 3, side, side), classes, name, device))
        notes = []
        if skipped:
            notes.append(f"{skipped} file{'s' if skipped != 1 else ''} skipped (not images)")
        if resized:
            notes.append(f"{resized} image{'s' if resized != 1 else ''} of another size resized to {side}x{side}")
        host = bytes(pixels), bytes(labels)
        return cls("images", name, *parts, notes="; ".join(notes),
                   rebuild=lambda dev: cls.images(*host, classes, size, dev, skipped, resized, name))

    # ------------------------------------------------------------------ batches

    def train_loader(self, n, batch_size, augment=None):
        """Shuffled batches of the first n training images, augmented on the GPU (a webgrad.transforms
        Compose without its final normalisation, or None); the last partial batch is dropped."""
        if augment:
            view = self.train.view(T.Compose(list(augment) + [T.ToTensor(), T.Normalize(self.mean, self.std)]))
        else:
            view = self.train.view(mean=self.mean, std=self.std)
        return DataLoader(Subset(view, range(n)), batch_size, shuffle=True, drop_last=True)

    def test_loader(self, n, batch_size):
        """The first n test images, in order."""
        return DataLoader(Subset(self.test.view(mean=self.mean, std=self.std), range(n)), batch_size)

    async def test_labels(self):
        """The test labels as a list of ints (read back once)."""
        return await self.test.targets.tolist_async()

    async def test_pixels(self, count):
        """The uint8 pixels (C x H x W each) of the first `count` test images, as bytes (for the page)."""
        return bytes(await self.test.data[:count].reshape(-1).tolist_async())


def _strip_root(message, root):
    """File names as the user knows them (not Pyodide's folder the worker wrote them into)."""
    return message.replace(root.rstrip("/") + "/", "").replace(repr(root), "the files you chose").replace(root, "the files you chose")
