"""Data augmentation kernels (shaders/augment.wgsl): per-sample random crop and flip, and the per-channel
affine that turns uint8 images into normalised floats. Semantics: backends/interface.py."""

import struct

from ...dtypes import float32, uint8
from ..kernels import AUGMENT_MAX_CHANNELS, AUGMENT_PAD_MODES
from .. import kernels
from .dispatch import Kernel, Shader, dtype_code
from .views import check_view, f32, u32_fields

SHADER = Shader("augment.wgsl", {})
CROP_FLIP = Kernel(SHADER, "crop_flip", ((0, "write"), (1, "read"), (2, "read"), (3, "uniform")), ("X_DTYPE",))
AFFINE = Kernel(SHADER, "affine", ((0, "write"), (1, "read"), (4, "uniform")), ("X_DTYPE",))
AFFINE4 = Kernel(SHADER, "affine4", ((7, "write"), (1, "read"), (8, "read"), (4, "uniform")), ("X_DTYPE",))
ERASE = Kernel(SHADER, "erase", ((0, "write"), (1, "read"), (2, "read"), (6, "uniform")), ("X_DTYPE",))
COLOR = Kernel(SHADER, "color", ((0, "write"), (1, "read"), (2, "read"), (5, "uniform")), ("X_DTYPE",))

_CROP = struct.Struct("<18I2f")
_AFFINE = struct.Struct(f"<8I{4 * 8}f")
_COLOR = struct.Struct("<12I8f")
_ERASE = struct.Struct("<12I6f")
WORKGROUP = 256


def _groups(rt, n):
    return (min(-(-n // WORKGROUP), rt.limits["max_compute_workgroups_per_dimension"]), 1, 1)


def _check_images(out, x, out_dtype):
    check_view(x, "x", contiguous=True, ndim=4)
    check_view(out, "out", dtype=out_dtype, contiguous=True, ndim=4)
    if x.dtype not in (float32, uint8):
        raise TypeError(f"augmentation kernels read float32 or uint8 images, not {x.dtype}")


@kernels.augment_crop_flip.implement("webgpu")
def crop_flip(rt, out, x, seed, offset, pad, mode, fill, flip_p):
    _check_images(out, x, x.dtype)
    n, c, h, w = x.shape
    oh, ow = out.shape[2:]
    left, top, right, bottom = pad
    if out.shape[:2] != (n, c) or not (0 < oh <= h + top + bottom and 0 < ow <= w + left + right):
        raise ValueError(f"crop_flip: out {out.shape} does not fit x {x.shape} padded by {pad}")
    if x.dtype is uint8 and out.offset % 4:
        raise ValueError("crop_flip: a uint8 out must start at a multiple of 4 elements")
    if out.numel == 0:
        return
    seed_slot, seed_value = u32_fields(seed, "seed")
    offset_slot, offset_value = u32_fields(offset, "offset")
    words = -(-out.numel // 4) if x.dtype is uint8 else out.numel
    params = _CROP.pack(out.numel, words, c, h, w, oh, ow, top, left, h + top + bottom - oh + 1,
                        w + left + right - ow + 1, x.offset, out.offset, seed_value, offset_value, seed_slot,
                        offset_slot, AUGMENT_PAD_MODES.index(mode), f32(fill), f32(flip_p))
    slots = tuple(s for s in (seed_slot, offset_slot) if s != 0xFFFFFFFF)
    constants = CROP_FLIP.constants({"X_DTYPE": dtype_code(x.dtype)})
    rows = out.numel // ow  # a thread per output row
    rt.dispatch(CROP_FLIP, constants, (out.storage, x.storage, rt.scalars), params, _groups(rt, rows), slots)


@kernels.augment_affine.implement("webgpu")
def affine(rt, out, x, scale, shift, channels_last=False):
    _check_images(out, x, float32)
    n, c, h, w = out.shape
    expected = (n, h, w, c) if channels_last else (n, c, h, w)
    if x.shape != expected:
        raise ValueError(f"affine: x has shape {x.shape}, expected {expected} for out {out.shape}")
    if not (len(scale) == len(shift) == c) or c > AUGMENT_MAX_CHANNELS:
        raise ValueError(f"affine: {len(scale)} scales and {len(shift)} shifts for {c} channels "
                         f"(at most {AUGMENT_MAX_CHANNELS})")
    if out.numel == 0:
        return
    pad = [0.0] * (AUGMENT_MAX_CHANNELS - c)
    coef = [f32(v) for v in scale] + pad + [f32(v) for v in shift] + pad
    params = _AFFINE.pack(out.numel, c, h * w, int(bool(channels_last)), x.offset, out.offset, 0, 0, *coef)
    constants = AFFINE.constants({"X_DTYPE": dtype_code(x.dtype)})
    if not channels_last and (h * w) % 4 == 0 and x.offset % 4 == 0 and out.offset % 4 == 0:  # whole vec4s
        rt.dispatch(AFFINE4, constants, (out.storage, x.storage, x.storage), params, _groups(rt, out.numel // 4))
        return
    rt.dispatch(AFFINE, constants, (out.storage, x.storage), params, _groups(rt, -(-out.numel // 4)))


@kernels.augment_color.implement("webgpu")
def color(rt, out, x, seed, offset, brightness, contrast, saturation):
    _check_images(out, x, x.dtype)
    n, c, h, w = x.shape
    if out.shape != x.shape or c not in (1, 3):
        raise ValueError(f"color: x {x.shape} and out {out.shape} must be one shape of 1 or 3 channels")
    if x.dtype is uint8 and ((h * w) % 4 or x.offset % 4 or out.offset % 4):
        raise ValueError(f"color: uint8 images on WebGPU need H * W ({h}x{w}) and offsets that are multiples of "
                         "4 (whole words per plane); convert the images to float32 first")
    if out.numel == 0:
        return
    seed_slot, seed_value = u32_fields(seed, "seed")
    offset_slot, offset_value = u32_fields(offset, "offset")
    lo = [f32(r[0]) for r in (brightness, contrast, saturation)]
    hi = [f32(r[1]) for r in (brightness, contrast, saturation)]
    params = _COLOR.pack(n, c, h * w, x.offset, out.offset, seed_value, offset_value, seed_slot, offset_slot, 0, 0, 0,
                         *lo, 0.0, *hi, 0.0)
    slots = tuple(s for s in (seed_slot, offset_slot) if s != 0xFFFFFFFF)
    limit = rt.limits["max_compute_workgroups_per_dimension"]
    groups = (min(n, limit), -(-n // limit), 1)  # one workgroup per image
    rt.dispatch(COLOR, COLOR.constants({"X_DTYPE": dtype_code(x.dtype)}), (out.storage, x.storage, rt.scalars),
                params, groups, slots)


@kernels.augment_erase.implement("webgpu")
def erase(rt, out, x, seed, offset, p, scale, log_ratio, value):
    _check_images(out, x, x.dtype)
    if out.shape != x.shape:
        raise ValueError(f"erase: out {out.shape} must have x's shape {x.shape}")
    if x.dtype is uint8 and out.offset % 4:
        raise ValueError("erase: a uint8 out must start at a multiple of 4 elements")
    if out.numel == 0:
        return
    n, c, h, w = x.shape
    seed_slot, seed_value = u32_fields(seed, "seed")
    offset_slot, offset_value = u32_fields(offset, "offset")
    words = -(-out.numel // 4) if x.dtype is uint8 else out.numel
    params = _ERASE.pack(out.numel, words, c, h, w, x.offset, out.offset, seed_value, offset_value, seed_slot,
                         offset_slot, 0, f32(p), f32(scale[0]), f32(scale[1]), f32(log_ratio[0]), f32(log_ratio[1]),
                         f32(value))
    slots = tuple(s for s in (seed_slot, offset_slot) if s != 0xFFFFFFFF)
    rt.dispatch(ERASE, ERASE.constants({"X_DTYPE": dtype_code(x.dtype)}), (out.storage, x.storage, rt.scalars),
                params, _groups(rt, out.numel // w), slots)  # a thread per image row
