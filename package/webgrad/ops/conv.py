"""Convolution, pooling and padding: conv2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d, pad.

conv2d is three backend kernels: the convolution (bias included) and its input and weight gradients
(_backends/kernels.py). The CPU backend builds them from im2col and BLAS; WebGPU multiplies with the
matmul kernel reading the image in place (_backends/webgpu/conv.py). The bias gradient is a sum of the
output gradient over images and positions.

Pooling kernels return what their backward needs (max_pool2d: the argmax of each window), and the
backward kernels scatter the gradient back. Images are contiguous NCHW; a 3-D [C, H, W] input is
treated as a batch of one, as in PyTorch.
"""

from .. import dtypes
from .._autograd import is_grad_enabled, record, record_adjoint
from .._view import View
from .._tensor import Tensor, full, tensor
from .elementwise import check_same_device, new
from .shape import cat, index_select
from .autocast_policy import full_precision, kept, lower_precision  # noqa: F401
from .._backends import kernels


def ntuple(value, n, name, op):
    """An int, or a sequence of one or n ints, as n ints (a convolution's stride, padding, ...)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,) * n
    value = tuple(value)
    if len(value) == 1:
        value = value * n
    if len(value) != n or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        kind = {2: "a pair", 3: "a triple"}.get(n, f"{n}")
        raise ValueError(f"{op}(): {name} must be an int or {kind} of ints, got {value!r}")
    return value


def _pair(value, name, op):
    return ntuple(value, 2, name, op)


def _out_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _image(input, op):
    """(4-D input, whether it was unbatched)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): expected a Tensor, got {type(input).__name__}")
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{op}(): expected a 3-D [C, H, W] or 4-D [N, C, H, W] input, got shape {list(input.shape)}")
    if not input.dtype.is_floating:
        raise RuntimeError(f"{op}(): expected a floating point input, got {input.dtype.name} (convert with .float())")
    return (input.unsqueeze(0), True) if input.ndim == 3 else (input, False)


def _geometry(op, shape, kernel, stride, padding, dilation):
    """Output (OH, OW), or an error naming every size involved."""
    if any(k <= 0 for k in kernel):
        raise ValueError(f"{op}(): kernel size must be positive, got {kernel}")
    if any(s <= 0 for s in stride) or any(d <= 0 for d in dilation) or any(p < 0 for p in padding):
        raise ValueError(f"{op}(): stride and dilation must be positive and padding non-negative, got "
                         f"stride={stride}, padding={padding}, dilation={dilation}")
    h, w = shape[-2], shape[-1]
    oh = _out_size(h, kernel[0], stride[0], padding[0], dilation[0])
    ow = _out_size(w, kernel[1], stride[1], padding[1], dilation[1])
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"{op}(): the input of shape {list(shape)} is too small: padded size "
                           f"({h + 2 * padding[0]}, {w + 2 * padding[1]}) < dilated kernel size "
                           f"({dilation[0] * (kernel[0] - 1) + 1}, {dilation[1] * (kernel[1] - 1) + 1})")
    return oh, ow


# ===================================================================== convolution
def _same_padding(input, kernel, stride, dilation):
    """PyTorch's padding='same': total d*(k-1) per side pair, the odd cell going to the bottom/right."""
    if any(s != 1 for s in stride):
        raise ValueError("conv2d(): padding='same' is not supported for strided convolutions")
    total = [d * (k - 1) for d, k in zip(dilation, kernel)]
    half = tuple(t // 2 for t in total)
    extra = [t - 2 * h for t, h in zip(total, half)]
    if any(extra):  # asymmetric: pad the extra row/column explicitly, the kernel pads the rest
        input = pad(input, (0, extra[1], 0, extra[0]))
    return input, half


@lower_precision("conv2d")
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation), as torch.nn.functional.conv2d. weight: [O, C/groups, kh, kw]."""
    x, unbatched = _image(input, "conv2d")
    if not isinstance(weight, Tensor) or weight.ndim != 4:
        raise RuntimeError(f"conv2d(): weight must be a 4-D tensor [out_channels, in_channels/groups, kh, kw], got "
                           f"{list(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__}")
    check_same_device("conv2d", x, weight, bias)
    if weight.dtype is not x.dtype or (bias is not None and bias.dtype is not x.dtype):
        raise RuntimeError(f"conv2d(): input ({x.dtype.name}), weight ({weight.dtype.name}) and bias must share a dtype")
    stride, dilation = _pair(stride, "stride", "conv2d"), _pair(dilation, "dilation", "conv2d")
    kernel = tuple(weight.shape[2:])
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0, 0)
        elif padding == "same":
            x, padding = _same_padding(x, kernel, stride, dilation)
        else:
            raise ValueError(f"conv2d(): padding must be an int, a pair, 'valid' or 'same', got {padding!r}")
    padding = _pair(padding, "padding", "conv2d")
    n, c = x.shape[0], x.shape[1]
    o, cg = weight.shape[0], weight.shape[1]
    if groups < 1 or c % groups or o % groups or cg * groups != c:
        raise RuntimeError(f"conv2d(): input of shape {list(input.shape)} has {c} channels, but the weight of shape "
                           f"{list(weight.shape)} with groups={groups} expects {cg * groups}"
                           + (f" (and out_channels {o} must be divisible by groups)" if groups > 1 and o % groups else ""))
    if bias is not None and tuple(bias.shape) != (o,):
        raise RuntimeError(f"conv2d(): bias must have shape [{o}], got {list(bias.shape)}")
    if groups > 1 and groups == c and kernel[0] * kernel[1] <= DEPTHWISE_MAX_WINDOW:
        out = _depthwise_conv2d(x, weight, bias, stride, padding, dilation)
    elif groups > 1:  # one convolution per group of channels, joined along the channel dim
        biases = bias.chunk(groups) if bias is not None else [None] * groups
        out = cat([_conv2d(xi, wi, bi, stride, padding, dilation)
                   for xi, wi, bi in zip(x.chunk(groups, 1), weight.chunk(groups, 0), biases)], 1)
    else:
        out = _conv2d(x, weight, bias, stride, padding, dilation)
    return out.squeeze(0) if unbatched else out


# A depthwise convolution (groups == in_channels: MobileNet, EfficientNet, ShuffleNet) with at most this many
# taps is a sum of shifted, strided slices of the padded input, each times its channel's tap: kh*kw elementwise
# passes over the output, where one small convolution per channel would cost a dispatch (and a kernel's tiling
# overhead) per channel. Differentiable by composition, to any order.
DEPTHWISE_MAX_WINDOW = 49


def _depthwise_conv2d(x, weight, bias, stride, padding, dilation):
    n, c, h, w = x.shape
    o, _, kh, kw = weight.shape
    oh, ow = _geometry("conv2d", x.shape, (kh, kw), stride, padding, dilation)
    if o != c:  # a channel multiplier: output channel k reads input channel k // (o // c)
        x = x.repeat_interleave(o // c, dim=1)
    xp = pad(x, (padding[1], padding[1], padding[0], padding[0])) if any(padding) else x
    taps = weight.reshape(o, kh * kw)
    out = None
    for a in range(kh):
        for b in range(kw):
            top, left = a * dilation[0], b * dilation[1]
            window = xp[:, :, top:top + stride[0] * (oh - 1) + 1:stride[0], left:left + stride[1] * (ow - 1) + 1:stride[1]]
            term = window * taps[:, a * kw + b].reshape(1, o, 1, 1)
            out = term if out is None else out + term
    return out + bias.reshape(1, o, 1, 1) if bias is not None else out


def _conv2d(input, weight, bias, stride, padding, dilation):
    x, w = input.contiguous(), weight.contiguous()
    b = bias.contiguous() if bias is not None else None
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = _geometry("conv2d", x.shape, (kh, kw), stride, padding, dilation)
    be = x.device.backend
    geometry = (stride, padding, dilation)
    out = new((n, o, oh, ow), x.dtype, x.device)
    # keep: the weight gradient will be taken, and a backend may hand it work of the forward's
    # (WebGPU on a software adapter: the unfolded image), held here until backward
    keep = w.requires_grad and is_grad_enabled()
    workspace = kernels.conv2d(be, out._view, x._view, w._view, b._view if b is not None else None, *geometry, keep=keep)
    # w is kept for the input's gradient only; autocast's cast of a parameter as the parameter, cast again at
    # the backward (autocast_policy.kept)
    w_shape, w_grad, b_grad = tuple(w.shape), w.requires_grad, b is not None and b.requires_grad
    w_values = kept(w) if x.requires_grad else None

    def backward(g):
        g = g.contiguous()
        if is_grad_enabled():  # create_graph: gradients that are nodes of their own, differentiable again
            return (_conv_input_grad(g, w_values(), tuple(x.shape), geometry) if x.requires_grad else None,
                    _conv_weight_grad(g, x, w_shape, geometry) if w_grad else None,
                    g.sum((0, 2, 3)) if b_grad else None)
        gx = gw = gb = None
        # The weight gradient first: then the input gradient's last pass is the last to touch g, and in a
        # captured step the backward of a ReLU before this convolution folds into it (WebGPU's fusion.py)
        if w_grad:
            gw = new(w_shape, g.dtype, g.device)
            kernels.conv2d_backward_weight(be, gw._view, g._view, x._view, *geometry, workspace=workspace)
        if x.requires_grad:
            gx = new(tuple(x.shape), g.dtype, g.device)
            kernels.conv2d_backward_input(be, gx._view, g._view, w_values()._view, *geometry)
        if b_grad:
            gb = g.sum((0, 2, 3))
        return gx, gw, gb
    return record(out, "Convolution", (x, w, b), backward)


# A convolution's two gradients as differentiable functions (create_graph=True: a gradient penalty through a
# convolutional critic). All three maps are bilinear, and each one's derivatives are the other two: for
# out = conv(x, w), <g, conv(x, w)> = <conv_input_grad(g, w), x> = <conv_weight_grad(g, x), w>.
def _conv_input_grad(g, w, x_shape, geometry):
    """d<g, conv(x, w)>/dx: the transposed convolution of g by w, recorded when it can be differentiated."""
    gx = new(x_shape, g.dtype, g.device)
    kernels.conv2d_backward_input(g.device.backend, gx._view, g._view, w._view, *geometry)
    if is_grad_enabled() and (g.requires_grad or w.requires_grad):
        def backward(h):  # h: x-shaped
            h = h.contiguous()
            return (_conv2d(h, w, None, *geometry) if g.requires_grad else None,
                    _conv_weight_grad(g, h, tuple(w.shape), geometry) if w.requires_grad else None)
        record(gx, "ConvolutionBackwardInput", (g, w), backward)
    return gx


def _conv_weight_grad(g, x, w_shape, geometry):
    """d<g, conv(x, w)>/dw, recorded when it can be differentiated."""
    gw = new(w_shape, g.dtype, g.device)
    kernels.conv2d_backward_weight(g.device.backend, gw._view, g._view, x._view, *geometry)
    if is_grad_enabled() and (g.requires_grad or x.requires_grad):
        def backward(h):  # h: w-shaped
            h = h.contiguous()
            return (_conv2d(x, h, None, *geometry) if g.requires_grad else None,
                    _conv_input_grad(g, h, tuple(x.shape), geometry) if x.requires_grad else None)
        record(gw, "ConvolutionBackwardWeight", (g, x), backward)
    return gw


# ===================================================================== pooling
def _pool_args(op, kernel_size, stride, padding, dilation=1):
    kernel = _pair(kernel_size, "kernel_size", op)
    stride = kernel if stride is None or (not isinstance(stride, int) and len(tuple(stride)) == 0) \
        else _pair(stride, "stride", op)
    padding, dilation = _pair(padding, "padding", op), _pair(dilation, "dilation", op)
    if any(k <= 0 for k in kernel) or any(s <= 0 for s in stride):
        raise ValueError(f"{op}(): kernel_size and stride must be positive, got kernel_size={kernel}, stride={stride}")
    if any(p > k // 2 for p, k in zip(padding, kernel)):
        raise RuntimeError(f"{op}(): pad should be at most half of effective kernel size, but got "
                           f"padding={padding} and kernel_size={kernel}")
    return kernel, stride, padding, dilation


def _ceil_extra(shape, kernel, stride, padding, dilation):
    """Rows and columns to add at the bottom/right so that floor-mode pooling gives ceil_mode's output size:
    PyTorch's ceil((size + 2p - d(k-1) - 1) / s) + 1 windows, less one if the last would start past the input
    and its left padding."""
    extra = []
    for size, k, s, p, d in zip(shape[-2:], kernel, stride, padding, dilation):
        span = size + 2 * p - d * (k - 1) - 1
        out = -(-span // s) + 1
        if (out - 1) * s >= size + p:
            out -= 1
        extra.append(max(0, (out - 1) * s - span))
    return tuple(extra)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over each window; with return_indices also the flat index h*W + w of each max in its plane.
    ceil_mode: the windows that start inside the input (or its left padding) and run past the end are kept."""
    x, unbatched = _image(input, "max_pool2d")
    kernel, stride, padding, dilation = _pool_args("max_pool2d", kernel_size, stride, padding, dilation)
    extra = _ceil_extra(x.shape, kernel, stride, padding, dilation) if ceil_mode else (0, 0)
    if any(extra):  # -inf rows and columns at the bottom/right (never a window's max), indices mapped back
        h, w = x.shape[-2:]
        out, indices = max_pool2d(pad(x, (0, extra[1], 0, extra[0]), value=float("-inf")), kernel, stride, padding,
                                  dilation, return_indices=True)
        indices = indices // (w + extra[1]) * w + indices % (w + extra[1])
        if unbatched:
            out, indices = out.squeeze(0), indices.squeeze(0)
        return (out, indices) if return_indices else out
    x = x.contiguous()
    oh, ow = _geometry("max_pool2d", x.shape, kernel, stride, padding, dilation)
    shape = tuple(x.shape[:2]) + (oh, ow)
    out, indices = new(shape, x.dtype, x.device), new(shape, dtypes.int64, x.device)  # int64, as PyTorch
    kernels.max_pool2d(x.device.backend, out._view, indices._view, x._view, kernel, stride, padding, dilation)

    def backward(g):
        gx = new(tuple(x.shape), g.dtype, g.device)
        kernels.max_pool2d_backward(g.device.backend, gx._view, g.contiguous()._view, indices._view, kernel, stride, padding,
                                             dilation)
        # create_graph: the scatter's adjoint reads each window's argmax out of h
        return (record_adjoint(gx, g, lambda h: h.reshape(shape[0], shape[1], -1).gather(
            2, indices.reshape(shape[0], shape[1], -1)).reshape(shape), "MaxPool2DWithIndicesBackward"),)
    record(out, "MaxPool2DWithIndices", (x,), backward)
    if unbatched:
        out, indices = out.squeeze(0), indices.squeeze(0)
    return (out, indices) if return_indices else out


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over each window (the divisor counts padding cells when count_include_pad). ceil_mode keeps the
    windows that run past the end (their divisor counts the cells inside the padded input, as PyTorch's);
    divisor_override divides every window's sum by that number instead."""
    x, unbatched = _image(input, "avg_pool2d")
    kernel, stride, padding, _ = _pool_args("avg_pool2d", kernel_size, stride, padding)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("avg_pool2d(): divisor must be not zero")
    extra = _ceil_extra(x.shape, kernel, stride, padding, (1, 1)) if ceil_mode else (0, 0)
    if divisor_override is not None or any(extra):
        # each window's sum (the padded mean times kh*kw, over zeros added at the bottom/right), divided by
        # PyTorch's divisor of that window
        sums = avg_pool2d(pad(x, (0, extra[1], 0, extra[0])), kernel, stride, padding, count_include_pad=True)
        sums = sums * float(kernel[0] * kernel[1])
        if divisor_override is not None:
            out = sums / float(divisor_override)
        else:
            out = sums / _avg_divisors(x.shape[-2:], tuple(sums.shape[-2:]), kernel, stride, padding,
                                       count_include_pad, x)
        return out.squeeze(0) if unbatched else out
    x = x.contiguous()
    oh, ow = _geometry("avg_pool2d", x.shape, kernel, stride, padding, (1, 1))
    out = new(tuple(x.shape[:2]) + (oh, ow), x.dtype, x.device)
    kernels.avg_pool2d(x.device.backend, out._view, x._view, kernel, stride, padding, bool(count_include_pad))

    def backward(g):
        gx = new(tuple(x.shape), g.dtype, g.device)
        kernels.avg_pool2d_backward(g.device.backend, gx._view, g.contiguous()._view, kernel, stride, padding,
                                             bool(count_include_pad))
        return (record_adjoint(gx, g, lambda h: avg_pool2d(h, kernel, stride, padding, False, count_include_pad),
                               "AvgPool2DBackward"),)
    record(out, "AvgPool2D", (x,), backward)
    return out.squeeze(0) if unbatched else out


def _avg_divisors(size, out_size, kernel, stride, padding, count_include_pad, like):
    """[OH, OW] divisors of PyTorch's average pooling: a window clipped to the padded input, counted with
    its padding cells (count_include_pad) or with the input cells alone."""
    per_dim = []
    for n, o, k, s, p in zip(size, out_size, kernel, stride, padding):
        counts = []
        for i in range(o):
            start = i * s - p
            end = min(start + k, n + p)
            counts.append(end - start if count_include_pad else min(end, n) - max(start, 0))
        per_dim.append(counts)
    return tensor([[float(a * b) for b in per_dim[1]] for a in per_dim[0]], dtype=like.dtype, device=like.device)


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to a fixed output size. Window i spans [floor(i*H/OH), ceil((i+1)*H/OH)), as PyTorch."""
    x, unbatched = _image(input, "adaptive_avg_pool2d")
    size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    if len(size) != 2:
        raise ValueError(f"adaptive_avg_pool2d(): output_size must be an int or a pair, got {output_size!r}")
    h, w = x.shape[2], x.shape[3]
    oh, ow = (h if size[0] is None else size[0]), (w if size[1] is None else size[1])
    if oh <= 0 or ow <= 0:
        raise ValueError(f"adaptive_avg_pool2d(): output_size must be positive, got {output_size!r}")
    if h % oh == 0 and w % ow == 0:  # the windows tile the image: plain average pooling (global pooling included)
        out = avg_pool2d(x, (h // oh, w // ow))
    else:  # overlapping windows of varying size: average with two small matrices, rows @ x @ colsᵀ
        rows = _adaptive_matrix(h, oh, x)
        cols = _adaptive_matrix(w, ow, x)
        out = rows @ x @ cols.t()
    return out.squeeze(0) if unbatched else out


def _adaptive_matrix(size, out, like):
    """[out, size] matrix whose row i averages adaptive window i."""
    m = [[0.0] * size for _ in range(out)]
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        for j in range(start, end):
            m[i][j] = 1.0 / (end - start)
    return tensor(m, dtype=like.dtype, device=like.device)


# ===================================================================== padding
def pad(input, pad, mode="constant", value=None):
    """torch.nn.functional.pad: `pad` lists (before, after) pairs starting from the last dim.
    mode 'constant' (negative pads crop), 'reflect', 'replicate' or 'circular'."""
    pairs = list(pad)
    if len(pairs) % 2 or len(pairs) // 2 > input.ndim:
        raise ValueError(f"pad(): padding length must be even and at most 2 * ndim ({2 * input.ndim}), got {len(pairs)}")
    per_dim = {input.ndim - 1 - i: (int(pairs[2 * i]), int(pairs[2 * i + 1])) for i in range(len(pairs) // 2)}
    if mode == "constant":
        return _constant_pad(input, per_dim, 0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"pad(): mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
    if value is not None and value != 0:
        raise ValueError(f"pad(): padding mode {mode!r} doesn't take in value argument")
    out = input
    for d, (before, after) in per_dim.items():
        if before or after:
            out = _index_pad(out, d, before, after, mode)
    return out


def _constant_pad(input, per_dim, value):
    for d, (before, after) in per_dim.items():
        if input.shape[d] + min(before, 0) + min(after, 0) < 0:  # torch: "narrow(): length must be non-negative"
            raise RuntimeError(f"pad(): negative padding ({before}, {after}) of dim {d} removes more than its "
                               f"{input.shape[d]} elements (input shape {list(input.shape)})")
    # negative pads crop: take that slice first (a view), then pad with what is left
    crop = tuple(slice(max(-per_dim[d][0], 0), input.shape[d] - max(-per_dim[d][1], 0)) if d in per_dim else slice(None)
                 for d in range(input.ndim))
    x = input[crop] if any(min(p) < 0 for p in per_dim.values()) else input
    before = [max(per_dim.get(d, (0, 0))[0], 0) for d in range(x.ndim)]
    after = [max(per_dim.get(d, (0, 0))[1], 0) for d in range(x.ndim)]
    out = full(tuple(n + b + a for n, b, a in zip(x.shape, before, after)), value, dtype=x.dtype, device=x.device)
    o = out._view
    inner = tuple(slice(b, b + n) for b, n in zip(before, x.shape))
    offset = o.offset + sum(b * s for b, s in zip(before, o.strides))
    kernels.copy(x.device.backend, View(o.storage, tuple(x.shape), o.strides, offset, x.dtype), x._view)
    return record(out, "ConstantPadNd", (x,), lambda g: (g[inner],))


def _index_pad(x, d, before, after, mode):
    """Pad dim d by gathering source positions (index_select carries the gradient back). A negative pad
    crops, as PyTorch's: reflect and replicate read the positions -before .. n+after of the whole dim,
    circular wraps around what is left after cropping."""
    n = x.shape[d]
    if n + before + after <= 0:
        raise RuntimeError(f"pad(): input (size {n} of dim {d}) is too small for padding ({before}, {after}): "
                           f"calculated output size {n + before + after} (input shape {list(x.shape)})")
    if mode == "circular" and n + min(before, 0) + min(after, 0) <= 0:
        raise RuntimeError(f"pad(): circular padding ({before}, {after}) of dim {d} crops all of its {n} elements")
    if mode == "reflect" and (before >= n or after >= n):
        raise RuntimeError(f"pad(): reflect padding ({before}, {after}) must be smaller than the input size {n} "
                           f"of dim {d} (input shape {list(x.shape)})")
    if mode == "circular" and (before > n or after > n):
        raise RuntimeError(f"pad(): circular padding ({before}, {after}) must be at most the input size {n} of dim {d}")
    positions = range(-before, n + after)
    if mode == "replicate":
        idx = [min(max(i, 0), n - 1) for i in positions]
    elif mode == "reflect":
        idx = [-i if i < 0 else (2 * (n - 1) - i if i >= n else i) for i in positions]
    else:
        lo, kept = max(-before, 0), n - max(-before, 0) - max(-after, 0)
        idx = [lo + i % kept for i in range(-max(before, 0), kept + max(after, 0))]
    return index_select(x, d, tensor(idx, dtype=dtypes.int32, device=x.device))


# ===================================================================== transposed convolution
@lower_precision("conv_transpose2d")
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """2-D transposed convolution, as torch.nn.functional.conv_transpose2d. weight: [C_in, C_out/groups, kh, kw].

    It is the adjoint of conv2d: conv2d's input gradient (backend.conv2d_backward_input) with this weight
    read as a conv2d weight [O=C_in, C=C_out, kh, kw], so every backend already has its kernel. Its input
    gradient is conv2d itself and its weight gradient conv2d's weight gradient with input and grad swapped.
    """
    op = "conv_transpose2d"
    x, unbatched = _image(input, op)
    if not isinstance(weight, Tensor) or weight.ndim != 4:
        raise RuntimeError(f"{op}(): weight must be a 4-D tensor [in_channels, out_channels/groups, kh, kw], got "
                           f"{list(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__}")
    check_same_device(op, x, weight, bias)
    if weight.dtype is not x.dtype or (bias is not None and bias.dtype is not x.dtype):
        raise RuntimeError(f"{op}(): input ({x.dtype.name}), weight ({weight.dtype.name}) and bias must share a dtype")
    stride, padding = _pair(stride, "stride", op), _pair(padding, "padding", op)
    dilation, output_padding = _pair(dilation, "dilation", op), _pair(output_padding, "output_padding", op)
    if any(s <= 0 for s in stride) or any(d <= 0 for d in dilation) or any(p < 0 for p in padding + output_padding):
        raise ValueError(f"{op}(): stride and dilation must be positive and padding, output_padding non-negative, "
                         f"got stride={stride}, padding={padding}, output_padding={output_padding}, dilation={dilation}")
    if any(op_ >= s and op_ >= d for op_, s, d in zip(output_padding, stride, dilation)):
        raise RuntimeError("output padding must be smaller than either stride or dilation, but got "
                           f"output_padding_height: {output_padding[0]} output_padding_width: {output_padding[1]} "
                           f"stride_height: {stride[0]} stride_width: {stride[1]} "
                           f"dilation_height: {dilation[0]} dilation_width: {dilation[1]}")
    c = x.shape[1]
    ci, og = weight.shape[0], weight.shape[1]
    if not isinstance(groups, int) or groups < 1 or ci % groups:
        raise RuntimeError(f"{op}(): groups must be a positive integer dividing the weight's in_channels {ci}, "
                           f"got groups={groups}")
    if c != ci:
        raise RuntimeError(f"{op}(): input of shape {list(input.shape)} has {c} channels, but the weight of shape "
                           f"{list(weight.shape)} expects {ci} (weight: [in_channels, out_channels/groups, kh, kw])")
    if bias is not None and tuple(bias.shape) != (og * groups,):
        raise RuntimeError(f"{op}(): bias must have shape [{og * groups}], got {list(bias.shape)}")
    kernel = tuple(weight.shape[2:])
    size = tuple((n - 1) * s - 2 * p + d * (k - 1) + q + 1
                 for n, s, p, d, k, q in zip(x.shape[2:], stride, padding, dilation, kernel, output_padding))
    if any(v <= 0 for v in size):
        raise RuntimeError(f"{op}(): the input of shape {list(input.shape)} gives an output of size {list(size)}: "
                           f"padding={padding} is too large")
    geometry = (stride, padding, dilation)
    # output_padding may reach the stride (when smaller than the dilation): rows and columns past one stride of
    # it receive nothing, so the kernel makes the output without them and zeros are added after
    crop = None
    if any(q >= s for q, s in zip(output_padding, stride)):
        # output_padding may reach the stride (when smaller than the dilation), beyond what the kernel's output
        # sizes allow: make the whole output (no padding, no output_padding), then crop `padding` from the start
        # and pad or crop the end to the size asked for (the rows past the whole output receive nothing)
        crop = [(-p, v - (f - p)) for p, v, f in zip(padding, size, (
            (n - 1) * s_ + d * (k - 1) + 1 for n, s_, d, k in zip(x.shape[2:], stride, dilation, kernel)))]
        size = tuple(v - b - a for v, (b, a) in zip(size, crop))
        geometry = (stride, (0, 0), dilation)
    if groups > 1:  # one transposed convolution per group of channels, joined along the channel dim
        out = cat([_conv_transpose2d(xi, wi, size, geometry)
                   for xi, wi in zip(x.chunk(groups, 1), weight.chunk(groups, 0))], 1)
    else:
        out = _conv_transpose2d(x, weight, size, geometry)
    if crop is not None:
        out = pad(out, crop[1] + crop[0])
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1)
    return out.squeeze(0) if unbatched else out


def _conv_transpose2d(input, weight, size, geometry):
    x, w = input.contiguous(), weight.contiguous()
    be = x.device.backend
    out = new((x.shape[0], w.shape[1]) + size, x.dtype, x.device)
    kernels.conv2d_backward_input(be, out._view, x._view, w._view, *geometry)

    def backward(g):
        g = g.contiguous()
        if is_grad_enabled():  # create_graph (see _conv_input_grad): x plays a convolution's output gradient
            return (_conv2d(g, w, None, *geometry) if x.requires_grad else None,
                    _conv_weight_grad(x, g, tuple(w.shape), geometry) if w.requires_grad else None)
        gx = gw = None
        if x.requires_grad:  # the adjoint of the adjoint: conv2d of the output gradient
            gx = new(tuple(x.shape), g.dtype, g.device)
            kernels.conv2d(be, gx._view, g._view, w._view, None, *geometry)
        if w.requires_grad:  # d<g, T_w x>/dw: conv2d's weight gradient, x playing conv2d's output gradient
            gw = new(tuple(w.shape), g.dtype, g.device)
            kernels.conv2d_backward_weight(be, gw._view, x._view, g._view, *geometry)
        return gx, gw
    return record(out, "Convolution", (x, w), backward)
