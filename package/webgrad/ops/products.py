"""Products built on matmul, as torch: einsum, tensordot, the add* family (addmm, addmv, addr, addbmm, baddbmm),
mv, outer/ger, inner, vdot, kron, cdist, cross, block_diag, cartesian_prod and combinations.

Each is a composition (permutes, reshapes, one matmul where there is a contraction), so its gradient comes
from the ops it uses. einsum contracts its operands two at a time as batched matrix products: the labels
both operands keep are the batch, the labels only one of them has are the rows or columns, and the labels
nothing after needs are summed over by the product itself.
"""

import itertools

from .. import _norm, dtypes
from .._autograd import renamed
from .._tensor import Tensor, _norm_dim, tensor, zeros
from .core import broadcast_shapes
from .conv import pad
from .joining import meshgrid
from .matmul import matmul
from .shape import cat, diagonal, index_select, stack


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


# ===================================================================== einsum
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def einsum(equation, *operands):
    """Einstein summation (torch.einsum): 'ij,jk->ik', implicit outputs ('ij,jk': the labels seen once, in
    alphabetical order), '...' for broadcast dims, a label repeated in one operand for its diagonal, labels
    of size 1 broadcast against others."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    for t in operands:
        if not isinstance(t, Tensor):
            raise TypeError(f"einsum(): operands must be Tensors, got {type(t).__name__}")
    inputs, output = _parse(equation.replace(" ", ""), operands)
    sizes = {}
    for labels, t in zip(inputs, operands):
        for label, n in zip(labels, t.shape):
            if sizes.get(label, 1) != 1 and n != 1 and sizes[label] != n:
                raise RuntimeError(f"einsum(): operands do not broadcast with remapped shapes (original->remapped): "
                                   f"label {label!r} has sizes {sizes[label]} and {n}")
            sizes[label] = n if sizes.get(label, 1) == 1 else sizes[label]
    terms = [_diagonals(t, labels) for t, labels in zip(operands, inputs)]
    # sum over labels only one operand has and the output does not keep
    for k, (t, labels) in enumerate(terms):
        elsewhere = set(output).union(*(set(ls) for j, (_, ls) in enumerate(terms) if j != k))
        terms[k] = _sum_labels(t, labels, [c for c in labels if c not in elsewhere])
    t, labels = terms[0]
    for k in range(1, len(terms)):
        needed = set(output).union(*(set(ls) for _, ls in terms[k + 1:]))
        t, labels = _contract(t, labels, *terms[k], needed, sizes)
    t, labels = _sum_labels(t, labels, [c for c in labels if c not in output])
    if labels != output:
        t = t.permute(*[labels.index(c) for c in output])
    out_shape = tuple(sizes[c] for c in output)
    return t if tuple(t.shape) == out_shape else t.expand(*out_shape)


def _parse(equation, operands):
    """(labels of each operand, output labels), '...' replaced by labels of their own (the broadcast dims)."""
    lhs, arrow, rhs = equation.partition("->")
    specs = lhs.split(",")
    if len(specs) != len(operands):
        raise ValueError(f"einsum(): {'more' if len(operands) > len(specs) else 'fewer'} operands were provided "
                         "than specified in the equation")
    used = set(c for c in equation if c.isalpha())
    free = [c for c in _LETTERS if c not in used]
    ell = 0
    for spec, t in zip(specs, operands):
        if "..." in spec:
            ell = max(ell, t.ndim - len(spec.replace("...", "")))
    ell_labels = "".join(free[:ell])
    inputs = []
    for spec, t in zip(specs, operands):
        for c in spec.replace("...", ""):
            if c not in _LETTERS:
                raise ValueError(f"einsum(): invalid subscript given in the equation string: {c!r}")
        if "..." in spec:
            k = t.ndim - len(spec.replace("...", ""))
            if k < 0:
                raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(spec) - 3}) is more than "
                                   f"the number of dimensions ({t.ndim}) for operand")
            spec = spec.replace("...", ell_labels[ell - k:])
        elif len(spec) != t.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(spec)}) does not match the "
                               f"number of dimensions ({t.ndim}) for operand and no ellipsis was given")
        inputs.append(spec)
    if arrow:
        output = rhs.replace("...", ell_labels)
        for c in output:
            if c not in _LETTERS:
                raise ValueError(f"einsum(): invalid subscript given in the equation string: {c!r}")
            if output.count(c) > 1:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the output")
            if not any(c in spec for spec in inputs):
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any input "
                                   "operand")
    else:  # implicit: the broadcast dims, then the labels seen once, in alphabetical order
        counts = {}
        for spec in inputs:
            for c in spec:
                counts[c] = counts.get(c, 0) + 1
        output = ell_labels + "".join(sorted((c for c, n in counts.items() if n == 1 and c not in ell_labels),
                                             key=_LETTERS.index))
    return inputs, output


def _diagonals(t, labels):
    """(t, labels) with each label repeated within the operand reduced to its diagonal."""
    labels = list(labels)
    while True:
        repeated = next((c for c in labels if labels.count(c) > 1), None)
        if repeated is None:
            return t, "".join(labels)
        i = labels.index(repeated)
        j = labels.index(repeated, i + 1)
        t = diagonal(t, 0, i, j)  # the diagonal becomes the last dim
        labels = [c for k, c in enumerate(labels) if k not in (i, j)] + [repeated]


def _sum_labels(t, labels, gone):
    if not gone:
        return t, labels
    return t.sum(tuple(labels.index(c) for c in gone)), "".join(c for c in labels if c not in gone)


def _contract(a, la, b, lb, needed, sizes):
    """a (labels la) times b (labels lb) summed over the shared labels not needed later: one batched matmul."""
    batch = [c for c in la if c in lb and c in needed]
    summed = [c for c in la if c in lb and c not in needed]
    rows = [c for c in la if c not in lb]
    cols = [c for c in lb if c not in la]

    def arrange(t, labels, order):
        t = t.permute(*[labels.index(c) for c in order]) if list(labels) != order else t
        full = tuple(sizes[c] if c in batch or c in summed else t.shape[k] for k, c in enumerate(order))
        return t.expand(*full) if tuple(t.shape) != full else t

    a = arrange(a, la, batch + rows + summed)
    b = arrange(b, lb, batch + summed + cols)
    nb = len(batch)
    bshape = tuple(a.shape[:nb])
    rshape, cshape = tuple(a.shape[nb:nb + len(rows)]), tuple(b.shape[len(b.shape) - len(cols):])
    k = _numel(a.shape[nb + len(rows):])
    out = matmul(a.reshape(bshape + (_numel(rshape), k)), b.reshape(bshape + (k, _numel(cshape))))
    return out.reshape(bshape + rshape + cshape), "".join(batch + rows + cols)


# ===================================================================== tensordot and the matrix-vector family
def tensordot(a, b, dims=2, out=None):
    """Sum of products over the last `dims` dims of a and the first of b, or over the given pairs of dims."""
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = dims
        da = [da] if isinstance(da, int) else list(da)
        db = [db] if isinstance(db, int) else list(db)
    if len(da) != len(db):
        raise RuntimeError(f"both dimension lists should have same length, got {len(da)} and {len(db)}")
    da, db = [_norm_dim(d, a.ndim) for d in da], [_norm_dim(d, b.ndim) for d in db]
    for i, j in zip(da, db):  # a dim of size 1 broadcasts: the other side's dim is summed first
        if a.shape[i] == 1 and b.shape[j] != 1:
            b = b.sum(j, keepdim=True)
        elif b.shape[j] == 1 and a.shape[i] != 1:
            a = a.sum(i, keepdim=True)
        elif a.shape[i] != b.shape[j]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[i]} in dim {i} and "
                               f"second has size {b.shape[j]} in dim {j}")
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    k = _numel(a.shape[d] for d in da)
    left = a.permute(*free_a, *da).reshape(_numel(a.shape[d] for d in free_a), k)
    right = b.permute(*db, *free_b).reshape(k, _numel(b.shape[d] for d in free_b))
    result = matmul(left, right).reshape(tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b))
    if out is not None:
        return out.copy_(result)
    return result


def _scaled_sum(input, product, beta, alpha, name):
    """beta * input + alpha * product, input broadcast to the product's shape; beta = 0 ignores input (NaN too)."""
    if tuple(broadcast_shapes(tuple(input.shape), tuple(product.shape), op=name)) != tuple(product.shape):
        raise RuntimeError(f"{name}(): input of shape {list(input.shape)} does not broadcast to the product's shape "
                           f"{list(product.shape)}")
    out = product if alpha == 1 else product * alpha
    if beta != 0:
        out = out + (input if beta == 1 else input * beta)
    return renamed(out, name.capitalize(), input)  # (PyTorch's node: AddmmBackward0, BaddbmmBackward0, ...)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2) for 2-D mat1, mat2."""
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"addmm(): mat1 and mat2 must be matrices, got {mat1.ndim}-D and {mat2.ndim}-D")
    return _scaled_sum(input, matmul(mat1, mat2), beta, alpha, "addmm")


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec)."""
    return _scaled_sum(input, mv(mat, vec), beta, alpha, "addmv")


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta * input + alpha * outer(vec1, vec2)."""
    return _scaled_sum(input, outer(vec1, vec2), beta, alpha, "addr")


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * sum over b of batch1[b] @ batch2[b] (one matmul: the batch joins the inner dim)."""
    if batch1.ndim != 3 or batch2.ndim != 3 or batch1.shape[0] != batch2.shape[0]:
        raise RuntimeError(f"addbmm(): expected 3-D batches of the same size, got {list(batch1.shape)} and "
                           f"{list(batch2.shape)}")
    b, n, m = batch1.shape
    p = batch2.shape[2]
    product = matmul(batch1.permute(1, 0, 2).reshape(n, b * m), batch2.reshape(b * batch2.shape[1], p))
    return _scaled_sum(input, product, beta, alpha, "addbmm")


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * bmm(batch1, batch2)."""
    if batch1.ndim != 3 or batch2.ndim != 3 or batch1.shape[0] != batch2.shape[0]:
        raise RuntimeError(f"baddbmm(): expected 3-D batches of the same size, got {list(batch1.shape)} and "
                           f"{list(batch2.shape)}")
    return _scaled_sum(input, matmul(batch1, batch2), beta, alpha, "baddbmm")


def mv(input, vec):
    """Matrix [n, m] times vector [m]."""
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.ndim}, {vec.ndim}")
    return matmul(input, vec)


def outer(input, vec2):
    """The outer product of two 1-D tensors: [n] x [m] -> [n, m]."""
    if input.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"outer(): expected 1-D tensors, got {input.ndim}-D and {vec2.ndim}-D")
    return input.unsqueeze(1) * vec2.unsqueeze(0)


ger = outer


def inner(input, other):
    """Sum of products over the last dims (a 0-d operand multiplies)."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(input.shape)} and {list(other.shape)}")
    return tensordot(input, other, ([-1], [-1]))


def vdot(input, other):
    """The dot product of two 1-D tensors (real tensors: no conjugation)."""
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    return matmul(input, other)


def kron(input, other):
    """The Kronecker product: blocks input[i] * other, over as many dims as the larger operand has."""
    nd = max(input.ndim, other.ndim)
    a = input.reshape((1,) * (nd - input.ndim) + tuple(input.shape))
    b = other.reshape((1,) * (nd - other.ndim) + tuple(other.shape))
    inter_a = tuple(v for n in a.shape for v in (n, 1))
    inter_b = tuple(v for n in b.shape for v in (1, n))
    return (a.reshape(inter_a) * b.reshape(inter_b)).reshape(tuple(m * n for m, n in zip(a.shape, b.shape)))


# ===================================================================== distances, cross product
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """p-norm distances between the rows of x1 [*, P, M] and x2 [*, R, M]: [*, P, R] (torch's gradient:
    0 where a distance is 0)."""
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D, X2 got: {x2.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got {p}")
    batch = broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2]), op="cdist")
    p1, r, m = x1.shape[-2], x2.shape[-2], x1.shape[-1]
    a = x1.expand(*batch, p1, m).unsqueeze(-2)
    b = x2.expand(*batch, r, m).unsqueeze(-3)
    diff = a - b
    if p == 0:  # a count of the differing coordinates: its gradient is zeros, as torch's
        return (diff != 0).to(diff.dtype).sum(-1) + diff.sum(-1) * 0
    return _norm.norm(diff, p, dim=-1)


def cross(input, other, dim=None):
    """The cross product of 3-vectors along dim (torch.cross without dim: the first dim of size 3)."""
    shape = broadcast_shapes(tuple(input.shape), tuple(other.shape), op="cross")
    if dim is None:
        dim = next((d for d, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise RuntimeError(f"no dimension of size 3 in input {list(shape)}")
    d = _norm_dim(dim, len(shape))
    if shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3, got inputs of shapes "
                           f"{list(input.shape)} and {list(other.shape)}")
    a, b = input.expand(*shape), other.expand(*shape)
    a0, a1, a2 = (a.narrow(d, i, 1) for i in range(3))
    b0, b1, b2 = (b.narrow(d, i, 1) for i in range(3))
    return cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


# ===================================================================== block matrices, combinatorics
def block_diag(*tensors):
    """The tensors (0-d as [1, 1], 1-D as one row) as blocks on the diagonal of a zero matrix."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    blocks = []
    for t in tensors:
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input has {t.ndim} "
                               "dimensions")
        blocks.append(t.reshape(1, 1) if t.ndim == 0 else t.reshape(1, -1) if t.ndim == 1 else t)
    if not blocks:
        return zeros((1, 0))
    dtype = blocks[0].dtype
    for blk in blocks[1:]:
        dtype = dtypes.promote(dtype, blk.dtype)
    width = sum(blk.shape[1] for blk in blocks)
    rows, left = [], 0
    for blk in blocks:
        w = blk.shape[1]
        rows.append(pad(blk.to(dtype), (left, width - left - w)))
        left += w
    return cat(rows, 0)


def cartesian_prod(*tensors):
    """Every combination of one element of each 1-D tensor, as rows [N, k] (one tensor: itself)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for t in tensors:
        if t.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([g.reshape(-1) for g in grids], 1)


def combinations(input, r=2, with_replacement=False):
    """The r-element combinations of a 1-D tensor's elements, in order, as rows [N, r] (itertools'
    combinations, or combinations_with_replacement)."""
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return input[:0]
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(pick(range(input.shape[0]), r))
    if not rows:
        return input[:0].reshape(0, 1).expand(0, r)
    index = tensor([i for row in rows for i in row], dtype=dtypes.int64, device=input.device)
    return index_select(input, 0, index).reshape(len(rows), r)
