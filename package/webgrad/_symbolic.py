"""torch.sym_int, sym_float, sym_max, sym_min, sym_not, sym_ite, sym_sum and torch.cond: PyTorch's helpers that
stay traceable under torch.compile. webgrad runs eagerly, so each is its plain Python meaning."""

import builtins
import math

from ._tensor import Tensor


def sym_int(a):
    """int(a), rounding toward zero."""
    return math.trunc(a) if isinstance(a, float) else builtins.int(a)


def sym_float(a):
    return builtins.float(a)


def sym_max(a, b):
    """max(a, b); a float if either is one, as torch's."""
    result = builtins.max(a, b)
    return builtins.float(result) if isinstance(a, float) or isinstance(b, float) else result


def sym_min(a, b):
    """min(a, b); a float if either is one, as torch's."""
    result = builtins.min(a, b)
    return builtins.float(result) if isinstance(a, float) or isinstance(b, float) else result


def sym_not(a):
    return not a


def sym_ite(b, t, f):
    """t if b else f."""
    return t if b else f


def sym_sum(args):
    return builtins.sum(args)


def cond(pred, true_fn, false_fn, operands=()):
    """true_fn(*operands) if pred else false_fn(*operands); pred a bool, a number or a one-element tensor."""
    if isinstance(pred, Tensor):
        if pred.numel() != 1:
            raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got {pred}.")
        pred = bool(pred.item())
    elif not isinstance(pred, (bool, builtins.int, builtins.float)):
        raise RuntimeError(f"Expected pred to be bool or tensor, but got {pred}.")
    if not callable(true_fn) or not callable(false_fn):
        raise RuntimeError("Expect both branches to be callable.")
    return (true_fn if pred else false_fn)(*tuple(operands))
