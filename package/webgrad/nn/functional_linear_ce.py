"""torch.nn.functional.linear_cross_entropy: cross_entropy(linear(input, linear_weight, linear_bias), target).

With ``options=None`` it is that composition. With a ``LinearCrossEntropyOptions`` (torch.nn's) it runs PyTorch's
chunked path: the batch is processed ``batch_chunk_size`` rows at a time, so the full [N, C] logits (C a language
model's vocabulary) never exist at once. For the scalar reductions the gradients of input, weight and bias are
computed chunk by chunk in the forward and only scaled by the loss's gradient in the backward, as PyTorch's op does;
for ``reduction='none'`` the backward recomputes each chunk's logits. Every step is a tensor op, so both devices run
it.
"""

import dataclasses
import math
import warnings

from .. import dtypes
from .._autograd import is_grad_enabled, no_grad, record
from .._tensor import Tensor
from ..ops.loss import cross_entropy
from ..ops.matmul import linear
from ..ops.reduce import logsumexp
from ..ops.shape import cat

__all__ = ["LinearCrossEntropyOptions", "linear_cross_entropy"]

_ACC_POLICIES = ("auto", "accurate", "balanced", "compact")
_AUTO_CHUNKING = "aspect_ratio:2"  # PyTorch's pick for a (device, dtype) without a measured default


@dataclasses.dataclass(slots=True, frozen=True)
class LinearCrossEntropyOptions:
    """How F.linear_cross_entropy chunks its batch, as torch.nn.LinearCrossEntropyOptions.

    batch_chunk_size: rows per chunk (None: decided by chunking_method, or one chunk). chunking_method: "auto",
    "aspect_ratio" or "aspect_ratio:N" (chunks whose [rows, C] logits match the [N, in_features] input in size, N
    times smaller), or None to use batch_chunk_size alone. allow_retain_graph: whether the scalar reductions'
    backward may run twice (retain_graph=True). acc_policy and acc_dtype choose PyTorch's mixed-precision
    accumulation; webgrad accumulates in the input's dtype, so they are validated and otherwise have no effect.
    """

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: object = None

    def __post_init__(self):
        if self.acc_policy not in _ACC_POLICIES:
            raise ValueError(f"invalid acc_policy: {self.acc_policy!r}")
        if self.chunking_method is not None and self.chunking_method != "auto":
            _aspect_ratio_factor(self.chunking_method)
        if not (self.batch_chunk_size is None
                or (isinstance(self.batch_chunk_size, int) and not isinstance(self.batch_chunk_size, bool)
                    and self.batch_chunk_size > 0)):
            raise ValueError(f"batch_chunk_size must be positive int or None, got {self.batch_chunk_size!r}")
        if self.acc_dtype is not None and not (isinstance(self.acc_dtype, dtypes.dtype) and self.acc_dtype.is_floating):
            raise ValueError(f"acc_dtype must be None or a floating dtype, got {self.acc_dtype!r}. Pass "
                             "acc_dtype=None to let the op pick automatically.")

    def _chunk_rows(self, num_batches, in_features, num_classes):
        """Rows per chunk for this call, as PyTorch's options resolve it."""
        method = self.chunking_method
        if method == "auto":
            method = None if self.batch_chunk_size is not None else _AUTO_CHUNKING
        rows = num_batches if self.batch_chunk_size is None else min(self.batch_chunk_size, num_batches)
        if method is not None:
            factor = _aspect_ratio_factor(method)
            target = -(-num_batches // -(-num_classes // in_features))
            by_method = min((1 << (target - 1).bit_length()) // factor, num_batches)
            if self.batch_chunk_size is not None and self.batch_chunk_size != by_method:
                raise ValueError(f"batch_chunk_size (={self.batch_chunk_size}) and chunking_method ('{method}') "
                                 f"give different chunk sizes ({self.batch_chunk_size} vs {by_method}); pass only one.")
            rows = by_method
        return max(1, rows)


def _aspect_ratio_factor(method):
    name, sep, factor = method.partition(":")
    factor = factor if sep else "1"
    if not (name == "aspect_ratio" and factor.isdigit() and int(factor) > 0):
        raise ValueError(f"invalid chunking_method: {method!r}")
    return int(factor)


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None, reduction="mean",
                         ignore_index=None, label_smoothing=0.0, options=None):
    """cross_entropy(linear(input, linear_weight, linear_bias), target, ...), as
    torch.nn.functional.linear_cross_entropy. input: [in_features] or [N, in_features]; linear_weight:
    [C, in_features] or [C, d1, ..., dK, in_features] (a K-dimensional loss, batched input only); ignore_index None
    means -100 for class indices. options: a LinearCrossEntropyOptions for the chunked path (class-index targets,
    2-D linear_weight, no label smoothing; otherwise it falls back to the composition with a warning)."""
    for value, what in ((input, "input"), (linear_weight, "linear_weight"), (target, "target")):
        if not isinstance(value, Tensor):
            raise TypeError(f"linear_cross_entropy(): argument '{what}' must be Tensor, not {type(value).__name__}")
    if input.ndim < 1 or input.ndim > 2:
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.ndim}")
    if linear_weight.ndim < 2:
        raise RuntimeError(f"expected linear_weight with dimensionality at least 2, got {linear_weight.ndim}")
    num_batches = tuple(input.shape[:-1])
    in_features = input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError("expected equal input and linear_weight last dimensions (in_features), got "
                           f"{input.shape[-1]} and {linear_weight.shape[-1]}, respectively")
    num_classes = linear_weight.shape[0]
    out_features = tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (num_classes, *out_features):
        raise RuntimeError(f"expected linear_bias shape {(num_classes, *out_features)}, got "
                           f"{tuple(linear_bias.shape)}")
    if out_features and not num_batches:
        raise RuntimeError(f"K-dimensional loss defined by linear_weight shape {tuple(linear_weight.shape)} requires"
                           f" batched input, (N, {in_features}), got unbatched input with shape {tuple(input.shape)}")
    logits_shape = (*num_batches, num_classes, *out_features)
    target_contains_probabilities = tuple(target.shape) == logits_shape
    if target_contains_probabilities and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains probabilities")
    ignore_index = ignore_index if ignore_index is not None else -100
    if options is not None:
        chunkable = (not out_features and reduction in ("mean", "sum", "none") and label_smoothing == 0.0
                     and not target.dtype.is_floating and target.dtype != dtypes.bool_)
        if chunkable:
            return _chunked(input, linear_weight, target, linear_bias, weight, reduction, ignore_index, options)
        warnings.warn("linear_cross_entropy: ``options`` ignored; chunked path needs reduction in "
                      "{'mean','sum','none'}, label_smoothing == 0, class-index targets, out_features == (). Got "
                      f"reduction={reduction!r}, label_smoothing={label_smoothing}, target.dtype={target.dtype}, "
                      f"out_features={out_features}.", stacklevel=2)
    if out_features:
        flat = math.prod(out_features, start=num_classes)
        linear_weight = linear_weight.reshape(flat, in_features)
        linear_bias = linear_bias.reshape(flat) if linear_bias is not None else None
    logits = linear(input, linear_weight, linear_bias).reshape(logits_shape)
    return cross_entropy(logits, target, weight=weight, reduction=reduction, ignore_index=ignore_index,
                         label_smoothing=label_smoothing)


# ------------------------------------------------------------------------------------------- chunked path
def _row_weights(target, weight, ignore_index):
    """Each row's class weight (weight[target], 1 without weight), 0 where target is ignore_index; and the target
    with ignored rows pointed at class 0, so that gathering by it stays in range."""
    ignored = target == ignore_index
    safe = target.masked_fill(ignored, 0)  # a target out of [0, C) is caught by gather/index_select's bounds check
    if weight is None:
        rows = (~ignored).to(dtypes.float32)
    else:
        rows = weight.detach().index_select(0, safe.reshape(-1)).reshape(safe.shape).masked_fill(ignored, 0.0)
    return safe, rows


def _chunk_logits(x, w, b):
    return linear(x, w, b)


def _chunk_gradient(logits, safe, rows, scale):
    """d(sum of scale * rows * (logsumexp - logit[target])) / d logits: scale * rows * (softmax - onehot)."""
    factor = (rows * scale).unsqueeze(1)
    probs = (logits - logsumexp(logits, 1, keepdim=True)).exp()
    onehot = logits.new_zeros(logits.shape).scatter(1, safe.unsqueeze(1), 1.0)
    return (probs - onehot) * factor


def _chunked(input, linear_weight, target, linear_bias, weight, reduction, ignore_index, options):
    if not isinstance(options, LinearCrossEntropyOptions):
        raise TypeError(f"linear_cross_entropy(): options must be a LinearCrossEntropyOptions or None, not "
                        f"{type(options).__name__}")
    batched = input.ndim == 2
    x = input if batched else input.unsqueeze(0)
    t = target if batched else target.reshape(1)
    n, num_classes = x.shape[0], linear_weight.shape[0]
    rows_per_chunk = options._chunk_rows(n, x.shape[1], num_classes)
    starts = range(0, n, rows_per_chunk)
    wants = [is_grad_enabled() and v is not None and v.requires_grad for v in (input, linear_weight, linear_bias)]
    w, b = linear_weight.detach(), None if linear_bias is None else linear_bias.detach()
    with no_grad():
        safe, rows = _row_weights(t, weight, ignore_index)
        rows = rows.to(x.dtype)
        scale = 1.0 / rows.sum() if reduction == "mean" else 1.0  # a tensor for the mean: no read-back
        losses, grad_x = [], []
        grad_w = w.new_zeros(w.shape) if wants[1] else None
        grad_b = w.new_zeros((num_classes,)) if wants[2] else None
        for s in starts:
            xc, tc, rc = x.detach()[s:s + rows_per_chunk], safe[s:s + rows_per_chunk], rows[s:s + rows_per_chunk]
            logits = _chunk_logits(xc, w, b)
            picked = logits.gather(1, tc.unsqueeze(1)).squeeze(1)
            losses.append((logsumexp(logits, 1) - picked) * rc)
            if reduction != "none" and any(wants):
                g = _chunk_gradient(logits, tc, rc, scale)
                if wants[0]:
                    grad_x.append(g @ w)
                if wants[1]:
                    grad_w = grad_w + g.t() @ xc
                if wants[2]:
                    grad_b = grad_b + g.sum(0)
            del logits  # one chunk's logits at a time
        loss = cat(losses, 0) if losses else x.new_zeros((0,))
        out = loss if reduction == "none" else loss.sum() * scale
    if not batched and reduction == "none":
        out = out.squeeze(0)
    if not any(wants):
        return out
    if reduction == "none":
        backward = _recomputing_backward(x, w, b, safe, rows, starts, rows_per_chunk, wants, batched)
    else:
        saved = [cat(grad_x, 0).reshape(input.shape) if wants[0] else None, grad_w, grad_b]
        backward = _precomputed_backward(saved, options.allow_retain_graph)
    return record(out, "linear_cross_entropy", (input, linear_weight, linear_bias), backward)


def _refuse_higher_order():
    if is_grad_enabled():
        raise NotImplementedError("linear_cross_entropy with options: higher-order gradients (create_graph=True) are "
                                  "not supported by the chunked path; pass options=None")


def _precomputed_backward(saved, allow_retain_graph):
    """The scalar reductions' backward: the gradients computed in the forward, times the loss's gradient."""
    def backward(g):
        _refuse_higher_order()
        if saved[0] is None and saved[1] is None and saved[2] is None:
            raise RuntimeError("linear_cross_entropy: backward through the chunked path a second time; construct "
                               "LinearCrossEntropyOptions(allow_retain_graph=True) to allow retain_graph=True")
        grads = tuple(None if s is None else s * g for s in saved)
        if not allow_retain_graph:
            saved[:] = [None, None, None]
        return grads
    return backward


def _recomputing_backward(x, w, b, safe, rows, starts, rows_per_chunk, wants, batched):
    """reduction='none': each row's loss has its own gradient, so each chunk's logits are computed again."""
    def backward(g):
        _refuse_higher_order()
        g = g if batched else g.reshape(1)
        grad_x = []
        grad_w = w.new_zeros(w.shape) if wants[1] else None
        grad_b = w.new_zeros((w.shape[0],)) if wants[2] else None
        for s in starts:
            xc = x.detach()[s:s + rows_per_chunk]
            end = s + rows_per_chunk
            logits = _chunk_logits(xc, w, b)
            gc = _chunk_gradient(logits, safe[s:end], rows[s:end], g[s:end])
            if wants[0]:
                grad_x.append(gc @ w)
            if wants[1]:
                grad_w = grad_w + gc.t() @ xc
            if wants[2]:
                grad_b = grad_b + gc.sum(0)
            del logits
        grad_input = cat(grad_x, 0).reshape(x.shape if batched else x.shape[1:]) if wants[0] else None
        return grad_input, grad_w, grad_b
    return backward
