"""webgrad.nn.functional: the stateless forms of layers, activations and losses (as torch.nn.functional).

Ops with kernels of their own (activations, linear, conv/pool, softmax, losses) live in webgrad/ops and
are re-exported here. The functions defined below are compositions of those ops, so their gradients
come from the ops they are built from.
"""

import math
import warnings

from .. import _bounds, dtypes
from .._autograd import no_grad, record, renamed
from ..ops.conv import adaptive_avg_pool2d, avg_pool2d, conv2d, conv_transpose2d, max_pool2d, pad  # noqa: F401
from ..ops.conv3d import conv3d, conv_transpose3d  # noqa: F401
from ..ops import elementwise as _elementwise
from ..ops.elementwise import gelu  # noqa: F401
from ..ops.elementwise import check_same_device as _check_same_device, where as _where
from ..ops.loss import (binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy,  # noqa: F401
                        huber_loss, l1_loss, mse_loss, nll_loss, smooth_l1_loss)
from ..ops.matmul import linear  # noqa: F401
from ..ops.autocast_policy import full_precision, lower_precision
from ..ops.attention import fused_dropout as _fused_dropout
from ..ops.attention_chunked import sdpa as _sdpa_kernels
from ._resample import (interpolate, pixel_shuffle, pixel_unshuffle, upsample, upsample_bilinear,  # noqa: F401
                        upsample_nearest)
from ..ops.reduce import log_softmax as _log_softmax, softmax as _softmax
from ..ops.row_norm import normalize_rows as _normalize_rows
from ..ops.shape import cat as _cat
from ..ops.masked import softmax_of_masked as _softmax_of_masked
from ..random import rand
from .._tensor import Tensor, arange, ones, zeros
from ._sparse_grad import rows_with_sparse_grad
from .._backends import kernels
from .functional_layers import *  # noqa: F401,F403  (glu, normalize, conv1d, unfold, ...: __all__)
from .functional_losses import *  # noqa: F401,F403  (kl_div, triplet_margin_loss, ...: __all__)
from .functional_pool3d import *  # noqa: F401,F403  (max_pool3d, avg_pool3d, adaptive_*_pool3d: __all__)
from .functional_ctc import ctc_loss  # noqa: F401
from .functional_linear_ce import linear_cross_entropy  # noqa: F401  (chunked over the batch)
from .fractional_pool import (fractional_max_pool2d, fractional_max_pool2d_with_indices,  # noqa: F401
                              fractional_max_pool3d, fractional_max_pool3d_with_indices)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    """(output, indices) of max_pool2d whatever return_indices says, as torch.nn.functional.max_pool2d_with_indices."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


# The activations of the op table (relu, elu, hardswish, ...: every record exposed as "functional"),
# with PyTorch's parameters and `inplace=` where PyTorch has it (webgrad/ops/table.py).
globals().update(_elementwise.table_functions("functional"))


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """softmax over `dim`, as torch.nn.functional.softmax. Over the last dim of a masked_fill's result (hand-written
    attention's `att.masked_fill(mask, -inf)`, then `softmax(att, dim=-1)`), one kernel computes it from the
    masked_fill's input and mask, and so does its gradient (ops/masked.py). Without dim, PyTorch's deprecated
    implicit choice (a warning; dim 0 for 0-, 1- and 3-d inputs, else 1)."""
    if dim is None and isinstance(input, Tensor):
        dim = _softmax_legacy_dim(input.ndim, "softmax", _stacklevel)
    if dtype is None and dim is not None and isinstance(input, Tensor):
        fused = _softmax_of_masked(input, dim)
        if fused is not None:
            return fused
    return _softmax(input, dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """log(softmax(input)) over `dim` in one kernel, as torch.nn.functional.log_softmax; without dim, PyTorch's
    deprecated implicit choice (a warning; dim 0 for 0-, 1- and 3-d inputs, else 1)."""
    if dim is None and isinstance(input, Tensor):
        dim = _softmax_legacy_dim(input.ndim, "log_softmax", _stacklevel)
    return _log_softmax(input, dim, dtype=dtype)


# ===================================================================== dropout
def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p and scale the rest by 1/(1-p). The mask is drawn on the input's
    device, inside one dropout kernel (ops/attention.py: the numbers of `rand(shape) >= p`, never stored; the
    gradient is the same kernel), so dropout uploads nothing."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        out = input * 0.0
    elif input.dtype.is_floating:
        out = _fused_dropout(input, p)
    else:
        keep = rand(*input.shape, device=input.device) >= p  # P(keep) = 1 - p
        out = _where(keep, input * (1.0 / (1.0 - p)), 0.0)
    return _elementwise._maybe_inplace(input, out, inplace)


def _feature_dropout(input, p, training, inplace, batched=True):
    """Zero whole channels: one keep/drop draw per (sample, channel), made on the input's device."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        out = input * 0.0
    else:
        lead = 2 if batched else 1  # the dims that index a channel: [N, C] or, unbatched, [C]
        keep = rand(*input.shape[:lead], *([1] * (input.ndim - lead)), device=input.device) >= p  # P(keep) = 1 - p
        out = _where(keep, input * (1.0 / (1.0 - p)), 0.0)
    return _elementwise._maybe_inplace(input, out, inplace)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Channel-wise dropout of [N, C, L] or unbatched [C, L] inputs."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _feature_dropout(input, p, training, inplace, batched=input.ndim == 3)  # [C, L]: unbatched


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Channel-wise dropout: each channel of each sample is zeroed with probability p (the rest scaled by
    1/(1-p)). As PyTorch, a 3-D input is read as [N, C, L], with a warning."""
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated and will result "
                      "in an error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 3D or 4D "
                      "inputs).", stacklevel=2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior "
                      "is desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior "
                      "will change in a future release to interpret the input as one without a batch dimension, i.e. "
                      "shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please switch to using "
                      "dropout1d instead.", stacklevel=2)
    if input.ndim < 2:
        raise RuntimeError(f"dropout2d: feature dropout requires at least 2 dimensions in the input, got {input.ndim}")
    return _feature_dropout(input, p, training, inplace)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Channel-wise dropout of [N, C, D, H, W] or unbatched [C, D, H, W] inputs."""
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is deprecated and will result "
                      "in an error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 4D or 5D "
                      "inputs).", stacklevel=2)
    if input.ndim < 2:
        raise RuntimeError(f"dropout3d: feature dropout requires at least 2 dimensions in the input, got {input.ndim}")
    return _feature_dropout(input, p, training, inplace, batched=input.ndim != 4)  # [C, D, H, W]: unbatched


# ===================================================================== normalization
def _normalized(diff, var, eps, weight, bias, shape):
    """(x - mean) / sqrt(var + eps), then the per-channel affine (weight and bias reshaped to `shape`)."""
    out = diff * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


@full_precision("batch_norm")
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Normalise each channel (dim 1) over the batch and spatial dims.

    training: use the batch statistics and, when running_mean/var are given, update them in place:
    running = (1 - momentum) * running + momentum * batch, with the unbiased batch variance, as PyTorch.
    Otherwise use running_mean/var. One fused kernel family (the device's batch_norm and
    batch_norm_backward): statistics in one pass, then normalise and affine in one.
    """
    if momentum is None:
        raise TypeError("batch_norm(): argument 'momentum' must be float, not NoneType")
    if input.ndim < 2 and input.numel() == 0:  # an empty 1-D input (torch accepts it): empty, with empty gradients
        return input + sum((t.sum() * 0 for t in (weight, bias) if t is not None), start=0.0)
    return _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


@full_precision("batch_norm")  # the BatchNorm modules call this, not batch_norm: autocast applies here too
def _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps, count=None):
    """batch_norm; `count` (BatchNorm's num_batches_tracked, an int32 tensor) is incremented in training by
    the kernel itself, and momentum None uses 1 / count read on the device: PyTorch's cumulative average
    without a read-back, so a recorded step replays it right. float16 input is returned as float16, as
    PyTorch does: on WebGPU the kernels read and write float16 activations with float32 statistics,
    weight and bias (cuDNN's half batch norm, what autocast runs on CUDA); elsewhere it is normalised
    in float32."""
    if input.dtype in (dtypes.float16, dtypes.bfloat16) and input.device.type != "webgpu":
        return _batch_norm(input.float(), running_mean, running_var, weight, bias, training, momentum, eps,
                           count).to(input.dtype)
    if input.ndim < 2:
        raise ValueError(f"batch_norm(): expected an input with at least 2 dims [N, C, ...], got shape {list(input.shape)}")
    n, c = input.shape[0], input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise RuntimeError(f"batch_norm(): {name} must have shape [{c}] (one entry per channel of input "
                               f"{list(input.shape)}), got {list(t.shape)}")
    _check_same_device("batch_norm", input,
                       *(t for t in (running_mean, running_var, weight, bias) if t is not None))
    spatial = input.numel() // (n * c) if n * c else 0
    if training:
        if n * spatial == 1:  # PyTorch's rule; an empty batch passes through
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {list(input.shape)}")
        update = running_mean is not None and running_var is not None
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("batch_norm(): running_mean and running_var are required when training=False")
        update = False
    x = input if input.dtype.is_floating else input.float()
    dtype, device = x.dtype, x.device
    pdtype = dtypes.float32 if dtype is dtypes.float16 else dtype  # statistics, weight and bias
    x = x.contiguous()
    weight, bias = (None if t is None else t.to(pdtype).contiguous() for t in (weight, bias))
    out = Tensor._empty(tuple(x.shape), dtype, device)
    counter = None if count is None or not training else count.reshape(1)
    if x.numel() == 0:
        if counter is not None:
            with no_grad():
                count.add_(1)
        return out
    save = Tensor._empty((2, c), pdtype, device)  # mean and invstd: what normalised x, for the backward pass
    stats = [running_mean, running_var] if training and update or not training else [None, None]
    # The kernel reads (and in training updates) contiguous [C] vectors of x's dtype; others go through a copy.
    work = [t if t is None or (t.dtype == pdtype and t.is_contiguous()) else t.detach().to(pdtype).contiguous()
            for t in stats]
    backend = device.backend

    def view(t, *shape):
        return None if t is None else (t.reshape(*shape) if shape else t)._view

    kernels.batch_norm(backend, view(out, n, c, spatial), save._view, view(x, n, c, spatial), view(weight), view(bias),
                       view(work[0]), view(work[1]), bool(training), None if momentum is None else float(momentum),
                       float(eps), view(counter))
    if training and update:
        with no_grad():
            for t, w in zip(stats, work):
                if w is not t:
                    t.copy_(w)

    def backward(g):
        g = g.to(dtype).contiguous()
        grads = [Tensor._empty(shape, t.dtype, device) if t is not None and t.requires_grad else None
                 for t, shape in ((x, tuple(x.shape)), (weight, (c,)), (bias, (c,)))]
        kernels.batch_norm_backward(backend, view(grads[0], n, c, spatial), view(grads[1]), view(grads[2]),
                                    view(g, n, c, spatial), view(x, n, c, spatial), save._view, view(weight),
                                    bool(training))
        return tuple(grads)

    def composite():  # the definition in differentiable ops, for gradients of gradients (create_graph)
        shape = (1, c) + (1,) * (x.ndim - 2)
        if training:  # the batch's statistics (biased variance), which depend on x
            dims = (0,) + tuple(range(2, x.ndim))
            centred = x - x.mean(dims, keepdim=True)
            y = centred * ((centred * centred).mean(dims, keepdim=True) + eps).rsqrt()
        else:  # the running ones, constants
            y = (x - running_mean.detach().reshape(shape)) * (running_var.detach().reshape(shape) + eps).rsqrt()
        y = y * weight.reshape(shape) if weight is not None else y
        return (y + bias.reshape(shape) if bias is not None else y), (x, weight, bias)
    backward.composite = composite
    return record(out, "BatchNorm", (x, weight, bias), backward)


@full_precision("layer_norm")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the trailing dims `normalized_shape` (biased variance), then scale and shift: one fused
    kernel forward (each row's mean and rstd saved) and one backward pass for all three gradients."""
    normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(normalized_shape)
    if input.ndim < k or tuple(input.shape[input.ndim - k:]) != normalized_shape:
        raise RuntimeError(f"layer_norm(): given normalized_shape={list(normalized_shape)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in normalized_shape)}], but got input of size {list(input.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != normalized_shape:
            raise RuntimeError(f"layer_norm(): expected {name} of shape {list(normalized_shape)}, got {list(t.shape)}")
    _check_same_device("layer_norm", input, *(t for t in (weight, bias) if t is not None))
    x = (input if input.dtype.is_floating else input.float()).contiguous()
    w, b = (None if t is None else t.to(x.dtype).contiguous() for t in (weight, bias))
    return _normalize_rows(x, normalized_shape, w, b, eps)


@full_precision("group_norm")
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalise each sample over groups of num_groups consecutive channels (and all spatial positions),
    biased variance, then scale and shift per channel."""
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    n, c = input.shape[0], input.shape[1]
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(input.shape)} and num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise RuntimeError(f"group_norm(): expected {name} to be a vector of size equal to the number of channels "
                               f"in input ({c}), but got {name} of shape {list(t.shape)}")
    x = input.reshape(n, num_groups, input.numel() // (n * num_groups) if n else c // num_groups)
    if n * c // num_groups * (input.numel() // (n * c) if n * c else 0) == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                         f"{[n * c // num_groups, num_groups] + list(input.shape[2:])}")
    diff = x - x.mean(2, keepdim=True)
    out = (diff * ((diff * diff).mean(2, keepdim=True) + eps).rsqrt()).reshape(tuple(input.shape))
    shape = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Normalise each channel of each sample over its spatial positions (biased variance).

    With use_input_stats and running_mean/var given, these are updated in place with the instance
    statistics averaged over the batch (the unbiased variance), as PyTorch; without use_input_stats the
    running statistics normalise instead."""
    if input.ndim < 3:
        raise ValueError(f"instance_norm(): expected an input with at least 3 dims [N, C, ...], got shape "
                         f"{list(input.shape)}")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise RuntimeError(f"instance_norm(): {name} must have shape [{c}] (one entry per channel of input "
                               f"{list(input.shape)}), got {list(t.shape)}")
    shape = (1, c) + (1,) * (input.ndim - 2)
    if use_input_stats:
        n = input.numel() // (input.shape[0] * c) if input.numel() else 0
        if n == 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input size {list(input.shape)}")
        dims = tuple(range(2, input.ndim))
        mean = input.mean(dims, keepdim=True)
        diff = input - mean
        var = (diff * diff).mean(dims, keepdim=True)
        if running_mean is not None and running_var is not None:
            with no_grad():
                running_mean.copy_(running_mean * (1.0 - momentum) + mean.mean(0).reshape(c) * momentum)
                running_var.copy_(running_var * (1.0 - momentum) + var.mean(0).reshape(c) * (momentum * n / (n - 1)))
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("Expected running_mean and running_var to be defined when use_input_stats is false")
        diff = input - running_mean.reshape(shape)
        var = running_var.reshape(shape)
    return _normalized(diff, var, eps, weight, bias, shape)


# ===================================================================== activations with a weight
def prelu(input, weight):
    """max(0, x) + weight * min(0, x), weight one value or one per channel (dim 1). Where x is exactly 0 the
    input gradient is weight's, as PyTorch."""
    _check_same_device("prelu", input, weight)
    k = weight.numel()
    channels = input.shape[1] if input.ndim >= 2 else 1
    if k != 1 and (weight.ndim != 1 or k != channels):
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = {k} "
                           f"and channel size = {channels}.")
    w = weight.reshape(()) if k == 1 else weight.reshape((1, k) + (1,) * (input.ndim - 2))
    return _where(input > 0, input, input * w)


# ===================================================================== sparse
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    """Rows of `weight` picked by the integer tensor `input`: out[..., :] = weight[input[...], :].
    Rows read at padding_idx get no gradient. max_norm first rescales, in place, the rows read whose norm_type-norm
    exceeds it (PyTorch's embedding_renorm_); scale_grad_by_freq divides each row's gradient by how often the
    batch reads it."""
    if not isinstance(input, Tensor) or input.dtype.is_floating:
        raise TypeError("embedding(): input must be an integer tensor of indices, got "
                        f"{input.dtype.name if isinstance(input, Tensor) else type(input).__name__}")
    if weight.ndim != 2:
        raise RuntimeError(f"embedding(): weight must be 2-D [num_embeddings, embedding_dim], got {list(weight.shape)}")
    _check_same_device("embedding", input, weight)
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    if sparse:
        return rows_with_sparse_grad(input, weight, padding_idx, scale_grad_by_freq)
    # an index outside [0, num_embeddings) raises IndexError (on WebGPU at the next read-back: _bounds.py)
    with _bounds.reporting("embedding(): index {value} is out of range for {size} embeddings"):
        out = weight.index_select(0, input.reshape(-1)).reshape(tuple(input.shape) + (weight.shape[1],))
    if scale_grad_by_freq and weight.requires_grad:
        out = _scaled_by_frequency(out, input, weight.shape[0])
    if padding_idx is not None:
        if padding_idx < 0:
            padding_idx += weight.shape[0]
        # same values, but the padding rows' gradient stops here
        out = _where((input == padding_idx).unsqueeze(-1), out.detach(), out)
    return renamed(out, "Embedding", weight)  # (PyTorch's node: EmbeddingBackward0)


def _embedding_renorm_(weight, input, max_norm, norm_type):
    """PyTorch's embedding_renorm_: rows read whose norm exceeds max_norm scaled to max_norm / (norm + 1e-7)."""
    with no_grad():
        rows = input.reshape(-1).unique()
        picked = weight.index_select(0, rows)
        norms = picked.norm(p=norm_type, dim=1, keepdim=True)
        scale = _where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight.index_copy_(0, rows, picked * scale)


def _scaled_by_frequency(out, input, num_embeddings):
    """out unchanged, its gradient at each position divided by how often the batch reads that position's row."""
    flat = input.reshape(-1)
    counts = flat.bincount(minlength=num_embeddings).index_select(0, flat).to(out.dtype)
    scale = (1.0 / counts).reshape(tuple(input.shape) + (1,))
    return record(out.detach(), "Embedding", (out,), lambda g: (g * scale,))


def one_hot(tensor, num_classes=-1):
    """int [*] -> int [*, num_classes] with a 1 at each index. num_classes=-1 reads max + 1 from the data
    (a device read; pass num_classes to avoid it)."""
    if not isinstance(tensor, Tensor) or tensor.dtype.is_floating:
        raise RuntimeError("one_hot is only applicable to index tensor (an integer Tensor)")
    if num_classes == -1:
        num_classes = int(tensor.max().item()) + 1 if tensor.numel() else 0
    # (as torch: the CPU raises here, WebGPU at the next read-back instead of rows of zeros)
    kernels.check_values(tensor.device.backend, tensor._view, "one_hot: Class values must be smaller than num_classes "
                         f"({num_classes}).", RuntimeError, low=0, high=num_classes - 1,
                         below_message=_bounds.ONE_HOT_NEGATIVE)
    classes = arange(num_classes, dtype=dtypes.int64, device=tensor.device)
    return (tensor.unsqueeze(-1) == classes).long()  # int64, as PyTorch


def _softmax_legacy_dim(ndim, name, stacklevel=3):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  "as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


# ===================================================================== attention
_NEG_INF = float("-inf")


def _additive(mask, like, attend_when_true):
    """A mask as a float bias added to the scores: a bool mask becomes 0 / -inf (attend_when_true says which
    value of the bool means "attend": True for SDPA, False for MultiheadAttention's masks), a float mask is
    returned as it is (PyTorch adds it)."""
    if mask.dtype == dtypes.bool_:
        zero = zeros(1, dtype=like.dtype, device=like.device)
        return _where(mask, zero, _NEG_INF) if attend_when_true else _where(mask, _NEG_INF, zero)
    return mask


def _attention(query, key, value, bias, dropout_p, scale):
    """softmax(q kᵀ · scale + bias) v, with dropout on the weights; returns (output, weights)."""
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale
    if bias is not None:
        scores = scores + bias
    weights = scores.softmax(-1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    return weights @ value, weights


@lower_precision("scaled_dot_product_attention")  # (float16 under autocast, as PyTorch)
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(Q Kᵀ / sqrt(E) + mask) V over the last two dims, as torch.nn.functional.scaled_dot_product_attention.

    A bool attn_mask says where to attend (True = attend, False = -inf); a float one is added to the scores.
    is_causal masks the upper triangle (query i attends keys j <= i). dropout_p applies dropout to the weights
    (always, as PyTorch: pass 0.0 in eval). The fused attention kernels run it (ops/attention.py: the weights are
    never stored), or on WebGPU, from 128 keys on, batched products over chunks of (batch, head) pairs
    (ops/attention_chunked.py, which holds the rule); a float mask that requires grad takes the composition of
    matmul, softmax and dropout instead. enable_gqa: key and value may have fewer heads (dim -3) than query, each
    then serving a group of query heads (repeated as PyTorch's math path repeats them)."""
    if enable_gqa:  # grouped-query attention: each key/value head serves a group of query heads (dim -3)
        if min(query.ndim, key.ndim, value.ndim) < 3:
            raise IndexError("Dimension out of range (expected to be in range of [-2, 1], but got -3)")
        heads = query.shape[-3]
        if heads % key.shape[-3] or heads % value.shape[-3]:
            raise RuntimeError("Number of heads in key and value must divide the number of heads in query")
        key = key.repeat_interleave(heads // key.shape[-3], -3)
        value = value.repeat_interleave(heads // value.shape[-3], -3)
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise RuntimeError("scaled_dot_product_attention: query, key and value must have at least 2 dimensions")
    if query.shape[-1] != key.shape[-1]:
        raise RuntimeError(f"scaled_dot_product_attention: query and key must have the same embedding dimension, "
                           f"got {query.shape[-1]} and {key.shape[-1]}")
    if key.shape[-2] != value.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: key and value must have the same sequence length, "
                           f"got {key.shape[-2]} and {value.shape[-2]}")
    L, S = query.shape[-2], key.shape[-2]
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    _check_same_device("scaled_dot_product_attention", query, key, value,
                       *(() if attn_mask is None else (attn_mask,)))
    fused = _sdpa_kernels(query, key, value, attn_mask, dropout_p, is_causal, scale)
    if fused is not None:  # (the attention kernels, or products in chunks: ops/attention_chunked.py's choose)
        return fused
    bias = None
    if is_causal:
        causal = ones(L, S, dtype=dtypes.bool_, device=query.device).tril()
        bias = _additive(causal, query, attend_when_true=True)
    elif attn_mask is not None:
        bias = _additive(attn_mask, query, attend_when_true=True)
    return _attention(query, key, value, bias, dropout_p, scale)[0]


# ------------------------------------------------------------------ multi-head attention (sequence first)

def _canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """A bool mask (True = masked) as the float bias PyTorch adds to the scores (0 / -inf, in target_type);
    a float mask as it is. Any other dtype is refused, as PyTorch refuses it."""
    if mask is None:
        return None
    if mask.dtype != dtypes.bool_ and not mask.dtype.is_floating:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype != other_type:
        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same type for both "
                      f"instead.", stacklevel=3)
    if mask.dtype == dtypes.bool_:
        return _where(mask, _NEG_INF, zeros(1, dtype=target_type, device=mask.device))
    return mask


def _each_input(fn, query, key, value):
    """fn applied to query, key and value, once per distinct tensor: self-attention's inputs stay one tensor (one
    projection product), encoder-decoder attention's key and value another."""
    if query is key is value:
        query = key = value = fn(query)
    elif key is value:
        query, key = fn(query), fn(key)
        value = key
    else:
        query, key, value = fn(query), fn(key), fn(value)
    return query, key, value


def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads):
    """Whether the call is batched (3-D query) or not (2-D), after PyTorch's checks of the inputs' ranks."""
    if query.ndim not in (2, 3):
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received {query.ndim}-D query "
                             f"tensor")
    batched = query.ndim == 3
    form = "batched (3-D)" if batched else "unbatched (2-D)"
    if key.ndim != query.ndim or value.ndim != query.ndim:
        raise AssertionError(f"For {form} `query`, expected `key` and `value` to be {query.ndim}-D but found "
                             f"{key.ndim}-D and {value.ndim}-D tensors respectively")
    if key_padding_mask is not None and key_padding_mask.ndim != query.ndim - 1:
        raise AssertionError(f"For {form} `query`, expected `key_padding_mask` to be `None` or {query.ndim - 1}-D "
                             f"but found {key_padding_mask.ndim}-D tensor instead")
    if attn_mask is not None:
        if attn_mask.ndim not in (2, 3):
            raise AssertionError(f"For {form} `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found "
                                 f"{attn_mask.ndim}-D tensor instead")
        expected = (num_heads, query.shape[0], key.shape[0])
        if not batched and attn_mask.ndim == 3 and tuple(attn_mask.shape) != expected:
            raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got {tuple(attn_mask.shape)}")
    return batched


def _mha_in_projection(query, key, value, in_proj_weight, in_proj_bias, separate, q_proj_weight, k_proj_weight,
                       v_proj_weight):
    """q, k, v projected to embed_dim features: one product for self-attention (query is key is value), two
    for encoder-decoder attention (key is value), as PyTorch packs them; three with separate weights."""
    E = query.shape[-1]
    if separate:
        for name, w in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
            if w is None:
                raise AssertionError(f"use_separate_proj_weight is True but {name}_proj_weight is None")
        b_q, b_k, b_v = (None,) * 3 if in_proj_bias is None else in_proj_bias.chunk(3)
        named = (("query", query, q_proj_weight, b_q), ("key", key, k_proj_weight, b_k),
                 ("value", value, v_proj_weight, b_v))
        for name, x, w, b in named:
            if tuple(w.shape) != (E, x.shape[-1]):
                raise AssertionError(f"expecting {name} weights shape of {(E, x.shape[-1])}, but got "
                                     f"{tuple(w.shape)}")
            if b is not None and tuple(b.shape) != (E,):
                raise AssertionError(f"expecting {name} bias shape of {(E,)}, but got {tuple(b.shape)}")
        return tuple(linear(x, w, b) for _, x, w, b in named)
    if in_proj_weight is None:
        raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
    w, b = in_proj_weight, in_proj_bias
    if key is value and query is key:
        return linear(query, w, b).split(E, dim=-1)
    if key is value:
        q = linear(query, w[:E], None if b is None else b[:E])
        return (q, *linear(key, w[E:], None if b is None else b[E:]).split(E, dim=-1))
    b = (None,) * 3 if b is None else b.chunk(3)
    return tuple(linear(x, wi, bi) for x, wi, bi in zip((query, key, value), w.chunk(3), b))


def _mha_heads(t, static, name, batch, heads, head_dim):
    """[S, N, E] -> [N, H, S, D]; or static_k / static_v ([N * H, S, D]) in its place, checked as PyTorch does."""
    if static is None:
        return t.reshape(t.shape[0], batch, heads, head_dim).permute(1, 2, 0, 3)
    if static.shape[0] != batch * heads:
        raise AssertionError(f"expecting {name}.size(0) of {batch * heads}, but got {static.shape[0]}")
    if static.shape[2] != head_dim:
        raise AssertionError(f"expecting {name}.size(2) of {head_dim}, but got {static.shape[2]}")
    return static.reshape(batch, heads, static.shape[1], head_dim)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """nn.MultiheadAttention's computation on given weights, as torch.nn.functional.multi_head_attention_forward.

    Sequence first: query [L, N, E], key [S, N, kdim], value [S, N, vdim] (or unbatched, without N). Bool masks
    mask where True; float masks are added to the scores. attn_mask is [L, S] or [N * num_heads, L, S];
    key_padding_mask [N, S]. bias_k / bias_v ([1, 1, E]) append one learned key and value, add_zero_attn one of
    zeros. Returns (output [L, N, E], weights [N, L, S] averaged over heads, [N, num_heads, L, S] without
    average_attn_weights, or None without need_weights).

    Without need_weights the attention is F.scaled_dot_product_attention (the fused attention kernels, which never
    hold the weights); is_causal then stands for the mask where no key_padding_mask is given, as in PyTorch."""
    batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = _each_input(lambda t: t.unsqueeze(1), query, key, value)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    L, N, E = query.shape
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask",
                                       None if attn_mask is None else attn_mask.dtype, "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # the attention kernels mask causally without reading a mask
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)
        is_causal = is_causal and key_padding_mask is None
    if E != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {E}")
    H = num_heads
    D = E // H
    if D * H != E:
        raise AssertionError(f"embed_dim {E} not divisible by num_heads {H}")
    if use_separate_proj_weight and tuple(key.shape[:2]) != tuple(value.shape[:2]):
        raise AssertionError(f"key's sequence and batch dims {tuple(key.shape[:2])} do not match value's "
                             f"{tuple(value.shape[:2])}")
    if not use_separate_proj_weight and tuple(key.shape) != tuple(value.shape):
        raise AssertionError(f"key shape {tuple(key.shape)} does not match value shape {tuple(value.shape)}")
    q, k, v = _mha_in_projection(query, key, value, in_proj_weight, in_proj_bias, use_separate_proj_weight,
                                 q_proj_weight, k_proj_weight, v_proj_weight)
    S = key.shape[0]
    if attn_mask is not None:
        expected = (L, S) if attn_mask.ndim == 2 else (N * H, L, S)
        if attn_mask.ndim not in (2, 3):
            raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")
        if tuple(attn_mask.shape) != expected:
            raise RuntimeError(f"The shape of the {attn_mask.ndim}D attn_mask is {tuple(attn_mask.shape)}, but "
                               f"should be {expected}.")
        attn_mask = attn_mask.unsqueeze(0) if attn_mask.ndim == 2 else attn_mask
    if (bias_k is None) != (bias_v is None):
        raise AssertionError("bias_k is set but bias_v is None" if bias_v is None else
                             "bias_v is set but bias_k is None")
    extra_keys = (bias_k is not None) + bool(add_zero_attn)  # keys appended past the S given: unmasked
    if bias_k is not None:
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = _cat([k, bias_k.expand(1, N, E)])
        v = _cat([v, bias_v.expand(1, N, E)])
    q = q.reshape(L, N, H, D).permute(1, 2, 0, 3)  # [N, H, L, D]
    k = _mha_heads(k, static_k, "static_k", N, H, D)
    v = _mha_heads(v, static_v, "static_v", N, H, D)
    if add_zero_attn:
        k = _cat([k, zeros(N, H, 1, D, dtype=k.dtype, device=k.device)], dim=2)
        v = _cat([v, zeros(N, H, 1, D, dtype=v.dtype, device=v.device)], dim=2)
    S = k.shape[2]
    if extra_keys:
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, extra_keys))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, extra_keys))
    bias = None if attn_mask is None else attn_mask.reshape(1 if attn_mask.shape[0] == 1 else N, -1, L, S)
    if key_padding_mask is not None:
        if key_padding_mask.shape[0] != N:
            raise AssertionError(f"Expected key_padded_mask.shape[0] to be {N}, but got {key_padding_mask.shape[0]}")
        if key_padding_mask.shape[1] != S:
            raise AssertionError(f"Expected key_padded_mask.shape[1] to be {S}, but got {key_padding_mask.shape[1]}")
        padding = key_padding_mask.reshape(N, 1, 1, S)
        bias = padding if bias is None else bias + padding
    dropout_p = dropout_p if training else 0.0

    weights = None
    if need_weights:
        scores = (q * math.sqrt(1.0 / D)) @ k.transpose(-2, -1)
        weights = softmax(scores if bias is None else scores + bias, dim=-1)
        if dropout_p > 0.0:
            weights = dropout(weights, p=dropout_p)  # (the weights returned are those applied, as PyTorch's)
        out = weights @ v
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not batched:
            weights = weights.squeeze(0)
    else:
        out = scaled_dot_product_attention(q, k, v, bias, dropout_p, is_causal)
    out = linear(out.permute(2, 0, 1, 3).reshape(L, N, E), out_proj_weight, out_proj_bias)  # from [N, H, L, D]
    return (out if batched else out.squeeze(1)), weights


from ._grid_sample import affine_grid, grid_sample  # noqa: F401  (spatial transformers: _grid_sample.py)
from .random_functional import alpha_dropout, feature_alpha_dropout, gumbel_softmax  # noqa: F401,E402
from .functional_inplace import *  # noqa: F401,F403,E402  (relu_, elu_, leaky_relu_, hardtanh_, selu_, celu_)
from .functional_layers import channel_shuffle as native_channel_shuffle  # noqa: F401,E402  (the same op in torch)
