"""The CPU reference of the data augmentation kernels (webgrad.transforms)."""

from .. import kernels
from ..kernels import AUGMENT_COLOR_ORDERS
from .arrays import array, lowbias32, np, write


@kernels.augment_crop_flip.implement("cpu")
def augment_crop_flip(out, x, seed, offset, pad, mode, fill, flip_p):
    v = array(x)
    n, _, h, w = v.shape
    oh, ow = out.shape[2:]
    left, top, right, bottom = pad
    k = lowbias32(np.array([seed & 0xFFFFFFFF], np.uint32))[0]
    c = (np.arange(3 * n, dtype=np.uint64) + offset).astype(np.uint32)
    u = (lowbias32(lowbias32(c ^ k) + k) >> np.uint32(8)).astype(np.float64).reshape(n, 3) * 2.0 ** -24
    i = np.floor(u[:, 0] * (h + top + bottom - oh + 1)).astype(np.int64)
    j = np.floor(u[:, 1] * (w + left + right - ow + 1)).astype(np.int64)
    flipped = u[:, 2] < np.float32(flip_p)
    cols = np.where(flipped[:, None], np.arange(ow)[::-1], np.arange(ow))
    # padded coordinates -> image coordinates (-1: outside, the fill value)
    rows = _pad_index(i[:, None] + np.arange(oh) - top, h, mode)        # [N, OH]
    cols = _pad_index(j[:, None] + cols - left, w, mode)                 # [N, OW]
    res = v[np.arange(n)[:, None, None, None], np.arange(v.shape[1])[None, :, None, None],
            np.maximum(rows, 0)[:, None, :, None], np.maximum(cols, 0)[:, None, None, :]]
    outside = (rows < 0)[:, None, :, None] | (cols < 0)[:, None, None, :]
    write(out, np.where(outside, np.asarray(fill).astype(v.dtype), res))


@kernels.augment_affine.implement("cpu")
def augment_affine(out, x, scale, shift, channels_last=False):
    v = array(x)
    if channels_last:
        v = v.transpose(0, 3, 1, 2)
    a = np.asarray(scale, np.float32)[:, None, None]
    b = np.asarray(shift, np.float32)[:, None, None]
    write(out, v.astype(np.float32) * a + b)


@kernels.augment_color.implement("cpu")
def augment_color(out, x, seed, offset, brightness, contrast, saturation):
    v = array(x)
    n, c = v.shape[:2]
    u8 = v.dtype == np.uint8
    bound = np.float32(255.0 if u8 else 1.0)
    k = lowbias32(np.array([seed & 0xFFFFFFFF], np.uint32))[0]
    counters = (np.arange(4 * n, dtype=np.uint64) + offset).astype(np.uint32)
    bits = (lowbias32(lowbias32(counters ^ k) + k) >> np.uint32(8)).reshape(n, 4)
    u = bits.astype(np.float32) * np.float32(2.0 ** -24)
    lo = np.array([brightness[0], contrast[0], saturation[0]], np.float32)
    hi = np.array([brightness[1], contrast[1], saturation[1]], np.float32)
    factors = lo + (hi - lo) * u[:, 1:]
    orders = np.floor(bits[:, 0].astype(np.float64) * 6 * 2.0 ** -24).astype(np.int64)

    def blend(a, b, f):
        r = np.clip(f * a + (np.float32(1.0) - f) * b, np.float32(0.0), bound)
        return np.floor(r) if u8 else r

    def gray(img):
        if c == 1:
            return img[0]
        g = np.float32(0.2989) * img[0] + np.float32(0.587) * img[1] + np.float32(0.114) * img[2]
        return np.floor(g) if u8 else g

    res = np.empty(v.shape, np.float32)
    for i in range(n):  # image by image: each has its own order
        img = v[i].astype(np.float32)
        for op in AUGMENT_COLOR_ORDERS[orders[i]]:
            f = factors[i, op]
            if op == 0:
                img = blend(img, np.float32(0.0), f)
            elif op == 1:
                img = blend(img, np.float32(gray(img).mean(dtype=np.float64)), f)
            elif c != 1:
                img = blend(img, gray(img), f)
        res[i] = img
    write(out, res)


@kernels.augment_erase.implement("cpu")
def augment_erase(out, x, seed, offset, p, scale, log_ratio, value):
    v = array(x)
    n, c, h, w = v.shape
    k = lowbias32(np.array([seed & 0xFFFFFFFF], np.uint32))[0]
    counters = (np.arange(41 * n, dtype=np.uint64) + offset).astype(np.uint32)
    bits = (lowbias32(lowbias32(counters ^ k) + k) >> np.uint32(8)).reshape(n, 41)
    u = bits.astype(np.float32) * np.float32(2.0 ** -24)
    f = np.float32
    res = v.copy()
    for i in range(n):  # image by image: the attempts are a short sequential search
        if not u[i, 0] < f(p):
            continue
        for a in range(10):
            d = 1 + 4 * a
            area = f(h * w) * (f(scale[0]) + (f(scale[1]) - f(scale[0])) * u[i, d])
            ratio = np.exp(f(log_ratio[0]) + (f(log_ratio[1]) - f(log_ratio[0])) * u[i, d + 1])
            eh, ew = int(np.round(np.sqrt(area * ratio))), int(np.round(np.sqrt(area / ratio)))
            if eh < h and ew < w:
                top = int(bits[i, d + 2]) * (h - eh + 1) >> 24
                left = int(bits[i, d + 3]) * (w - ew + 1) >> 24
                res[i, :, top:top + eh, left:left + ew] = value
                break
    write(out, res)

def _pad_index(idx, size, mode):
    """Image row (or column) read at padded-relative coordinate idx (0..size-1 is the image), per mode."""
    if mode == "constant":
        return np.where((idx >= 0) & (idx < size), idx, -1)
    if mode == "edge":
        return np.clip(idx, 0, size - 1)
    if mode == "reflect":
        return np.where(idx < 0, -idx, np.where(idx >= size, 2 * size - 2 - idx, idx))
    return np.where(idx < 0, -idx - 1, np.where(idx >= size, 2 * size - 1 - idx, idx))  # symmetric
