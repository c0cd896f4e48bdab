"""The base of the image datasets (CIFAR10, CIFAR100, ImageFolder): uint8 images [N, C, H, W] and int32
labels held on one device, uploaded once, batches gathered there.

dataset[i] is (float32 image [C, H, W] in [0, 1], int label); with `transform`, the image given to it is the
uint8 tensor [C, H, W]. A transform of webgrad.transforms (a batched one) also runs on whole batches: the
DataLoader path gathers a uint8 batch with one index_select and hands it to the transform, so a CIFAR
step's input pipeline (gather, crop, flip, normalise) stays on the device. Any other callable is applied
per sample (DataLoader's general path).
"""

import copy
import numbers

from .. import dtypes
from ..data.dataset import Dataset
from ..data.loader import DataLoader
from ..transforms import functional as TF
from .._tensor import tensor


class DeviceImages(Dataset):
    classes = []

    def _store(self, pixels, labels, shape, device, transform, target_transform):
        """pixels: bytes-like, N*C*H*W uint8 in NCHW order; labels: bytes-like (one byte each) or ints."""
        n, c, h, w = shape
        self.transform, self.target_transform = transform, target_transform
        self.data = tensor(pixels, dtype=dtypes.uint8, device=device).reshape(n, c, h, w)
        if isinstance(labels, (bytes, bytearray, memoryview)):
            self._labels = bytes(labels)
            self.targets = tensor(self._labels, dtype=dtypes.uint8, device=device).int()
        else:
            self._labels = [int(v) for v in labels]
            self.targets = tensor(self._labels, dtype=dtypes.int32, device=device)
        self._mean, self._std = (0.0,), (1.0,)

    def __len__(self):
        return len(self._labels)

    def __getitem__(self, index):
        index = int(index)
        image, label = self.data[index], self._labels[index]
        image = self.transform(image) if self.transform is not None else TF.to_tensor(image)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return image, label

    # ------------------------------------------------------------------ batch gathering on the device
    @property
    def batch_device(self):
        if self.target_transform is not None or not getattr(self.transform, "batched", self.transform is None):
            return None  # a per-sample callable: DataLoader's general path
        return self.data.device

    def get_batch(self, index):
        """[images [B, C, H, W], int32 labels [B]] for an int32 index tensor on the data's device."""
        images = self.data.index_select(0, index)
        if self.transform is not None:
            images = self.transform(images)
        else:
            images = TF.to_normalized(images, self._mean, self._std)  # one kernel: x / 255, then (x - mean) / std
        return [images, self.targets.index_select(0, index)]

    def loader(self, batch_size=1, shuffle=False, generator=None, drop_last=False, mean=0.0, std=1.0):
        """A DataLoader of (images, int32 labels) gathered on the device. Without a transform the images
        are float32 (x / 255 - mean[c]) / std[c] (mean, std: a number or one per channel); with a batched
        transform (webgrad.transforms), whatever it makes of the uint8 batch."""
        if self.batch_device is None:
            raise ValueError(f"{type(self).__name__}.loader() gathers batches on the device and cannot apply "
                             "per-sample transforms (webgrad.transforms work on batches); use DataLoader(dataset, ...)")
        mean = (float(mean),) if isinstance(mean, numbers.Real) else tuple(float(m) for m in mean)
        std = (float(std),) if isinstance(std, numbers.Real) else tuple(float(s) for s in std)
        if (mean, std) != ((0.0,), (1.0,)) and self.transform is not None:
            raise ValueError("loader(mean=, std=) normalises untransformed images; with a transform, end it "
                             "with transforms.Normalize instead")
        if any(s <= 0 for s in std):
            raise ValueError(f"{type(self).__name__}.loader(): std must be positive, got {std}")
        view = copy.copy(self)  # shares .data and .targets
        view._mean, view._std = mean, std
        return DataLoader(view, batch_size, shuffle, generator=generator, drop_last=drop_last)

    def _repr_lines(self):
        return []

    def __repr__(self):
        lines = [f"Dataset {type(self).__name__}", f"    Number of datapoints: {len(self)}",
                 f"    Root location: {self.root}"] + self._repr_lines() + [f"    Device: {self.data.device}"]
        if self.transform is not None:
            lines.append(f"    Transform: {self.transform!r}")
        return "\n".join(lines)
