"""The one table from ATen ops to webgrad: ``ATEN[torch.ops.aten.mm.default] = fn``. A new mapping is one entry.

Each function takes the FX node's arguments with every tensor already a webgrad Tensor on the target device
and returns webgrad Tensors (or a tuple of them, as the ATen
op does). Functions run under ``webgrad.no_grad()``: AOTAutograd has already written the backward graph in
ATen ops, so webgrad's own autograd is not involved. A function raises :class:`Unsupported` for argument
combinations it does not cover; the executor then runs that node in eager PyTorch (see executor.py).
"""

import math
import struct

import webgrad as wg
from webgrad import dtypes
from webgrad.ops.core import unbroadcast
from webgrad.ops.elementwise import new
from webgrad._view import View
from webgrad._tensor import Tensor

import torch
from .._backends import kernels
from webgrad.ops import bags, pooling3d
from webgrad.nn._resample import aa_rows
from webgrad.random import fill_random

aten = torch.ops.aten


class Unsupported(Exception):
    """This mapping does not cover these arguments (the node falls back to eager PyTorch)."""


def _dtype(torch_dtype):
    """webgrad's dtype for a torch dtype."""
    try:
        return _DTYPES[torch_dtype]
    except KeyError:
        raise Unsupported(f"dtype {torch_dtype} has no webgrad equivalent") from None


_DTYPES = {torch.float32: dtypes.float32, torch.float64: dtypes.float64, torch.int64: dtypes.int64,
           torch.int32: dtypes.int32, torch.uint8: dtypes.uint8, torch.bool: dtypes.bool_}


def _pair(v):
    v = list(v)
    return tuple(v * 2 if len(v) == 1 else v)


# ------------------------------------------------------------------ linear algebra
def _matrix(x):
    """A 2-D float32 operand as (a [1, rows, cols] contiguous view, transposed): a transposed contiguous matrix
    (a weight's t(), as nn.Linear's graphs pass it) is read as it lies."""
    v = x._view
    if v.strides == (1, x.shape[0]) and x.shape[0] > 1 and x.shape[1] > 1:
        return View(v.storage, (1, x.shape[1], x.shape[0]), (x.numel(), x.shape[0], 1), v.offset, v.dtype), True
    x = x.contiguous()
    return x._view.reshaped((1,) + tuple(x.shape)), False


def _addmm(bias, a, b, beta=1, alpha=1):
    """bias + a @ b in one matmul kernel with its bias fused (nn.Linear's forward), else composed."""
    if beta == 1 and alpha == 1 and bias.ndim == 1 and bias.shape[0] == b.shape[1] and \
            a.dtype is b.dtype is bias.dtype is dtypes.float32:
        av, ta = _matrix(a)
        bv, tb = _matrix(b)
        out = new((a.shape[0], b.shape[1]), a.dtype, a.device)
        kernels.matmul(a.device.backend, out._view.reshaped((1,) + tuple(out.shape)), av, bv, trans_a=ta,
                       trans_b=tb, bias=bias.contiguous()._view)
        return out
    out = a @ b
    if alpha != 1:
        out = out * alpha
    return out + (bias if beta == 1 else bias * beta)


# ------------------------------------------------------------------ convolution
def _convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    if transposed or x.ndim != 4:
        raise Unsupported("only 2-D, non-transposed convolutions are mapped")
    return wg.nn.functional.conv2d(x, w, bias, tuple(stride), tuple(padding), tuple(dilation), groups)


def _convolution_backward(grad, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding, groups,
                          output_mask):
    """(grad_input, grad_weight, grad_bias) from the backend's two conv-gradient kernels and a sum."""
    if transposed or groups != 1 or x.ndim != 4:
        raise Unsupported("only 2-D, non-transposed, groups=1 convolution gradients are mapped")
    geometry = (_pair(stride), _pair(padding), _pair(dilation))
    g, x, w = grad.contiguous(), x.contiguous(), w.contiguous()
    be = g.device.backend
    gx = gw = gb = None
    if output_mask[0]:
        gx = new(tuple(x.shape), g.dtype, g.device)
        kernels.conv2d_backward_input(be, gx._view, g._view, w._view, *geometry)
    if output_mask[1]:
        gw = new(tuple(w.shape), g.dtype, g.device)
        kernels.conv2d_backward_weight(be, gw._view, g._view, x._view, *geometry)
    if output_mask[2]:
        gb = g.sum((0, 2, 3))
    return gx, gw, gb


# ------------------------------------------------------------------ pooling
def _max_pool2d(x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    if ceil_mode or x.ndim != 4:
        raise Unsupported("ceil_mode and unbatched inputs are not mapped")
    return wg.nn.functional.max_pool2d(x, tuple(kernel), tuple(stride) or None, _pair(padding) if not isinstance(
        padding, int) else padding, _pair(dilation) if not isinstance(dilation, int) else dilation,
        return_indices=True)


def _max_pool2d_backward(grad, x, kernel, stride, padding, dilation, ceil_mode, indices):
    if ceil_mode or x.ndim != 4:
        raise Unsupported("ceil_mode and unbatched inputs are not mapped")
    gx = new(tuple(x.shape), grad.dtype, grad.device)
    kernel = _pair(kernel)
    stride = _pair(stride) if len(stride) else kernel
    kernels.max_pool2d_backward(grad.device.backend, gx._view, grad.contiguous()._view, indices.contiguous()._view,
                                            kernel, stride, _pair(padding), _pair(dilation))
    return gx


def _avg_pool2d(x, kernel, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    if ceil_mode or x.ndim != 4:
        raise Unsupported("ceil_mode and unbatched inputs are not mapped")
    return wg.nn.functional.avg_pool2d(x, tuple(kernel), tuple(stride) or None, tuple(padding) if not isinstance(
        padding, int) else padding, False, count_include_pad, divisor_override)


def _avg_pool2d_backward(grad, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    if ceil_mode or divisor_override is not None or x.ndim != 4:
        raise Unsupported("ceil_mode, divisor_override and unbatched inputs are not mapped")
    gx = new(tuple(x.shape), grad.dtype, grad.device)
    kernel = _pair(kernel)
    stride = _pair(stride) if len(stride) else kernel
    kernels.avg_pool2d_backward(grad.device.backend, gx._view, grad.contiguous()._view, kernel, stride, _pair(padding),
                                            bool(count_include_pad))
    return gx


# ------------------------------------------------------------------ softmax and losses
def _rows(x, dim):
    """x with `dim` moved last and flattened to [rows, cols] (contiguous), and the function undoing it."""
    dim = dim % x.ndim
    moved = x.movedim(dim, -1).contiguous()
    shape = tuple(moved.shape)
    return moved.reshape(-1, shape[-1]), lambda y: y.reshape(shape).movedim(-1, dim).contiguous()


def _softmax(x, dim, half_to_float=False, log=False):
    if x.numel() == 0:
        return x.clone()
    if x.ndim == 0:
        return _softmax(x.reshape(1), 0, log=log).reshape(())
    rows, back = _rows(x, dim)
    out = new(tuple(rows.shape), rows.dtype, rows.device)
    kernels.softmax(rows.device.backend, out._view, rows._view, log=log)
    return back(out)


def _softmax_backward(grad, y, dim, input_dtype, log=False):
    if grad.numel() == 0:
        return grad.clone()
    if grad.ndim == 0:
        return _softmax_backward(grad.reshape(1), y.reshape(1), 0, input_dtype, log).reshape(())
    g, back = _rows(grad, dim)
    yr, _ = _rows(y, dim)
    out = new(tuple(g.shape), g.dtype, g.device)
    kernels.softmax_backward(g.device.backend, out._view, g._view, yr._view, log=log)
    return back(out)


def _nll_loss_forward(logp, target, weight, reduction, ignore_index):
    """-logp[target] (gathered, not the cross-entropy kernel, which would take logp's log-sum-exp to be 0: it is
    only for log-probabilities, and F.nll_loss takes any input)."""
    return _nll_loss_forward_composed(logp, target, weight, reduction, ignore_index)


def nll_of_log_softmax(logp, target, weight, reduction, ignore_index):
    """nll_loss_forward of what _log_softmax made (the executor pairs them, see GraphExecutor._pair): one
    cross-entropy kernel, exact there since the log-sum-exp of log-probabilities is 0."""
    if weight is not None or logp.ndim != 2 or logp.dtype is not dtypes.float32:
        return _nll_loss_forward(logp, target, weight, reduction, ignore_index)
    x, t, be = logp.contiguous(), target.contiguous(), logp.device.backend
    if reduction == 1:
        out = new((2,), x.dtype, x.device)
        kernels.cross_entropy_mean(be, out._view, x._view, t._view, ignore_index)
        return out[0], out[1]
    rows = new((x.shape[0], 2), x.dtype, x.device)
    kernels.cross_entropy(be, rows._view, x._view, t._view, ignore_index)
    loss, count = rows[:, 0], rows[:, 1].sum()
    return (loss.contiguous() if reduction == 0 else loss.sum()), count


def nll_log_softmax_backward(grad, logp, target, weight, reduction, ignore_index, total_weight):
    """nll_loss_backward followed by _log_softmax_backward_data over the rows of the same log-probabilities
    (the executor pairs them, see GraphExecutor._pair): the gradient of the logits, grad * (softmax - onehot)
    scaled per row, in one cross-entropy-backward kernel."""
    rows = logp.shape[0]
    if reduction == 1:
        g = (grad / total_weight).reshape(1).expand(rows)
    elif reduction == 2:
        g = grad.reshape(1).expand(rows)
    else:
        g = grad
    g = g.contiguous()
    out = new(tuple(logp.shape), logp.dtype, logp.device)
    kernels.cross_entropy_backward(logp.device.backend, out._view, logp.contiguous()._view, target.contiguous()._view,
                                   g._view, ignore_index)
    return out


def _nll_loss_forward_composed(logp, target, weight, reduction, ignore_index):
    if logp.ndim > 2:
        raise Unsupported("only [N, C] and [C] inputs are mapped")
    target_shape = tuple(target.shape)
    if logp.ndim == 1:
        logp, target = logp.unsqueeze(0), target.reshape(1)
    t = target.int()
    valid = t != ignore_index
    safe = wg.where(valid, t, 0)
    w = valid.to(dtype=logp.dtype)
    if weight is not None:
        w = w * weight.index_select(0, safe)
    loss = -logp.gather(1, safe.unsqueeze(1)).squeeze(1) * w
    total = w.sum()
    # reduction: 0 none, 1 mean, 2 sum (ATen's enum); total_weight is returned as ATen does
    if reduction == 0:
        return loss.reshape(*target_shape), total
    return (loss.sum() / total if reduction == 1 else loss.sum()), total


def _nll_loss_backward(grad, logp, target, weight, reduction, ignore_index, total_weight):
    if logp.ndim > 2:
        raise Unsupported("only [N, C] and [C] inputs are mapped")
    shape = tuple(logp.shape)
    if logp.ndim == 1:
        logp, target = logp.unsqueeze(0), target.reshape(1)
    t = target.int()
    valid = t != ignore_index
    safe = wg.where(valid, t, 0)
    w = valid.to(dtype=logp.dtype)
    if weight is not None:
        w = w * weight.index_select(0, safe)
    if reduction == 1:
        w = w / total_weight
    coef = -(w * grad if reduction == 0 else w * grad.reshape(()))
    # each row's coefficient scattered at its target (no class index list made on the host and uploaded)
    out = wg.zeros(tuple(logp.shape), dtype=logp.dtype, device=logp.device)
    return out.scatter_(1, safe.unsqueeze(1), coef.unsqueeze(1).to(dtype=logp.dtype)).reshape(shape)


# ------------------------------------------------------------------ fused recurrent cells
# What nn.LSTM and nn.GRU call on an accelerator (CUDA, and PyTorch's webgpu device): the gates of one time step
# from the two products, and their backward. The same formulas as ATen's CUDA kernels; workspace holds what the
# backward needs.
def _lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    gates = input_gates + hidden_gates
    if input_bias is not None:
        gates = gates + input_bias + hidden_bias
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    return o * cy.tanh(), cy, wg.cat([i, f, g, o], 1)


def _lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    i, f, g, o = workspace.chunk(4, 1)
    tanh_cy = cy.tanh()
    grad_hy = wg.zeros_like(cy) if grad_hy is None else grad_hy
    gc = grad_hy * o * (1 - tanh_cy * tanh_cy)
    if grad_cy is not None:
        gc = gc + grad_cy
    grad_gates = wg.cat([gc * g * i * (1 - i), gc * cx * f * (1 - f), gc * i * (1 - g * g),
                         grad_hy * tanh_cy * o * (1 - o)], 1)
    return grad_gates, gc * f, grad_gates.sum(0) if has_bias else None


def _gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    if input_bias is not None:
        input_gates, hidden_gates = input_gates + input_bias, hidden_gates + hidden_bias
    ir, ii, in_ = input_gates.chunk(3, 1)
    hr, hi, hn = hidden_gates.chunk(3, 1)
    r, z = (ir + hr).sigmoid(), (ii + hi).sigmoid()
    n = (in_ + r * hn).tanh()
    return n + z * (hx - n), wg.cat([r, z, n, hx, hn], 1)


def _gru_cell_backward(grad_hy, workspace, has_bias):
    r, z, n, hx, hn = workspace.chunk(5, 1)
    gn = grad_hy * (1 - z) * (1 - n * n)
    gz = grad_hy * (hx - n) * z * (1 - z)
    gr = gn * hn * r * (1 - r)
    grad_input = wg.cat([gr, gz, gn], 1)
    grad_hidden = wg.cat([gr, gz, gn * r], 1)
    if not has_bias:
        return grad_input, grad_hidden, grad_hy * z, None, None
    return grad_input, grad_hidden, grad_hy * z, grad_input.sum(0), grad_hidden.sum(0)


# ------------------------------------------------------------------ elementwise helpers
def _threshold_backward(grad, x, threshold):
    if threshold == 0 and grad.dtype is x.dtype and tuple(grad.shape) == tuple(x.shape):
        return _relu_backward(grad, x)  # ReLU's gradient in one kernel (x: the ReLU's output)
    return wg.where(x <= threshold, 0.0, grad)


def _scalar_tensor(value, dtype=None, layout=None, device=None, pin_memory=None, *, target):
    return wg.tensor(value, dtype=_dtype(dtype or torch.float32), device=target)


def _arange(start, end, step=1, dtype=None, layout=None, device=None, pin_memory=None, *, target):
    if dtype is None:
        dtype = torch.int64 if all(isinstance(v, int) for v in (start, end, step)) else torch.get_default_dtype()
    if not dtype.is_floating_point:  # ATen: the count from the numbers as given, the values from integers
        count = math.ceil((float(end) - float(start)) / float(step)) if float(step) else 0
        start, step = int(start), int(step)
        if step == 0:
            raise ValueError("step must be nonzero")
        end = start + max(0, count) * step
    return wg.arange(start, end, step, dtype=_dtype(dtype), device=target)


def _full(size, value, dtype=None, layout=None, device=None, pin_memory=None, *, target):
    return wg.full(tuple(size), value, dtype=_dtype(dtype or torch.get_default_dtype()), device=target)


def _like(fill):
    def like(x, *args, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
        value = fill if fill is not None else args[0]
        return wg.full(tuple(x.shape), value, dtype=_dtype(dtype) if dtype is not None else x.dtype, device=x.device)
    return like


def _to_copy(x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    return x.to(dtype=_dtype(dtype)) if dtype is not None else x.clone()


def _sum(x, dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        x = x.to(dtype=_dtype(dtype))
    if dim is None or len(dim) == 0:
        return x.sum() if not keepdim else x.sum(tuple(range(x.ndim)), keepdim=True)
    return x.sum(tuple(dim), keepdim=keepdim)


def _mean(x, dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        x = x.to(dtype=_dtype(dtype))
    if dim is None or len(dim) == 0:
        return x.mean(tuple(range(x.ndim)), keepdim=True) if keepdim and x.ndim else x.mean()
    return x.mean(tuple(dim), keepdim=keepdim)


def _var_mean(x, dim=None, correction=1, keepdim=False):
    dims = tuple(range(x.ndim)) if dim is None else tuple(dim)
    mean = x.mean(dims, keepdim=True)
    count = 1
    for d in dims:
        count *= x.shape[d]
    var = ((x - mean) ** 2).sum(dims, keepdim=keepdim) / max(count - (1 if correction is None else correction), 0)
    return var, (mean if keepdim else mean.squeeze(dims))


def _view(x, size):
    return x.reshape(*size)  # reshape copies only where ATen's view would have needed a contiguous input


def _expand(x, size, implicit=False):
    size = [x.shape[i - (len(size) - x.ndim)] if s == -1 else s for i, s in enumerate(size)]
    return x.expand(*size)


def _squeeze(x, dim=None):
    if dim is None:
        return x.squeeze()
    for d in sorted((d % x.ndim for d in ([dim] if isinstance(dim, int) else dim)), reverse=True):
        x = x.squeeze(d)
    return x


def _slice(x, dim=0, start=None, end=None, step=1):
    n = x.shape[dim]
    start = 0 if start is None else max(min(start if start >= 0 else start + n, n), 0)
    end = n if end is None else max(min(end if end >= 0 else end + n, n), 0)
    index = [slice(None)] * x.ndim
    index[dim] = slice(start, end, step)
    return x[tuple(index)]


def _clone(x, memory_format=None):
    return x.clone()


def _gelu(x, approximate="none"):
    return wg.nn.functional.gelu(x, approximate=approximate)


def _unary_backward(op):
    """dL/dx for an op of webgrad's UNARY_BACKWARD_OPS table, given grad and the op's output (y) or input (x)."""
    def backward(grad, z, approximate="none"):
        g, z = grad.contiguous(), z.contiguous()
        name = "gelu_tanh" if op == "gelu" and approximate == "tanh" else op
        out = new(tuple(g.shape), g.dtype, g.device)
        x, y = (z, z)  # each kernel reads the one it needs: tanh/sigmoid read y, gelu reads x
        kernels.unary_backward(g.device.backend, name, out._view, g._view, x._view, y._view)
        return out
    return backward


_relu_backward = _unary_backward("relu")  # (every eager ReLU's backward: built once)


# ------------------------------------------------------------------ activations and their ATen backward formulas
# (what eager PyTorch on webgpu tensors and nn.LeakyReLU(inplace=True) reach; the formulas are ATen's)
def _elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    return wg.where(x > 0, x * scale, (wg.exp(x * input_scale) - 1) * (alpha * scale))


def _elu_backward(grad, alpha, scale, input_scale, is_result, z):
    if is_result:  # z is the output (an in-place ELU): its negative part is alpha*scale*(exp(x*input_scale) - 1)
        return wg.where(z <= 0, grad * input_scale * (z + alpha * scale), grad * scale)
    return wg.where(z <= 0, grad * (input_scale * alpha * scale) * wg.exp(z * input_scale), grad * scale)


def _softplus_backward(grad, x, beta, threshold):
    z = wg.exp(x * beta)
    return wg.where(x * beta > threshold, grad, grad * z / (z + 1))


def _mish_backward(grad, x):
    t = wg.tanh(wg.nn.functional.softplus(x))
    return grad * (t + x * wg.sigmoid(x) * (1 - t * t))


def _log_sigmoid_forward(x):
    return wg.nn.functional.logsigmoid(x), wg.empty(0, dtype=x.dtype, device=x.device)


def _native_layer_norm(x, shape, weight, bias, eps):
    dims = tuple(range(x.ndim - len(shape), x.ndim))
    mean = x.mean(dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dims, keepdim=True)
    rstd = (var + eps).rsqrt()
    out = (x - mean) * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out, mean, rstd


def _empty_index_keeps(fn):
    """A scatter that leaves x as it is for an empty index, whatever the index's shape or dtype: ATen checks
    nothing then (gather's backward scatters into zeros with the index gather was given, an empty uint8 one
    included)."""
    def scatter(x, dim, index, *args, **kwargs):
        return x.clone() if index.numel() == 0 else fn(x, dim, index, *args, **kwargs)
    return scatter


def _scatter_value(x, dim, index, value):
    """x with `value` written at `index` along `dim`: where index covers x in every other dim (the nll_loss case),
    one comparison per index column and a where."""
    if x.ndim == 0 or index.ndim != x.ndim or any(index.shape[d] != x.shape[d] for d in range(x.ndim)
                                                   if d != dim % x.ndim):
        return x.scatter(dim, index, value=value)  # webgrad's scatter kernel
    dim = dim % x.ndim
    shape = [1] * x.ndim
    shape[dim] = x.shape[dim]
    positions = wg.arange(x.shape[dim], dtype=dtypes.int32, device=x.device).reshape(*shape)
    mask = None
    for j in range(index.shape[dim]):
        hit = positions == index.narrow(dim, j, 1)
        mask = hit if mask is None else mask | hit
    return wg.where(mask, value, x) if mask is not None else x.clone()


def _as_ncs(x):
    """x ([N, C, ...]) as the contiguous [N, C, S] view the batch-norm kernels take."""
    n, c = x.shape[0], x.shape[1]
    return x.contiguous()._view.reshaped((n, c, x.numel() // max(n * c, 1)))


def batch_norm_fused(x, weight, bias, running_mean, running_var, training, momentum, eps):
    """Batch norm in webgrad's kernel: (out, save [2, C] = (mean, invstd)); running_mean/var updated in place
    when training (None for none)."""
    c = x.shape[1]
    out = new(tuple(x.shape), x.dtype, x.device)
    save = new((2, c), x.dtype, x.device)
    kernels.batch_norm(x.device.backend, out._view.reshaped(_as_ncs(x).shape), save._view, _as_ncs(x),
                       weight.contiguous()._view if weight is not None else None,
                       bias.contiguous()._view if bias is not None else None,
                       running_mean._view if running_mean is not None else None,
                       running_var._view if running_var is not None else None, bool(training), momentum, eps)
    return out, save


def _fusable_bn(x, *vectors):
    return x.ndim >= 2 and x.dtype is dtypes.float32 and all(
        v is None or (v.dtype is dtypes.float32 and v._view.is_contiguous()) for v in vectors)


def batch_norm_in_place(x, weight, bias, running_mean, running_var, training, momentum, eps):
    """_native_batch_norm_legit_functional with the running statistics updated where they lie and handed back
    as the new ones (executor._in_place_batch_norm says when)."""
    if not _fusable_bn(x, weight, bias, running_mean, running_var) or momentum is None:
        return _batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps)
    out, save = batch_norm_fused(x, weight, bias, running_mean, running_var, training, momentum, eps)
    return out, save[0], save[1], running_mean, running_var


def _batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    """ATen's functional batch norm: (out, save_mean, save_rstd, new running mean, new running var)."""
    if _fusable_bn(x, weight, bias, running_mean, running_var) and momentum is not None:
        rm = running_mean.clone() if training and running_mean is not None else running_mean
        rv = running_var.clone() if training and running_var is not None else running_var
        out, save = batch_norm_fused(x, weight, bias, rm, rv, training, momentum, eps)
        if not training:  # eval saves no statistics (ATen returns empty tensors)
            empty = wg.empty(0, dtype=x.dtype, device=x.device)
            return out, empty, empty, running_mean, running_var
        return out, save[0], save[1], rm, rv
    dims = (0,) + tuple(range(2, x.ndim))
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    if training:
        mean = x.mean(dims)
        var = ((x - mean.reshape(shape)) ** 2).mean(dims)  # biased, as the normalisation uses
    else:
        mean, var = running_mean, running_var
    rstd = (var + eps).rsqrt()
    out = (x - mean.reshape(shape)) * rstd.reshape(shape)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    if training and running_mean is not None:
        n = x.numel() // x.shape[1]
        running_mean = running_mean * (1 - momentum) + mean * momentum
        running_var = running_var * (1 - momentum) + var * (momentum * n / max(n - 1, 1))
    if not training:  # eval saves no statistics (ATen returns empty tensors)
        mean = rstd = wg.empty(0, dtype=x.dtype, device=x.device)
    return out, mean, rstd, running_mean, running_var


def _batch_norm_backward(grad, x, weight, running_mean, running_var, save_mean, save_invstd, train, eps,
                         output_mask):
    """(grad_input, grad_weight, grad_bias) from webgrad's batch-norm backward kernel."""
    if not _fusable_bn(x, weight) or grad.dtype is not dtypes.float32:
        raise Unsupported("batch norm's backward is mapped for float32 [N, C, ...] inputs")
    c = x.shape[1]
    mv, iv = save_mean._view, save_invstd._view
    if train and mv.storage is iv.storage and mv.strides == iv.strides == (1,) and iv.offset == mv.offset + c:
        save = Tensor._make(View(mv.storage, (2, c), (c, 1), mv.offset, mv.dtype), x.device)  # the forward's [2, C]
    elif train:
        save = wg.stack([save_mean, save_invstd]).contiguous()
    else:
        save = wg.stack([running_mean, (running_var + eps).rsqrt()]).contiguous()
    gx = new(tuple(x.shape), x.dtype, x.device) if output_mask[0] else None
    gw = new((c,), x.dtype, x.device) if output_mask[1] else None
    gb = new((c,), x.dtype, x.device) if output_mask[2] else None
    shape3 = _as_ncs(x).shape
    kernels.batch_norm_backward(x.device.backend, gx._view.reshaped(shape3) if gx is not None else None,
                                gw._view if gw is not None else None, gb._view if gb is not None else None,
                                _as_ncs(grad), _as_ncs(x), save._view,
                                weight.contiguous()._view if weight is not None else None, bool(train))
    return gx, gw, gb


def _erf(x):
    """erf composed from webgrad ops (webgrad has no erf kernel): Abramowitz & Stegun 7.1.26,
    absolute error below 1.5e-7, i.e. float32 rounding."""
    a = x.abs()
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return x.sign() * (1.0 - poly * (-(a * a)).exp())


def _attention_scores(q, k, is_causal, attn_mask, scale):
    if attn_mask is not None:
        raise Unsupported("attention masks are not mapped (is_causal is)")
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    s = (q @ k.transpose(-2, -1)) * scale
    if is_causal:
        lq, lk = s.shape[-2], s.shape[-1]
        keep = wg.arange(lq, dtype=dtypes.int32, device=q.device).unsqueeze(1) >= \
            wg.arange(lk, dtype=dtypes.int32, device=q.device).unsqueeze(0)
        s = wg.where(keep, s, float("-inf"))
    return s, scale


def _flash_attention(q, k, v, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    """softmax(q kᵀ * scale) v and the rows' logsumexp, which the backward uses to rebuild the softmax."""
    if dropout_p:
        raise Unsupported("attention dropout is not mapped")
    s, _ = _attention_scores(q, k, is_causal, attn_mask, scale)
    lse = s.logsumexp(-1)
    return (s - lse.unsqueeze(-1)).exp() @ v, lse


def _flash_attention_backward(grad, q, k, v, out, lse, dropout_p, is_causal, *, attn_mask=None, scale=None):
    if dropout_p:
        raise Unsupported("attention dropout is not mapped")
    s, scale = _attention_scores(q, k, is_causal, attn_mask, scale)
    p = (s - lse.unsqueeze(-1)).exp()
    dv = p.transpose(-2, -1) @ grad
    dp = grad @ v.transpose(-2, -1)
    ds = p * (dp - (grad * out).sum(-1, keepdim=True))
    return (ds @ k) * scale, (ds.transpose(-2, -1) @ q) * scale, dv


def _embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return weight.index_select(0, indices.reshape(-1)).reshape(*indices.shape, weight.shape[1])


def _embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    """The rows of grad summed into the rows of the weight their indices name (padding_idx's row stays 0), each
    divided by how often its index occurs with scale_grad_by_freq."""
    d = grad.shape[-1]
    flat = indices.reshape(-1).contiguous()
    rows = grad.reshape(-1, d).contiguous()
    if scale_grad_by_freq:
        rows = (rows / bags.index_counts(flat, num_weights, grad.dtype).index_select(0, flat.long()).unsqueeze(1))
    if padding_idx >= 0:
        rows = wg.where((flat != padding_idx).unsqueeze(1), rows, 0.0)
    out = new((num_weights, d), grad.dtype, grad.device)
    kernels.index_select_backward(grad.device.backend, out._view.reshaped((1, num_weights, d)),
                                  rows._view.reshaped((1, rows.shape[0], d)), flat._view)
    return out


def _method(name):
    """webgrad's Tensor method `name` as a table entry."""
    def fn(x, *args, **kwargs):
        return getattr(x, name)(*args, **kwargs)
    return fn


def _logical(name):
    """bitwise and/or/not on bools: the logical ops (integer bitwise ops are not mapped)."""
    def fn(*xs):
        if any(x.dtype is not dtypes.bool_ for x in xs if isinstance(x, wg.Tensor)):
            raise Unsupported("integer bitwise ops are not mapped")
        return getattr(xs[0], name)(*xs[1:])
    return fn


def _any_all(find):
    """any (find True: some element nonzero) and all (find False: no element zero) over dims, as bool."""
    def fn(x, dim=None, keepdim=False):
        dims = tuple(range(x.ndim)) if dim is None or dim == [] else (dim,) if isinstance(dim, int) else tuple(dim)
        # a float sum of 0/1 flags is 0 exactly when no flag is set, at any size
        hits = ((x != 0) if find else (x == 0)).to(dtype=dtypes.float32)
        count = hits.sum(dims, keepdim=keepdim) if dims else hits
        return (count > 0) if find else (count == 0)
    return fn


def _triangle(lower):
    def fn(x, diagonal=0):
        rows, cols = x.shape[-2], x.shape[-1]
        offset = wg.arange(cols, dtype=dtypes.int32, device=x.device).unsqueeze(0) - \
            wg.arange(rows, dtype=dtypes.int32, device=x.device).unsqueeze(1)
        keep = offset <= diagonal if lower else offset >= diagonal
        return wg.where(keep, x, wg.zeros((), dtype=x.dtype, device=x.device))
    return fn


def _split_with_sizes(x, sizes, dim=0):
    out, start = [], 0
    for n in sizes:
        out.append(x.narrow(dim, start, n))
        start += n
    return out


def _split(x, size, dim=0):
    n = x.shape[dim]
    return _split_with_sizes(x, [min(size, n - i) for i in range(0, n, size)], dim)


def _index_put(x, indices, values, accumulate=False):
    """x with `values` written where a bool mask of x's shape is set (how graphs build masks), or added at the
    rows one integer index names (accumulate: how the embedding's gradient decomposes)."""
    if len(indices) == 1 and indices[0] is not None:
        index = indices[0]
        if index.dtype is dtypes.bool_ and tuple(index.shape) == tuple(x.shape) and not accumulate:
            return wg.where(index, values.to(dtype=x.dtype), x)
        if not index.dtype.is_floating and index.dtype is not dtypes.bool_ and accumulate and x.ndim >= 1:
            rows, inner = x.shape[0], x.numel() // max(x.shape[0], 1)
            flat = index.reshape(-1).contiguous()
            src = values.to(dtype=x.dtype).expand(*index.shape, *x.shape[1:]).contiguous()
            added = new((1, rows, inner), x.dtype, x.device)
            kernels.index_select_backward(x.device.backend, added._view, src._view.reshaped((1, flat.numel(), inner)),
                                          flat._view)
            return x + added.reshape(*x.shape)
    raise Unsupported("index_put is mapped for one bool mask of the tensor's shape, or one integer index with "
                      "accumulate=True")


def _mse_loss(x, y, reduction=1):
    d = (x - y) ** 2
    return d if reduction == 0 else d.mean() if reduction == 1 else d.sum()


def _mse_loss_backward(grad, x, y, reduction):
    return (x - y) * grad * (2.0 / x.numel() if reduction == 1 else 2.0)


def _max_dim(x, dim, keepdim=False):
    return x.amax(dim, keepdim=keepdim), x.argmax(dim, keepdim=keepdim)


def _min_dim(x, dim, keepdim=False):
    return x.amin(dim, keepdim=keepdim), x.argmin(dim, keepdim=keepdim)


def _binary(fn):
    """An ATen binary op with an optional `alpha` (add/sub) and python-number operands."""
    def op(a, b, *, alpha=1):
        return fn(a, b * alpha if alpha != 1 else b)
    return op


ATEN = {
    # linear algebra
    aten.mm.default: lambda a, b: a @ b,
    aten.bmm.default: lambda a, b: a @ b,
    aten.addmm.default: _addmm,
    # convolution and pooling
    aten.convolution.default: _convolution,
    aten.convolution_backward.default: _convolution_backward,
    aten.max_pool2d_with_indices.default: _max_pool2d,
    aten.max_pool2d_with_indices_backward.default: _max_pool2d_backward,
    aten.avg_pool2d.default: _avg_pool2d,
    aten.avg_pool2d_backward.default: _avg_pool2d_backward,
    # softmax and losses
    aten._softmax.default: lambda x, dim, half: _softmax(x, dim),
    aten._log_softmax.default: lambda x, dim, half: _softmax(x, dim, log=True),
    aten._softmax_backward_data.default: lambda g, y, dim, dt: _softmax_backward(g, y, dim, dt),
    aten._log_softmax_backward_data.default: lambda g, y, dim, dt: _softmax_backward(g, y, dim, dt, log=True),
    aten.nll_loss_forward.default: _nll_loss_forward,
    aten.nll_loss_backward.default: _nll_loss_backward,
    aten.native_layer_norm.default: _native_layer_norm,
    # recurrent cells
    aten._thnn_fused_lstm_cell.default: _lstm_cell,
    aten._thnn_fused_lstm_cell_backward_impl.default: _lstm_cell_backward,
    aten._thnn_fused_gru_cell.default: _gru_cell,
    aten._thnn_fused_gru_cell_backward.default: _gru_cell_backward,
    aten._scaled_dot_product_flash_attention_for_cpu.default: _flash_attention,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default: _flash_attention_backward,
    aten._native_batch_norm_legit_functional.default: _batch_norm,
    aten.native_batch_norm_backward.default: _batch_norm_backward,
    aten._native_batch_norm_legit_no_training.default:
        lambda x, w, b, rm, rv, momentum, eps: _batch_norm(x, w, b, rm, rv, False, momentum, eps)[:3],
    # activations and their gradients
    aten.relu.default: wg.relu,
    aten.threshold_backward.default: _threshold_backward,
    aten.gelu.default: _gelu,
    aten.leaky_relu.default: lambda x, negative_slope=0.01: wg.nn.functional.leaky_relu(x, negative_slope),
    aten.leaky_relu_backward.default: lambda g, x, slope, is_result: wg.where(x > 0, g, g * slope),
    aten.elu.default: _elu,
    aten.elu_backward.default: _elu_backward,
    aten.softplus.default: lambda x, beta=1.0, threshold=20.0: wg.nn.functional.softplus(x, beta, threshold),
    aten.softplus_backward.default: _softplus_backward,
    aten.hardtanh.default: lambda x, min_val=-1.0, max_val=1.0: wg.nn.functional.hardtanh(x, min_val, max_val),
    aten.hardtanh_backward.default: lambda g, x, lo, hi: wg.where((x <= lo) | (x >= hi), 0.0, g),
    aten.mish.default: wg.nn.functional.mish,
    aten.mish_backward.default: _mish_backward,
    aten.hardswish.default: wg.nn.functional.hardswish,
    aten.hardswish_backward.default: lambda g, x: wg.where(x <= -3, 0.0, wg.where(x < 3, g * (x / 3 + 0.5), g)),
    aten.hardsigmoid.default: wg.nn.functional.hardsigmoid,
    aten.hardsigmoid_backward.default: lambda g, x: wg.where((x > -3) & (x < 3), g / 6, 0.0),
    aten.log_sigmoid_forward.default: _log_sigmoid_forward,
    aten.log_sigmoid_backward.default: lambda g, x, buffer: g * wg.sigmoid(-x),
    aten.sgn.default: wg.sign,
    aten.gelu_backward.default: _unary_backward("gelu"),
    aten.tanh.default: wg.tanh,
    aten.tanh_backward.default: _unary_backward("tanh"),
    aten.sigmoid.default: wg.sigmoid,
    aten.sigmoid_backward.default: _unary_backward("sigmoid"),
    aten.exp.default: wg.exp,
    aten.erf.default: _erf,
    aten.log.default: wg.log,
    aten.sqrt.default: wg.sqrt,
    aten.rsqrt.default: wg.rsqrt,
    aten.neg.default: wg.neg,
    aten.abs.default: wg.abs,
    aten.reciprocal.default: wg.reciprocal,
    aten.pow.Tensor_Scalar: wg.pow,
    aten.pow.Tensor_Tensor: wg.pow,
    aten.clamp.default: lambda x, lo=None, hi=None: x.clamp(lo, hi),
    # binary arithmetic and comparisons (Tensor and Scalar overloads alike)
    aten.add.Tensor: _binary(wg.add), aten.add.Scalar: _binary(wg.add),
    aten.sub.Tensor: _binary(wg.sub), aten.sub.Scalar: _binary(wg.sub),
    aten.mul.Tensor: wg.mul, aten.mul.Scalar: wg.mul,
    aten.div.Tensor: wg.div, aten.div.Scalar: wg.div,
    aten.maximum.default: wg.maximum, aten.minimum.default: wg.minimum,
    aten.eq.Scalar: wg.eq, aten.eq.Tensor: wg.eq, aten.ne.Scalar: wg.ne, aten.ne.Tensor: wg.ne,
    aten.lt.Scalar: wg.lt, aten.lt.Tensor: wg.lt, aten.le.Scalar: wg.le, aten.le.Tensor: wg.le,
    aten.gt.Scalar: wg.gt, aten.gt.Tensor: wg.gt, aten.ge.Scalar: wg.ge, aten.ge.Tensor: wg.ge,
    aten.where.self: wg.where,
    # reductions
    aten.sum.dim_IntList: _sum,
    aten.sum.default: _sum,
    aten.mean.dim: _mean,
    aten.mean.default: _mean,
    aten.var_mean.correction: _var_mean,
    aten.amax.default: lambda x, dim=(), keepdim=False: x.amax(tuple(dim) or tuple(range(x.ndim)), keepdim=keepdim),
    aten.amin.default: lambda x, dim=(), keepdim=False: x.amin(tuple(dim) or tuple(range(x.ndim)), keepdim=keepdim),
    # creation and dtype
    aten.scalar_tensor.default: _scalar_tensor,
    aten.arange.start_step: _arange,
    aten.arange.default: lambda end, **kw: _arange(0, end, **kw),
    aten.full.default: _full,
    aten.zeros_like.default: _like(0), aten.ones_like.default: _like(1), aten.full_like.default: _like(None),
    aten.empty_like.default: _like(0),
    aten._to_copy.default: _to_copy,
    aten.clone.default: _clone,
    aten.lift_fresh_copy.default: _clone,
    # views and shape
    aten.view.default: _view,
    aten._unsafe_view.default: _view,
    aten.reshape.default: _view,
    aten.alias.default: lambda x: x,
    aten.detach.default: lambda x: x,
    aten.t.default: lambda x: x.t(),
    aten.permute.default: lambda x, dims: x.permute(*dims),
    aten.transpose.int: lambda x, a, b: x.transpose(a, b),
    aten.expand.default: _expand,
    aten.unsqueeze.default: lambda x, d: x.unsqueeze(d),
    aten.squeeze.dim: _squeeze, aten.squeeze.dims: _squeeze, aten.squeeze.default: _squeeze,
    aten.slice.Tensor: _slice,
    aten.select.int: lambda x, dim, i: x.select(dim, i),
    aten.cat.default: lambda xs, dim=0: wg.cat(list(xs), dim),
    aten.index_select.default: lambda x, dim, i: x.index_select(dim, i),
    # scattering by index: what graph networks and sparse products are made of
    aten.index_add.default: lambda x, dim, i, src, alpha=1: x.index_add(dim, i, src, alpha=alpha),
    aten.index_copy.default: lambda x, dim, i, src: x.index_copy(dim, i, src),
    aten.index_fill.int_Scalar: lambda x, dim, i, value: x.index_fill(dim, i, value),
    aten.scatter_add.default: _empty_index_keeps(lambda x, dim, i, src: x.scatter_add(dim, i, src)),
    aten.scatter.src: _empty_index_keeps(lambda x, dim, i, src: x.scatter(dim, i, src)),
    aten.scatter_reduce.two: _empty_index_keeps(lambda x, dim, i, src, reduce, include_self=True: x.scatter_reduce(
        dim, i, src, reduce, include_self=include_self)),
    aten.nonzero.default: lambda x: x.nonzero(),
    aten.scatter.value: _empty_index_keeps(_scatter_value),
    aten.gather.default: lambda x, dim, i, sparse_grad=False: x.gather(dim, i),
    aten.embedding.default: _embedding,
    # logic, masks, triangles
    aten.logical_not.default: _method("logical_not"), aten.logical_and.default: _method("logical_and"),
    aten.logical_or.default: _method("logical_or"),
    aten.bitwise_not.default: _logical("logical_not"), aten.bitwise_and.Tensor: _logical("logical_and"),
    aten.bitwise_or.Tensor: _logical("logical_or"),
    aten.any.default: _any_all(True), aten.any.dim: _any_all(True), aten.any.dims: _any_all(True),
    aten.all.default: _any_all(False), aten.all.dim: _any_all(False), aten.all.dims: _any_all(False),
    aten.isnan.default: _method("isnan"),
    aten.isinf.default: lambda x: x.abs() == float("inf"),
    aten.isposinf.default: lambda x: x == float("inf"), aten.isneginf.default: lambda x: x == float("-inf"),
    aten.tril.default: _triangle(True), aten.triu.default: _triangle(False),
    aten.index_put.default: _index_put,
    aten.split_with_sizes.default: _split_with_sizes, aten.split.Tensor: _split,
    aten.stack.default: lambda xs, dim=0: wg.stack(list(xs), dim),
    # more elementwise math
    aten.sign.default: _method("sign"), aten.floor.default: _method("floor"), aten.ceil.default: _method("ceil"),
    aten.round.default: _method("round"), aten.sin.default: _method("sin"), aten.cos.default: _method("cos"),
    aten.clamp_min.default: lambda x, lo: x.clamp(lo, None), aten.clamp_max.default: lambda x, hi: x.clamp(None, hi),
    aten.log1p.default: _method("log1p"), aten.expm1.default: _method("expm1"),
    aten.silu.default: lambda x: x * wg.sigmoid(x),
    aten.addcmul.default: lambda x, a, b, value=1: x + a * b * value,
    aten.addcdiv.default: lambda x, a, b, value=1: x + a / b * value,
    aten.lerp.Scalar: lambda x, end, weight: x + (end - x) * weight,
    aten.mse_loss.default: _mse_loss, aten.mse_loss_backward.default: _mse_loss_backward,
    # reductions to values and indices
    aten.max.dim: _max_dim, aten.min.dim: _min_dim,
    aten.max.default: lambda x: x.max(), aten.min.default: lambda x: x.min(),
    aten.argmax.default: lambda x, dim=None, keepdim=False: x.argmax(dim, keepdim=keepdim) if dim is not None
    else x.argmax(),
    aten.embedding_dense_backward.default: _embedding_dense_backward,
}



def _norm(x, ord=2, dtype=None):
    """The vector norm of all of x (the foreach norms of gradient clipping)."""
    if ord == 2:
        return (x * x).sum().sqrt()
    if ord == 1:
        return x.abs().sum()
    return wg.linalg.vector_norm(x, ord)


ATEN[aten.pow.Scalar] = lambda base, x: base ** x


def _unsupported(what):
    raise Unsupported(f"{what} is not mapped")


# ------------------------------------------------------------------ what eager PyTorch on webgpu tensors reaches
# Entries for ops webgrad has, with ATen's argument conventions (dims as lists, dtype keywords, Scalar overloads);
# the in-place and out= forms follow from each (torch_device/kernels.py). Where a webgrad op differs from ATen's for
# some arguments, the entry raises Unsupported for those.
def _vjp(forward, grad, *inputs):
    """The gradients of forward(*inputs) against `grad`, by webgrad's autograd (the backward ATen ops of ops whose
    forward is one webgrad op: upsampling, adaptive pooling, padding, cdist)."""
    with wg.enable_grad():
        leaves = [x.detach().requires_grad_(True) for x in inputs]
        out = forward(*leaves)
        grads = wg.autograd.grad(out, leaves, grad, allow_unused=True)
    return [g if g is not None else wg.zeros_like(x) for g, x in zip(grads, inputs)]


def _dims(x, dim):
    """ATen's optional dim list (None or [] for all dims) as webgrad's dim argument: None, or a tuple."""
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0) or x.ndim == 0:
        return None
    return (dim,) if isinstance(dim, int) else tuple(dim)


def _all_dims(x, dim, keepdim):
    """dims for a reduction that keeps them: None (all of them) only where keepdim is off."""
    dims = _dims(x, dim)
    return tuple(range(x.ndim)) if dims is None and keepdim and x.ndim else dims


def _moment(name):
    """std / var with ATen's correction (None: 1) and webgrad's reduction over the same dims."""
    def fn(x, dim=None, *, correction=None, keepdim=False):
        if not x.dtype.is_floating:
            raise Unsupported(f"{name} of an integer tensor")
        dims = _all_dims(x, dim, keepdim)
        return getattr(wg, name)(x, dims, keepdim=keepdim, correction=1 if correction is None else correction)
    return fn


def _with_dtype(fn):
    """An op whose `dtype` keyword casts the input first (sum, prod, cumsum, nansum...)."""
    def op(x, *args, dtype=None, **kwargs):
        if dtype is not None:
            x = x.to(dtype=_dtype(dtype))
        return fn(x, *args, **kwargs)
    return op


def _integer_result(fn):
    """An op whose integer and bool inputs give int64, as ATen's sum, prod, cumsum and cumprod do."""
    def op(x, *args, **kwargs):
        if not x.dtype.is_floating and x.dtype is not dtypes.int64:
            x = x.to(dtype=dtypes.int64)
        return fn(x, *args, **kwargs)
    return op


def _prod(x, dim=None, keepdim=False):
    return x.prod() if dim is None else x.prod(dim, keepdim=keepdim)


def _sort(x, stable=None, dim=-1, descending=False):
    out = x.sort(dim, descending, stable=True)  # a stable order is also a valid unstable one, and the CPU's
    return out[0], out[1]


def _topk(x, k, dim=-1, largest=True, sorted=True):
    out = x.topk(k, dim, largest, sorted)
    return out[0], out[1]


def _masked_fill(x, mask, value):
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
        value = value.to(dtype=x.dtype)
    out = wg.where(mask, value, x)
    return out if out.dtype is x.dtype else out.to(dtype=x.dtype)


def _index(x, indices):
    """x[indices], ATen's list of index tensors (None for a whole dim) as one advanced index."""
    return x[tuple(slice(None) if i is None else i for i in indices)]


def _index_put_general(x, indices, values, accumulate=False):
    try:
        return _index_put(x, indices, values, accumulate)
    except Unsupported:
        pass
    index = tuple(slice(None) if i is None else i for i in indices)
    if accumulate:
        return x.index_put(index, values.to(dtype=x.dtype), accumulate=True)
    out = x.clone()
    out[index] = values.to(dtype=x.dtype)
    return out


def _vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        x = x.to(dtype=_dtype(dtype))
    if not x.dtype.is_floating:
        raise Unsupported("vector norms of integer tensors")
    return wg.linalg.vector_norm(x, ord, _dims(x, dim), keepdim)


def _norm_dims(x, p=2, dim=None, keepdim=False, *, dtype=None):
    return _vector_norm(x, 2 if p is None else p, dim, keepdim, dtype=dtype)


def _linspace(start, end, steps, dtype=None, layout=None, device=None, pin_memory=None, *, target):
    if isinstance(start, Tensor) or isinstance(end, Tensor):
        raise Unsupported("linspace with tensor ends on the device")
    return wg.linspace(start, end, steps, dtype=_dtype(dtype or torch.get_default_dtype()), device=target)


def _logspace(start, end, steps, base=10.0, dtype=None, layout=None, device=None, pin_memory=None, *, target):
    if isinstance(start, Tensor) or isinstance(end, Tensor):
        raise Unsupported("logspace with tensor ends on the device")
    return wg.logspace(start, end, steps, base, dtype=_dtype(dtype or torch.get_default_dtype()), device=target)


def _eye(n, m=None, dtype=None, layout=None, device=None, pin_memory=None, *, target):
    return wg.eye(n, n if m is None else m, dtype=_dtype(dtype or torch.get_default_dtype()), device=target)


def _randperm(n, generator=None, dtype=None, layout=None, device=None, pin_memory=None, *, target):
    if generator is not None:
        raise Unsupported("randperm with a generator")
    return wg.randperm(n, dtype=_dtype(dtype or torch.int64), device=target)


def _multinomial(x, num_samples, replacement=False, *, generator=None):
    if generator is not None:
        raise Unsupported("multinomial with a generator")
    return wg.multinomial(x, num_samples, replacement)


def _conv1d_as_2d(x, w, stride, padding, dilation):
    """A 1-D convolution's operands and geometry as the 2-D convolution of height 1 that computes it."""
    return (x.unsqueeze(2), w.unsqueeze(2), (1, _pair(stride)[0]), (0, _pair(padding)[0]), (1, _pair(dilation)[0]))


def _convolution_any(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    if isinstance(padding, str):
        raise Unsupported("string padding")
    if x.ndim == 3 and not transposed:
        return wg.nn.functional.conv1d(x, w, bias, tuple(stride), tuple(padding), tuple(dilation), groups)
    if x.ndim == 3 and transposed:
        return wg.nn.functional.conv_transpose1d(x, w, bias, tuple(stride), tuple(padding), tuple(output_padding),
                                                 groups, tuple(dilation))
    if x.ndim == 5:
        if transposed:
            return wg.nn.functional.conv_transpose3d(x, w, bias, tuple(stride), tuple(padding), tuple(output_padding),
                                                     groups, tuple(dilation))
        return wg.nn.functional.conv3d(x, w, bias, tuple(stride), tuple(padding), tuple(dilation), groups)
    if x.ndim == 4 and transposed:
        return wg.nn.functional.conv_transpose2d(x, w, bias, tuple(stride), tuple(padding), tuple(output_padding),
                                                 groups, tuple(dilation))
    return _convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups)


def _convolution_backward_any(grad, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding, groups,
                              output_mask):
    if x.ndim == 3 and not transposed and groups == 1:
        x2, w2, s2, p2, d2 = _conv1d_as_2d(x, w, stride, padding, dilation)
        gx, gw, gb = _convolution_backward(grad.unsqueeze(2), x2, w2, bias_sizes, s2, p2, d2, False, (0, 0), 1,
                                           output_mask)
        return (gx.squeeze(2) if gx is not None else None, gw.squeeze(2) if gw is not None else None, gb)
    if x.ndim == 5 or (x.ndim in (3, 4) and (transposed or groups != 1)):
        def forward(a, b):
            return _convolution_any(a, b, None, stride, padding, dilation, transposed, output_padding, groups)
        gx, gw = _vjp(forward, grad, x, w)
        gb = grad.sum((0,) + tuple(range(2, grad.ndim))) if output_mask[2] else None
        return gx if output_mask[0] else None, gw if output_mask[1] else None, gb
    return _convolution_backward(grad, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding,
                                 groups, output_mask)


def _upsample(mode, align_corners=None):
    """upsample_<mode>(x, output_size, [align_corners,] *scales): webgrad's interpolate. ATen maps an output
    pixel to its source by the scale it is given where there is one (interpolate's scale_factor), else by the
    ratio of sizes."""
    def fn(x, output_size, *rest):
        if mode in ("linear", "bilinear", "bicubic", "trilinear"):
            corners, scales = rest[0], rest[1:]
        else:
            corners, scales = None, rest
        scales = [s for s in scales if s is not None]
        if scales and len(scales) == len(output_size):
            out = wg.nn.functional.interpolate(x, scale_factor=tuple(scales), mode=mode, align_corners=corners,
                                               recompute_scale_factor=False)
            if tuple(out.shape[2:]) != tuple(output_size):
                raise Unsupported("an output size other than the one the scales give")
            return out
        return wg.nn.functional.interpolate(x, size=tuple(output_size), mode=mode, align_corners=corners)
    return fn


def _upsample_backward(mode):
    forward = _upsample(mode)

    def fn(grad, output_size, input_size, *rest):
        x = wg.zeros(tuple(input_size), dtype=grad.dtype, device=grad.device)
        return _vjp(lambda a: forward(a, output_size, *rest), grad, x)[0]
    return fn


def _smooth_l1_loss(x, y, reduction=1, beta=1.0):
    return wg.nn.functional.smooth_l1_loss(x, y, reduction=_REDUCTIONS[reduction], beta=beta)


def _smooth_l1_loss_backward(grad, x, y, reduction, beta):
    d = x - y
    g = d.sign() if beta == 0 else wg.where(d.abs() < beta, d / beta, d.sign())
    return g * (grad / x.numel() if reduction == 1 else grad)


def _huber_loss(x, y, reduction=1, delta=1.0):
    return wg.nn.functional.huber_loss(x, y, reduction=_REDUCTIONS[reduction], delta=delta)


def _huber_loss_backward(grad, x, y, reduction, delta):
    d = x - y
    g = wg.where(d.abs() <= delta, d, d.sign() * delta)
    return g * (grad / x.numel() if reduction == 1 else grad)


_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _cdist_forward(x1, x2, p, compute_mode=None):
    return wg.cdist(x1, x2, p)


def _cdist_backward(grad, x1, x2, p, cdist):
    return _vjp(lambda a: wg.cdist(a, x2, p), grad, x1)[0]


def _unique2(x, sorted=True, return_inverse=False, return_counts=False):
    out = wg.unique(x, sorted=True, return_inverse=True, return_counts=True)
    values, inverse, counts = out
    empty = wg.empty(0, dtype=dtypes.int64, device=x.device)
    return values, inverse.reshape(*x.shape) if return_inverse else empty, counts if return_counts else empty


def _rsub(x, other, alpha=1):
    return other - (x * alpha if alpha != 1 else x)


def _pad(mode):
    def fn(x, pad):
        return wg.nn.functional.pad(x, tuple(pad), mode=mode)
    return fn


def _pad_backward(mode):
    def fn(grad, x, pad):
        return _vjp(lambda a: wg.nn.functional.pad(a, tuple(pad), mode=mode), grad, x)[0]
    return fn


def _adaptive_avg_pool2d_backward(grad, x):
    return _vjp(lambda a: wg.nn.functional.adaptive_avg_pool2d(a, tuple(grad.shape[-2:])), grad, x)[0]


def _cummaxmin(name):
    def fn(x, dim):
        out = getattr(wg, name)(x, dim)
        return out[0], out[1]
    return fn


def _values_indices(name):
    def fn(x, *args, **kwargs):
        out = getattr(x, name)(*args, **kwargs)
        return out[0], out[1]
    return fn


def _pool2d(fn, x, *args, **kwargs):
    """A webgrad 2-D pooling of a batched or unbatched ([C, H, W]) input."""
    if x.ndim == 3:
        out = fn(x.unsqueeze(0), *args, **kwargs)
        return tuple(o.squeeze(0) for o in out) if isinstance(out, tuple) else out.squeeze(0)
    return fn(x, *args, **kwargs)


def _max_pool2d_any(x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    if not ceil_mode and x.ndim == 4:
        return _max_pool2d(x, kernel, stride, padding, dilation, ceil_mode)
    out = _pool2d(wg.nn.functional.max_pool2d, x, tuple(kernel), tuple(stride) or None, _pair(padding),
                  _pair(dilation), ceil_mode, return_indices=True)
    return out[0], out[1]


def _max_pool2d_backward_any(grad, x, kernel, stride, padding, dilation, ceil_mode, indices):
    if not ceil_mode and x.ndim == 4:
        return _max_pool2d_backward(grad, x, kernel, stride, padding, dilation, ceil_mode, indices)
    return _vjp(lambda a: _max_pool2d_any(a, kernel, stride, padding, dilation, ceil_mode)[0], grad, x)[0]


def _avg_pool2d_any(x, kernel, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    if not ceil_mode and x.ndim == 4:
        return _avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    return _pool2d(wg.nn.functional.avg_pool2d, x, tuple(kernel), tuple(stride) or None, _pair(padding), ceil_mode,
                   count_include_pad, divisor_override)


def _avg_pool2d_backward_any(grad, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    if not ceil_mode and divisor_override is None and x.ndim == 4:
        return _avg_pool2d_backward(grad, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    return _vjp(lambda a: _avg_pool2d_any(a, kernel, stride, padding, ceil_mode, count_include_pad,
                                          divisor_override), grad, x)[0]


def _adaptive_max_pool2d(x, size):
    out = _pool2d(wg.nn.functional.adaptive_max_pool2d, x, tuple(size), return_indices=True)
    return out[0], out[1]


_GRID_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_GRID_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


def _grid_sampler_2d(x, grid, interpolation_mode, padding_mode, align_corners):
    return wg.nn.functional.grid_sample(x, grid, _GRID_MODES[interpolation_mode], _GRID_PADDING[padding_mode],
                                        align_corners)


def _grid_sampler_2d_backward(grad, x, grid, interpolation_mode, padding_mode, align_corners, output_mask):
    gx, gg = _vjp(lambda a, b: _grid_sampler_2d(a, b, interpolation_mode, padding_mode, align_corners), grad, x,
                  grid)
    return gx if output_mask[0] else None, gg


def _unfold_backward(grad, input_sizes, dim, size, step):
    x = wg.zeros(tuple(input_sizes), dtype=grad.dtype, device=grad.device)
    return _vjp(lambda a: a.unfold(dim, size, step), grad, x)[0]


def _embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    if weight.ndim != 2 or indices.ndim != 1 or offsets.ndim != 1:
        raise Unsupported("embedding_bag is mapped for a 2-D weight, 1-D indices and 1-D offsets")
    return bags.embedding_bag(weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding_idx)


def _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, max_indices, num_weights,
                            scale_grad_by_freq, mode, sparse=False, per_sample_weights=None, padding_idx=-1):
    if sparse:
        raise Unsupported("embedding_bag's sparse gradient is not mapped")
    return bags.embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, max_indices, num_weights,
                                       scale_grad_by_freq, mode, per_sample_weights, padding_idx)


_REDUCTIONS = ("none", "mean", "sum")  # ATen's Reduction enum


def _bincount(x, weights=None, minlength=0):
    """How often each value 0..max(x) occurs (weights summed instead where given): one read-back of the maximum
    for the result's length, as on CUDA, then an index_add."""
    if x.ndim != 1 or x.dtype.is_floating or x.dtype is dtypes.bool_:
        raise Unsupported("bincount of a non-integer or non-1-D input (ATen raises)")
    if weights is not None and (weights.ndim != 1 or weights.shape[0] != x.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    low, high = (int(v) for v in wg.aminmax(x)) if x.shape[0] else (0, -1)
    if low < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    size = max(minlength, high + 1)
    if weights is None:
        counts = wg.zeros(size, dtype=dtypes.int64, device=x.device)
        return counts.index_add(0, x.long(), counts.new_ones(x.shape[0])) if x.shape[0] else counts
    if not weights.dtype.is_floating:
        raise Unsupported("bincount with integer weights gives float64")
    out = wg.zeros(size, dtype=weights.dtype, device=x.device)
    return out.index_add(0, x.long(), weights) if x.shape[0] else out


def _rows_last(x):
    """[N, C, d1, ...] as [N * d1 * ..., C] (classes last, one row per position), and its shape [N, d1, ...]."""
    moved = x.movedim(1, -1)
    return moved.reshape(-1, x.shape[1]), tuple(moved.shape[:-1])


def _nll_loss2d_forward(logp, target, weight, reduction, ignore_index):
    """nll_loss over [N, C, H, W] (segmentation): the [N, C] mapping on one row per pixel."""
    rows, shape = _rows_last(logp)
    loss, total = _nll_loss_forward_composed(rows, target.reshape(-1), weight, reduction, ignore_index)
    return (loss.reshape(*shape) if reduction == 0 else loss), total


def _nll_loss2d_backward(grad, logp, target, weight, reduction, ignore_index, total_weight):
    rows, shape = _rows_last(logp)
    g = grad.reshape(-1) if reduction == 0 else grad
    out = _nll_loss_backward(g, rows, target.reshape(-1), weight, reduction, ignore_index, total_weight)
    return out.reshape(*shape, logp.shape[1]).movedim(-1, 1).contiguous()


def _group_norm_backward(grad, x, mean, rstd, weight, n, c, hxw, groups, output_mask):
    """(grad_input, grad_weight, grad_bias) of native_group_norm from its saved per-group mean and rstd: layer
    norm's gradient within each group of C / groups channels."""
    g = grad.reshape(n, c, hxw)
    per_group = c // groups * hxw
    xhat = ((x.reshape(n, groups, per_group) - mean.reshape(n, groups, 1)) * rstd.reshape(n, groups, 1))
    gx = gw = gb = None
    if output_mask[0]:
        gy = g * weight.reshape(1, c, 1) if weight is not None else g
        gy = gy.reshape(n, groups, per_group)
        gx = (rstd.reshape(n, groups, 1) * (gy - gy.mean(-1, keepdim=True) -
                                            xhat * (gy * xhat).mean(-1, keepdim=True))).reshape(*x.shape)
    if output_mask[1] and weight is not None:
        gw = (g * xhat.reshape(n, c, hxw)).sum((0, 2))
    if output_mask[2]:
        gb = g.sum((0, 2))
    return gx, gw, gb


def _prelu_backward(grad, x, weight):
    positive = x > 0
    gx = wg.where(positive, grad, grad * weight)
    return gx, unbroadcast(wg.where(positive, 0.0, grad * x), tuple(weight.shape))


def _pool3d_grad(forward):
    """The backward ATen op of a 3-D average pooling: webgrad's autograd of the same passes."""
    def backward(grad, x, *args):
        return _vjp(lambda a: forward(a, *args), grad, x)[0]
    return backward


def _inv_ex(A, *, check_errors=False):
    inverse, info = wg.linalg.inv_ex(A, check_errors=check_errors)
    return inverse, info


def _cholesky_ex(A, *, upper=False, check_errors=False):
    L, info = wg.linalg.cholesky_ex(A, upper=upper, check_errors=check_errors)
    return L, info


_EAGER = {
    # elementwise math webgrad has (integer inputs give float results, as ATen's)
    **{getattr(aten, name).default: getattr(wg, name) for name in (
        "acos", "asin", "atan", "acosh", "asinh", "atanh", "cosh", "sinh", "tan", "exp2", "trunc", "frac", "log2",
        "log10", "lgamma", "digamma", "erfinv", "erfc", "i0", "sinc", "rad2deg", "deg2rad", "signbit", "atan2",
        "logaddexp", "logaddexp2", "hypot", "fmax", "fmin", "heaviside", "nextafter", "floor_divide")},
    aten.special_i0e.default: wg.special.i0e, aten.special_i1.default: wg.special.i1,
    aten.special_i1e.default: wg.special.i1e, aten.special_ndtri.default: wg.special.ndtri,
    aten.special_erfcx.default: wg.special.erfcx, aten.special_log_ndtr.default: wg.special.log_ndtr,
    aten.special_entr.default: wg.special.entr, aten.special_xlog1py.default: wg.special.xlog1py,
    aten.polygamma.default: wg.polygamma,
    aten.logit.default: lambda x, eps=None: wg.logit(x, eps),
    aten.nan_to_num.default: lambda x, nan=None, posinf=None, neginf=None: wg.nan_to_num(
        x, 0.0 if nan is None else nan, posinf, neginf),
    aten.round.decimals: lambda x, *, decimals=0: wg.round(x, decimals=decimals),
    aten.remainder.Tensor: wg.remainder, aten.remainder.Scalar: wg.remainder,
    aten.remainder.Scalar_Tensor: wg.remainder,
    aten.fmod.Tensor: wg.fmod, aten.fmod.Scalar: wg.fmod,
    aten.floor_divide.Scalar: wg.floor_divide,
    aten.div.Tensor_mode: lambda a, b, *, rounding_mode=None: wg.div(a, b, rounding_mode=rounding_mode),
    aten.div.Scalar_mode: lambda a, b, *, rounding_mode=None: wg.div(a, b, rounding_mode=rounding_mode),
    aten.xlogy.Tensor: wg.xlogy, aten.xlogy.Scalar_Other: wg.xlogy, aten.xlogy.Scalar_Self: wg.xlogy,
    aten.copysign.Tensor: wg.copysign, aten.copysign.Scalar: wg.copysign,
    aten.rsub.Tensor: _rsub, aten.rsub.Scalar: _rsub,
    aten.masked_fill.Scalar: _masked_fill, aten.masked_fill.Tensor: _masked_fill,
    # reductions and scans
    aten.std.correction: _moment("std"), aten.var.correction: _moment("var"),
    aten.std_mean.correction: lambda x, dim=None, *, correction=None, keepdim=False: (
        _moment("std")(x, dim, correction=correction, keepdim=keepdim), _mean(x, dim, keepdim)),
    aten.prod.default: _integer_result(_with_dtype(_prod)),
    aten.prod.dim_int: _integer_result(_with_dtype(_prod)),
    aten.nansum.default: _integer_result(_with_dtype(lambda x, dim=None, keepdim=False: wg.nansum(
        x, _all_dims(x, dim, keepdim), keepdim))),
    aten.cumsum.default: _integer_result(_with_dtype(lambda x, dim: x.cumsum(dim))),
    aten.cumprod.default: _integer_result(_with_dtype(lambda x, dim: x.cumprod(dim))),
    aten._logcumsumexp.default: wg.logcumsumexp,
    aten.cummax.default: _cummaxmin("cummax"), aten.cummin.default: _cummaxmin("cummin"),
    aten.argmin.default: lambda x, dim=None, keepdim=False: x.argmin(dim, keepdim=keepdim) if dim is not None
    else x.argmin(),
    aten.aminmax.default: lambda x, *, dim=None, keepdim=False: tuple(wg.aminmax(x, dim=dim, keepdim=keepdim)),
    aten.count_nonzero.dim_IntList: lambda x, dim: wg.count_nonzero(x, _dims(x, dim)),
    aten.count_nonzero.default: lambda x, dim=None: wg.count_nonzero(x, dim),
    aten.linalg_vector_norm.default: _vector_norm,
    aten.norm.Scalar: lambda x, p=2: _vector_norm(x, p),
    aten.norm.ScalarOpt_dim: _norm_dims,
    aten.norm.ScalarOpt_dim_dtype: _norm_dims,
    aten.equal.default: lambda a, b: wg.equal(a, b),
    aten.sort.default: lambda x, dim=-1, descending=False: _sort(x, None, dim, descending),
    aten.sort.stable: _sort,
    aten.topk.default: _topk,
    aten.kthvalue.default: _values_indices("kthvalue"),
    aten.median.default: lambda x: x.median(),
    aten.median.dim: _values_indices("median"),
    aten.nanmedian.default: lambda x: x.nanmedian(),
    aten.nanmedian.dim: _values_indices("nanmedian"),
    aten.mode.default: _values_indices("mode"),
    # shape, order and selection
    aten.flip.default: lambda x, dims: x.flip(tuple(dims)),
    aten.roll.default: lambda x, shifts, dims=(): wg.roll(x, tuple(shifts), tuple(dims) or None),
    aten.index.Tensor: _index,
    aten.index_put.default: _index_put_general,
    aten.masked_select.default: lambda x, mask: wg.masked_select(x, mask),
    aten.masked_scatter.default: lambda x, mask, source: wg.masked_scatter(x, mask, source),
    aten.take.default: wg.take,
    aten.isin.Tensor_Tensor: lambda a, b, *, assume_unique=False, invert=False: wg.isin(a, b, invert=invert),
    aten.isin.Tensor_Scalar: lambda a, b, *, assume_unique=False, invert=False: wg.isin(a, b, invert=invert),
    aten._unique2.default: _unique2,
    # linear algebra
    aten.dot.default: lambda a, b: a.dot(b), aten.vdot.default: lambda a, b: a.dot(b),
    aten.mv.default: lambda a, b: a.mv(b),
    aten.addmv.default: lambda x, m, v, *, beta=1, alpha=1: wg.addmv(x, m, v, beta=beta, alpha=alpha),
    aten.baddbmm.default: lambda x, a, b, *, beta=1, alpha=1: wg.baddbmm(x, a, b, beta=beta, alpha=alpha),
    aten.addbmm.default: lambda x, a, b, *, beta=1, alpha=1: wg.addbmm(x, a, b, beta=beta, alpha=alpha),
    aten._cdist_forward.default: _cdist_forward,
    aten._cdist_backward.default: _cdist_backward,
    # convolution (1-D, transposed, grouped gradients), upsampling, pooling, padding
    aten.convolution.default: _convolution_any,
    aten.convolution_backward.default: _convolution_backward_any,
    aten.upsample_nearest1d.default: _upsample("nearest"),
    aten.upsample_nearest2d.default: _upsample("nearest"),
    aten.upsample_bilinear2d.default: _upsample("bilinear"),
    aten.upsample_linear1d.default: _upsample("linear"),
    aten.upsample_nearest3d.default: _upsample("nearest"),
    aten.upsample_bicubic2d.default: _upsample("bicubic"),
    aten.upsample_trilinear3d.default: _upsample("trilinear"),
    aten.upsample_nearest3d_backward.default: _upsample_backward("nearest"),
    aten.upsample_bicubic2d_backward.default: _upsample_backward("bicubic"),
    aten.upsample_trilinear3d_backward.default: _upsample_backward("trilinear"),
    aten.upsample_nearest1d_backward.default: _upsample_backward("nearest"),
    aten.upsample_nearest2d_backward.default: _upsample_backward("nearest"),
    aten.upsample_bilinear2d_backward.default: _upsample_backward("bilinear"),
    aten.upsample_linear1d_backward.default: _upsample_backward("linear"),
    aten._adaptive_avg_pool2d.default: lambda x, size: wg.nn.functional.adaptive_avg_pool2d(x, tuple(size)),
    aten._adaptive_avg_pool2d_backward.default: _adaptive_avg_pool2d_backward,
    aten.reflection_pad1d.default: _pad("reflect"), aten.reflection_pad2d.default: _pad("reflect"),
    aten.reflection_pad3d.default: _pad("reflect"), aten.replication_pad3d.default: _pad("replicate"),
    aten.reflection_pad3d_backward.default: _pad_backward("reflect"),
    aten.replication_pad3d_backward.default: _pad_backward("replicate"),
    aten.replication_pad1d.default: _pad("replicate"), aten.replication_pad2d.default: _pad("replicate"),
    aten.reflection_pad1d_backward.default: _pad_backward("reflect"),
    aten.reflection_pad2d_backward.default: _pad_backward("reflect"),
    aten.replication_pad1d_backward.default: _pad_backward("replicate"),
    aten.replication_pad2d_backward.default: _pad_backward("replicate"),
    aten.max_pool2d_with_indices.default: _max_pool2d_any,
    aten.max_pool2d_with_indices_backward.default: _max_pool2d_backward_any,
    aten.avg_pool2d.default: _avg_pool2d_any,
    aten.avg_pool2d_backward.default: _avg_pool2d_backward_any,
    aten.adaptive_max_pool2d.default: _adaptive_max_pool2d,
    aten.adaptive_max_pool2d_backward.default: lambda grad, x, indices: _vjp(
        lambda a: _adaptive_max_pool2d(a, tuple(grad.shape[-2:]))[0], grad, x)[0],
    aten.grid_sampler_2d.default: _grid_sampler_2d,
    aten.grid_sampler_2d_backward.default: _grid_sampler_2d_backward,
    aten.unfold_backward.default: _unfold_backward,
    aten.index_fill.int_Tensor: lambda x, dim, i, value: x.index_fill(dim, i, value.item() if isinstance(
        value, Tensor) else value),
    aten.linalg_solve_triangular.default: lambda A, B, *, upper, left=True, unitriangular=False:
        wg.linalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular),
    aten.linalg_inv_ex.default: _inv_ex,
    aten.linalg_cholesky_ex.default: _cholesky_ex,
    aten.linalg_cross.default: lambda a, b, *, dim=-1: wg.linalg.cross(a, b, dim=dim),
    # losses
    aten.smooth_l1_loss.default: _smooth_l1_loss, aten.smooth_l1_loss_backward.default: _smooth_l1_loss_backward,
    aten.huber_loss.default: _huber_loss, aten.huber_loss_backward.default: _huber_loss_backward,
    # creation and sampling
    aten._embedding_bag.default: _embedding_bag, aten._embedding_bag_forward_only.default: _embedding_bag,
    aten._embedding_bag_backward.default: _embedding_bag_backward,
    aten._embedding_bag_dense_backward.default: lambda grad, indices, offset2bag, bag_size, max_indices, num_weights,
    scale_grad_by_freq, mode, per_sample_weights, padding_idx=-1: _embedding_bag_backward(
        grad, indices, indices[:0], offset2bag, bag_size, max_indices, num_weights, scale_grad_by_freq, mode, False,
        per_sample_weights, padding_idx),
    aten._embedding_bag_per_sample_weights_backward.default: bags.per_sample_weights_backward,
    aten.max_pool3d_with_indices.default: pooling3d.max_pool3d,
    aten.max_pool3d_with_indices_backward.default: lambda grad, x, kernel, stride, padding, dilation, ceil_mode,
    indices: pooling3d.max_pool3d_backward(grad, x, indices),
    aten.adaptive_max_pool3d.default: pooling3d.adaptive_max_pool3d,
    aten.adaptive_max_pool3d_backward.default: pooling3d.max_pool3d_backward,
    aten.avg_pool3d.default: pooling3d.avg_pool3d,
    aten.avg_pool3d_backward.default: _pool3d_grad(pooling3d.avg_pool3d),
    aten._adaptive_avg_pool3d.default: pooling3d.adaptive_avg_pool3d,
    aten._adaptive_avg_pool3d_backward.default: lambda grad, x: _vjp(
        lambda a: pooling3d.adaptive_avg_pool3d(a, tuple(grad.shape[-3:])), grad, x)[0],
    # (the output size given, the kernel size is not read)
    aten.max_unpool2d.default: lambda x, indices, size: wg.nn.functional.max_unpool2d(x, indices, 1,
                                                                                      output_size=tuple(size)),
    aten.max_unpool3d.default: lambda x, indices, size, stride, padding: wg.nn.functional.max_unpool3d(
        x, indices, 1, output_size=tuple(size)),
    aten.index_reduce.default: lambda x, dim, i, src, reduce, *, include_self=True: x.index_reduce(
        dim, i, src, reduce, include_self=include_self),
    aten.bincount.default: _bincount,
    aten.renorm.default: lambda x, p, dim, maxnorm: wg.renorm(x, p, dim, maxnorm),
    aten.linalg_pinv.atol_rtol_tensor: lambda x, *, atol=None, rtol=None, hermitian=False: wg.linalg.pinv(
        x, atol=atol, rtol=rtol, hermitian=hermitian),
    # activations, losses and lookups webgrad has, with their backward ops as webgrad's autograd of them
    aten.hardshrink.default: lambda x, lambd=0.5: wg.nn.functional.hardshrink(x, lambd),
    aten.hardshrink_backward.default: lambda g, x, lambd: wg.where((x > lambd) | (x < -lambd), g, 0.0),
    aten.softshrink.default: lambda x, lambd=0.5: wg.nn.functional.softshrink(x, lambd),
    aten.softshrink_backward.default: lambda g, x, lambd: wg.where((x > lambd) | (x < -lambd), g, 0.0),
    aten.threshold.default: lambda x, threshold, value: wg.nn.functional.threshold(x, threshold, value),
    aten.glu.default: lambda x, dim=-1: wg.nn.functional.glu(x, dim),
    aten.glu_backward.default: lambda g, x, dim: _vjp(lambda a: wg.nn.functional.glu(a, dim), g, x)[0],
    aten.logit_backward.default: lambda g, x, eps=None: _vjp(lambda a: wg.logit(a, eps), g, x)[0],
    aten.channel_shuffle.default: lambda x, groups: wg.nn.functional.channel_shuffle(x, groups),
    aten.binary_cross_entropy.default: lambda x, y, weight=None, reduction=1: wg.nn.functional.binary_cross_entropy(
        x, y, weight, reduction=_REDUCTIONS[reduction]),
    aten.binary_cross_entropy_backward.default: lambda g, x, y, weight=None, reduction=1: _vjp(
        lambda a: wg.nn.functional.binary_cross_entropy(a, y, weight, reduction=_REDUCTIONS[reduction]), g, x)[0],
    aten.logical_xor.default: lambda a, b: wg.logical_xor(a, b),
    aten.trace.default: lambda x: wg.trace(x),
    aten.histc.default: lambda x, bins=100, min=0, max=0: wg.histc(x, bins, min, max),
    aten.searchsorted.Tensor: lambda seq, x, *, out_int32=False, right=False, side=None, sorter=None: wg.searchsorted(
        seq, x, out_int32=out_int32, right=right, side=side, sorter=sorter),
    aten.bucketize.Tensor: lambda x, boundaries, *, out_int32=False, right=False: wg.bucketize(
        x, boundaries, out_int32=out_int32, right=right),
    aten.nll_loss2d_forward.default: _nll_loss2d_forward,
    aten.nll_loss2d_backward.default: _nll_loss2d_backward,
    aten.native_group_norm_backward.default: _group_norm_backward,
    aten._prelu_kernel.default: lambda x, weight: wg.where(x > 0, x, x * weight),
    aten._prelu_kernel_backward.default: _prelu_backward,
    aten.eye.default: _eye, aten.eye.m: _eye,
    # the zero gradients of real inputs (sgn's backward): dense zeros, which autograd treats as the same
    aten._efficientzerotensor.default: lambda size, dtype=None, layout=None, device=None, pin_memory=None, *,
    target: _full(size, 0, dtype, target=target),
    aten.linspace.default: _linspace, aten.logspace.default: _logspace,
    aten.randperm.default: _randperm,
    aten.multinomial.default: _multinomial,
}
ATEN.update(_EAGER)
NEEDS_DEVICE_EAGER = {aten.eye.default, aten.eye.m, aten.linspace.default, aten.logspace.default,
                      aten.randperm.default, aten._efficientzerotensor.default}


# ------------------------------------------------------------------ more ops eager PyTorch reaches
# Each on webgrad's device ops (its WGSL special functions, sorts, scatters, searches); a backward ATen op whose
# forward is one webgrad function is that function's gradient by webgrad's autograd (_vjp).
_SPECIAL = ("airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
            "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
            "scaled_modified_bessel_k1", "spherical_bessel_j0")
_POLYNOMIALS = ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
                "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
                "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
                "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p")


def _angle(x):
    """The argument of a real number: pi below zero, 0 elsewhere, NaN kept (float results for integers)."""
    if not x.dtype.is_floating:
        x = x.to(dtype=dtypes.float32)
    return wg.where(x < 0, math.pi, wg.where(x.isnan(), x, 0.0).to(dtype=x.dtype)).to(dtype=x.dtype)


def _frexp(x):
    out = wg.frexp(x)
    return out[0], out[1]


def _unique_consecutive(x, return_inverse=False, return_counts=False, dim=None):
    out = wg.unique_consecutive(x, return_inverse=True, return_counts=True, dim=dim)
    empty = wg.empty(0, dtype=dtypes.int64, device=x.device)
    return out[0], out[1] if return_inverse else empty, out[2] if return_counts else empty


def _unique_dim(x, dim, sorted=True, return_inverse=False, return_counts=False):
    """ATen's unique_dim gives the inverse and the counts whatever the flags say."""
    out = wg.unique(x, sorted=True, return_inverse=True, return_counts=True, dim=dim)
    return out[0], out[1], out[2]


def _unique(x, sorted=True, return_inverse=False):
    values, inverse = wg.unique(x, sorted=True, return_inverse=True)
    return values, inverse.reshape(*x.shape) if return_inverse else wg.empty(0, dtype=dtypes.int64, device=x.device)


def _multi_margin_loss(x, target, p=1, margin=1, weight=None, reduction=1):
    return wg.nn.functional.multi_margin_loss(x, target, p, margin, weight, reduction=_REDUCTIONS[reduction])


def _multilabel_margin_loss(x, target, reduction):
    """(loss, is_target): is_target marks each row's target classes (those listed before the first -1)."""
    rows = x.reshape(1, -1) if x.ndim < 2 else x
    t = target.reshape(tuple(rows.shape)).long()
    listed = (t == -1).long().cumsum(1) == 0
    classes = wg.arange(rows.shape[1], device=x.device)
    is_target = ((t.unsqueeze(2) == classes) & listed.unsqueeze(2)).any(1).to(dtype=x.dtype)
    loss = wg.nn.functional.multilabel_margin_loss(x, target, reduction=_REDUCTIONS[reduction])
    return loss, is_target.reshape(*x.shape)


def _histogram_bins(x, bins=100, *, range=None, weight=None, density=False):
    out = wg.histogram(x, bins, range=range, weight=weight, density=density)
    return out[0], out[1]


def _histogramdd_edges(x, bins, *, range=None, weight=None, density=False):
    return list(wg.histogramdd(x, list(bins), range=range, weight=weight, density=density)[1])


def _histogramdd(x, bins, *, range=None, weight=None, density=False):
    return wg.histogramdd(x, list(bins), range=range, weight=weight, density=density)[0]


def _grid_sampler_3d_backward(grad, x, grid, interpolation_mode, padding_mode, align_corners, output_mask):
    return _grid_sampler_2d_backward(grad, x, grid, interpolation_mode, padding_mode, align_corners, output_mask)


_MORE = {
    **{getattr(aten, "special_" + name).default: getattr(wg.special, name) for name in _SPECIAL},
    **{getattr(getattr(aten, "special_" + name), overload): getattr(wg.special, name)
       for name in _POLYNOMIALS for overload in ("default", "x_scalar", "n_scalar")},
    aten.special_zeta.default: wg.special.zeta, aten.special_zeta.self_scalar: wg.special.zeta,
    aten.special_zeta.other_scalar: wg.special.zeta,
    aten.igamma.default: wg.igamma, aten.igammac.default: wg.igammac,
    aten.frexp.Tensor: _frexp,
    aten.angle.default: _angle,
    aten.put.default: lambda x, index, source, accumulate=False: wg.put(x, index, source, accumulate),
    aten.repeat_interleave.Tensor: lambda repeats, *, output_size=None: wg.repeat_interleave(
        repeats, output_size=output_size),
    aten.nonzero_static.default: lambda x, *, size, fill_value=-1: wg.nonzero_static(
        x, size=size, fill_value=fill_value),
    aten.unique_consecutive.default: _unique_consecutive,
    aten.unique_dim.default: _unique_dim,
    aten._unique.default: _unique,
    aten.histogram.bin_ct: _histogram_bins,
    aten.histogram.bins_tensor: lambda x, bins, *, weight=None, density=False: _histogram_bins(
        x, bins, weight=weight, density=density),
    aten._histogramdd_bin_edges.default: _histogramdd_edges,
    aten._histogramdd_from_bin_cts.default: _histogramdd,
    aten._histogramdd_from_bin_tensors.default: lambda x, bins, *, weight=None, density=False: _histogramdd(
        x, bins, weight=weight, density=density),
    # distances, margin losses, sliding blocks, resampling
    aten._pdist_forward.default: lambda x, p=2.0: wg.nn.functional.pdist(x, p),
    aten._pdist_backward.default: lambda grad, x, p, pdist: _vjp(lambda a: wg.nn.functional.pdist(a, p), grad,
                                                                 x)[0],
    aten.multi_margin_loss.default: _multi_margin_loss,
    aten.multi_margin_loss_backward.default: lambda grad, x, target, p, margin, weight=None, reduction=1: _vjp(
        lambda a: _multi_margin_loss(a, target, p, margin, weight, reduction), grad, x)[0],
    aten.multilabel_margin_loss_forward.default: _multilabel_margin_loss,
    aten.multilabel_margin_loss_backward.default: lambda grad, x, target, reduction, is_target: _vjp(
        lambda a: _multilabel_margin_loss(a, target, reduction)[0], grad, x)[0],
    aten.im2col.default: lambda x, kernel_size, dilation, padding, stride: wg.nn.functional.unfold(
        x, tuple(kernel_size), tuple(dilation), tuple(padding), tuple(stride)),
    aten.col2im.default: lambda x, output_size, kernel_size, dilation, padding, stride: wg.nn.functional.fold(
        x, tuple(output_size), tuple(kernel_size), tuple(dilation), tuple(padding), tuple(stride)),
    aten.grid_sampler_3d.default: _grid_sampler_2d,
    aten.grid_sampler_3d_backward.default: _grid_sampler_3d_backward,
    **{getattr(aten, f"_upsample_nearest_exact{d}d").default: _upsample("nearest-exact") for d in (1, 2, 3)},
    **{getattr(aten, f"_upsample_nearest_exact{d}d_backward").default: _upsample_backward("nearest-exact")
       for d in (1, 2, 3)},
}
ATEN.update(_MORE)


# ------------------------------------------------------------------ linear algebra: webgrad's factorization kernels
# The factorizations (LU, Cholesky, QR, eigh, SVD, triangular solves) are device kernels; ATen's composites and
# backward formulas call these ops with the factors they saved (LU and pivots), so those are returned as ATen does.
def _linalg_svd(A, full_matrices=False, compute_uv=True, *, driver=None):
    if not compute_uv:
        empty = wg.empty(0, dtype=A.dtype, device=A.device)
        return empty, wg.linalg.svdvals(A), empty.clone()
    U, S, Vh = wg.linalg.svd(A, full_matrices=full_matrices)
    return U, S, Vh


def _linalg_eigh(A, UPLO="L", compute_v=True):
    """The eigenvalues only: the device's eigenvectors are as valid as LAPACK's but their signs differ, and
    PyTorch's results should not depend on the device."""
    if compute_v:
        raise Unsupported("eigenvectors (their signs are LAPACK's on the CPU)")
    return wg.linalg.eigvalsh(A, UPLO), wg.empty(0, dtype=A.dtype, device=A.device)


def _lu_factor_ex(A, *, pivot=True, check_errors=False):
    LU, pivots, info = wg.linalg.lu_factor_ex(A, pivot=pivot, check_errors=check_errors)
    return LU, pivots, info


def _linalg_solve_ex(A, B, *, left=True, check_errors=False):
    """(X, LU, pivots, info): B a matrix, or a vector where ATen's linalg_solve takes it as one."""
    LU, pivots, info = wg.linalg.lu_factor_ex(A, check_errors=check_errors)
    vector = left and (B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1])))
    if vector:
        X = wg.linalg.lu_solve(LU, pivots, B.unsqueeze(-1)).squeeze(-1)
    else:
        X = wg.linalg.lu_solve(LU, pivots, B, left=left)
    return X, LU, pivots, info


def _det_parts(A):
    """(LU, pivots, the permutation's sign) as ATen's det and slogdet save them for their backward: of A^T where
    A is contiguous (det A^T = det A; their backward solves with the adjoint accordingly), else of A."""
    return wg.linalg._det_parts(A.mT if A.is_contiguous() else A)


def _linalg_det(A):
    LU, pivots, sign = _det_parts(A)
    return LU.diagonal(0, -2, -1).prod(-1) * sign, LU, pivots


def _linalg_slogdet(A):
    LU, pivots, perm_sign = _det_parts(A)
    diag = LU.diagonal(0, -2, -1)
    return diag.sign().prod(-1) * perm_sign, diag.abs().log().sum(-1), LU, pivots


def _lstsq(A, B, rcond=None, *, driver=None):
    out = wg.linalg.lstsq(A, B, rcond, driver=driver)
    return out[0], out[1], out[2], out[3]


def _tuple(fn):
    """fn's named tuple as the plain tuple the dispatcher takes."""
    return lambda *args, **kwargs: tuple(fn(*args, **kwargs))


_LINALG = {
    aten._linalg_svd.default: _linalg_svd,
    aten._linalg_eigh.default: _linalg_eigh,
    aten.linalg_qr.default: _tuple(wg.linalg.qr),
    aten.linalg_lu_factor_ex.default: _lu_factor_ex,
    aten.linalg_lu.default: _tuple(wg.linalg.lu),
    aten.lu_unpack.default: _tuple(wg.linalg.lu_unpack),
    aten.linalg_lu_solve.default: lambda LU, pivots, B, *, left=True, adjoint=False: wg.linalg.lu_solve(
        LU, pivots, B, left=left, adjoint=adjoint),
    aten._linalg_solve_ex.default: _linalg_solve_ex,
    aten._linalg_det.default: _linalg_det,
    aten._linalg_slogdet.default: _linalg_slogdet,
    aten.cholesky.default: lambda A, upper=False: wg.linalg.cholesky(A, upper=upper),
    aten.cholesky_inverse.default: lambda L, upper=False: wg.linalg.cholesky_inverse(L, upper),
    aten._cholesky_solve_helper.default: lambda B, L, upper: wg.linalg.cholesky_solve(B, L, upper),
    aten.triangular_solve.default: _tuple(wg.linalg._triangular_solve),
    aten.linalg_matrix_exp.default: wg.linalg.matrix_exp,
    aten.linalg_householder_product.default: wg.linalg.householder_product,
    aten.linalg_lstsq.default: _lstsq,
}
ATEN.update(_LINALG)


# ------------------------------------------------------------------ Householder QR in LAPACK's packed form
def _geqrf(A):
    """(a, tau) of LAPACK's geqrf: R on and above the diagonal, below it the Householder vectors v_j (v_j[0] = 1
    implied), H_j = I - tau_j v_j v_j^T with dlarfg's signs (beta = -sign(alpha) * |x|; tau 0 where the column
    below the diagonal is already 0). Column by column (geqr2), on the device, batched."""
    m, n = A.shape[-2:]
    a = A.contiguous().clone()
    k = min(m, n)
    taus = []
    for j in range(k):
        x = a[..., j:, j]
        alpha, rest = x[..., 0], x[..., 1:]
        norm = (rest * rest).sum(-1).sqrt() if m - j > 1 else alpha * 0
        beta = -wg.copysign((alpha * alpha + norm * norm).sqrt(), alpha)
        flat = norm == 0
        tau = wg.where(flat, 0.0, (beta - alpha) / wg.where(flat, 1.0, beta))
        v = wg.where(flat.unsqueeze(-1), rest, rest / wg.where(flat, 1.0, alpha - beta).unsqueeze(-1))
        a[..., j, j] = wg.where(flat, alpha, beta)
        if m - j > 1:
            a[..., j + 1:, j] = v
        if j + 1 < n:  # apply H_j to the columns on the right
            block = a[..., j:, j + 1:]
            vfull = wg.cat([wg.ones_like(alpha).unsqueeze(-1), v], -1)  # [..., m - j]
            w = (vfull.unsqueeze(-1) * block).sum(-2)  # v^T block: [..., n - j - 1]
            a[..., j:, j + 1:] = block - tau.unsqueeze(-1).unsqueeze(-1) * vfull.unsqueeze(-1) * w.unsqueeze(-2)
        taus.append(tau)
    tau = wg.stack(taus, -1) if taus else wg.zeros(tuple(A.shape[:-2]) + (0,), dtype=A.dtype, device=A.device)
    return a, tau


def _ormqr(A, tau, C, left=True, transpose=False):
    """Q C, Q^T C, C Q or C Q^T with Q (m x m) the product of geqrf's reflectors in A: householder_product of the
    reflectors' columns padded to a square with zeros."""
    m, k = A.shape[-2], tau.shape[-1]
    if m == 0 or k == 0 or C.numel() == 0:
        return C.clone()
    columns = A[..., :, :k]
    padded = wg.cat([columns, wg.zeros(tuple(columns.shape[:-1]) + (m - k,), dtype=A.dtype, device=A.device)], -1)
    Q = wg.linalg.householder_product(padded, tau)
    Q = Q.mT if transpose else Q
    return Q @ C if left else C @ Q


ATEN.update({aten.geqrf.default: _geqrf, aten.ormqr.default: _ormqr})


# ------------------------------------------------------------------ segment reductions
_SEGMENT = {"sum": ("sum", 0.0), "mean": ("sum", 0.0), "prod": ("prod", 1.0), "max": ("amax", -math.inf),
            "min": ("amin", math.inf)}


def _segments(data, lengths, offsets, axis, unsafe=True):
    """(each element's segment along axis, expanded to data's shape; the lengths [*lead, S]; S). Elements outside
    every segment get slot S, which the callers drop."""
    given_lengths = lengths is not None
    if given_lengths:
        lengths = lengths.long()
        offsets = wg.cat([wg.zeros(tuple(lengths.shape[:-1]) + (1,), dtype=dtypes.int64, device=data.device),
                          lengths.cumsum(-1)], -1)
    else:
        offsets = offsets.long()
        lengths = offsets[..., 1:] - offsets[..., :-1]
    segments, size = offsets.shape[-1] - 1, data.shape[axis]
    if not unsafe and lengths.numel():  # ATen's checks (one read-back, as on CUDA)
        low, total = (int(v) for v in wg.stack([lengths.amin(), (lengths.sum(-1) != size).long().sum()]).tolist())
        if low < 0:
            raise RuntimeError("lengths contains negative value!" if given_lengths else
                               "Expected segment_length >= 0 to be true, but got false.")
        if total and given_lengths:
            raise RuntimeError("segment_reduce(): Expected all rows of lengths along axis to sum to "
                               "data.size(lengths.dim()-1) when !unsafe.")
    lead, trail = tuple(data.shape[:axis]), tuple(data.shape[axis + 1:])
    positions = wg.arange(size, device=data.device).expand(*lead, size).contiguous()
    slot = wg.searchsorted(offsets.contiguous(), positions, right=True) - 1
    slot = wg.where((slot < 0) | (slot >= segments), segments, slot)
    slot = slot.reshape(lead + (size,) + (1,) * len(trail)).expand(*data.shape)
    return slot, lengths.reshape(lead + (segments,) + (1,) * len(trail)), segments


def _segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None):
    """Each segment of data along axis reduced (segments given by their lengths or by offsets, batched over the
    dims before axis): one scatter_reduce of every element into its segment's slot, the slot found by a search
    of the offsets. initial takes part as one more element, except in a mean, which divides (initial + sum) by
    the length and gives initial for an empty segment."""
    if indices is not None or reduce not in _SEGMENT:
        raise Unsupported("segment_reduce with indices, or an unknown reduction")
    axis %= data.ndim
    slot, lengths, segments = _segments(data, lengths, offsets, axis, unsafe)
    op, empty = _SEGMENT[reduce]
    shape = list(data.shape)
    shape[axis] = segments + 1
    start = wg.full(tuple(shape), empty if initial is None else initial, dtype=data.dtype, device=data.device)
    out = start.scatter_reduce(axis, slot, data, op, include_self=True).narrow(axis, 0, segments)
    if reduce == "mean":
        count = lengths.to(dtype=data.dtype)
        out = wg.where(count == 0, math.nan if initial is None else initial, out / count)
    return out


def _segment_reduce_backward(grad, output, data, reduce, *, lengths=None, offsets=None, axis=0, initial=None):
    """ATen's formulas (SegmentReduce.cpp): max and min give each element equal to its segment's result the
    gradient, divided by their count where there are several and it is positive; prod divides the result by the
    element, or for a zero takes the product of the others (and initial)."""
    axis %= data.ndim
    slot, lengths, segments = _segments(data, lengths, offsets, axis)

    def per_element(t):  # a per-segment tensor read at each element's segment (0 outside every segment)
        return wg.cat([t, wg.zeros_like(t.narrow(axis, 0, 1))], axis).gather(axis, slot)

    def per_segment(t):  # a per-element tensor summed over each segment
        shape = list(data.shape)
        shape[axis] = segments + 1
        return wg.zeros(tuple(shape), dtype=t.dtype, device=t.device).scatter_add(axis, slot, t).narrow(
            axis, 0, segments)
    g = per_element(grad)
    if reduce == "sum":
        return g
    if reduce == "mean":
        return g / per_element(lengths.to(dtype=data.dtype).expand(*grad.shape).contiguous()).clamp(min=1)
    if reduce in ("max", "min"):
        hit = (data == per_element(output)) | data.isnan()
        count = per_element(per_segment(hit.to(dtype=data.dtype)))
        return wg.where(hit, wg.where((count > 1) & (g > 0), g / count, g), 0.0)
    zero = data == 0
    others = per_segment(zero.to(dtype=data.dtype))  # the zeros in each segment
    shape = list(data.shape)
    shape[axis] = segments + 1
    nonzero = wg.full(tuple(shape), 1.0 if initial is None else initial, dtype=data.dtype, device=data.device)
    nonzero = nonzero.scatter_reduce(axis, slot, wg.where(zero, 1.0, data), "prod").narrow(axis, 0, segments)
    exclusive = wg.where(per_element(others) == 1, per_element(nonzero), 0.0)
    return wg.where(zero, g * exclusive, g * per_element(output) / wg.where(zero, 1.0, data))


ATEN.update({aten.segment_reduce.default: _segment_reduce,
             aten._segment_reduce_backward.default: _segment_reduce_backward})


def _batch_norm_no_stats(x, weight, bias, training, momentum, eps):
    """_native_batch_norm_legit without running statistics: the batch's own (out, save_mean, save_invstd)."""
    out, mean, rstd, _, _ = _batch_norm(x, weight, bias, None, None, True, momentum, eps)
    return out, mean, rstd


ATEN.update({
    aten._native_batch_norm_legit.no_stats: _batch_norm_no_stats,
    # the backward of _batch_norm_with_update: update is training, save_var holds the saved invstd, as on the CPU
    aten.batch_norm_backward.default: lambda grad, x, weight, running_mean, running_var, save_mean, save_var, update,
    eps, output_mask, reserve: _batch_norm_backward(grad, x, weight, running_mean, running_var, save_mean, save_var,
                                                    update, eps, output_mask),
})


# ------------------------------------------------------------------ antialiased resampling
def _aa_weights(n_in, n_out, align_corners, scale, cubic, like):
    """The [n_out, n_in] matrix of ATen's antialiased resampling along one dim, on like's device."""
    return wg.tensor(aa_rows(n_in, n_out, bool(align_corners), scale, cubic), dtype=like.dtype, device=like.device)


def _upsample_aa(cubic):
    """_upsample_bilinear2d_aa / _upsample_bicubic2d_aa: two products with the per-dim weight matrices."""
    def fn(x, output_size, align_corners, scales_h=None, scales_w=None):
        if x.ndim != 4:
            raise Unsupported("antialiased resampling of a non-4-D input")
        wh = _aa_weights(x.shape[2], output_size[0], align_corners, scales_h, cubic, x)
        ww = _aa_weights(x.shape[3], output_size[1], align_corners, scales_w, cubic, x)
        return wh @ x @ ww.t()
    return fn


def _upsample_aa_backward(cubic):
    def fn(grad, output_size, input_size, align_corners, scales_h=None, scales_w=None):
        wh = _aa_weights(input_size[2], output_size[0], align_corners, scales_h, cubic, grad)
        ww = _aa_weights(input_size[3], output_size[1], align_corners, scales_w, cubic, grad)
        return wh.t() @ grad @ ww
    return fn


ATEN.update({aten._upsample_bilinear2d_aa.default: _upsample_aa(False),
             aten._upsample_bilinear2d_aa_backward.default: _upsample_aa_backward(False),
             aten._upsample_bicubic2d_aa.default: _upsample_aa(True),
             aten._upsample_bicubic2d_aa_backward.default: _upsample_aa_backward(True)})


def _rrelu_with_noise(x, noise, lower=0.125, upper=1.0 / 3, training=False, generator=None):
    """Randomized leaky ReLU: in training each non-positive element gets a slope drawn from U(lower, upper) and the
    positive ones 1, written into noise (which the backward reads); in eval the mean slope."""
    if generator is not None:
        raise Unsupported("rrelu with a generator")
    if not training:
        return wg.where(x > 0, x, x * ((lower + upper) / 2))
    slopes = new(tuple(x.shape), x.dtype, x.device)
    fill_random(slopes, "uniform", lower, upper)
    slopes = wg.where(x > 0, 1.0, slopes).to(dtype=x.dtype)
    if noise.numel():
        kernels.copy(x.device.backend, noise._view, slopes.reshape(*noise.shape)._view)
    return x * slopes


ATEN[aten.rrelu_with_noise.default] = _rrelu_with_noise


# ------------------------------------------------------------------ fractional max pooling
def _f32(value):
    """value rounded to float32, as ATen computes the pooling intervals in the input's dtype."""
    return struct.unpack("f", struct.pack("f", value))[0]


def _fractional_max_pool(x, kernel_size, output_size, samples):
    """(values, indices) of ATen's fractional max pooling (FractionalMaxPool2d/3d.cpp): along each spatial dim the
    windows start at int((i + u) * alpha) - int(u * alpha), alpha = (in - k) / (out - 1), the last at in - k, with
    u the plane's sample for that dim (samples[..., 0] is the width's in 2-D, the depth's in 3-D). Each window's
    first maximum in row-major order, its index flat within the plane; all on the device, windows gathered."""
    d = len(kernel_size)
    unbatched = x.ndim == d + 1
    if unbatched:
        x, samples = x.unsqueeze(0), samples.reshape(1, *samples.shape[-2:])
    n, c, sizes = x.shape[0], x.shape[1], tuple(x.shape[2:])
    order = [1, 0] if d == 2 else [0, 1, 2]  # the sample of each spatial dim
    flat = None
    for axis, (size, k, out) in enumerate(zip(sizes, kernel_size, output_size)):
        if out + k - 1 > size:
            raise Unsupported("an output larger than the input allows (ATen raises)")
        u = samples[..., order[axis]].unsqueeze(-1)  # [N, C, 1]
        steps = wg.arange(out, device=x.device).to(dtype=x.dtype)
        if out > 1:
            alpha = _f32((size - k) / (out - 1))
            start = ((steps + u) * alpha).long() - (u * alpha).long()
        else:
            start = wg.zeros((n, c, 1), dtype=dtypes.int64, device=x.device)
        last = wg.full((n, c, 1), size - k, dtype=dtypes.int64, device=x.device)
        start = wg.cat([start[..., :-1], last], -1) if out > 0 else start[..., :0]
        pos = start.unsqueeze(-1) + wg.arange(k, device=x.device)  # [N, C, out, k]
        stride = math.prod(sizes[axis + 1:])
        pos = (pos * stride).reshape((n, c) + (1, 1) * axis + (out, k) + (1, 1) * (d - 1 - axis))
        flat = pos if flat is None else flat + pos
    # [N, C, o0, k0, o1, k1, ...] -> [N, C, o0 * o1 ..., k0 * k1 ...]
    perm = (0, 1) + tuple(2 + 2 * i for i in range(d)) + tuple(3 + 2 * i for i in range(d))
    windows = flat.permute(*perm).reshape(n, c, math.prod(output_size), math.prod(kernel_size)).contiguous()
    values = x.reshape(n, c, 1, -1).expand(n, c, windows.shape[2], math.prod(sizes)).gather(3, windows)
    best, at = values.max(-1, keepdim=True)
    indices = windows.gather(3, at)
    shape = (n, c) + tuple(output_size)
    best, indices = best.reshape(*shape), indices.reshape(*shape)
    return (best.squeeze(0), indices.squeeze(0)) if unbatched else (best, indices)


def _fractional_max_pool_backward(grad, x, kernel_size, output_size, indices):
    """Each output's gradient added at the input position it took (scatter_add within each plane)."""
    planes = x.reshape(-1, math.prod(x.shape[-len(kernel_size):]))
    out = wg.zeros(tuple(planes.shape), dtype=grad.dtype, device=grad.device)
    return out.scatter_add(1, indices.reshape(planes.shape[0], -1), grad.reshape(planes.shape[0], -1)).reshape(
        *x.shape)


ATEN.update({aten.fractional_max_pool2d.default: _fractional_max_pool,
             aten.fractional_max_pool3d.default: _fractional_max_pool,
             aten.fractional_max_pool2d_backward.default: _fractional_max_pool_backward,
             aten.fractional_max_pool3d_backward.default: _fractional_max_pool_backward})


# ------------------------------------------------------------------ CTC loss
def _lse(*terms):
    """log(sum(exp(terms))) of tensors that may hold -inf (all -inf gives -inf, no NaN)."""
    top = terms[0]
    for t in terms[1:]:
        top = wg.maximum(top, t)
    top = wg.where(top == -math.inf, 0.0, top)
    total = None
    for t in terms:
        e = (t - top).exp()
        total = e if total is None else total + e
    return total.log() + top


def _shift(x, by):
    """x moved `by` states to the right along its last dim, -inf coming in."""
    pad = wg.full(tuple(x.shape[:-1]) + (by,), -math.inf, dtype=x.dtype, device=x.device)
    return wg.cat([pad, x[..., :-by]], -1)


def _ctc_setup(log_probs, targets, input_lengths, target_lengths, blank):
    """(the extended labels [N, L] (blank, t1, blank, t2, ..., blank), log_probs read at them [T, N, L], whether
    a state may be entered from two states back [N, L], whether it exists for the sample's target [N, L])."""
    if log_probs.ndim != 3 or log_probs.dtype is not dtypes.float32:
        raise Unsupported("ctc_loss of a non-3-D or non-float32 input")
    t, n = log_probs.shape[:2]
    s = max(target_lengths) if target_lengths else 0
    device = log_probs.device
    if s == 0:
        labels = wg.full((n, 1), blank, dtype=dtypes.int64, device=device)
    else:
        if targets.ndim == 1:  # concatenated targets: each sample's run of them, padded by repeating its last
            starts = [sum(target_lengths[:i]) for i in range(n)]
            at = [starts[i] + min(j, max(target_lengths[i] - 1, 0)) for i in range(n) for j in range(s)]
            picked = targets.long().index_select(0, wg.tensor(at, dtype=dtypes.int64, device=device)).reshape(n, s)
        else:
            picked = targets.long()[:, :s]
        blanks = wg.full((n, s), blank, dtype=dtypes.int64, device=device)
        labels = wg.cat([wg.stack([blanks, picked], -1).reshape(n, 2 * s), blanks[:, :1]], -1)
    width = labels.shape[1]
    read = log_probs.gather(2, labels.unsqueeze(0).expand(t, n, width).contiguous())
    skip = (labels != blank) & (labels != wg.cat([labels[:, :2] * 0 - 1, labels[:, :-2]], -1))
    states = wg.arange(width, device=device).unsqueeze(0) < wg.tensor(
        [2 * k + 1 for k in target_lengths], dtype=dtypes.int64, device=device).unsqueeze(1)
    return labels, read, skip, states


def _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    """(negative log-likelihood [N], log_alpha [N, T, L]) by the forward recursion over time, in log space, all
    samples at once (a sample's alphas stop at its input length; later ones are -inf)."""
    input_lengths, target_lengths = [int(v) for v in input_lengths], [int(v) for v in target_lengths]
    _, read, skip, states = _ctc_setup(log_probs, targets, input_lengths, target_lengths, blank)
    t, n, width = read.shape
    device = log_probs.device
    first = wg.arange(width, device=device).unsqueeze(0) < 2
    frames = wg.tensor(input_lengths, dtype=dtypes.int64, device=device)
    going = (wg.arange(t, device=device).unsqueeze(1) < frames).unsqueeze(2) & states  # [T, N, L]
    alpha = wg.where(first & states, read[0], -math.inf)
    alphas = [alpha]
    for step in range(1, t):
        alpha = _lse(alpha, _shift(alpha, 1), wg.where(skip, _shift(alpha, 2), -math.inf)) + read[step]
        alpha = wg.where(going[step], alpha, -math.inf)
        alphas.append(alpha)
    log_alpha = wg.stack(alphas, 1)  # [N, T, L]
    at = wg.tensor([max(k - 1, 0) for k in input_lengths], dtype=dtypes.int64, device=device)
    last = log_alpha.gather(1, at.reshape(n, 1, 1).expand(n, 1, width)).squeeze(1)  # [N, L]
    ends = wg.tensor([[2 * k, max(2 * k - 1, 0)] for k in target_lengths], dtype=dtypes.int64, device=device)
    final = last.gather(1, ends)
    two = wg.tensor([k > 0 for k in target_lengths], dtype=dtypes.bool_, device=device)
    # (an impossible alignment stays inf here: ctc_loss zeroes it with zero_infinity, and the backward needs it)
    return -_lse(final[:, 0], wg.where(two, final[:, 1], -math.inf)), log_alpha


def _ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, nll, log_alpha, blank,
                       zero_infinity=False):
    """ATen's gradient (LossCTC.cpp), which is the logits' gradient through log_softmax: exp(lp) minus each class's
    posterior occupancy, sum over its states of exp(log_alpha + log_beta + nll - lp), times the sample's grad; the
    betas by the backward recursion from each sample's last frame; zeros past a sample's input length."""
    input_lengths, target_lengths = [int(v) for v in input_lengths], [int(v) for v in target_lengths]
    labels, read, skip, states = _ctc_setup(log_probs, targets, input_lengths, target_lengths, blank)
    t, n, width = read.shape
    device = log_probs.device
    index = wg.arange(width, device=device).unsqueeze(0)
    ends = wg.tensor([2 * k for k in target_lengths], dtype=dtypes.int64, device=device).unsqueeze(1)
    final = (index == ends) | ((index == ends - 1) & (ends > 0))
    skip_from = wg.cat([skip[:, 2:], wg.zeros((n, 2), dtype=dtypes.bool_, device=device)], -1)
    frames = wg.tensor(input_lengths, dtype=dtypes.int64, device=device)
    steps = wg.arange(t, device=device).unsqueeze(1)
    going = ((steps < frames - 1).unsqueeze(2) & states)  # [T, N, L]: a later frame exists
    start = ((steps == frames - 1).unsqueeze(2) & states & final)  # the last frame's two final states
    beta = wg.full((n, width), -math.inf, dtype=read.dtype, device=device)
    betas = [None] * t
    for step in range(t - 1, -1, -1):
        later = _lse(beta, _shift(beta.flip(-1), 1).flip(-1),
                     wg.where(skip_from, _shift(beta.flip(-1), 2).flip(-1), -math.inf)) + read[step]
        beta = wg.where(going[step], later, wg.where(start[step], read[step], -math.inf))
        betas[step] = beta
    log_beta = wg.stack(betas, 0)  # [T, N, L]
    both = log_alpha.transpose(0, 1) + log_beta
    top = both.amax(-1, keepdim=True)
    top = wg.where(top == -math.inf, 0.0, top)
    occupancy = wg.zeros(tuple(log_probs.shape), dtype=log_probs.dtype, device=device).scatter_add(
        2, labels.unsqueeze(0).expand(t, n, width).contiguous(), (both - top).exp())
    lcab = occupancy.log() + top
    g = (log_probs.exp() - (lcab + nll.reshape(1, n, 1) - log_probs).exp()) * grad.reshape(1, n, 1)
    live = steps < frames
    if zero_infinity:
        live = live & (nll != math.inf).unsqueeze(0)
    return wg.where(live.unsqueeze(2), g, 0.0)


ATEN.update({aten._ctc_loss.default: _ctc_loss, aten._ctc_loss_backward.default: _ctc_loss_backward})


# The foreach ops (what optimizers compile to) as loops over the op each applies to one tensor: a list in, a
# list out. The loop is the host's only; on WebGPU a recorded graph replays the kernels without it.
def _foreach(base, kind):
    fn = ATEN[base]
    if kind == "unary":
        return lambda xs: [fn(x) for x in xs]
    if kind == "one":  # one scalar (or one 0-d tensor) for every tensor
        return lambda xs, s, **kw: [fn(x, s, **kw) for x in xs]
    if kind == "each":  # a list of tensors or of scalars, one per tensor
        return lambda xs, ys, **kw: [fn(x, y, **kw) for x, y in zip(xs, ys)]
    if kind == "scalar_first":
        return lambda s, xs: [fn(s, x) for x in xs]
    if kind == "three_one":  # addcmul/addcdiv with one value
        return lambda xs, a, b, value=1: [fn(x, p, q, value) for x, p, q in zip(xs, a, b)]
    if kind == "three_each":
        return lambda xs, a, b, values: [fn(x, p, q, v) for x, p, q, v in zip(xs, a, b, values)]
    if kind == "lerp_list":
        return lambda xs, ends, weights: [x + (e - x) * w for x, e, w in zip(xs, ends, weights)]
    if kind == "lerp_each":
        return lambda xs, ends, weights: [fn(x, e, w) for x, e, w in zip(xs, ends, weights)]
    raise ValueError(kind)


_FOREACH = {
    "add": (aten.add.Scalar, aten.add.Tensor), "sub": (aten.sub.Scalar, aten.sub.Tensor),
    "mul": (aten.mul.Scalar, aten.mul.Tensor), "div": (aten.div.Scalar, aten.div.Tensor),
    "maximum": (aten.maximum.default, aten.maximum.default), "minimum": (aten.minimum.default, aten.minimum.default),
    "clamp_min": (aten.clamp_min.default, aten.maximum.default), "clamp_max": (aten.clamp_max.default,
                                                                               aten.minimum.default),
    "pow": (aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor),
}
for _name, (_scalar, _tensor) in _FOREACH.items():
    _packet = getattr(aten, "_foreach_" + _name)
    for _overload, (_base, _kind) in {"Scalar": (_scalar, "one"), "ScalarList": (_scalar, "each"),
                                      "List": (_tensor, "each"), "Tensor": (_tensor, "one")}.items():
        if hasattr(_packet, _overload):
            ATEN[getattr(_packet, _overload)] = _foreach(_base, _kind)
for _name in ("sqrt", "neg", "reciprocal", "exp", "abs", "sign"):
    ATEN[getattr(aten, "_foreach_" + _name).default] = _foreach(getattr(aten, _name).default, "unary")
ATEN[aten._foreach_pow.ScalarAndTensor] = _foreach(aten.pow.Scalar, "scalar_first")
ATEN[aten._foreach_addcmul.Scalar] = _foreach(aten.addcmul.default, "three_one")
ATEN[aten._foreach_addcmul.ScalarList] = _foreach(aten.addcmul.default, "three_each")
ATEN[aten._foreach_addcdiv.Scalar] = _foreach(aten.addcdiv.default, "three_one")
ATEN[aten._foreach_addcdiv.ScalarList] = _foreach(aten.addcdiv.default, "three_each")
ATEN[aten._foreach_lerp.Scalar] = _foreach(aten.lerp.Scalar, "one")
ATEN[aten._foreach_lerp.List] = _foreach(aten.lerp.Scalar, "lerp_list")
ATEN[aten._foreach_lerp.ScalarList] = _foreach(aten.lerp.Scalar, "lerp_each")
ATEN[aten._foreach_norm.Scalar] = lambda xs, ord=2, dtype=None: [_norm(x, ord) for x in xs]
ATEN[aten._foreach_copy.default] = lambda xs, srcs, non_blocking=False: [s.to(dtype=x.dtype).expand(*x.shape).clone()
                                                                         for x, s in zip(xs, srcs)]
ATEN[aten._foreach_zero.default] = lambda xs: [wg.zeros(tuple(x.shape), dtype=x.dtype, device=x.device) for x in xs]
ATEN[aten.copy.default] = lambda x, src, non_blocking=False: src.to(dtype=x.dtype).expand(*x.shape).clone()

# ops whose core-ATen decomposition the compile backend skips: the table maps each to one kernel (or a pair, see
# nll_log_softmax_backward), where the decomposition gives several
KEEP_WHOLE = {aten._log_softmax_backward_data.default, aten._softmax_backward_data.default,
              aten.nll_loss_forward.default, aten.nll_loss_backward.default, aten.threshold_backward.default,
              aten.gelu_backward.default, aten.sigmoid_backward.default, aten.tanh_backward.default,
              aten.embedding_dense_backward.default, aten.native_batch_norm_backward.default}

# ops that create tensors from nothing need the target device (passed as the keyword `target`)
NEEDS_DEVICE = {aten.scalar_tensor.default, aten.full.default, aten.arange.start_step,
                aten.arange.default} | NEEDS_DEVICE_EAGER
