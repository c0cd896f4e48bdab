"""The CPU reference of fill, copy, where and the op table's unary and binary kernels.

Each op table record's `cpu` function is the reference, computed in float64 (int64 for ops with an exact integer
form) and rounded once into the output's dtype."""

from ... import dtypes
from ...ops import table
from .. import kernels
from .arrays import NP_DTYPES, array, int_param, np, write


def _record(records, op, kind):
    rec = records.get(op)
    if rec is None:
        raise ValueError(f"unknown {kind} op {op!r}; the op table (webgrad/ops/table.py) has no such record")
    return rec


@kernels.fill.implement("cpu")
def fill(out, value):
    array(out)[...] = value


@kernels.copy.implement("cpu")
def copy(out, x):
    src = array(x)
    if out.dtype in (dtypes.int32, dtypes.int64) and src.dtype.kind == "f":
        src = np.trunc(src)
    with np.errstate(over="ignore"):  # float32 -> float16 beyond 65504 is inf, silently (as PyTorch)
        array(out)[...] = src.astype(NP_DTYPES[out.dtype], copy=True)

# unary and binary ops come from the op table (webgrad/ops/table.py): each record's `cpu` function
# is the reference, computed in float64 (int64 for ops with an exact integer form) and rounded once.


@kernels.unary.implement("cpu")
def unary(op, out, x, a=0.0, b=0.0):
    rec = _record(table.UNARY, op, "unary")
    v = array(x)
    with np.errstate(all="ignore"):
        if rec.result == table.BOOL:
            res = rec.cpu(v, a, b)
        elif not out.dtype.is_floating:
            if not rec.int_exact:
                raise TypeError(f"unary {op!r} has no integer form; out is {out.dtype}")
            res = rec.cpu(v.astype(np.int64), int_param(a), int_param(b))
        else:
            # native: in the input's precision (float16 in float32, PyTorch's opmath)
            native = np.float32 if out.dtype is dtypes.float16 else NP_DTYPES[out.dtype]
            res = rec.cpu(v.astype(native if rec.native else np.float64), a, b)
    write(out, res)


@kernels.unary_backward.implement("cpu")
def unary_backward(op, out, grad, x, y, a=0.0, b=0.0):
    rec = _record(table.UNARY, op, "unary")
    if rec.grad_cpu is None:
        raise ValueError(f"unary op {op!r} has no derivative in the op table")
    g, xv, yv = (array(t).astype(np.float64) for t in (grad, x, y))
    with np.errstate(all="ignore"):
        write(out, g * rec.grad_cpu(xv, yv, a, b))


@kernels.binary.implement("cpu")
def binary(op, out, x, y):
    rec = _record(table.BINARY, op, "binary")
    xv, yv = array(x), array(y)
    exact = rec.int_exact and xv.dtype.kind != "f" and yv.dtype.kind != "f"
    wide = np.int64 if exact else np.float64
    if rec.native and out.dtype.is_floating:
        wide = NP_DTYPES[out.dtype]
    if rec.result == table.BOOL and op.startswith("logical"):
        wide = np.bool_
    with np.errstate(all="ignore"):
        write(out, rec.cpu(xv.astype(wide), yv.astype(wide)))


@kernels.where.implement("cpu")
def where(out, cond, x, y):
    write(out, np.where(array(cond), array(x), array(y)))
