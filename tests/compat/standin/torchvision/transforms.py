"""torchvision.transforms stand-in: the transforms the corpus scripts use, with torchvision's semantics on PIL
images (geometry, through Pillow) and on tensors (ToTensor's [0, 1] float CHW, Normalize). Random transforms draw
from Python's `random`, which the runner seeds."""

import numbers
import random

import numpy as np
import torch
from PIL import Image


class InterpolationMode:
    NEAREST = Image.NEAREST
    BILINEAR = Image.BILINEAR
    BICUBIC = Image.BICUBIC


def _size_pair(size):
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    if len(size) == 1:
        return int(size[0]), int(size[0])
    return int(size[0]), int(size[1])


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class ToTensor:
    """PIL image or HWC uint8 array -> float tensor [C, H, W] in [0, 1]."""

    def __call__(self, pic):
        array = np.asarray(pic)
        if array.ndim == 2:
            array = array[:, :, None]
        array = array.transpose(2, 0, 1)
        if array.dtype == np.uint8:
            array = array.astype(np.float32) / 255.0
        return torch.tensor(np.ascontiguousarray(array, dtype=np.float32))


class ToPILImage:
    def __call__(self, pic):
        array = np.asarray(pic.detach().cpu().tolist(), dtype=np.float32) if hasattr(pic, "detach") else pic
        if array.ndim == 3:
            array = array.transpose(1, 2, 0)
            if array.shape[2] == 1:
                array = array[:, :, 0]
        if array.dtype != np.uint8:
            array = (np.clip(array, 0, 1) * 255).astype(np.uint8)
        return Image.fromarray(array)


class Normalize:
    def __init__(self, mean, std, inplace=False):
        self.mean, self.std, self.inplace = list(mean), list(std), inplace

    def __call__(self, tensor):
        channels = tensor.shape[-3]
        mean = self.mean * channels if len(self.mean) == 1 else self.mean
        std = self.std * channels if len(self.std) == 1 else self.std
        mean = torch.tensor(mean, dtype=tensor.dtype).view(-1, 1, 1)
        std = torch.tensor(std, dtype=tensor.dtype).view(-1, 1, 1)
        return (tensor - mean) / std


class Resize:
    """An int resizes the smaller edge to it, keeping the aspect ratio; a pair gives (height, width)."""

    def __init__(self, size, interpolation=Image.BILINEAR, max_size=None, antialias=True):
        self.size, self.interpolation = size, interpolation

    def __call__(self, img):
        w, h = img.size
        if isinstance(self.size, numbers.Number) or len(self.size) == 1:
            short = int(self.size if isinstance(self.size, numbers.Number) else self.size[0])
            if w <= h:
                new_w, new_h = short, int(short * h / w)
            else:
                new_w, new_h = int(short * w / h), short
        else:
            new_h, new_w = _size_pair(self.size)
        return img.resize((new_w, new_h), self.interpolation)


Scale = Resize


class CenterCrop:
    def __init__(self, size):
        self.size = _size_pair(size)

    def __call__(self, img):
        th, tw = self.size
        w, h = img.size
        left, top = round((w - tw) / 2.0), round((h - th) / 2.0)
        return img.crop((left, top, left + tw, top + th))


class Pad:
    def __init__(self, padding, fill=0, padding_mode="constant"):
        self.padding, self.fill = padding, fill

    def __call__(self, img):
        p = self.padding
        left, top, right, bottom = (p, p, p, p) if isinstance(p, int) else (
            (p[0], p[1], p[0], p[1]) if len(p) == 2 else tuple(p))
        padded = Image.new(img.mode, (img.size[0] + left + right, img.size[1] + top + bottom), self.fill)
        padded.paste(img, (left, top))
        return padded


class RandomCrop:
    def __init__(self, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant"):
        self.size, self.padding, self.fill = _size_pair(size), padding, fill

    def __call__(self, img):
        if self.padding:
            img = Pad(self.padding, self.fill)(img)
        th, tw = self.size
        w, h = img.size
        top, left = random.randint(0, h - th), random.randint(0, w - tw)
        return img.crop((left, top, left + tw, top + th))


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        return img.transpose(Image.FLIP_LEFT_RIGHT) if random.random() < self.p else img


class Grayscale:
    def __init__(self, num_output_channels=1):
        self.num_output_channels = num_output_channels

    def __call__(self, img):
        img = img.convert("L")
        return img.convert("RGB") if self.num_output_channels == 3 else img


class Lambda:
    def __init__(self, lambd):
        self.lambd = lambd

    def __call__(self, img):
        return self.lambd(img)
