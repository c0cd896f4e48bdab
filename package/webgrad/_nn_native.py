"""ATen's native_* normalizations and the other ATen-level helpers PyTorch publishes at the top level.

torch.native_layer_norm, native_batch_norm, native_group_norm and _native_batch_norm_legit return, besides the
normalized output, the statistics ATen's kernels save for backward (the mean and the reciprocal standard deviation);
decompositions and some scripts call them for that. torch._softmax_backward_data is softmax's backward as a function,
torch._chunk_cat the fused split-and-cat FSDP uses. Each is composed from webgrad's ops: the output comes from
nn.functional's implementation (autograd and both devices with it), the statistics from ordinary reductions.
"""

import math

from . import dtypes
from ._tensor import Tensor, empty, zeros
from .nn import functional as F
from .ops.elementwise import where
from .ops.shape import cat


def _check_tensor(value, op, what):
    if not isinstance(value, Tensor):
        raise TypeError(f"{op}(): argument '{what}' must be Tensor, not {type(value).__name__}")


def _mean_rstd(input, dims, eps):
    """The mean over dims (kept) and 1 / sqrt(biased variance + eps), as ATen's normalization kernels save them."""
    mean = input.mean(dims, keepdim=True)
    var = input.var(dims, unbiased=False, keepdim=True)
    return mean, (var + eps).rsqrt()


# ====================================================================== layer norm
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """(output, mean, rstd): F.layer_norm's output, and the statistics over the trailing normalized_shape dims with
    those dims kept as size 1. The statistics do not require grad (ATen marks them non-differentiable)."""
    _check_tensor(input, "native_layer_norm", "input")
    shape = tuple(normalized_shape)
    out = F.layer_norm(input, shape, weight, bias, eps)
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    mean, rstd = _mean_rstd(input.detach(), dims, eps)
    return out, mean, rstd


# ===================================================================== group norm
def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """(output, mean, rstd) with mean and rstd of shape [N, group], as torch.native_group_norm; N, C and HxW must
    describe the input (N * C * HxW elements). The statistics are differentiable, as ATen's are here."""
    _check_tensor(input, "native_group_norm", "input")
    if input.numel() != N * C * HxW or (input.ndim >= 2 and (input.shape[0], input.shape[1]) != (N, C)):
        raise RuntimeError(f"native_group_norm: expected an input of {N} x {C} x {HxW} elements (N, C, HxW), got "
                           f"shape {list(input.shape)}")
    if C % group:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(input.shape)} and num_groups={group}")
    out = F.group_norm(input, group, weight, bias, eps)
    mean, rstd = _mean_rstd(input.reshape(N, group, C // group * HxW), (2,), eps)
    return out, mean.squeeze(2), rstd.squeeze(2)


# ===================================================================== batch norm
def _batch_statistics(input, eps):
    dims = (0,) + tuple(range(2, input.ndim))
    mean, rstd = _mean_rstd(input.detach(), dims, eps)
    return mean.reshape(-1), rstd.reshape(-1)


def _batch_norm_outputs(input, weight, bias, running_mean, running_var, training, momentum, eps, op):
    _check_tensor(input, op, "input")
    if input.ndim < 2:
        raise RuntimeError(f"{op}: expected an input with at least 2 dims (N, C, ...), got {input.ndim}-D")
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError(f"{op}: running_mean and running_var must be defined in evaluation mode")
    if training:  # the saved statistics come from the batch, before F.batch_norm updates the running ones
        saved = _batch_statistics(input, eps)
    else:  # ATen saves nothing in evaluation mode: two empty tensors
        saved = tuple(empty(0, dtype=input.dtype, device=input.device) for _ in range(2))
    out = F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    return (out, *saved)


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """(output, save_mean, save_invstd), as torch.native_batch_norm: in training the batch's mean and 1 / sqrt(biased
    variance + eps) per channel (the running statistics, where given, updated in place), in evaluation two empty
    tensors. The saved statistics do not require grad."""
    return _batch_norm_outputs(input, weight, bias, running_mean, running_var, training, momentum, eps,
                               "native_batch_norm")


def _native_batch_norm_legit(input, weight, bias, *args):
    """torch._native_batch_norm_legit: native_batch_norm's, with or without the running statistics
    (input, weight, bias, running_mean, running_var, training, momentum, eps) or (input, weight, bias, training,
    momentum, eps)."""
    if len(args) == 5:
        running_mean, running_var, training, momentum, eps = args
    elif len(args) == 3:
        running_mean = running_var = None
        training, momentum, eps = args
    else:
        raise TypeError(f"_native_batch_norm_legit() takes 6 or 8 arguments, got {3 + len(args)}")
    return _batch_norm_outputs(input, weight, bias, running_mean, running_var, training, momentum, eps,
                               "_native_batch_norm_legit")


def _batch_norm_with_update(input, weight, bias, running_mean, running_var, momentum, eps):
    """torch.ops.aten._batch_norm_with_update: training-mode batch norm updating the running statistics in place;
    (output, save_mean, save_invstd, reserve), reserve an empty uint8 tensor (cuDNN's workspace elsewhere)."""
    out, mean, invstd = _batch_norm_outputs(input, weight, bias, running_mean, running_var, True, momentum, eps,
                                            "_batch_norm_with_update")
    return out, mean, invstd, empty(0, dtype=dtypes.uint8, device=input.device)


# ======================================================================= dropout
def native_dropout_backward(grad_output, mask, scale):
    """torch.ops.aten.native_dropout_backward: the gradient through dropout's kept elements, grad_output * mask *
    scale (scale 1 / (1 - p))."""
    _check_tensor(grad_output, "native_dropout_backward", "grad_output")
    _check_tensor(mask, "native_dropout_backward", "mask")
    return grad_output * mask.to(grad_output.dtype) * scale


# ======================================================================= pooling
def max_pool2d_with_indices_backward(grad_output, input, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """torch.ops.aten.max_pool2d_with_indices_backward: grad_output added into the input positions indices name
    (flat in each [H, W] plane). The input only gives the shape; its gradient is zeros, as ATen's formula says."""
    _check_tensor(grad_output, "max_pool2d_with_indices_backward", "grad_output")
    _check_tensor(input, "max_pool2d_with_indices_backward", "self")
    if tuple(indices.shape) != tuple(grad_output.shape):
        raise RuntimeError(f"max_pool2d_with_indices_backward: indices of shape {list(indices.shape)} do not match "
                           f"grad_output's {list(grad_output.shape)}")
    # zeros of input's shape that carry input's (zero) gradient, whatever its values (inf, nan)
    base = where(zeros(input.shape, dtype=dtypes.bool_, device=input.device), input, 0.0)
    planes = base.flatten(-2)
    grad = planes.scatter_add(-1, indices.flatten(-2).long(), grad_output.flatten(-2).to(planes.dtype))
    return grad.reshape(input.shape)


# ======================================================================= softmax
def _softmax_backward_data(grad_output, output, dim, input_dtype):
    """The gradient of softmax's input from its output y and the output's gradient g: y * (g - sum(g * y, dim))."""
    _check_tensor(grad_output, "_softmax_backward_data", "grad_output")
    _check_tensor(output, "_softmax_backward_data", "output")
    if tuple(grad_output.shape) != tuple(output.shape):
        raise RuntimeError(f"_softmax_backward_data: grad_output of shape {list(grad_output.shape)} and output of "
                           f"shape {list(output.shape)} differ")
    dim = dim if output.ndim else 0
    grad = output * (grad_output - (grad_output * output).sum(dim, keepdim=True))
    return grad if input_dtype is None or grad.dtype == input_dtype else grad.to(input_dtype)


def _safe_softmax(input, dim, dtype=None):
    """torch.ops.aten._safe_softmax: softmax, but 0 (not nan) along a slice whose every element is -inf (a fully
    masked attention row)."""
    _check_tensor(input, "_safe_softmax", "self")
    masked = (input == float("-inf")).all(dim, keepdim=True) if input.ndim else input == float("-inf")
    # the masked slices go through softmax as zeros, so neither their values nor their gradients are nan
    out = F.softmax(where(masked, 0.0, input), dim, dtype=dtype)
    return where(masked, 0.0, out)


# ===================================================================== chunk cat
def _chunk_cat(tensors, dim, num_chunks):
    """torch._chunk_cat: each tensor, padded with zeros along dim to a multiple of num_chunks, is split into
    num_chunks chunks; chunk i of every tensor, flattened from dim on, is concatenated into row i of the result,
    shaped tensors[0].shape[:dim] + (num_chunks, total)."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("_chunk_cat expects a non-empty input tensor list")
    if num_chunks < 1:
        raise RuntimeError(f"_chunk_cat expects a positive num_chunks, got {num_chunks}")
    ndim = tensors[0].ndim  # dim counts in the first tensor's rank; the others may differ in rank after dim
    if any(t.ndim == 0 for t in tensors):
        raise RuntimeError("_chunk_cat expects non-scalar input tensors")
    if not -ndim <= dim < ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {dim})")
    dim %= ndim
    leading = tuple(tensors[0].shape[:dim])
    pieces = []
    for t in tensors:
        if t.ndim <= dim or tuple(t.shape[:dim]) != leading:
            raise RuntimeError(f"_chunk_cat expects same sizes of 0,...,dim-1 dimensions for all tensors, got "
                               f"{list(tensors[0].shape)} and {list(t.shape)}")
        size = t.shape[dim]
        chunk = math.ceil(size / num_chunks)
        padding = chunk * num_chunks - size
        if padding:
            pad_shape = leading + (padding,) + tuple(t.shape[dim + 1:])
            t = cat([t, t.new_zeros(pad_shape)], dim)
        pieces.append(t.reshape(leading + (num_chunks, -1)))
    if len({p.dtype for p in pieces}) > 1:
        common = pieces[0].dtype
        for p in pieces[1:]:
            common = dtypes.promote_types(common, p.dtype)
        pieces = [p.to(common) for p in pieces]
    return cat(pieces, dim + 1)


FUNCTIONS = {name: globals()[name] for name in (
    "native_layer_norm", "native_group_norm", "native_batch_norm", "_native_batch_norm_legit",
    "_softmax_backward_data", "_chunk_cat")}

# ATen operators with no torch.* function, reached as torch.ops.aten.NAME (ops/namespaces.py), with the underscored
# ones above that torch.ops.aten's lookup of public functions skips
ATEN_ONLY = {name: globals()[name] for name in (
    "_batch_norm_with_update", "native_dropout_backward", "max_pool2d_with_indices_backward",
    "_native_batch_norm_legit", "_softmax_backward_data", "_chunk_cat", "_safe_softmax")}
