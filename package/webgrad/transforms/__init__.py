"""webgrad.transforms: image transforms with torchvision's names and semantics, run batched on the device.

    from webgrad import transforms as T
    augment = T.Compose([T.RandomCrop(32, padding=4, padding_mode="reflect"), T.RandomHorizontalFlip(),
                         T.ToTensor(), T.Normalize((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))])
    train = webgrad.datasets.CIFAR10(root, train=True, transform=augment, device="webgpu")
    for x, y in train.loader(batch_size=128, shuffle=True): ...   # gathered and augmented on the GPU

Each transform takes an image [C, H, W] or a batch [..., C, H, W] (uint8 or float32) and, on a batch,
draws its random parameters per image: one kernel for the whole batch (see functional.py). Datasets that
gather batches on the device (webgrad.datasets) apply them to the gathered uint8 batch.
"""

import numbers
import warnings

from . import functional as F

__all__ = ["Compose", "RandomCrop", "RandomHorizontalFlip", "ColorJitter", "ToTensor", "Normalize",
           "RandomErasing"]


class Transform:
    """Base of the batched transforms: `batched` tells a dataset it may apply the transform to a whole batch."""

    batched = True

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._repr_args().items())
        return f"{type(self).__name__}({args})"

    def _repr_args(self):
        return {}


class Compose(Transform):
    """Apply transforms in turn (any callables; batched when all of them are)."""

    def __init__(self, transforms):
        self.transforms = list(transforms)

    @property
    def batched(self):
        return all(getattr(t, "batched", False) for t in self.transforms)

    def __call__(self, img):
        steps = self.transforms
        i = 0
        while i < len(steps):
            t = steps[i]
            following = steps[i + 1] if i + 1 < len(steps) else None
            if isinstance(t, ToTensor) and type(following) is Normalize and F.is_uint8_tensor(img) \
                    and not following.inplace:
                img = F.to_normalized(img, following.mean, following.std)  # one kernel instead of two
                i += 2
                continue
            img = t(img)
            i += 1
        return img

    def __repr__(self):
        lines = "".join(f"\n    {t}" for t in self.transforms)
        return f"Compose({lines}\n)"


class RandomCrop(Transform):
    """Crop a random `size` region (an int or (h, w)) after padding by `padding` (int, (lr, tb) or
    (left, top, right, bottom)) with `fill` or padding_mode "edge", "reflect" or "symmetric"."""

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant", generator=None):
        self.size = F._pair(size, "size")
        if padding is not None:
            F.padding_sides(padding)  # validate now, as torchvision does
        if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            raise ValueError("Padding mode should be either constant, edge, reflect or symmetric")
        self.padding, self.pad_if_needed, self.fill, self.padding_mode = padding, pad_if_needed, fill, padding_mode
        self.generator = generator

    def __call__(self, img):
        return F.random_crop(img, self.size, self.padding, self.pad_if_needed, self.fill, self.padding_mode,
                             self.generator)

    def _repr_args(self):
        return {"size": self.size, "padding": self.padding}


class RandomHorizontalFlip(Transform):
    """Flip each image left-right with probability p."""

    def __init__(self, p=0.5, generator=None):
        self.p, self.generator = p, generator

    def __call__(self, img):
        return F.random_horizontal_flip(img, self.p, self.generator)

    def _repr_args(self):
        return {"p": self.p}


class ColorJitter(Transform):
    """Random brightness, contrast and saturation, in a random order, per image (torchvision's ColorJitter;
    hue is not supported yet). Each is a non-negative number v (factors in [max(0, 1 - v), 1 + v]) or a
    (min, max) range."""

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0, generator=None):
        self.brightness = self._check_input(brightness, "brightness")
        self.contrast = self._check_input(contrast, "contrast")
        self.saturation = self._check_input(saturation, "saturation")
        if hue not in (0, None, (0, 0)):
            raise NotImplementedError("ColorJitter(hue=...) is not supported yet; brightness, contrast and "
                                      "saturation are")
        self.generator = generator

    @staticmethod
    def _check_input(value, name):
        if isinstance(value, (int, float)):
            if value < 0:
                raise ValueError(f"If {name} is a single number, it must be non negative.")
            value = (max(0.0, 1.0 - value), 1.0 + value)
        elif not (isinstance(value, (tuple, list)) and len(value) == 2):
            raise TypeError(f"{name} should be a single number or a list/tuple with length 2.")
        low, high = float(value[0]), float(value[1])
        if not 0.0 <= low <= high:
            raise ValueError(f"{name} values should be between (0, inf), but got {list(value)}.")
        return low, high

    def __call__(self, img):
        return F.color_jitter(img, self.brightness, self.contrast, self.saturation, self.generator)

    def _repr_args(self):
        return {"brightness": self.brightness, "contrast": self.contrast, "saturation": self.saturation}


class ToTensor(Transform):
    """uint8 images to float32 in [0, 1] (see functional.to_tensor for layouts)."""

    def __call__(self, pic):
        return F.to_tensor(pic)


class Normalize(Transform):
    """(image - mean) / std per channel, on float images."""

    def __init__(self, mean, std, inplace=False):
        self.mean, self.std, self.inplace = mean, std, inplace

    def __call__(self, tensor):
        return F.normalize(tensor, self.mean, self.std, self.inplace)

    def _repr_args(self):
        return {"mean": self.mean, "std": self.std}


class RandomErasing(Transform):
    """With probability p, erase a random rectangle of each image (area a `scale` fraction of the image,
    aspect ratio in `ratio`) to `value`, as torchvision's RandomErasing (value="random" is not supported yet)."""

    def __init__(self, p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0, inplace=False, generator=None):
        if not isinstance(value, (numbers.Number, str, tuple, list)):
            raise TypeError("Argument value should be either a number or str or a sequence")
        if isinstance(value, str) and value != "random":
            raise ValueError("If value is str, it should be 'random'")
        if isinstance(value, str) or not isinstance(value, numbers.Number):
            raise NotImplementedError("RandomErasing: only one number as value is supported yet")
        if not isinstance(scale, (tuple, list)):
            raise TypeError("Scale should be a sequence")
        if not isinstance(ratio, (tuple, list)):
            raise TypeError("Ratio should be a sequence")
        if (scale[0] > scale[1]) or (ratio[0] > ratio[1]):
            warnings.warn("Scale and ratio should be of kind (min, max)")
        if scale[0] < 0 or scale[1] > 1:
            raise ValueError("Scale should be between 0 and 1")
        if p < 0 or p > 1:
            raise ValueError("Random erasing probability should be between 0 and 1")
        self.p, self.scale, self.ratio, self.value, self.inplace = p, scale, ratio, value, inplace
        self.generator = generator

    def __call__(self, img):
        out = F.random_erasing(img, self.p, self.scale, self.ratio, self.value, self.generator)
        if self.inplace:
            img.copy_(out)
            return img
        return out

    def _repr_args(self):
        return {"p": self.p, "scale": self.scale, "ratio": self.ratio, "value": self.value}
