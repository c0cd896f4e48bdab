"""Small layers of torch.nn.functional, composed from webgrad's ops: the shrink and threshold activations (glu,
hardshrink, softshrink, tanhshrink, threshold, rrelu, softmin), normalisations (normalize, rms_norm,
local_response_norm), distances (cosine_similarity, pairwise_distance, pdist), 1-D convolution and pooling on the
2-D kernels (conv1d, conv_transpose1d, avg_pool1d, max_pool1d, adaptive_avg_pool1d, adaptive_max_pool1d/2d),
im2col and its inverse (unfold, fold), channel_shuffle, embedding_bag and bilinear.

Their gradients come from the ops they are made of. Index lists that depend on shapes only (unfold's windows,
pdist's pairs, adaptive windows) are made on the host. nn.functional re-exports them.
"""

import math
import warnings

from .. import _norm, dtypes
from .._autograd import no_grad, renamed
from .._tensor import Tensor, _norm_dim, arange, tensor, zeros
from ..ops import elementwise
from ..ops.conv import adaptive_avg_pool2d, avg_pool2d, conv2d, conv_transpose2d, max_pool2d, pad
from ..ops.elementwise import where
from ..ops.reduce import softmax
from ..ops.row_norm import normalize_rows
from ..random import rand
from ._sparse_grad import rows_with_sparse_grad

_sigmoid = elementwise.function("sigmoid")
_tanh = elementwise.function("tanh")


def _check(input, op, name="input"):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(input).__name__}")


def _index(values, like):
    return tensor(values, dtype=dtypes.int64, device=like.device) if values else \
        zeros(0, dtype=dtypes.int64, device=like.device)


# ===================================================================== activations
def glu(input, dim=-1):
    """a * sigmoid(b) for the two halves a, b of `input` along dim, as torch.nn.functional.glu."""
    _check(input, "glu")
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = _norm_dim(dim, input.ndim)
    n = input.shape[d]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {n}")
    a, b = input.narrow(d, 0, n // 2), input.narrow(d, n // 2, n // 2)
    return a * _sigmoid(b)


def hardshrink(input, lambd=0.5):
    """input where |input| > lambd, else 0."""
    _check(input, "hardshrink")
    return where((input >= -lambd) & (input <= lambd), 0.0, input)


def softshrink(input, lambd=0.5):
    """input - lambd above lambd, input + lambd below -lambd, 0 between."""
    _check(input, "softshrink")
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    return where(input > lambd, input - lambd, where(input < -lambd, input + lambd, 0.0))


def tanhshrink(input):
    """input - tanh(input)."""
    _check(input, "tanhshrink")
    return input - _tanh(input)


def threshold(input, threshold, value, inplace=False):
    """input where input > threshold, else value, as torch.nn.functional.threshold."""
    _check(input, "threshold")
    return elementwise._maybe_inplace(input, where(input > threshold, input, value), inplace)


def threshold_(input, threshold, value):
    return globals()["threshold"](input, threshold, value, inplace=True)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky ReLU whose negative slope is drawn uniformly from [lower, upper] for each element in training, and
    is (lower + upper) / 2 otherwise, as torch.nn.functional.rrelu."""
    _check(input, "rrelu")
    if training:
        slope = rand(*input.shape, device=input.device) * (upper - lower) + lower
        if slope.dtype is not input.dtype:
            slope = slope.to(input.dtype)
    else:
        slope = (lower + upper) / 2.0
    return elementwise._maybe_inplace(input, where(input >= 0, input, input * slope), inplace)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-input) over dim, as torch.nn.functional.softmin."""
    _check(input, "softmin")
    if dim is None:
        warnings.warn("Implicit dimension choice for softmin has been deprecated. Change the call to include dim=X "
                      "as an argument.", stacklevel=_stacklevel)
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return softmax(-input, dim, dtype=dtype)


# ===================================================================== normalisation
def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input divided by its p-norm over dim (at least eps), as torch.nn.functional.normalize."""
    _check(input, "normalize")
    denom = _norm.norm(input, p, (dim,), keepdim=True).clamp(min=eps).expand_as(input)
    result = input / denom
    return result if out is None else out.copy_(result)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """input / sqrt(mean(input^2) + eps) over the trailing `normalized_shape` dims, times weight, as
    torch.nn.functional.rms_norm (eps defaults to the dtype's machine epsilon)."""
    _check(input, "rms_norm")
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError(f"rms_norm(): given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in shape)}], but got input of size {list(input.shape)}")
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(f"rms_norm(): expected weight of shape {list(shape)}, got {list(weight.shape)}")
    if eps is None:
        eps = 9.765625e-04 if input.dtype is dtypes.float16 else 0.0078125 if input.dtype is dtypes.bfloat16 else (
            2.220446049250313e-16 if input.dtype is dtypes.float64 else 1.1920928955078125e-07)
    if k and input.dtype in (dtypes.float32, dtypes.float64) and (weight is None or weight.dtype is input.dtype):
        if weight is not None and weight.device != input.device:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{input.device} and {weight.device}!")
        # the fused row kernels: one dispatch forward, one backward pass (ops/row_norm.py)
        return normalize_rows(input.contiguous(), shape, None if weight is None else weight.contiguous(), None, eps,
                              rms=True)
    x = input.float() if input.dtype in (dtypes.float16, dtypes.bfloat16) else input  # (in float32, as torch's)
    dims = tuple(range(input.ndim - k, input.ndim))
    out = x * ((x * x).mean(dims, keepdim=True) + eps).rsqrt() if dims else x * (x * x + eps).rsqrt()
    out = out.to(input.dtype) if out.dtype is not input.dtype else out
    return out * weight if weight is not None else out


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """input / (k + alpha * mean of input^2 over `size` neighbouring channels)^beta, as
    torch.nn.functional.local_response_norm."""
    _check(input, "local_response_norm")
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if input.numel() == 0:
        return input
    shape = tuple(input.shape)
    square = (input * input).reshape(shape[0], 1, shape[1], -1)  # [N, 1, C, rest]
    square = pad(square, (0, 0, size // 2, (size - 1) // 2))
    div = avg_pool2d(square, (size, 1), stride=1).reshape(shape)
    return input / (div * alpha + k) ** beta


# ===================================================================== distances
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """The cosine of the angle between x1 and x2 (broadcast) along dim, each norm at least eps, as
    torch.nn.functional.cosine_similarity (the clamped norms pass their gradient through, as torch's)."""
    _check(x1, "cosine_similarity", "x1")
    _check(x2, "cosine_similarity", "x2")
    if not x1.dtype.is_floating:
        x1 = x1.float()
    if not x2.dtype.is_floating:
        x2 = x2.float()
    shape = elementwise.broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    x1 = x1.expand(*shape) if tuple(x1.shape) != shape else x1
    x2 = x2.expand(*shape) if tuple(x2.shape) != shape else x2

    def clamped_norm(x):
        n = _norm.norm(x, 2.0, (dim,), keepdim=True)
        with no_grad():
            lift = n.clamp(min=eps) - n
        return n + lift
    return ((x1 / clamped_norm(x1)) * (x2 / clamped_norm(x2))).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The p-norm of x1 - x2 + eps over the last dim, as torch.nn.functional.pairwise_distance."""
    _check(x1, "pairwise_distance", "x1")
    _check(x2, "pairwise_distance", "x2")
    ndim = max(x1.ndim, x2.ndim)
    diff = x1 - x2 + eps
    if ndim == 0:
        return _norm.norm(diff.reshape(1), float(p), (0,), keepdim=False).reshape(())
    return _norm.norm(diff, float(p), (ndim - 1,), keepdim=keepdim)


def pdist(input, p=2):
    """The p-norm distances between the rows of a matrix, for each pair i < j in row-major order, as
    torch.nn.functional.pdist."""
    _check(input, "pdist")
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n = input.shape[0]
    first = [i for i in range(n) for _ in range(i + 1, n)]
    second = [j for i in range(n) for j in range(i + 1, n)]
    if not first:
        return input.reshape(-1)[:0] * 1.0
    diff = input.index_select(0, _index(first, input)) - input.index_select(0, _index(second, input))
    if p == 0:  # a count of the differing entries: a zero gradient, as torch's
        with no_grad():
            out = _norm.norm(diff, 0.0, (1,), keepdim=False)
        return elementwise.record_zero_grad(out, "Pdist", (input,))
    return _norm.norm(diff, float(p), (1,), keepdim=False)


# ===================================================================== 1-D convolution and pooling
def _single(value, name):
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise RuntimeError(f"expected {name} to be a single integer value or a list of 1 values to match the "
                               f"convolution dimensions, but got {name}={list(value)}")
        return int(value[0])
    return int(value)


def _signal(input, op, batched_ndim=3):
    """input as [N, C, 1, L] (a 2-D image one pixel high) and whether it came without a batch dim."""
    _check(input, op)
    if input.ndim not in (batched_ndim - 1, batched_ndim):
        raise RuntimeError(f"{op}: Expected 2D (unbatched) or 3D (batched) input, but got input of size: "
                           f"{list(input.shape)}")
    unbatched = input.ndim == batched_ndim - 1
    x = input.unsqueeze(0) if unbatched else input
    return x.unsqueeze(2), unbatched


def _back(out, unbatched):
    out = out.squeeze(2)
    return out.squeeze(0) if unbatched else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution of [N, C, L] (or [C, L]) with weight [O, C / groups, K], on conv2d, as
    torch.nn.functional.conv1d (padding may be 'same' or 'valid')."""
    x, unbatched = _signal(input, "conv1d")
    if weight.ndim != 3:
        raise RuntimeError(f"conv1d: expected a 3-D weight [out_channels, in_channels / groups, kernel], got "
                           f"{list(weight.shape)}")
    pad2 = padding if isinstance(padding, str) else (0, _single(padding, "padding"))
    out = conv2d(x, weight.unsqueeze(2), bias, (1, _single(stride, "stride")), pad2,
                 (1, _single(dilation, "dilation")), groups)
    return _back(out, True) if unbatched else renamed(_back(out, False), "Convolution")  # (PyTorch's node)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """1-D transposed convolution of [N, C, L] (or [C, L]) with weight [C, O / groups, K], on conv_transpose2d,
    as torch.nn.functional.conv_transpose1d."""
    x, unbatched = _signal(input, "conv_transpose1d")
    out = conv_transpose2d(x, weight.unsqueeze(2), bias, (1, _single(stride, "stride")),
                           (0, _single(padding, "padding")), (0, _single(output_padding, "output_padding")), groups,
                           (1, _single(dilation, "dilation")))
    return _back(out, True) if unbatched else renamed(_back(out, False), "Convolution")  # (PyTorch's node)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """Mean over each window of [N, C, L] (or [C, L]), as torch.nn.functional.avg_pool1d."""
    x, unbatched = _signal(input, "avg_pool1d")
    k = _single(kernel_size, "kernel_size")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else _single(stride, "stride")
    out = avg_pool2d(x, (1, k), (1, s), (0, _single(padding, "padding")), ceil_mode, count_include_pad)
    return _back(out, unbatched)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over each window of [N, C, L] (or [C, L]), with the indices of the maxima along L where asked, as
    torch.nn.functional.max_pool1d."""
    x, unbatched = _signal(input, "max_pool1d")
    k = _single(kernel_size, "kernel_size")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else _single(stride, "stride")
    out, indices = max_pool2d(x, (1, k), (1, s), (0, _single(padding, "padding")),
                              (1, _single(dilation, "dilation")), ceil_mode, return_indices=True)
    out, indices = _back(out, unbatched), _back(indices, unbatched)  # (one row: the flat index is the column)
    return (out, indices) if return_indices else out


def adaptive_avg_pool1d(input, output_size):
    """Average pooling of [N, C, L] (or [C, L]) to output_size windows, as torch.nn.functional.adaptive_avg_pool1d."""
    x, unbatched = _signal(input, "adaptive_avg_pool1d")
    return _back(adaptive_avg_pool2d(x, (1, _single(output_size, "output_size"))), unbatched)


def _adaptive_windows(size, out):
    """[out, longest] positions of PyTorch's adaptive windows [floor(i*size/out), ceil((i+1)*size/out)), each
    padded with its last position (which never changes a window's max or its first position)."""
    spans = [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]
    longest = max(end - start for start, end in spans)
    return [[min(start + j, end - 1) for j in range(longest)] for start, end in spans], longest


def _adaptive_max(x, out_size, op):
    """Adaptive max pooling of [N, C, H, W] to out_size: (values, flat indices h * W + w)."""
    h, w = x.shape[-2:]
    oh, ow = out_size
    if oh <= 0 or ow <= 0 or h == 0 or w == 0:
        raise RuntimeError(f"{op}: output_size and the input's spatial dims must be positive, got output_size "
                           f"{list(out_size)} for input of size {list(x.shape)}")
    rows, lh = _adaptive_windows(h, oh)
    cols, lw = _adaptive_windows(w, ow)
    picked = x.index_select(2, _index([r for window in rows for r in window], x))
    picked = picked.index_select(3, _index([c for window in cols for c in window], x))
    n, c = x.shape[:2]
    picked = picked.reshape(n, c, oh, lh, ow, lw).permute(0, 1, 2, 4, 3, 5).reshape(n, c, oh, ow, lh * lw)
    values, local = picked.max(-1)
    flat = [[[r * w + col for r in rows[i] for col in cols[j]] for j in range(ow)] for i in range(oh)]
    table = _index(flat, x).reshape(1, 1, oh, ow, lh * lw).expand(n, c, oh, ow, lh * lw)
    return values, table.gather(4, local.unsqueeze(4)).squeeze(4)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max over adaptive windows of [N, C, L] (or [C, L]), with their indices where asked, as
    torch.nn.functional.adaptive_max_pool1d."""
    x, unbatched = _signal(input, "adaptive_max_pool1d")
    out, indices = _adaptive_max(x, (1, _single(output_size, "output_size")), "adaptive_max_pool1d")
    out, indices = _back(out, unbatched), _back(indices, unbatched)
    return (out, indices) if return_indices else out


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max over adaptive windows of [N, C, H, W] (or [C, H, W]); None in output_size keeps that dim, as
    torch.nn.functional.adaptive_max_pool2d."""
    _check(input, "adaptive_max_pool2d")
    if input.ndim not in (3, 4):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: {list(input.shape)}")
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    size = tuple(x.shape[2 + i] if s is None else int(s) for i, s in enumerate(size))
    out, indices = _adaptive_max(x, size, "adaptive_max_pool2d")
    if unbatched:
        out, indices = out.squeeze(0), indices.squeeze(0)
    return (out, indices) if return_indices else out


def _unpool(input, indices, kernel_size, stride, padding, output_size, dims, op):
    """The inverse of max pooling over the last `dims` dims: input's values written at their flat plane positions
    `indices` (a max pool's return_indices) in zeros of the output size (PyTorch's default: (n - 1) * stride -
    2 * padding + kernel)."""
    _check(input, op)
    _check(indices, op, "indices")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"{op}: Expected shape of indices to be same as that of the input tensor "
                           f"({list(input.shape)}) but got indices tensor with shape: {list(indices.shape)}")
    if input.ndim not in (dims + 1, dims + 2):
        raise RuntimeError(f"{op}: Expected {dims + 1}D or {dims + 2}D tensor, but got {list(input.shape)}")

    def per_dim(value, name):
        values = tuple(value) if isinstance(value, (tuple, list)) else (value,) * dims
        if len(values) != dims:
            raise RuntimeError(f"{op}: {name} must have {dims} elements, got {list(values)}")
        return tuple(int(v) for v in values)
    kernel = per_dim(kernel_size, "kernel_size")
    strides = kernel if stride is None or (isinstance(stride, (tuple, list)) and not stride) else \
        per_dim(stride, "stride")
    pads = per_dim(padding, "padding")
    spatial = tuple(input.shape[-dims:])
    if output_size is None:
        size = tuple((n - 1) * s - 2 * p + k for n, s, p, k in zip(spatial, strides, pads, kernel))
    else:
        size = tuple(int(n) for n in tuple(output_size)[-dims:])
        if len(tuple(output_size)) not in (dims, input.ndim):
            raise ValueError(f"{op}: output_size must have {dims} or {input.ndim} elements, got "
                             f"{list(output_size)}")
    lead = tuple(input.shape[:-dims])
    plane = 1
    for n in size:
        plane *= n
    flat_in = input.reshape(lead + (-1,))
    from ..ops.scatter import scatter
    with _bounds_reporting(f"{op}: Found an invalid max index: {{value}} (output volumes are of size {plane})"):
        out = scatter(zeros(lead + (plane,), dtype=input.dtype, device=input.device), len(lead),
                      indices.reshape(lead + (-1,)).long(), flat_in)
    return out.reshape(lead + size)


def _bounds_reporting(message):
    from .. import _bounds
    return _bounds.reporting(message)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool1d: [N, C, L] (or [C, L]) values written at their indices, zeros elsewhere, as
    torch.nn.functional.max_unpool1d."""
    return _unpool(input, indices, kernel_size, stride, padding, output_size, 1, "max_unpool1d")


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool2d (indices h * W + w of each plane), as torch.nn.functional.max_unpool2d."""
    return _unpool(input, indices, kernel_size, stride, padding, output_size, 2, "max_unpool2d")


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of a 3-D max pooling (flat indices of each volume), as torch.nn.functional.max_unpool3d."""
    return _unpool(input, indices, kernel_size, stride, padding, output_size, 3, "max_unpool3d")


# ===================================================================== im2col
def _pair(value, name):
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise RuntimeError(f"{name} must be an int or a pair, got {list(value)}")
        return int(value[0]), int(value[1])
    return int(value), int(value)


def _windows(size, kernel, dilation, padding, stride):
    """(padded size, blocks per dim, [kh * kw * L] flat positions in the padded image)."""
    padded = [n + 2 * p for n, p in zip(size, padding)]
    blocks = [(n - d * (k - 1) - 1) // s + 1 for n, k, d, s in zip(padded, kernel, dilation, stride)]
    if any(b <= 0 for b in blocks):
        raise RuntimeError(f"Given input with spatial size {list(size)}, kernel_size={list(kernel)}, "
                           f"dilation={list(dilation)}, padding={list(padding)}, calculated shape of the array of "
                           f"sliding blocks as {blocks}, but its components must be at least one.")
    positions = [(i * dilation[0] + bi * stride[0]) * padded[1] + j * dilation[1] + bj * stride[1]
                 for i in range(kernel[0]) for j in range(kernel[1])
                 for bi in range(blocks[0]) for bj in range(blocks[1])]
    return padded, blocks, positions


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """The sliding blocks of [N, C, H, W] (or [C, H, W]) as columns: [N, C * kh * kw, L], as
    torch.nn.functional.unfold (im2col)."""
    _check(input, "unfold")
    if input.ndim not in (3, 4):
        raise NotImplementedError(f"Input Error: Only 3D or 4D input Tensors are supported (got {input.ndim}D)")
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    kernel, dil, padd, strd = (_pair(v, n) for v, n in ((kernel_size, "kernel_size"), (dilation, "dilation"),
                                                        (padding, "padding"), (stride, "stride")))
    padded, blocks, positions = _windows(tuple(x.shape[2:]), kernel, dil, padd, strd)
    n, c = x.shape[:2]
    if any(padd):
        x = pad(x, (padd[1], padd[1], padd[0], padd[0]))
    cols = x.reshape(n, c, padded[0] * padded[1]).index_select(2, _index(positions, x))
    out = cols.reshape(n, c * kernel[0] * kernel[1], blocks[0] * blocks[1])
    return out.squeeze(0) if unbatched else out


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """The inverse arrangement of unfold: columns [N, C * kh * kw, L] (or unbatched) summed back into
    [N, C, H, W] where blocks overlap, as torch.nn.functional.fold (col2im)."""
    _check(input, "fold")
    if input.ndim not in (2, 3):
        raise NotImplementedError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported "
                                  f"(got {input.ndim}D)")
    unbatched = input.ndim == 2
    x = input.unsqueeze(0) if unbatched else input
    size, kernel, dil, padd, strd = (_pair(v, n) for v, n in (
        (output_size, "output_size"), (kernel_size, "kernel_size"), (dilation, "dilation"), (padding, "padding"),
        (stride, "stride")))
    padded, blocks, positions = _windows(size, kernel, dil, padd, strd)
    n, ck, length = x.shape
    per = kernel[0] * kernel[1]
    if ck % per:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                           f"got input.size(1)={ck} and kernel_size={list(kernel)}")
    if length != blocks[0] * blocks[1]:
        raise RuntimeError(f"Given output_size={list(size)}, kernel_size={list(kernel)}, dilation={list(dil)}, "
                           f"padding={list(padd)}, stride={list(strd)}, expected size of input's dimension 2 to match "
                           f"the calculated number of sliding blocks {blocks[0]} * {blocks[1]} = "
                           f"{blocks[0] * blocks[1]}, but got input.size(2)={length}.")
    from ..ops.scatter import index_add
    c = ck // per
    cols = x.reshape(n, c, per * length)
    image = zeros((n, c, padded[0] * padded[1]), dtype=x.dtype, device=x.device)
    image = index_add(image, 2, _index(positions, x), cols).reshape(n, c, padded[0], padded[1])
    image = image[:, :, padd[0]:padd[0] + size[0], padd[1]:padd[1] + size[1]]
    return image.squeeze(0) if unbatched else image


# ===================================================================== rearranging and products
def channel_shuffle(input, groups):
    """The channels of [N, C, *] regrouped: the g-th channel of group k moves to position g * groups + k, as
    torch.nn.functional.channel_shuffle."""
    _check(input, "channel_shuffle")
    if input.ndim < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with sizes "
                           f"{list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    n, c = input.shape[:2]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    rest = tuple(input.shape[2:])
    return input.reshape((n, groups, c // groups) + rest).transpose(1, 2).reshape((n, c) + rest)


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = input1[..., i] weight[o, i, j] input2[..., j] + bias[o], as torch.nn.functional.bilinear."""
    _check(input1, "bilinear", "input1")
    _check(input2, "bilinear", "input2")
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be three-dimensional, but got {weight.ndim}")
    o, i, j = weight.shape
    if input1.ndim != input2.ndim or tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got {list(input1.shape[:-1])} and "
                           f"{list(input2.shape[:-1])}")
    if input1.shape[-1] != i or input2.shape[-1] != j:
        raise RuntimeError(f"bilinear(): input sizes {input1.shape[-1]} and {input2.shape[-1]} do not match weight "
                           f"[{o}, {i}, {j}]")
    lead = tuple(input1.shape[:-1])
    x1, x2 = input1.reshape(-1, i), input2.reshape(-1, j)
    mixed = x1.matmul(weight.permute(1, 0, 2).reshape(i, o * j)).reshape(-1, o, j)  # [B, O, J]
    out = (mixed * x2.unsqueeze(1)).sum(-1)
    if bias is not None:
        out = out + bias
    return out.reshape(lead + (o,))


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sums, means or maxima of bags of embedding rows, as torch.nn.functional.embedding_bag: input is 2-D (one bag
    per row) or 1-D with `offsets` (where each bag starts); per_sample_weights scales the rows (mode 'sum');
    rows at padding_idx take no part; an empty bag gives zeros."""
    _check(input, "embedding_bag")
    _check(weight, "embedding_bag", "weight")
    if max_norm is not None or scale_grad_by_freq:
        raise NotImplementedError("embedding_bag(): max_norm and scale_grad_by_freq are not supported")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
    if sparse and mode == "max":
        raise ValueError("max mode does not support sparse weights")
    if input.dtype.is_floating:
        raise ValueError(f"embedding_bag(): input must be an integer tensor of indices, got {input.dtype.name}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                      f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
                                      "on GitHub.")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(f"embedding_bag: If per_sample_weights ({list(per_sample_weights.shape)}) is not None, "
                             f"then it must have the same shape as the input ({list(input.shape)})")
    rows = weight.shape[0]
    if padding_idx is not None:
        if not -rows <= padding_idx < rows:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= rows
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             "fixed length sequences.")
        bags, length = input.shape
        bag_of = arange(bags, device=input.device).repeat_interleave(length) if bags * length else \
            zeros(0, dtype=dtypes.int64, device=input.device)
        flat = input.reshape(-1)
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        flat = input
        bags = offsets.shape[0] - (1 if include_last_offset else 0)
        starts = offsets[:bags] if include_last_offset else offsets
        # each element's bag: the number of bag starts at or before it, less one
        marks = zeros(flat.shape[0] + 1, dtype=dtypes.int64, device=input.device)
        from ..ops.scatter import index_add
        marks = index_add(marks, 0, starts.long(), marks.new_ones(starts.shape[0]))
        bag_of = marks[:flat.shape[0]].cumsum(0) - 1
        if include_last_offset and flat.shape[0]:
            bag_of = bag_of.clamp(max=bags - 1)
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if sparse:  # weight's gradient a sparse COO tensor, as torch's (_sparse_grad.py)
        picked = rows_with_sparse_grad(flat.long(), weight, padding_idx, name="EmbeddingBag")
    else:
        picked = weight.index_select(0, flat.long()) if flat.shape[0] else weight[:0]
    keep = None if padding_idx is None else (flat != padding_idx)
    if per_sample_weights is not None:
        picked = picked * per_sample_weights.reshape(-1, 1)
    from ..ops.scatter import index_add, index_reduce
    dim = weight.shape[1]
    out = zeros((bags, dim), dtype=weight.dtype, device=weight.device)
    if mode == "max":
        if keep is not None:
            picked = where(keep.unsqueeze(1), picked, -math.inf)
        out = index_reduce(out, 0, bag_of, picked, "amax", include_self=False)
        hit = index_add(zeros(bags, dtype=dtypes.int64, device=weight.device), 0, bag_of,
                        (keep.long() if keep is not None else flat.new_ones(flat.shape[0])))
        return where((hit > 0).unsqueeze(1), out, 0.0)
    if keep is not None:
        picked = where(keep.unsqueeze(1), picked, 0.0)
    out = index_add(out, 0, bag_of, picked)
    if mode == "mean":
        count = index_add(zeros(bags, dtype=weight.dtype, device=weight.device), 0, bag_of,
                          (keep.to(weight.dtype) if keep is not None else weight.new_ones(flat.shape[0])))
        out = out / count.clamp(min=1).unsqueeze(1)
    return out


__all__ = ["glu", "hardshrink", "softshrink", "tanhshrink", "threshold", "threshold_", "rrelu", "rrelu_", "softmin",
           "normalize", "rms_norm", "local_response_norm", "cosine_similarity", "pairwise_distance", "pdist",
           "conv1d", "conv_transpose1d", "avg_pool1d", "max_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d",
           "adaptive_max_pool2d", "unfold", "fold", "channel_shuffle", "bilinear", "embedding_bag", "max_unpool1d",
           "max_unpool2d", "max_unpool3d"]
