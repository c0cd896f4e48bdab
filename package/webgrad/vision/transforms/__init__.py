"""torchvision.transforms on webgrad: the batched transforms of webgrad.transforms (Compose, RandomCrop,
RandomHorizontalFlip, ColorJitter, ToTensor, Normalize, RandomErasing, which also take PIL images here) and the
per-sample ones scripts chain before them (Resize, CenterCrop, RandomResizedCrop, Pad, Grayscale, Lambda ...).

Images are webgrad tensors [..., C, H, W] (uint8 or float; webgrad's datasets hand uint8 ones to a transform) or PIL
images where Pillow is installed (this package's ImageFolder loads them, as torchvision's does). Random choices
come from webgrad's generator (torch.manual_seed seeds them), as torchvision's come from torch's.
"""

import math
import random as _py_random

from ... import random as _random
from ... import transforms as _batched
from . import functional as F
from .functional import InterpolationMode

__all__ = ["Compose", "ToTensor", "PILToTensor", "ToPILImage", "ConvertImageDtype", "Normalize", "Resize",
           "CenterCrop", "Pad", "Lambda", "RandomApply", "RandomChoice", "RandomOrder", "RandomCrop",
           "RandomHorizontalFlip", "RandomVerticalFlip", "RandomResizedCrop", "ColorJitter", "Grayscale",
           "RandomGrayscale", "RandomErasing", "InterpolationMode", "ToImage", "ToDtype"]

Compose = _batched.Compose
Normalize = _batched.Normalize
RandomErasing = _batched.RandomErasing


def _uniform(low=0.0, high=1.0):
    """One number in [low, high) from webgrad's default generator (torch.manual_seed seeds it; it takes one counter,
    as a device draw would), drawn on the host: a per-image transform reading a device value back each time
    would wait on the GPU once per image where tensors live on WebGPU (the browser)."""
    seed, counter = _random.default_generator.take(1)
    return low + (high - low) * _py_random.Random((seed << 32) | counter).random()


def _randint(low, high):
    return low + min(int(_uniform() * (high - low)), high - low - 1)


class _PerSample(_batched.Transform):
    batched = False  # applied to each image (webgrad's datasets then take DataLoader's general path)


class _AcceptsPIL:
    """A batched webgrad transform that also takes a PIL image (read into a uint8 tensor [C, H, W] first)."""

    def __call__(self, img):
        return super().__call__(F.image_tensor(img))


class RandomCrop(_AcceptsPIL, _batched.RandomCrop):
    pass


class RandomHorizontalFlip(_AcceptsPIL, _batched.RandomHorizontalFlip):
    pass


class ColorJitter(_AcceptsPIL, _batched.ColorJitter):
    pass


class ToTensor(_batched.ToTensor):
    """uint8 images (PIL or tensor) to float32 in [0, 1]; [H, W] -> [1, H, W]."""

    def __call__(self, pic):
        return F.to_tensor(pic)


class PILToTensor(_PerSample):
    def __call__(self, pic):
        return F.pil_to_tensor(pic)


class ToPILImage(_PerSample):
    def __init__(self, mode=None):
        self.mode = mode

    def __call__(self, pic):
        return F.to_pil_image(pic, self.mode)


class ConvertImageDtype(_PerSample):
    def __init__(self, dtype):
        self.dtype = dtype

    def __call__(self, image):
        return F.convert_image_dtype(image, self.dtype)


class ToImage(_PerSample):
    """transforms.v2.ToImage: a PIL image as a uint8 tensor [C, H, W]; tensors pass through."""

    def __call__(self, img):
        return F.image_tensor(img)


class ToDtype(_PerSample):
    """transforms.v2.ToDtype(dtype, scale=False): scale=True rescales uint8 <-> float as ConvertImageDtype."""

    def __init__(self, dtype, scale=False):
        self.dtype, self.scale = dtype, scale

    def __call__(self, image):
        return F.convert_image_dtype(image, self.dtype) if self.scale else image.to(self.dtype)


class Resize(_PerSample):
    def __init__(self, size, interpolation=InterpolationMode.BILINEAR, max_size=None, antialias=True):
        self.size, self.interpolation, self.max_size, self.antialias = size, interpolation, max_size, antialias
        F._mode(interpolation)

    def __call__(self, img):
        return F.resize(img, self.size, self.interpolation, self.max_size, self.antialias)

    def _repr_args(self):
        return {"size": self.size, "interpolation": F._mode(self.interpolation), "antialias": self.antialias}


class CenterCrop(_PerSample):
    def __init__(self, size):
        self.size = _batched.F._pair(size, "size")

    def __call__(self, img):
        return F.center_crop(img, self.size)

    def _repr_args(self):
        return {"size": self.size}


class Pad(_PerSample):
    def __init__(self, padding, fill=0, padding_mode="constant"):
        _batched.F.padding_sides(padding)
        self.padding, self.fill, self.padding_mode = padding, fill, padding_mode

    def __call__(self, img):
        return F.pad(img, self.padding, self.fill, self.padding_mode)


class Lambda(_PerSample):
    def __init__(self, lambd):
        if not callable(lambd):
            raise TypeError(f"Argument lambd should be callable, got {repr(type(lambd).__name__)}")
        self.lambd = lambd

    def __call__(self, img):
        return self.lambd(img)


class RandomApply(_PerSample):
    def __init__(self, transforms, p=0.5):
        self.transforms, self.p = list(transforms), p

    def __call__(self, img):
        if self.p < _uniform():
            return img
        for t in self.transforms:
            img = t(img)
        return img


class RandomChoice(_PerSample):
    def __init__(self, transforms, p=None):
        self.transforms = list(transforms)
        total = sum(p) if p is not None else len(self.transforms)
        self.p = [w / total for w in p] if p is not None else [1.0 / len(self.transforms)] * len(self.transforms)

    def __call__(self, img):
        u, acc = _uniform(), 0.0
        for t, w in zip(self.transforms, self.p):
            acc += w
            if u < acc:
                return t(img)
        return self.transforms[-1](img)


class RandomOrder(_PerSample):
    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, img):
        order = sorted(range(len(self.transforms)), key=lambda _: _uniform())
        for i in order:
            img = self.transforms[i](img)
        return img


class RandomVerticalFlip(_PerSample):
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        return F.vflip(img) if _uniform() < self.p else img


class Grayscale(_PerSample):
    def __init__(self, num_output_channels=1):
        self.num_output_channels = num_output_channels

    def __call__(self, img):
        return F.rgb_to_grayscale(img, self.num_output_channels)


class RandomGrayscale(_PerSample):
    def __init__(self, p=0.1):
        self.p = p

    def __call__(self, img):
        if _uniform() < self.p:
            return F.rgb_to_grayscale(img, F.get_dimensions(img)[0])
        return img


class RandomResizedCrop(_PerSample):
    """A random area fraction `scale` of the image with aspect ratio in `ratio` (log-uniform), resized to size;
    torchvision's get_params: ten tries, then a central crop."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0), interpolation=InterpolationMode.BILINEAR,
                 antialias=True):
        self.size = _batched.F._pair(size, "size")
        if scale[0] > scale[1] or ratio[0] > ratio[1]:
            raise ValueError("Scale and ratio should be of kind (min, max)")
        self.scale, self.ratio, self.interpolation, self.antialias = scale, ratio, interpolation, antialias
        F._mode(interpolation)

    @staticmethod
    def get_params(img, scale, ratio):
        _, height, width = F.get_dimensions(img)
        area = height * width
        log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
        for _ in range(10):
            target_area = area * _uniform(scale[0], scale[1])
            aspect = math.exp(_uniform(log_ratio[0], log_ratio[1]))
            w = int(round(math.sqrt(target_area * aspect)))
            h = int(round(math.sqrt(target_area / aspect)))
            if 0 < w <= width and 0 < h <= height:
                return _randint(0, height - h + 1), _randint(0, width - w + 1), h, w
        in_ratio = width / height
        if in_ratio < min(ratio):
            w, h = width, int(round(width / min(ratio)))
        elif in_ratio > max(ratio):
            h, w = height, int(round(height * max(ratio)))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def __call__(self, img):
        top, left, h, w = self.get_params(img, self.scale, self.ratio)
        return F.resize(F.crop(img, top, left, h, w), list(self.size), self.interpolation, None, self.antialias)
