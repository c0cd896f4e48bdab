"""3-D pooling over [N, C, D, H, W] (or unbatched [C, D, H, W]), as ATen's max_pool3d_with_indices, avg_pool3d,
adaptive_max_pool3d and _adaptive_avg_pool3d, with their backward ops.

A box window is separable: its maximum is the maximum over depth of the maxima over height of the maxima over width,
and its average the same with weighted sums (the divisor is a product of one count per axis, whichever of
count_include_pad / the valid elements / divisor_override ATen takes). So each op is three passes, one per axis,
each a loop over the window's offsets j: out[o] = reduce_j x[position(o, j)]. The positions of every window are
worked out on the host, once per geometry: a fixed window (stride, padding, dilation, ceil_mode) or an adaptive one
(start floor(o * I / O), end ceil((o + 1) * I / O)). Positions outside the input repeat one inside the window (a
maximum does not change; a sum gives that offset weight 0). Where the positions of an offset step evenly the pass
reads a strided view, else an index_select. Maxima keep ATen's choice: the first largest element in (d, h, w)
order, the last NaN where there is one; indices are flat positions d * H * W + h * W + w in each volume.

Gradients: the maximum's gradient is scattered to its indices (scatter_add); the averages are linear, so their
gradient is webgrad's autograd of the same passes (index_add and pads of the gradient).
"""

import math

from .. import dtypes
from .._autograd import no_grad
from .._tensor import Tensor, tensor, zeros
from .elementwise import where

# (device, its backend, geometry of one axis) -> positions tensor. The backend is part of the key: a WebGPU device
# lost and opened again (webgpu.py's reset) has a new backend, and a buffer of the old device cannot be bound.
_POSITIONS = {}


def _triple(v, name):
    v = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if len(v) == 1:
        v = v * 3
    if len(v) != 3:
        raise RuntimeError(f"{name} must either be a single int, or a tuple of three ints")
    return v


def output_size(size, kernel, stride, padding, dilation, ceil_mode):
    """ATen's pooling_output_shape for one axis."""
    out = (size + 2 * padding - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def _fixed_axis(size, kernel, stride, padding, dilation, ceil_mode):
    """(window positions [kernel][O], valid [kernel][O]) of a fixed window along one axis: each out-of-range
    position replaced by the nearest valid one of the same window."""
    o_count = output_size(size, kernel, stride, padding, dilation, ceil_mode)
    raw = [[o * stride - padding + j * dilation for o in range(o_count)] for j in range(kernel)]
    valid = [[0 <= p < size for p in row] for row in raw]
    positions = [[0] * o_count for _ in range(kernel)]
    for o in range(o_count):
        inside = [raw[j][o] for j in range(kernel) if valid[j][o]]
        for j in range(kernel):
            p = raw[j][o]
            positions[j][o] = p if valid[j][o] else (inside[0] if p < 0 else inside[-1])
    return positions, valid


def _adaptive_axis(size, o_count):
    """(positions [L][O], valid [L][O]) of adaptive windows [floor(o * I / O), ceil((o + 1) * I / O))."""
    starts = [(o * size) // o_count for o in range(o_count)]
    ends = [-((-(o + 1) * size) // o_count) for o in range(o_count)]
    length = max(e - s for s, e in zip(starts, ends))
    positions = [[min(s + j, e - 1) for s, e in zip(starts, ends)] for j in range(length)]
    valid = [[s + j < e for s, e in zip(starts, ends)] for j in range(length)]
    return positions, valid


def _as_tensor(values, device, dtype):
    if len(_POSITIONS) > 512:  # (inputs of ever new sizes: start over rather than grow)
        _POSITIONS.clear()
    return tensor(values, dtype=dtype, device=device)


def _take(x, axis, positions, device, key):
    """x's elements at `positions` (a host list) along `axis`: a strided view where they step evenly, else an
    index_select (its index tensor kept per geometry and device)."""
    n = len(positions)
    step = positions[1] - positions[0] if n > 1 else 1
    if step > 0 and all(positions[i + 1] - positions[i] == step for i in range(n - 1)):
        items = [slice(None)] * x.ndim
        items[axis] = slice(positions[0], positions[0] + (n - 1) * step + 1, step)
        return x[tuple(items)]
    held = _POSITIONS.get((device, device.backend, key))
    if held is None:
        held = _POSITIONS[device, device.backend, key] = _as_tensor(positions, device, dtypes.int64)
    return x.index_select(axis, held)


def _max_pass(v, idx, axis, positions, scale, key):
    """Maxima of v over each window along `axis`, and the flat indices that won: idx (None on the first pass) holds
    the indices so far; this axis adds position * scale."""
    device = v.device
    best = won = None
    shape = (len(positions[0]),) + (1,) * (v.ndim - axis - 1)
    for j, row in enumerate(positions):
        vj = _take(v, axis, row, device, key + (j,))
        offset = _offset_tensor(row, scale, shape, device, key + (j, "offset", scale, shape))
        ij = offset if idx is None else _take(idx, axis, row, device, key + (j,)) + offset
        if best is None:
            best, won = vj, ij.expand(*vj.shape) if tuple(ij.shape) != tuple(vj.shape) else ij
            continue
        take = (vj > best) | (vj != vj)  # (a later NaN wins, as ATen's `val > max || isnan(val)`)
        best = where(take, vj, best)
        won = where(take, ij, won)
    return best, won


def _offset_tensor(row, scale, shape, device, key):
    held = _POSITIONS.get((device, device.backend, key))
    if held is None:
        held = _POSITIONS[device, device.backend, key] = _as_tensor([p * scale for p in row], device,
                                                                    dtypes.int64).reshape(*shape)
    return held


def _sum_pass(v, axis, positions, weights, key):
    """Weighted sums of v over each window along `axis`: sum_j weights[j][o] * v[positions[j][o]]."""
    device = v.device
    shape = (len(positions[0]),) + (1,) * (v.ndim - axis - 1)
    out = None
    for j, (row, w) in enumerate(zip(positions, weights)):
        if not any(w):
            continue
        vj = _take(v, axis, row, device, key + (j,))
        if any(x != 1 for x in w):
            wkey = key + (j, "weight", shape, v.dtype)
            held = _POSITIONS.get((device, device.backend, wkey))
            if held is None:
                held = _POSITIONS[device, device.backend, wkey] = _as_tensor(w, device, v.dtype).reshape(*shape)
            vj = vj * held
        out = vj if out is None else out + vj
    return out


def _batched(x, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if x.ndim not in (4, 5) or any(s == 0 for s in x.shape[-3:]):
        raise RuntimeError(f"{op}(): Expected 4D or 5D tensor with non-zero spatial sizes for input, but got "
                           f"{list(x.shape)}")
    return x.unsqueeze(0) if x.ndim == 4 else x


def _unbatch(out, x):
    return out.squeeze(0) if x.ndim == 4 else out


def _max_pool(x, axes, op):
    """(values, indices) of the separable maximum over the windows axes[k] = (positions, key) of D, H, W."""
    v = _batched(x, op)
    _, _, d, h, w = v.shape
    idx = None
    for axis, scale, (positions, key) in zip((4, 3, 2), (1, w, h * w), reversed(axes)):
        v, idx = _max_pass(v, idx, axis, positions, scale, key)
    return _unbatch(v.contiguous(), x), _unbatch(idx.contiguous(), x)


def max_pool3d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """(out, indices) of ATen's max_pool3d_with_indices."""
    k = _triple(kernel_size, "max_pool3d: kernel_size")
    s = _triple(stride, "max_pool3d: stride") if stride else k
    p = _triple(padding, "max_pool3d: padding")
    dl = _triple(dilation, "max_pool3d: dilation")
    v = _batched(x, "max_pool3d")
    for i in range(3):
        if p[i] * 2 > k[i]:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p[i]}, "
                               f"kernel_size={k[i]} and dilation={dl[i]}")
        if output_size(v.shape[2 + i], k[i], s[i], p[i], dl[i], ceil_mode) < 1:
            raise RuntimeError(f"max_pool3d(): Given input size {list(v.shape[1:])}, the output size is too small")
    axes = []
    for i in range(3):
        geometry = (v.shape[2 + i], k[i], s[i], p[i], dl[i], bool(ceil_mode))
        axes.append((_fixed_axis(*geometry)[0], ("fixed",) + geometry))
    with no_grad():
        return _max_pool(x, axes, "max_pool3d")


def adaptive_max_pool3d(x, output_size_):
    """(out, indices) of ATen's adaptive_max_pool3d."""
    v = _batched(x, "adaptive_max_pool3d")
    sizes = _triple(output_size_, "adaptive_max_pool3d: output_size")
    sizes = tuple(v.shape[2 + i] if o is None else o for i, o in enumerate(sizes))
    axes = [(_adaptive_axis(v.shape[2 + i], sizes[i])[0], ("adaptive", v.shape[2 + i], sizes[i])) for i in range(3)]
    with no_grad():
        return _max_pool(x, axes, "adaptive_max_pool3d")


def max_pool3d_backward(grad, x, indices):
    """The gradient of x (of x's shape) from a 3-D max pooling's output gradient and indices: each output's gradient
    added at the element it came from."""
    with no_grad():
        shape = tuple(x.shape)
        lead = math.prod(shape[:-3])
        volume = math.prod(shape[-3:])
        out = zeros((lead, volume), dtype=grad.dtype, device=grad.device)
        if grad.numel():
            out = out.scatter_add(1, indices.reshape(lead, -1).long(), grad.reshape(lead, -1))
        return out.reshape(*shape)


def _avg_axis(size, kernel, stride, padding, ceil_mode, count_include_pad):
    """(positions, weights) of a fixed average window along one axis: weights 1 / the axis's count for valid
    positions (count_include_pad counts the padding up to input + padding, as ATen), 0 for the others."""
    positions, valid = _fixed_axis(size, kernel, stride, padding, 1, ceil_mode)
    weights = []
    for j in range(kernel):
        row = []
        for o in range(len(positions[0])):
            start = o * stride - padding
            if count_include_pad:
                count = min(start + kernel, size + padding) - start
            else:
                count = min(start + kernel, size) - max(start, 0)
            row.append(1.0 / count if valid[j][o] else 0.0)
        weights.append(row)
    return positions, weights


def avg_pool3d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """ATen's avg_pool3d (webgrad's autograd gives its gradient)."""
    k = _triple(kernel_size, "avg_pool3d: kernel_size")
    s = _triple(stride, "avg_pool3d: stride") if stride else k
    p = _triple(padding, "avg_pool3d: padding")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    v = _batched(x, "avg_pool3d")
    for i in range(3):
        if p[i] * 2 > k[i]:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p[i]}, "
                               f"kernel_size={k[i]} and dilation=1")
        if output_size(v.shape[2 + i], k[i], s[i], p[i], 1, ceil_mode) < 1:
            raise RuntimeError(f"avg_pool3d(): Given input size {list(v.shape[1:])}, the output size is too small")
    for axis in (4, 3, 2):
        i = axis - 2
        geometry = (v.shape[axis], k[i], s[i], p[i], bool(ceil_mode), bool(count_include_pad))
        positions, weights = _avg_axis(*geometry)
        if divisor_override is not None:
            weights = [[1.0 if w else 0.0 for w in row] for row in weights]
        v = _sum_pass(v, axis, positions, weights, ("avg", divisor_override is not None) + geometry)
    if divisor_override is not None:
        v = v / divisor_override
    return _unbatch(v.contiguous(), x)


def adaptive_avg_pool3d(x, output_size_):
    """ATen's _adaptive_avg_pool3d (webgrad's autograd gives its gradient)."""
    v = _batched(x, "adaptive_avg_pool3d")
    sizes = _triple(output_size_, "adaptive_avg_pool3d: output_size")
    sizes = tuple(v.shape[2 + i] if o is None else o for i, o in enumerate(sizes))
    for axis in (4, 3, 2):
        size, o_count = v.shape[axis], sizes[axis - 2]
        if o_count == 1:
            v = v.mean(axis, keepdim=True)
            continue
        positions, valid = _adaptive_axis(size, o_count)
        counts = [sum(valid[j][o] for j in range(len(valid))) for o in range(o_count)]
        weights = [[1.0 / counts[o] if valid[j][o] else 0.0 for o in range(o_count)] for j in range(len(valid))]
        v = _sum_pass(v, axis, positions, weights, ("adaptive_avg", size, o_count))
    return _unbatch(v.contiguous(), x)
