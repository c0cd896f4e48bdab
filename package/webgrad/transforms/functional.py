"""The functions behind webgrad.transforms, batched on the device (as torchvision.transforms.functional, for
webgrad tensors).

An image is a tensor [..., C, H, W] (uint8 or float32): every leading dimension is a batch, and the random
transforms draw their parameters for each image of the batch (torchvision, given a batch, draws one set for
the whole batch). Draws come from webgrad's generator: the image of index n uses counters offset + 3n ..
offset + 3n + 2 of the stream `webgrad.rand` uses (see backends/interface.py), so a seed gives the same
augmentations on every device. Inside a replayed step (webgrad.replayable) the seed and offset are dynamic
scalars: every replay draws new ones. The results do not track gradients (these are input transforms).
"""

import numbers

from .. import dtypes, replay
from .. import random as _random
from .._backends.kernels import AUGMENT_MAX_CHANNELS, AUGMENT_PAD_MODES
from .._tensor import Tensor, tensor
from .._backends import kernels

_DRAWS_PER_IMAGE = 3


def _as_batch(img, name):
    """(img as a contiguous [N, C, H, W] tensor, the leading shape to restore)."""
    if not isinstance(img, Tensor):
        raise TypeError(f"{name}: expected a webgrad Tensor image [..., C, H, W], got {type(img).__name__}")
    if img.ndim < 3:
        raise ValueError(f"{name}: expected an image [..., C, H, W] with at least 3 dimensions, got shape "
                         f"{list(img.shape)}")
    if img.dtype not in (dtypes.uint8, dtypes.float32):
        raise TypeError(f"{name}: images must be uint8 or float32, not {img.dtype}")
    lead = tuple(img.shape[:-3])
    n = 1
    for d in lead:
        n *= d
    return img.detach().contiguous().reshape(n, *img.shape[-3:]), lead


def _draw(device, count, generator):
    """(seed, offset) for `count` counters of the generator; dynamic scalars while a step is recorded."""
    gen = generator or _random.default_generator
    seed, offset = gen.take(count)
    backend = device.backend
    if replay.capturing() and backend.supports_capture:
        seed, offset = backend.scalar(seed, "u32"), backend.scalar(offset, "u32")
        replay.on_replay(lambda: _random._advance(gen, count, seed, offset))
    return seed, offset


def _pair(value, name):
    if isinstance(value, numbers.Integral):
        return int(value), int(value)
    value = tuple(value)
    if len(value) == 1:
        return int(value[0]), int(value[0])
    if len(value) != 2:
        raise ValueError(f"{name} should be an int or a sequence of 1 or 2 ints, got {value}")
    return int(value[0]), int(value[1])


def padding_sides(padding):
    """torchvision's padding argument as (left, top, right, bottom)."""
    if isinstance(padding, numbers.Integral):
        p = int(padding)
        sides = (p, p, p, p)
    else:
        padding = tuple(int(p) for p in padding)
        if len(padding) == 1:
            sides = padding * 4
        elif len(padding) == 2:
            sides = (padding[0], padding[1], padding[0], padding[1])
        elif len(padding) == 4:
            sides = padding
        else:
            raise ValueError(f"Padding must be an int or a 1, 2, or 4 element tuple, not a {len(padding)} "
                             "element tuple")
    if min(sides) < 0:
        raise ValueError(f"padding must be non-negative, got {padding}")
    return sides


def _crop_flip(img, size, pad, mode, fill, flip_p, generator, name):
    x, lead = _as_batch(img, name)
    n, c, h, w = x.shape
    if mode not in AUGMENT_PAD_MODES:
        raise ValueError(f"{name}: padding_mode should be one of {AUGMENT_PAD_MODES}, got {mode!r}")
    left, top, right, bottom = pad
    if mode in ("reflect", "symmetric"):
        limit_h, limit_w = (h - 1, w - 1) if mode == "reflect" else (h, w)
        if max(top, bottom) > limit_h or max(left, right) > limit_w:
            raise ValueError(f"{name}: {mode} padding {pad} (left, top, right, bottom) needs a larger image "
                             f"than {h}x{w} (at most {limit_h} rows and {limit_w} columns of padding)")
    if not isinstance(fill, numbers.Real):
        raise TypeError(f"{name}: fill must be a number (one value for every channel), got {fill!r}")
    th, tw = size
    ph, pw = h + top + bottom, w + left + right
    if th > ph or tw > pw:
        raise ValueError(f"Required crop size {(th, tw)} is larger than input image size {(ph, pw)}")
    out = Tensor._empty((n, c, th, tw), x.dtype, x.device)
    seed, offset = _draw(x.device, _DRAWS_PER_IMAGE * n, generator)
    kernels.augment_crop_flip(x.device.backend, out._view, x._view, seed, offset, pad, mode, fill, flip_p)
    return out.reshape(*lead, c, th, tw)


def random_crop(img, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant", generator=None):
    """RandomCrop on each image of a batch: pad (torchvision's padding, fill, padding_mode), then crop `size`
    at a random position drawn per image."""
    th, tw = _pair(size, "size")
    left, top, right, bottom = padding_sides(padding) if padding is not None else (0, 0, 0, 0)
    h, w = img.shape[-2] + top + bottom, img.shape[-1] + left + right
    if pad_if_needed and (tw > w or th > h):
        if padding is not None and padding_mode in ("reflect", "symmetric"):
            # torchvision pads twice; a mirror of a mirror is not one wider mirror
            raise ValueError(f"random_crop: pad_if_needed after {padding_mode} padding is not supported; pad "
                             "enough with `padding`")
        extra_w, extra_h = max(tw - w, 0), max(th - h, 0)
        left, right, top, bottom = left + extra_w, right + extra_w, top + extra_h, bottom + extra_h
    return _crop_flip(img, (th, tw), (left, top, right, bottom), padding_mode, fill, 0.0, generator, "RandomCrop")


def random_horizontal_flip(img, p=0.5, generator=None):
    """Flip each image of a batch left-right with probability p, drawn per image."""
    h, w = img.shape[-2:]
    return _crop_flip(img, (h, w), (0, 0, 0, 0), "constant", 0, float(p), generator, "RandomHorizontalFlip")


def hflip(img):
    """Flip every image left-right (u < 1 always holds, so no randomness is involved)."""
    h, w = img.shape[-2:]
    return _crop_flip(img, (h, w), (0, 0, 0, 0), "constant", 0, 1.0, None, "hflip")


def color_jitter(img, brightness=(1.0, 1.0), contrast=(1.0, 1.0), saturation=(1.0, 1.0), generator=None):
    """ColorJitter on each image of a batch (factor ranges (low, high); (1, 1) leaves that property alone):
    the order of the adjustments and their factors are drawn per image."""
    x, lead = _as_batch(img, "ColorJitter")
    if x.shape[1] not in (1, 3):
        raise TypeError(f"Input image tensor permitted channel values are [1, 3], but found {x.shape[1]}")
    out = Tensor._empty(x.shape, x.dtype, x.device)
    seed, offset = _draw(x.device, 4 * x.shape[0], generator)
    ranges = [tuple(float(v) for v in r) for r in (brightness, contrast, saturation)]
    kernels.augment_color(x.device.backend, out._view, x._view, seed, offset, *ranges)
    return out.reshape(*lead, *x.shape[1:])


def random_erasing(img, p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0, generator=None):
    """RandomErasing on each image of a batch: with probability p, a rectangle of random area (a `scale`
    fraction) and aspect ratio (log-uniform in `ratio`) set to `value`, drawn per image (41 counters each)."""
    import math
    x, lead = _as_batch(img, "RandomErasing")
    out = Tensor._empty(x.shape, x.dtype, x.device)
    seed, offset = _draw(x.device, 41 * x.shape[0], generator)
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    kernels.augment_erase(x.device.backend, out._view, x._view, seed, offset, float(p), tuple(map(float, scale)), log_ratio,
                                   float(value))
    return out.reshape(*lead, *x.shape[1:])


def _affine(img, scale, shift, name, channels_last=False):
    x, lead = _as_batch(img, name)
    if channels_last:
        n, h, w, c = x.shape
    else:
        n, c, h, w = x.shape
    if c > AUGMENT_MAX_CHANNELS:
        raise ValueError(f"{name}: at most {AUGMENT_MAX_CHANNELS} channels, got {c}")
    scale, shift = list(scale), list(shift)
    if len(scale) == 1:
        scale, shift = scale * c, shift * c
    if len(scale) != c:
        raise ValueError(f"{name}: {len(scale)} values for an image of {c} channels")
    out = Tensor._empty((n, c, h, w), dtypes.float32, x.device)
    kernels.augment_affine(x.device.backend, out._view, x._view, scale, shift, channels_last)
    return out.reshape(*lead, c, h, w)


def to_tensor(pic):
    """uint8 images -> float32 in [0, 1]. A webgrad tensor is taken as [..., C, H, W] (the layout webgrad's
    datasets give) and stays so, a 2-D one [H, W] (MNIST's) becoming [1, H, W]; a NumPy array or a PIL image is [H, W, C] (torchvision's rule) and becomes
    [C, H, W]. float32 tensors pass through unchanged, as torchvision's ToTensor leaves floats unscaled."""
    if not isinstance(pic, Tensor):
        import numpy as np  # only a NumPy array or a PIL image gets here; both need NumPy
        arr = np.asarray(pic)
        if arr.ndim == 2:
            arr = arr[:, :, None]
        if arr.ndim != 3:
            raise ValueError(f"pic should be 2 or 3 dimensional. Got {arr.ndim} dimensions.")
        if arr.dtype != np.uint8:
            return tensor(arr.transpose(2, 0, 1).astype(np.float32))
        return _affine(tensor(arr), [1.0 / 255.0], [0.0], "ToTensor", channels_last=True)
    if pic.ndim == 2:  # a grayscale [H, W] image (MNIST's), as torchvision's ToTensor reads a 2-D array
        pic = pic.unsqueeze(0)
    if pic.dtype is dtypes.float32:
        return pic
    if pic.dtype is not dtypes.uint8:
        raise TypeError(f"ToTensor: expected a uint8 or float32 image, got {pic.dtype}")
    return _affine(pic, [1.0 / 255.0], [0.0], "ToTensor")


def _mean_std(mean, std):
    mean = [float(m) for m in (mean if not isinstance(mean, numbers.Real) else [mean])]
    std = [float(s) for s in (std if not isinstance(std, numbers.Real) else [std])]
    if any(s == 0 for s in std):
        raise ValueError("std evaluated to zero after conversion to float32, leading to division by zero.")
    if len(mean) != len(std):
        raise ValueError(f"normalize: {len(mean)} means but {len(std)} stds")
    return mean, std


def is_uint8_tensor(img):
    return isinstance(img, Tensor) and img.dtype is dtypes.uint8


def to_normalized(img, mean, std):
    """normalize(to_tensor(img), mean, std) for uint8 tensors in one kernel: x * (1 / (255 std)) - mean / std
    (equal up to float32 rounding)."""
    mean, std = _mean_std(mean, std)
    if img.ndim == 2:  # a grayscale [H, W] image: to_tensor's [1, H, W]
        img = img.unsqueeze(0)
    return _affine(img, [1.0 / (255.0 * s) for s in std], [-m / s for m, s in zip(mean, std)], "Normalize")


def normalize(tensor_, mean, std, inplace=False):
    """(image - mean[c]) / std[c] for each channel c of float images [..., C, H, W], in one kernel."""
    if not isinstance(tensor_, Tensor) or tensor_.dtype is not dtypes.float32:
        got = tensor_.dtype if isinstance(tensor_, Tensor) else type(tensor_).__name__
        raise TypeError(f"Input tensor should be a float tensor. Got {got}.")
    mean, std = _mean_std(mean, std)
    out = _affine(tensor_, [1.0 / s for s in std], [-m / s for m, s in zip(mean, std)], "Normalize")
    if inplace:
        tensor_.copy_(out)
        return tensor_
    return out
