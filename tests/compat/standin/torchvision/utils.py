"""torchvision.utils stand-in: make_grid and save_image, computed on the host (values read with .tolist())."""

import math

import numpy as np
import torch
from PIL import Image


def _host(tensor):
    if isinstance(tensor, (list, tuple)):
        return np.stack([_host(t) for t in tensor])
    return np.asarray(tensor.detach().cpu().float().tolist(), dtype=np.float32)


def _grid(array, nrow=8, padding=2, normalize=False, value_range=None, scale_each=False, pad_value=0.0):
    if array.ndim == 2:
        array = array[None]
    if array.ndim == 3:
        array = array[None] if array.shape[0] in (1, 3) else array[:, None]
    if array.shape[1] == 1:
        array = np.repeat(array, 3, axis=1)
    if normalize:
        lo, hi = value_range if value_range is not None else (array.min(), array.max())
        array = np.clip((array - lo) / max(hi - lo, 1e-5), 0, 1)
    n, c, h, w = array.shape
    cols = min(nrow, n)
    rows = math.ceil(n / cols)
    grid = np.full((c, rows * (h + padding) + padding, cols * (w + padding) + padding), pad_value, np.float32)
    for i in range(n):
        y, x = divmod(i, cols)
        top, left = y * (h + padding) + padding, x * (w + padding) + padding
        grid[:, top:top + h, left:left + w] = array[i]
    return grid


def make_grid(tensor, nrow=8, padding=2, normalize=False, value_range=None, scale_each=False, pad_value=0.0,
              **kwargs):
    return torch.tensor(_grid(_host(tensor), nrow, padding, normalize, value_range, scale_each, pad_value))


def save_image(tensor, fp, nrow=8, padding=2, normalize=False, value_range=None, scale_each=False, pad_value=0.0,
               format=None, **kwargs):
    grid = _grid(_host(tensor), nrow, padding, normalize, value_range, scale_each, pad_value)
    pixels = np.clip(grid * 255 + 0.5, 0, 255).astype(np.uint8).transpose(1, 2, 0)
    Image.fromarray(pixels).save(fp, format=format)
