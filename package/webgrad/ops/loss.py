"""Fused losses: softmax cross-entropy forward and backward are one kernel each (the step's hot spot)."""

from .. import dtypes
from ..autograd import record
from .elementwise import new


def _reduce_rows(per_row, reduction, count):
    if reduction == "none":
        return per_row
    if reduction == "sum":
        return per_row.sum()
    if reduction == "mean":
        return per_row.sum() / count
    raise ValueError(f"reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Softmax cross-entropy with class-index targets, as torch.nn.functional.cross_entropy.

    input: [N, C] or [N, C, d1, ...] logits (or [C] for a single sample); target: int [N] / [N, d1, ...].
    """
    from ..tensor import Tensor
    if weight is not None:
        raise NotImplementedError("cross_entropy(weight=...) is not supported yet")
    if not isinstance(target, Tensor) or target.dtype.is_floating:
        raise TypeError("cross_entropy(): target must be an integer tensor of class indices "
                        "(probability targets are not supported yet)")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    if input.ndim == 1:
        return cross_entropy(input.unsqueeze(0), target.reshape(1), None, ignore_index, reduction, label_smoothing) \
            .reshape(() if reduction != "none" else ())
    if input.ndim > 2:  # [N, C, d...] -> [N*d..., C]
        c = input.shape[1]
        spatial = tuple(input.shape[2:])
        moved = input.movedim(1, -1).reshape(-1, c)
        per = cross_entropy(moved, target.reshape(-1), None, ignore_index, "none", label_smoothing)
        if reduction == "none":
            return per.reshape(input.shape[0], *spatial)
        valid = (target != ignore_index).sum().float()
        return _reduce_rows(per, reduction, valid)
    n, c = input.shape
    if tuple(target.shape) != (n,):
        raise ValueError(f"cross_entropy(): expected target of shape [{n}] for input of shape {list(input.shape)}, "
                         f"got {list(target.shape)}")
    if target.device != input.device:
        raise RuntimeError(f"cross_entropy(): input is on {input.device} but target is on {target.device}")
    logits = (input if input.dtype.is_floating else input.float()).contiguous()
    tgt = target.int().contiguous()
    per_row = new((n,), logits.dtype, logits.device)
    logits.device.backend.cross_entropy(per_row._view, logits._view, tgt._view, ignore_index, float(label_smoothing))

    def backward(g):
        out = new((n, c), logits.dtype, g.device)
        g.device.backend.cross_entropy_backward(out._view, logits._view, tgt._view, g.contiguous()._view,
                                                ignore_index, float(label_smoothing))
        return (out,)
    record(per_row, "CrossEntropy", (logits,), backward)
    # PyTorch's mean divides by the number of non-ignored targets; only an index inside [0, C) can be ignored
    count = (tgt != ignore_index).sum().float() if 0 <= ignore_index < c else n
    return _reduce_rows(per_row, reduction, count)
