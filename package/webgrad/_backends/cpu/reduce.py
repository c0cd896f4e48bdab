"""The CPU reference of reductions over a middle axis, prefix sums and (log-)softmax."""

from .. import kernels
from .arrays import array, np, write


@kernels.reduce.implement("cpu")
def reduce(op, out, x):
    v = array(x)
    if op == "sum":
        res = v.astype(np.float64).sum(axis=1) if v.dtype.kind == "f" else v.astype(np.int64).sum(axis=1)
    elif op == "prod":
        res = v.astype(np.float64).prod(axis=1) if v.dtype.kind == "f" else v.astype(np.int64).prod(axis=1)
    elif op == "max":
        res = v.max(axis=1)
    elif op == "min":
        res = v.min(axis=1)
    elif op == "argmax":
        res = v.argmax(axis=1)
    elif op == "argmin":
        res = v.argmin(axis=1)
    else:
        raise ValueError(f"unknown reduction {op!r}")
    write(out, res)


@kernels.cumsum.implement("cpu")
def cumsum(out, x):
    v = array(x)
    write(out, np.cumsum(v.astype(np.float64) if v.dtype.kind == "f" else v.astype(np.int64), axis=1))


@kernels.softmax.implement("cpu")
def softmax(out, x, log=False):
    v = array(x).astype(np.float64)
    shifted = v - v.max(axis=1, keepdims=True)
    if log:
        res = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    else:
        e = np.exp(shifted)
        res = e / e.sum(axis=1, keepdims=True)
    write(out, res)


@kernels.softmax_backward.implement("cpu")
def softmax_backward(out, grad, y, log=False):
    g, yv = array(grad).astype(np.float64), array(y).astype(np.float64)
    if log:
        res = g - np.exp(yv) * g.sum(axis=1, keepdims=True)
    else:
        res = yv * (g - (g * yv).sum(axis=1, keepdims=True))
    write(out, res)
