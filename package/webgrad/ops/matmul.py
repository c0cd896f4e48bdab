"""Matrix products: matmul / @ (with batching and broadcast batch dims), mm, bmm, and the fused linear.

Transposed operands are never copied: a view whose last two dims are column-major (w.t(), x.mT) is
passed to the kernel as the stored matrix with a transpose flag. Backward passes are written with
such views, so `g @ w` and `x.mT @ g` run the A@B, Aᵀ@B and A@Bᵀ kernel variants directly.
"""

from .. import dtypes
from .._autograd import record, renamed
from .._view import View
from .elementwise import broadcast_shapes, check_same_device, new, unbroadcast
from .._tensor import Tensor
from .autocast_policy import full_precision, kept, lower_precision  # noqa: F401
from .._backends import kernels


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _inner_layout(rows, cols, s_rows, s_cols):
    """'row' if a [rows, cols] block is row-major contiguous, 'col' if column-major, else None."""
    if (cols == 1 or s_cols == 1) and (rows == 1 or s_rows == cols):
        return "row"
    if (rows == 1 or s_rows == 1) and (cols == 1 or s_cols == rows):
        return "col"
    return None


def _batch_stride(t, batch):
    """One stride that walks t's batch dims as a flat [prod(batch)] axis, 0 if t has no batch, or None."""
    tb = tuple(t.shape)[:-2]  # (a plain tuple: Size's slicing is Python-level, and this runs per product)
    if _prod(tb) == 1:
        return 0
    if tb != tuple(batch):
        return None
    dims = [(n, s) for n, s in zip(tb, t._view.strides[:-2]) if n != 1]
    for (n0, s0), (n1, s1) in zip(dims, dims[1:]):
        if s0 != s1 * n1:
            return None
    return dims[-1][1]


def operand(t, batch):
    """(View [B, r, c] of what is stored, transposed?) for a [*batch, R, C] matmul operand."""
    rows, cols = tuple(t.shape)[-2:]
    bstride = _batch_stride(t, batch)
    layout = _inner_layout(rows, cols, t._view.strides[-2], t._view.strides[-1]) if bstride is not None else None
    if layout is None or bstride not in (0, rows * cols):  # (the kernel's batch stride: 0 or the matrix's size)
        t = t.expand(*batch, rows, cols).contiguous() if _prod(t.shape[:-2]) != 1 else t.contiguous()
        bstride = _batch_stride(t, batch)
        layout = "row"
    b = _prod(batch)
    if layout == "row":
        return View(t._view.storage, (b, rows, cols), (bstride, cols, 1), t._view.offset, t.dtype), False
    return View(t._view.storage, (b, cols, rows), (bstride, rows, 1), t._view.offset, t.dtype), True


def _check(a, b, op):
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(f"{op}(): expected Tensors, got {type(a).__name__} and {type(b).__name__}")
    check_same_device(op, a, b)
    if a.dtype is not b.dtype:  # integers multiply as torch's CPU does
        raise RuntimeError(f"{op}(): expected tensors of one dtype, floating or integer, got {a.dtype.name} and "
                           f"{b.dtype.name} (convert with .float())")
    if a.dtype is dtypes.bool_:
        raise NotImplementedError(f"{op}(): not implemented for 'Bool' tensors, as in PyTorch (convert with .int())")
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError(f"{op}(): both arguments need at least 1 dimension, got shapes {list(a.shape)} and {list(b.shape)}")


@lower_precision("matmul")
def matmul(input, other):
    if getattr(input, "is_sparse", False) or getattr(other, "is_sparse", False):  # torch.mm/matmul with sparse COO
        from ..sparse._coo import matmul as sparse_matmul
        return sparse_matmul(input, other)
    a, b = input, other
    _check(a, b, "matmul")
    # (the nodes named as PyTorch's: dot, mv, a squeeze of its own, the _unsafe_view of a folded batch)
    if a.ndim == 1 and b.ndim == 1:
        return renamed(matmul(a.unsqueeze(0), b.unsqueeze(1)).reshape(()), "Dot")
    if a.ndim == 1:
        return renamed(matmul(a.unsqueeze(0), b).squeeze(-2), "Squeeze.4")
    if b.ndim == 1:
        return renamed(matmul(a, b.unsqueeze(1)).squeeze(-1), "Mv" if a.ndim == 2 else "UnsafeView")
    if b.ndim == 2 and a.ndim > 2:  # fold batch into rows: one big GEMM, and a plain dW in backward
        k = a.shape[-1]
        return renamed(matmul(a.reshape(_prod(a.shape[:-1]), k), b).reshape(*a.shape[:-1], b.shape[-1]), "UnsafeView")
    a_dims, b_dims = tuple(a.shape), tuple(b.shape)
    m, k = a_dims[-2:]
    k2, n = b_dims[-2:]
    if k != k2:
        raise RuntimeError(f"matmul: shapes {list(a.shape)} and {list(b.shape)} cannot be multiplied "
                           f"({m}x{k} and {k2}x{n})")
    batch = broadcast_shapes(a_dims[:-2], b_dims[:-2], op="matmul")
    if not a.dtype.is_floating:  # exact integer products (no GEMM kernel takes them), wrapping as the dtype does
        return (a.unsqueeze(-1) * b.unsqueeze(-3)).sum(-2).to(a.dtype)
    if k == 0 or _prod(batch) * m * n == 0:  # nothing to multiply: sums over an empty k are zeros (no kernel)
        return (a.unsqueeze(-1) * b.unsqueeze(-3)).sum(-2)
    out = new(batch + (m, n), a.dtype, a.device)
    av, ta = operand(a, batch)
    bv, tb = operand(b, batch)
    kernels.matmul(a.device.backend, out._view.reshaped((_prod(batch), m, n)), av, bv, trans_a=ta, trans_b=tb)
    # each operand is kept for the other's gradient; autocast's casts of parameters as the parameter, cast
    # again at the backward (autocast_policy.kept)
    a_shape, b_shape, a_grad, b_grad = a.shape, b.shape, a.requires_grad, b.requires_grad
    a_values = kept(a) if b_grad else None
    b_values = kept(b) if a_grad else None

    def backward(g):
        ga = unbroadcast(matmul(g, b_values().mT), a_shape) if a_grad else None
        gb = unbroadcast(matmul(a_values().mT, g), b_shape) if b_grad else None
        return ga, gb
    return record(out, "Mm" if not batch else "UnsafeView", (a, b), backward)  # (PyTorch's matmul: a bmm, viewed)


def mm(input, mat2):
    if getattr(input, "is_sparse", False) or getattr(mat2, "is_sparse", False):
        from ..sparse._coo import mm as sparse_mm
        return sparse_mm(input, mat2)
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mm(): expected 2-D tensors, got shapes {list(input.shape)} and {list(mat2.shape)}")
    return matmul(input, mat2)


def bmm(input, mat2):
    if input.ndim != 3 or mat2.ndim != 3 or input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"bmm(): expected 3-D tensors with the same batch size, got {list(input.shape)} and {list(mat2.shape)}")
    return renamed(matmul(input, mat2), "Bmm")


def dot(input, other):
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError("dot(): expected 1-D tensors")
    return matmul(input, other)


def _transposed(t):
    """t.t() of a 2-D tensor as a plain view, outside autograd, for an operand whose gradient the caller's
    own graph node handles: t.t() builds a differentiable view (and its node when t requires grad) through
    transpose and permute, for its strides only, twice per linear layer per step."""
    v = t._view
    return Tensor._make(View(v.storage, (v.shape[1], v.shape[0]), (v.strides[1], v.strides[0]), v.offset, v.dtype),
                        t.device)


@lower_precision("linear")
def linear(input, weight, bias=None):
    """input @ weight.T + bias in one kernel (the bias is added in the matmul's epilogue)."""
    _check(input, weight, "linear")
    if weight.ndim != 2:
        raise RuntimeError(f"linear(): weight must be 2-D [out_features, in_features], got {list(weight.shape)}")
    n, k = weight.shape
    dims = tuple(input.shape)
    if dims[-1] != k:
        raise RuntimeError(f"linear(): input has {input.shape[-1]} features (shape {list(input.shape)}) but the "
                           f"weight expects {k} (weight shape {list(weight.shape)})")
    if bias is not None and tuple(bias.shape) != (n,):
        raise RuntimeError(f"linear(): bias must have shape [{n}], got {list(bias.shape)}")
    lead = dims[:-1]
    flat = input.ndim == 2  # the usual case: no reshape calls (each parses its shape, even to change nothing)
    x = input if flat else input.reshape(-1, k)
    rows = lead[0] if flat else x.shape[0]
    out = new((rows, n), input.dtype, input.device)
    xv, tx = operand(x, ())
    wv, tw = operand(_transposed(weight), ())
    bv = bias.contiguous()._view if bias is not None else None
    kernels.matmul(input.device.backend, out._view.reshaped((1, rows, n)), xv, wv, trans_a=tx, trans_b=tw, bias=bv)
    weight_values, weight_grad = kept(weight), weight.requires_grad  # (autocast_policy.kept)
    bias_grad = bias is not None and bias.requires_grad

    def backward(g):
        gx = matmul(g, weight_values()) if x.requires_grad else None
        # (the plain view only where backward runs without grad: under create_graph g carries a graph that the
        # weight's gradient must keep, or a second derivative through it would miss its dependence on g)
        gw = matmul(g.t() if g.requires_grad else _transposed(g), x) if weight_grad else None
        gb = g.sum(0) if bias_grad else None
        return gx, gw, gb
    out = record(out, "Addmm" if bias is not None else "Mm", (x, weight, bias), backward)
    # (PyTorch's names: a view of the bias's addmm, the _unsafe_view of a matmul)
    # (PyTorch's names: it folds the batch into one addmm only for a contiguous input and bias, else adds the bias)
    name = "UnsafeView" if bias is None else "View" if input.is_contiguous() and bias.is_contiguous() else "Add"
    return out if flat else renamed(out.reshape(*lead, n), name)
