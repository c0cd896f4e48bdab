"""Reductions (sum, mean, max, min, argmax, var, std, logsumexp), prefix sums (cumsum) and softmax / log_softmax.

Every reduction is one backend kernel over a contiguous [outer, size, inner] layout: reduced dims that
form one block of a contiguous tensor are reduced in place. Sum, prod, max and min over several blocks
(a bias gradient sums [N, C, H, W] over dims 0, 2 and 3) reduce one block at a time, the largest first;
argmax/argmin over such a set permute the reduced dims to the end first (one copy).
"""

from ..return_types import structseq
from .. import dtypes
from .._autograd import no_grad, record, renamed
from .._view import View
from .._tensor import Tensor, _norm_dim, ones
from .core import cast, new
from .elementwise import maximum, minimum, where
from .autocast_policy import full_precision
from .._backends import kernels


def _dims(x, dim):
    if dim is None:
        return tuple(range(x.ndim))
    if isinstance(dim, int):
        dim = (dim,)
    if x.ndim == 0:  # dims 0 and -1 of a 0-d tensor are valid and reduce nothing, as in torch
        for d in dim:
            _norm_dim(d, 0)
        return ()
    dims = tuple(sorted({_norm_dim(d, x.ndim) for d in dim}))
    if len(dims) != len(tuple(dim)):
        raise RuntimeError(f"dim {tuple(dim)} appears multiple times in the list of dims")
    return dims


def _out_shape(shape, dims, keepdim):
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in dims)


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _layout(x, dims):
    """(view of x as contiguous [outer, size, inner]) for reducing `dims`, copying only when needed."""
    if not dims:
        return x._view.reshaped((_prod(x.shape), 1, 1)) if x._view.is_contiguous() else \
            x.contiguous()._view.reshaped((_prod(x.shape), 1, 1))
    block = dims == tuple(range(dims[0], dims[-1] + 1))
    if block:
        src = x.contiguous()
        shape = tuple(x.shape)
        return src._view.reshaped((_prod(shape[:dims[0]]), _prod(shape[dims[0]:dims[-1] + 1]), _prod(shape[dims[-1] + 1:])))
    kept = [i for i in range(x.ndim) if i not in dims]
    src = x.permute(*kept, *dims).contiguous()
    return src._view.reshaped((_prod(x.shape[i] for i in kept), _prod(x.shape[i] for i in dims), 1))


_STAGED = ("sum", "prod", "max", "min")  # associative: a set of dims can be reduced block by block


def _blocks(dims):
    """Runs of consecutive dims: (0, 2, 3) -> [(0,), (2, 3)]."""
    blocks = []
    for d in dims:
        if blocks and blocks[-1][-1] == d - 1:
            blocks[-1] += (d,)
        else:
            blocks.append((d,))
    return blocks


def _reduce(op, x, dims, keepdim, dtype):
    if x.numel() == 0 and op not in ("sum",):
        raise RuntimeError(f"{op}(): cannot reduce an empty tensor without an identity")
    blocks = _blocks(dims)
    if len(blocks) > 1 and op in _STAGED:
        # One kernel per block, in place (keepdim keeps the other dims where they are), instead of a
        # permuted copy of the whole tensor (which with its reduction took 99 us for a [1024, 32, 14, 14]
        # bias gradient on an H100). The largest block first leaves the smallest intermediate: batch
        # first reads that tensor in coalesced rows of 6272 (46 us), where 32768 rows of 196 (one
        # workgroup each) took 84 us.
        y = x
        for block in sorted(blocks, key=lambda b: -_prod(x.shape[d] for d in b)):
            y = _reduce(op, y, block, True, dtype)
        return y if keepdim else y.reshape(_out_shape(x.shape, dims, False))
    v = _layout(x, dims)
    out = new(_out_shape(x.shape, dims, keepdim), dtype, x.device)
    kernels.reduce(x.device.backend, op, out._view.reshaped((v.shape[0], v.shape[2])), v)
    return out


def _expand_back(g, shape, dims, keepdim):
    """A reduced gradient broadcast back to the input's `shape` (a stride-0 view, no copy)."""
    if not keepdim:
        g = g.reshape(_out_shape(shape, dims, True))
    return g.expand(*shape)


@full_precision("sum")
def sum(input, dim=None, keepdim=False, dtype=None):
    dims = _dims(input, dim)
    x = input
    if dtype is not None:
        x = cast(x, dtypes.to_dtype(dtype))
    elif not x.dtype.is_floating:
        x = cast(x, dtypes.int64)  # integers and bools sum in int64, as PyTorch
    out = _reduce("sum", x, dims, keepdim, x.dtype)
    shape = x.shape  # the backward needs the shape only: holding x would keep its buffer until then
    name = "Sum" if dim is None else "Sum.1"  # (PyTorch's overloads: sum(), sum(dim))
    return record(out, name, (x,), lambda g: (_expand_back(g, shape, dims, keepdim),))


@full_precision("prod")
def prod(input, dim=None, keepdim=False, dtype=None):
    """Product over `dim` (all elements when None), as torch.prod; its gradient is exact with zeros."""
    x = input
    if dtype is not None:
        x = cast(x, dtypes.to_dtype(dtype))
    elif not x.dtype.is_floating:
        x = cast(x, dtypes.int64)  # as PyTorch
    dims = _dims(x, dim)
    if x.numel() == 0:  # the empty product is 1 (its gradient, of an empty input, is empty)
        return sum(x, dims, keepdim) * 0 + 1
    out = _reduce("prod", x, dims, keepdim, x.dtype)

    def backward(g):
        # d out / d x_i = the product of the others: out / x_i where x_i != 0. Where x_i == 0 it is the
        # product of the non-zero others if x_i is the only zero of its slice, else 0.
        zero = x == 0
        nonzero_prod = prod(where(zero, 1.0, x), dims, keepdim=True)
        zeros = sum(zero, dims, keepdim=True)
        others = where(zero, where(zeros == 1, nonzero_prod, 0.0), _expand_back(out, x.shape, dims, keepdim) / where(zero, 1.0, x))
        return (_expand_back(g, x.shape, dims, keepdim) * others,)
    return record(out, "Prod", (x,), backward)


def mean(input, dim=None, keepdim=False, dtype=None):
    x = cast(input, dtypes.to_dtype(dtype)) if dtype is not None else input
    if not x.dtype.is_floating:
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be floating point, got {x.dtype.name}")
    dims = _dims(x, dim)
    n = _prod(x.shape[d] for d in dims)
    scale = 1.0 / n if n else float("nan")
    with no_grad():  # one graph node, MeanBackward0 as PyTorch's (a tutorial prints it), not a sum and a product
        out = sum(x, dims, keepdim) * scale
    shape = x.shape
    name = "Mean" if dim is None else "Mean.1"  # (PyTorch's overloads: mean(), mean(dim))
    return record(out, name, (x,), lambda g: (_expand_back(g * scale, shape, dims, keepdim),))


def _pick_extreme(op, x, dims, keepdim):
    """max/min over one dim (`dims` has one entry): (values, int64 indices); the gradient goes to the
    chosen element only."""
    v = _layout(x, dims)
    outer, size, inner = v.shape
    shape = _out_shape(x.shape, dims, keepdim)
    idx = new(shape, dtypes.int64, x.device)
    kernels.reduce(x.device.backend, "arg" + op, idx._view.reshaped((outer, inner)), v)
    values = new(shape, x.dtype, x.device)
    kernels.gather(x.device.backend, values._view.reshaped((outer, 1, inner)), v, idx._view.reshaped((outer, 1, inner)))

    def backward(g):
        out = new((outer, size, inner), g.dtype, g.device)
        gc = g.contiguous()
        kernels.gather_backward(g.device.backend, out._view, gc._view.reshaped((outer, 1, inner)), idx._view.reshaped((outer, 1, inner)))
        return out.reshape(x.shape)
    record(values, op.capitalize(), (x,), lambda g: (backward(g),))
    return values, idx


def _extreme(op):
    values_indices = structseq(op, ["values", "indices"])  # torch.return_types.max / .min

    def fn(input, dim=None, keepdim=False):
        if isinstance(dim, Tensor):  # max(a, b) is maximum
            return (maximum if op == "max" else minimum)(input, dim)
        if dim is None:
            values, _ = _pick_extreme(op, input.reshape(-1), (0,), False)
            return renamed(values, op.capitalize() + ".1", input)  # (PyTorch's overloads: max(), max(dim))
        values, idx = _pick_extreme(op, input, _dims(input, dim), keepdim)
        return values_indices(values, idx)
    fn.__name__ = op
    fn.__doc__ = f"{op}(x) -> a 0-d tensor; {op}(x, dim, keepdim=False) -> (values, indices); {op}(a, b) -> elementwise."
    return fn


max = _extreme("max")
min = _extreme("min")


def _arg(op):
    def fn(input, dim=None, keepdim=False):
        if dim is None:
            out = _reduce(op, input.reshape(-1), (0,), False, dtypes.int64)
            return out.reshape((1,) * input.ndim) if keepdim else out
        return _reduce(op, input, _dims(input, dim), keepdim, dtypes.int64)
    fn.__name__ = op
    return fn


argmax = _arg("argmax")
argmin = _arg("argmin")


def _amax_amin(op):
    def fn(input, dim=(), keepdim=False):
        dims = _dims(input, None if dim == () else dim)
        out = _reduce(op, input, dims, keepdim, input.dtype)

        def backward(g):
            # ties share the gradient evenly, as torch.amax
            hit = cast(input == _expand_back(out, input.shape, dims, keepdim), g.dtype)
            count = sum(hit, dims, keepdim=True)
            return _expand_back(g, input.shape, dims, keepdim) * hit / count
        return record(out, "A" + op, (input,), lambda g: (backward(g),))
    fn.__name__ = "a" + op
    return fn


amax = _amax_amin("max")
amin = _amax_amin("min")


def var(input, dim=None, unbiased=None, keepdim=False, correction=None):
    """Variance; unbiased (correction=1) by default, as PyTorch. var(x, True) is the legacy positional
    `unbiased` (a bool is never a dim)."""
    if isinstance(dim, bool):
        if unbiased is not None:
            raise TypeError("var(): got the legacy positional `unbiased` and `unbiased=` both")
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise RuntimeError("var(): pass either unbiased or correction, not both")
    corr = correction if correction is not None else (0 if unbiased is False else 1)
    dims = _dims(input, dim)
    n = _prod(input.shape[d] for d in dims)
    diff = input - mean(input, dims, keepdim=True)
    return renamed(sum(diff * diff, dims, keepdim) * (1.0 / (n - corr) if n > corr else float("nan")), "Var", input)


def std(input, dim=None, unbiased=None, keepdim=False, correction=None):
    if isinstance(dim, bool):  # std(x, True): the legacy positional `unbiased`
        dim, unbiased = None, dim
    return renamed(var(input, dim, unbiased=unbiased, keepdim=keepdim, correction=correction).sqrt(), "Std", input)


def var_mean(input, dim=None, unbiased=None, keepdim=False, correction=None):
    if isinstance(dim, bool):  # var_mean(x, True): the legacy positional `unbiased`
        dim, unbiased = None, dim
    return var(input, dim, unbiased, keepdim, correction), mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, correction=None):
    if isinstance(dim, bool):  # std_mean(x, True): the legacy positional `unbiased`
        dim, unbiased = None, dim
    return std(input, dim, unbiased, keepdim, correction), mean(input, dim, keepdim)


@full_precision("logsumexp")
def logsumexp(input, dim, keepdim=False):
    dims = _dims(input, dim)
    m = amax(input.detach(), dims, keepdim=True)
    m = where(m.isinf(), 0.0, m)  # all -inf (or +inf) rows: avoid inf - inf
    out = (input - m).exp().sum(dims, keepdim=True).log() + m
    return renamed(out if keepdim else out.reshape(_out_shape(input.shape, dims, False)), "Logsumexp", input)


# ===================================================================== softmax family
def _rows(x, dim):
    """x with `dim` moved last, as a contiguous [rows, cols] tensor, and a function putting results back."""
    d = _norm_dim(dim, x.ndim)
    last = x.ndim - 1
    moved = x if d == last or x.ndim == 0 else x.transpose(d, last)
    moved = moved.contiguous()
    shape = tuple(moved.shape)
    cols = shape[-1] if shape else 1
    rows = moved.numel() // cols if cols else 0

    def restore(t):
        t = t.reshape(shape)
        return t if d == last or x.ndim == 0 else t.transpose(d, last)
    return moved, rows, cols, restore


def _softmax(log):
    name = "LogSoftmax" if log else "Softmax"

    def fn(input, dim=None, dtype=None):
        if dim is None:
            raise TypeError(f"{name.lower()}(): missing the `dim` argument (PyTorch's implicit dim is deprecated)")
        x = cast(input, dtypes.to_dtype(dtype, dtypes.float32)) if (dtype or not input.dtype.is_floating) else input
        moved, rows, cols, restore = _rows(x, dim)
        y = new((rows, cols), x.dtype, x.device)
        if rows * cols:  # (an empty input has nothing to normalise)
            kernels.softmax(x.device.backend, y._view, moved._view.reshaped((rows, cols)), log=log)

        def backward(g):
            gm, _, _, _ = _rows(g, dim)
            out = new((rows, cols), x.dtype, g.device)
            if rows * cols:
                kernels.softmax_backward(g.device.backend, out._view, gm._view.reshaped((rows, cols)), y._view,
                                         log=log)
            return restore(out)

        def grads(g):
            return (backward(g),)

        def composite():  # the definition in differentiable ops, for gradients of gradients (create_graph)
            shifted = x - x.amax(dim, keepdim=True).detach()
            total = shifted.exp().sum(dim, keepdim=True)
            return (shifted - total.log() if log else shifted.exp() / total), (x,)
        grads.composite = composite
        out = restore(y)
        return record(out, name, (x,), grads)
    fn.__name__ = "log_softmax" if log else "softmax"
    return fn


softmax = full_precision("softmax")(_softmax(False))
log_softmax = full_precision("log_softmax")(_softmax(True))


# ===================================================================== prefix sums
def cumsum(input, dim, *, dtype=None):
    """The inclusive prefix sums of `input` along `dim`, as torch.cumsum. Integer and bool inputs sum in the
    int64, as PyTorch's, unless `dtype` says otherwise."""
    x = input
    if dtype is not None:
        x = cast(x, dtypes.to_dtype(dtype))
    elif not x.dtype.is_floating:
        x = cast(x, dtypes.int64)
    if x.dtype is dtypes.float16:  # (summed in float32 and rounded once, as PyTorch's half cumsum)
        return cast(cumsum(cast(x, dtypes.float32), dim), dtypes.float16)
    if x.ndim == 0:
        _norm_dim(dim, 1)  # 0 and -1 are the only dims of a scalar
        return x.clone()
    d = _norm_dim(dim, x.ndim)
    v = _layout(x, (d,))
    y = new(x.shape, x.dtype, x.device)
    kernels.cumsum(x.device.backend, y._view.reshaped(v.shape), v)
    if x.dtype.is_floating:
        # d cumsum_k / d x_j = [j <= k]: the gradient is the reversed prefix sum of g
        record(y, "Cumsum", (x,), lambda g: (cumsum(g.flip(d), d).flip(d),))
    return y
