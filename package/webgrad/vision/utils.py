"""torchvision.utils: make_grid and save_image."""

import math

from .. import dtypes
from .._tensor import Tensor, full
from ..ops.shape import stack

__all__ = ["make_grid", "save_image"]


def make_grid(tensor, nrow=8, padding=2, normalize=False, value_range=None, scale_each=False, pad_value=0.0):
    """Images [B, C, H, W] (or a list of [C, H, W]) tiled into one [C, H', W'] image, nrow per row, padding
    pixels of pad_value between and around them; normalize rescales to [0, 1] (by value_range, else the
    min and max, per image with scale_each), as torchvision's."""
    if isinstance(tensor, (list, tuple)):
        tensor = stack(list(tensor), 0)
    if not isinstance(tensor, Tensor):
        raise TypeError(f"tensor or list of tensors expected, got {type(tensor)}")
    if tensor.ndim == 2:
        tensor = tensor.unsqueeze(0)
    if tensor.ndim == 3:
        tensor = (tensor.repeat(3, 1, 1) if tensor.shape[0] == 1 else tensor).unsqueeze(0)
    if tensor.ndim == 4 and tensor.shape[1] == 1:
        tensor = tensor.repeat(1, 3, 1, 1)
    if normalize:
        tensor = tensor.clone()

        def rescale(img, low, high):
            return img.clamp(low, high).sub(low).div(max(high - low, 1e-5))
        if value_range is not None and not (isinstance(value_range, tuple) and len(value_range) == 2):
            raise TypeError("value_range has to be a tuple (min, max) if specified. min and max are numbers")
        if scale_each:
            tensor = stack([rescale(t, *(value_range or (float(t.min()), float(t.max())))) for t in tensor], 0)
        else:
            tensor = rescale(tensor, *(value_range or (float(tensor.min()), float(tensor.max()))))
    if tensor.shape[0] == 1:
        return tensor.squeeze(0)
    n, c, h, w = tensor.shape
    xmaps = min(nrow, n)
    ymaps = int(math.ceil(float(n) / xmaps))
    height, width = h + padding, w + padding
    grid = full((c, height * ymaps + padding, width * xmaps + padding), pad_value, dtype=tensor.dtype,
                device=tensor.device)
    k = 0
    for y in range(ymaps):  # one copy per image: Python walks images, not pixels
        for x in range(xmaps):
            if k >= n:
                break
            top, left = y * height + padding, x * width + padding
            grid[:, top:top + h, left:left + w] = tensor[k]
            k += 1
    return grid


def save_image(tensor, fp, format=None, **kwargs):
    """make_grid(tensor, **kwargs) written as an image file through Pillow (values in [0, 1] -> bytes, rounded)."""
    from .transforms.functional import to_pil_image
    grid = make_grid(tensor, **kwargs)
    image = grid.mul(255).add_(0.5).clamp_(0, 255).to(dtypes.uint8)
    to_pil_image(image).save(fp, format=format)
