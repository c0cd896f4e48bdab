"""torchvision.transforms.functional on webgrad: each function takes a webgrad image tensor ([..., C, H, W], or
[H, W] for one gray plane; uint8 or float) or a PIL image (where Pillow is installed), and returns the same kind,
with torchvision's arithmetic: sizes, crop offsets, uint8 rounding. Tensors are resized by F.interpolate with
antialiasing (torchvision's default), PIL images by Pillow itself, as torchvision does.
"""

import numbers

from ... import dtypes
from ..._tensor import Tensor, tensor
from ...nn import functional as NF
from ...transforms import functional as _batched

normalize = _batched.normalize


class InterpolationMode:
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


_PIL_FILTERS = {"nearest": "NEAREST", "nearest-exact": "NEAREST", "bilinear": "BILINEAR", "bicubic": "BICUBIC",
                "box": "BOX", "hamming": "HAMMING", "lanczos": "LANCZOS"}


def _pil_module():
    try:
        from PIL import Image
    except ImportError:
        return None
    return Image


def is_pil(img):
    image = _pil_module()
    return image is not None and isinstance(img, image.Image)


def _mode(interpolation):
    mode = getattr(interpolation, "value", interpolation)
    if mode not in _PIL_FILTERS:
        raise ValueError(f"interpolation {interpolation!r}: expected one of {sorted(_PIL_FILTERS)}")
    return mode


# ------------------------------------------------------------------ PIL <-> tensor
def pil_to_tensor(pic):
    """A PIL image as a uint8 tensor [C, H, W] (C = its bands), read from its bytes (no NumPy)."""
    if not is_pil(pic):
        raise TypeError(f"pic should be PIL Image. Got {type(pic)}")
    bands = len(pic.getbands())
    return tensor(pic.tobytes(), dtype=dtypes.uint8).reshape(pic.height, pic.width, bands).permute(2, 0, 1) \
        .contiguous()


def to_pil_image(pic, mode=None):
    """A [C, H, W] (or [H, W]) tensor as a PIL image: float images are scaled by 255 and truncated to bytes."""
    image = _pil_module()
    if image is None:
        raise ImportError("to_pil_image needs Pillow (pip install pillow; in Pyodide: micropip.install('pillow'))")
    if is_pil(pic):
        return pic if mode is None else pic.convert(mode)
    if not isinstance(pic, Tensor):
        raise TypeError(f"pic should be Tensor or PIL Image. Got {type(pic)}.")
    if pic.ndim == 2:
        pic = pic.unsqueeze(0)
    if pic.ndim != 3:
        raise ValueError(f"pic should be 2/3 dimensional. Got {pic.ndim} dimensions.")
    if pic.dtype.is_floating:
        pic = pic.mul(255).to(dtypes.uint8)
    elif pic.dtype is not dtypes.uint8:
        raise TypeError(f"to_pil_image: {pic.dtype} images are not supported (uint8 or float)")
    c, h, w = pic.shape
    mode = mode or {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}.get(c)
    if mode is None:
        raise ValueError(f"to_pil_image: {c} channels has no PIL mode")
    raw = bytes(pic.permute(1, 2, 0).contiguous().reshape(-1).tolist())
    return image.frombytes(mode, (w, h), raw)


def to_tensor(pic):
    """uint8 images (PIL or tensor) to float32 in [0, 1]; [H, W] -> [1, H, W]."""
    if is_pil(pic):
        pic = pil_to_tensor(pic)
    return _batched.to_tensor(pic)


def image_tensor(img):
    """img as a webgrad tensor image: PIL images become uint8 [C, H, W]."""
    return pil_to_tensor(img) if is_pil(img) else img


def get_dimensions(img):
    """[channels, height, width]."""
    if is_pil(img):
        return [len(img.getbands()), img.height, img.width]
    return [1 if img.ndim == 2 else img.shape[-3], img.shape[-2], img.shape[-1]]


def convert_image_dtype(image, dtype=dtypes.float32):
    """uint8 <-> float conversions with torchvision's scaling (x / 255; float to uint8 as x * 255.999 floored)."""
    dtype = dtypes.to_dtype(dtype)
    if image.dtype is dtype:
        return image
    if image.dtype.is_floating and dtype.is_floating:
        return image.to(dtype)
    if image.dtype is dtypes.uint8 and dtype.is_floating:
        return image.to(dtype) / 255
    if image.dtype.is_floating and dtype is dtypes.uint8:
        return image.mul(255.999).to(dtypes.uint8)
    raise TypeError(f"convert_image_dtype: {image.dtype} -> {dtype} is not supported (uint8 and float images)")


# ------------------------------------------------------------------ geometry
def _output_size(h, w, size, max_size):
    """torchvision's _compute_resized_output_size: an int (or [int]) matches the smaller edge."""
    if isinstance(size, numbers.Integral) or len(size) == 1:
        requested = int(size if isinstance(size, numbers.Integral) else size[0])
        short, long = (w, h) if w <= h else (h, w)
        new_short, new_long = requested, int(requested * long / short)
        if max_size is not None:
            if max_size <= requested:
                raise ValueError(f"max_size = {max_size} must be strictly greater than the requested size for the "
                                 f"smaller edge size = {size}")
            if new_long > max_size:
                new_short, new_long = int(max_size * new_short / new_long), max_size
        return (new_long, new_short) if w <= h else (new_short, new_long)
    if max_size is not None:
        raise ValueError("max_size should only be passed if size specifies the length of the smaller edge")
    return int(size[0]), int(size[1])


def resize(img, size, interpolation=InterpolationMode.BILINEAR, max_size=None, antialias=True):
    mode = _mode(interpolation)
    _, h, w = get_dimensions(img)
    oh, ow = _output_size(h, w, size, max_size)
    if is_pil(img):
        return img if (oh, ow) == (h, w) else img.resize((ow, oh), getattr(_pil_module(), _PIL_FILTERS[mode]))
    if (oh, ow) == (h, w):
        return img
    if mode not in ("nearest", "nearest-exact", "bilinear", "bicubic"):
        raise ValueError(f"resize: {mode!r} is only for PIL images; tensors take nearest, bilinear or bicubic")
    lead, x = img.shape[:-2], img.reshape(-1, 1, h, w)
    out = NF.interpolate(x.float() if img.dtype is dtypes.uint8 else x, size=(oh, ow), mode=mode,
                         antialias=antialias and mode in ("bilinear", "bicubic"),
                         align_corners=False if mode in ("bilinear", "bicubic") else None)
    if img.dtype is dtypes.uint8:
        out = out.round().clamp(0, 255).to(dtypes.uint8) if mode in ("bilinear", "bicubic") else \
            out.to(dtypes.uint8)
    return out.reshape(*lead, oh, ow)


def crop(img, top, left, height, width):
    """The [top, top + height) x [left, left + width) region; parts outside the image are zeros."""
    if is_pil(img):
        return img.crop((left, top, left + width, top + height))
    h, w = img.shape[-2:]
    inside = img[..., max(top, 0):min(top + height, h), max(left, 0):min(left + width, w)]
    pads = (max(-left, 0), max(left + width - w, 0), max(-top, 0), max(top + height - h, 0))
    return NF.pad(inside, pads) if any(pads) else inside


def center_crop(img, output_size):
    th, tw = _batched._pair(output_size, "size")
    _, h, w = get_dimensions(img)
    return crop(img, int(round((h - th) / 2.0)), int(round((w - tw) / 2.0)), th, tw)


def hflip(img):
    if is_pil(img):
        return img.transpose(_pil_module().FLIP_LEFT_RIGHT)
    return img.flip(-1)


def vflip(img):
    if is_pil(img):
        return img.transpose(_pil_module().FLIP_TOP_BOTTOM)
    return img.flip(-2)


def pad(img, padding, fill=0, padding_mode="constant"):
    """padding: int, (left/right, top/bottom) or (left, top, right, bottom); modes constant, edge, reflect."""
    modes = {"constant": "constant", "edge": "replicate", "reflect": "reflect"}
    if padding_mode not in modes:
        raise ValueError(f"padding_mode {padding_mode!r}: webgrad pads with constant, edge or reflect")
    left, top, right, bottom = _batched.padding_sides(padding)
    pil = is_pil(img)
    x = pil_to_tensor(img) if pil else img
    lead = x.shape[:-2]
    x4 = x.reshape(-1, 1, *x.shape[-2:])
    floating = x4.float() if x4.dtype is not dtypes.float32 and padding_mode != "constant" else x4
    out = NF.pad(floating, (left, right, top, bottom), mode=modes[padding_mode],
                 **({"value": fill} if padding_mode == "constant" else {}))
    out = out.to(x.dtype).reshape(*lead, *out.shape[-2:])
    return to_pil_image(out, img.mode) if pil else out


def rgb_to_grayscale(img, num_output_channels=1):
    """ITU-R 601-2 luma (0.2989 R + 0.587 G + 0.114 B), as torchvision's; uint8 results truncated."""
    if is_pil(img):
        gray = img.convert("L")
        return gray if num_output_channels == 1 else _pil_module().merge("RGB", [gray, gray, gray])
    if img.shape[-3] == 1:
        gray = img
    else:
        r, g, b = img.float().unbind(-3)
        gray = (0.2989 * r + 0.587 * g + 0.114 * b).to(img.dtype).unsqueeze(-3)
    return gray.expand(*gray.shape[:-3], num_output_channels, *gray.shape[-2:]).contiguous()


to_grayscale = rgb_to_grayscale
