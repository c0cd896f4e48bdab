"""Sparse COO tensors (torch.sparse_coo_tensor, Tensor.to_sparse, torch.sparse.mm), built on dense ops.

A sparse COO tensor of shape (s_0, ..., s_{k-1}, d_0, ...) holds `indices`, an int64 tensor [k, nnz] (k sparse
dims), and `values`, a tensor [nnz, d_0, ...] (its dense dims); an index may appear more than once (an
"uncoalesced" tensor: its entries add up). Both live on the tensor's device, and everything is a composition of
dense ops that both backends have, so it runs on the CPU and on WebGPU and its gradients are theirs:

- sparse @ dense (mm, spmm, matmul, @): out = zeros(m, n).index_add(0, rows, values[:, None] * D.index_select(0,
  cols)); nothing of size m x k is made. Gradients reach the values and the dense operand, as torch's.
- to_dense: values index_add-ed into zeros at their linear positions (the dense result, of the sparse shape).
- coalesce: the indices are read back to the host (one sync on WebGPU), sorted and made unique there (NumPy where
  present, else Python); the values are summed on the device by index_add. Constructing a tensor reads its
  indices back once as well, to check them against the size (an index out of range is an error, not a write
  outside a buffer).
- dense.to_sparse(): nonzero (data-dependent: a sync on WebGPU), then the values gathered by index_select.

Gradients: a sparse tensor's values carry its autograd history; `requires_grad_()` on a sparse tensor makes its
values a leaf, and its `.grad` is a sparse tensor at the coalesced indices holding the gradient of each entry (as
torch.sparse.mm gives it; torch.mm gives a leaf a dense gradient instead). Operations a sparse tensor does not
support raise NotImplementedError naming them (densify explicitly with .to_dense()).

Sparse gradients: embedding / embedding_bag with sparse=True (nn/_sparse_grad.py) give the table a sparse .grad,
which the autograd engine accumulates as torch's (_autograd._sum_grads) and SGD, Adagrad and SparseAdam step on
(optim/_sparse_grads.py, optim/sparse_adam.py).
"""

import math

from .. import devices, dtypes
from .._tensor import Tensor, arange, tensor, zeros
from ..layout import layout as _layout


def _numpy():
    try:
        import numpy
        return numpy
    except ImportError:
        return None


sparse_coo = _layout("sparse_coo")


def _prod(shape):
    return math.prod(shape) if shape else 1


def _strides(shape):
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return out[::-1]


def _host_rows(indices):
    """indices [k, nnz] as k lists of Python ints (one read-back)."""
    np = _numpy()
    if np is not None and indices.device.type == "cpu":
        return indices.numpy().tolist()
    return indices.tolist()


def _as_index_tensor(indices, device):
    if isinstance(indices, Tensor):
        if indices.is_sparse:
            raise TypeError("sparse_coo_tensor(): indices must be a dense tensor")
        if indices.dtype.is_floating:
            raise RuntimeError(f"indices must be an int64 tensor, got {indices.dtype.name}")
        return indices.to(device=device, dtype=dtypes.int64)
    if hasattr(indices, "tolist") and not isinstance(indices, list):  # a NumPy array
        indices = indices.tolist()
    return tensor(indices, dtype=dtypes.int64, device=device)


class SparseCOOTensor(Tensor):
    """A tensor with layout torch.sparse_coo (see the module doc). Made by sparse_coo_tensor and to_sparse."""

    is_sparse = True
    layout = sparse_coo

    def __init__(self, indices, values, shape, coalesced=False):  # noqa: D107  (not the public constructor)
        object.__setattr__(self, "_sp", (indices, values, tuple(int(s) for s in shape), bool(coalesced)))

    # ------------------------------------------------------------------ what a sparse tensor is
    @property
    def _view(self):
        raise NotImplementedError("this operation is not supported on sparse COO tensors (layout=torch.sparse_coo): "
                                  "they support mm/spmm/matmul/@ with a dense matrix, +, -, * by a scalar or a "
                                  "dense tensor, sum, t/transpose, coalesce, indices/values, to_dense, to(); call "
                                  ".to_dense() for anything else")

    @property
    def _sp_indices(self):
        return self._sp[0]

    @property
    def _sp_values(self):
        return self._sp[1]

    @property
    def shape(self):
        from .._tensor import Size
        return Size(self._sp[2])

    def size(self, dim=None):
        return self.shape if dim is None else self._sp[2][dim]

    @property
    def ndim(self):
        return len(self._sp[2])

    def dim(self):
        return len(self._sp[2])

    def numel(self):
        return _prod(self._sp[2])

    def __len__(self):
        if not self._sp[2]:
            raise TypeError("len() of a 0-d tensor")
        return self._sp[2][0]

    @property
    def dtype(self):
        return self._sp[1].dtype

    @property
    def device(self):
        return self._sp[1].device

    @property
    def is_cuda(self):
        return False

    def sparse_dim(self):
        return self._sp[0].shape[0]

    def dense_dim(self):
        return self._sp[1].ndim - 1

    def _nnz(self):
        return self._sp[0].shape[1]

    def is_coalesced(self):
        return self._sp[3]

    def _indices(self):
        return self._sp[0]

    def _values(self):
        return self._sp[1]

    def indices(self):
        if not self._sp[3]:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._sp[0]

    def values(self):
        if not self._sp[3]:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return self._sp[1]

    # ------------------------------------------------------------------ autograd: through the values
    @property
    def requires_grad(self):
        return self._sp[1].requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad=True):
        values = self._sp[1]
        if requires_grad and not values.requires_grad:
            values = values.detach().requires_grad_(True)  # a leaf of its own: the caller's tensor is left alone
        elif not requires_grad:
            if not values.is_leaf:
                raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want to use a "
                                   "computed variable in a subgraph that doesn't require differentiation use "
                                   "var_no_grad = var.detach().")
            values.requires_grad_(False)
        object.__setattr__(self, "_sp", (self._sp[0], values) + self._sp[2:])
        return self

    @property
    def grad_fn(self):
        return self._sp[1].grad_fn

    @property
    def is_leaf(self):
        return self._sp[1].is_leaf

    @property
    def grad(self):
        g = self._sp[1].grad
        if g is None:
            return None
        if self._sp[3]:
            return SparseCOOTensor(self._sp[0], g, self._sp[2], True)
        indices, _, first = _coalesce_plan(self._sp[0], self._sp[2][:self.sparse_dim()])
        return SparseCOOTensor(indices, g.index_select(0, first), self._sp[2], True)

    @grad.setter
    def grad(self, value):
        if value is None:
            self._sp[1].grad = None
        elif isinstance(value, SparseCOOTensor) and value._nnz() == self._nnz():
            self._sp[1].grad = value._sp[1]
        else:
            raise RuntimeError("a sparse tensor's grad can be set to None or to a sparse tensor of its indices")

    @property
    def data(self):
        return self.detach()

    def detach(self):
        return SparseCOOTensor(self._sp[0], self._sp[1].detach(), self._sp[2], self._sp[3])

    def clone(self, memory_format=None):
        return SparseCOOTensor(self._sp[0].clone(), self._sp[1].clone(), self._sp[2], self._sp[3])

    # ------------------------------------------------------------------ conversions
    def to(self, *args, **kwargs):
        """Tensor.to's forms (device, dtype, both, another tensor): the values converted as a dense tensor's
        would be, the indices moved with them."""
        values = self._sp[1].to(*args, **kwargs)
        indices = self._sp[0].to(values.device)
        if indices is self._sp[0] and values is self._sp[1]:
            return self
        return SparseCOOTensor(indices, values, self._sp[2], self._sp[3])

    def cpu(self):
        return self.to("cpu")

    def webgpu(self):
        return self.to("webgpu")

    def float(self):
        return self.to(dtype=dtypes.float32)

    def double(self):
        return self.to(dtype=dtypes.float64)

    def long(self):
        return self.to(dtype=dtypes.int64)

    def int(self):
        return self.to(dtype=dtypes.int32)

    def type(self, dtype=None):
        if dtype is None:
            return {"float32": "torch.sparse.FloatTensor", "float64": "torch.sparse.DoubleTensor",
                    "int64": "torch.sparse.LongTensor"}.get(self.dtype.name, f"torch.sparse.{self.dtype.name}")
        return self.to(dtype=dtype)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        if layout not in (None, sparse_coo) or blocksize is not None:
            raise NotImplementedError(f"to_sparse(layout={layout}): webgrad has sparse COO tensors only")
        if sparse_dim is not None and sparse_dim != self.sparse_dim():
            raise RuntimeError(f"to_sparse: conversion from Sparse to Sparse with sparse_dim argument != "
                               f"self.sparse_dim() is not supported (got {sparse_dim}, has {self.sparse_dim()})")
        return self

    def to_dense(self, dtype=None, *, masked_grad=None):
        indices, values, shape = self._sp[0], self._sp[1], self._sp[2]
        sd = self.sparse_dim()
        flat = zeros((_prod(shape[:sd]),) + shape[sd:], dtype=values.dtype, device=values.device)
        if self._nnz():
            flat = flat.index_add(0, _linear(indices, shape[:sd]), values)
        out = flat.reshape(shape)
        return out if dtype is None else out.to(dtype=dtype)

    def coalesce(self):
        """The same tensor with each index once (duplicates summed), indices in lexicographic order."""
        if self._sp[3]:
            return self
        indices, values, shape = self._sp[0], self._sp[1], self._sp[2]
        sd = self.sparse_dim()
        unique, inverse, _ = _coalesce_plan(indices, shape[:sd])
        summed = zeros((unique.shape[1],) + tuple(values.shape[1:]), dtype=values.dtype, device=values.device)
        if self._nnz():
            summed = summed.index_add(0, inverse, values)
        return SparseCOOTensor(unique, summed, shape, True)

    def zero_(self):
        """In place: no entries left (nnz 0, coalesced), as torch's sparse zero_ (optimizer.zero_grad(False))."""
        indices, values, shape, _ = self._sp
        object.__setattr__(self, "_sp", (indices[:, :0], values[:0], shape, True))
        return self

    # ------------------------------------------------------------------ shape
    def t(self):
        if self.sparse_dim() != 2 or self.dense_dim():
            raise RuntimeError(f"t() expects a 2-D sparse tensor, got sparse_dim {self.sparse_dim()} and dense_dim "
                               f"{self.dense_dim()}")
        return self.transpose(0, 1)

    def transpose(self, dim0, dim1):
        sd, n = self.sparse_dim(), self.ndim
        dim0, dim1 = dim0 % n, dim1 % n
        if dim0 >= sd or dim1 >= sd:
            raise NotImplementedError("transpose of a sparse tensor's dense dims is not supported")
        order = list(range(sd))
        order[dim0], order[dim1] = order[dim1], order[dim0]
        shape = list(self._sp[2])
        shape[dim0], shape[dim1] = shape[dim1], shape[dim0]
        indices = self._sp[0].index_select(0, tensor(order, dtype=dtypes.int64, device=self.device))
        return SparseCOOTensor(indices, self._sp[1], shape, dim0 == dim1 and self._sp[3])

    @property
    def T(self):
        return self.t()

    # ------------------------------------------------------------------ arithmetic
    def _with_values(self, values):
        return SparseCOOTensor(self._sp[0], values, self._sp[2], self._sp[3])

    def __neg__(self):
        return self._with_values(-self._sp[1])

    def __mul__(self, other):
        if isinstance(other, SparseCOOTensor):
            raise NotImplementedError("sparse * sparse is not supported: densify one side with .to_dense()")
        if isinstance(other, Tensor):
            if tuple(other.shape) != self._sp[2]:
                raise RuntimeError(f"mul: a sparse tensor of size {list(self._sp[2])} and a dense tensor of size "
                                   f"{list(other.shape)}: sizes must match")
            sd = self.sparse_dim()
            picked = other.reshape((_prod(self._sp[2][:sd]),) + self._sp[2][sd:]).index_select(
                0, _linear(self._sp[0], self._sp[2][:sd]))
            return self._with_values(self._sp[1] * picked)
        return self._with_values(self._sp[1] * other)

    __rmul__ = __mul__

    def __truediv__(self, other):
        if isinstance(other, Tensor) and other.ndim:
            raise NotImplementedError("sparse / tensor is supported for a scalar or 0-d divisor only")
        return self._with_values(self._sp[1] / other)

    def __add__(self, other):
        return add(self, other)

    def __radd__(self, other):
        return add(other, self)

    def __sub__(self, other):
        return add(self, other, alpha=-1)

    def __rsub__(self, other):
        return add(other, self, alpha=-1)

    def add(self, other, alpha=1):
        return add(self, other, alpha=alpha)

    def mul(self, other):
        return self * other

    def __matmul__(self, other):
        return matmul(self, other)

    def __rmatmul__(self, other):
        return matmul(other, self)

    def mm(self, mat2):
        return mm(self, mat2)

    def matmul(self, other):
        return matmul(self, other)

    def sum(self, dim=None, keepdim=False, dtype=None):
        if keepdim:
            raise NotImplementedError("sum(keepdim=True) of a sparse tensor is not supported")
        return sparse_sum(self, dim, dtype=dtype)

    def __repr__(self):
        pad = " " * 7
        ind = repr(self._sp[0]).replace("\n", "\n" + pad + " " * 8)
        val = repr(self._sp[1]).replace("\n", "\n" + pad + " " * 7)
        extra = ""
        if self._sp[1].grad_fn is not None:
            extra = f",\n{pad}grad_fn=<{type(self._sp[1].grad_fn).__name__}>"
        elif self._sp[1].requires_grad:
            extra = ", requires_grad=True"
        dev = "" if self.device.type == "cpu" else f", device='{self.device.type}'"
        return (f"tensor(indices={ind},\n{pad}values={val},\n{pad}size={tuple(self._sp[2])}, nnz={self._nnz()}, "
                f"layout=torch.sparse_coo{dev}{extra})")

    __str__ = __repr__

    def __reduce__(self):
        return (_rebuild_sparse, (self._sp[0], self._sp[1], self._sp[2], self._sp[3]))

    def __deepcopy__(self, memo):
        import copy
        return SparseCOOTensor(copy.deepcopy(self._sp[0], memo), copy.deepcopy(self._sp[1], memo), self._sp[2],
                               self._sp[3])


def _rebuild_sparse(indices, values, shape, coalesced):
    return SparseCOOTensor(indices, values, shape, coalesced)


# ====================================================================== helpers on the device and the host
def _linear(indices, sparse_shape):
    """The row-major linear position of each entry (an int64 tensor [nnz], on the indices' device)."""
    strides = _strides(sparse_shape)
    lin = None
    for d, stride in enumerate(strides):
        row = indices[d]
        term = row if stride == 1 else row * stride
        lin = term if lin is None else lin + term
    return lin if lin is not None else zeros(indices.shape[1], dtype=dtypes.int64, device=indices.device)


def _cat(a, b, dim):
    """a and b joined along dim, by index_add into zeros (methods of the tensors: this module imports no op family,
    which import it back for their sparse operands); differentiable in both."""
    n, m = a.shape[dim], b.shape[dim]
    shape = list(a.shape)
    shape[dim] = n + m
    out = zeros(tuple(shape), dtype=a.dtype, device=a.device)
    return out.index_add(dim, arange(n, device=a.device), a).index_add(dim, arange(n, n + m, device=a.device), b)


def _coalesce_plan(indices, sparse_shape):
    """(unique indices [k, u] in lexicographic order, inverse [nnz]: the unique entry each one adds to, first [u]:
    the first entry of each unique index), computed on the host; the tensors on the indices' device."""
    device = indices.device
    nnz = indices.shape[1]
    strides = _strides(sparse_shape)
    rows = _host_rows(indices)
    np = _numpy()
    if np is not None and nnz:
        lin = np.zeros(nnz, dtype=np.int64)
        for row, stride in zip(rows, strides):
            lin += np.asarray(row, dtype=np.int64) * stride
        unique, first, inverse = np.unique(lin, return_index=True, return_inverse=True)
        unique, first, inverse = unique.tolist(), first.tolist(), inverse.reshape(-1).tolist()
    else:
        lin = [sum(row[i] * s for row, s in zip(rows, strides)) for i in range(nnz)]
        firsts = {}
        for i, v in enumerate(lin):
            firsts.setdefault(v, i)
        unique = sorted(firsts)
        where = {v: j for j, v in enumerate(unique)}
        inverse = [where[v] for v in lin]
        first = [firsts[v] for v in unique]
    unravelled = [[(v // s) % n for v in unique] for s, n in zip(strides, sparse_shape)]
    k = len(sparse_shape)
    out = tensor(unravelled, dtype=dtypes.int64, device=device) if unique else \
        zeros((k, 0), dtype=dtypes.int64, device=device)
    return (out, tensor(inverse, dtype=dtypes.int64, device=device) if inverse else
            zeros(0, dtype=dtypes.int64, device=device),
            tensor(first, dtype=dtypes.int64, device=device) if first else zeros(0, dtype=dtypes.int64, device=device))


def _check_indices(indices, shape, sd):
    """Every index in [0, size) of its dim: read back once (an index out of range would write outside a buffer)."""
    if not indices.shape[1]:
        return
    rows = _host_rows(indices)
    for d in range(sd):
        lo, hi = min(rows[d]), max(rows[d])
        if lo < 0:
            raise RuntimeError(f"found negative index {lo} for dim {d}")
        if hi >= shape[d]:
            raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is {shape[d]} but found index "
                               f"{hi}")


# ====================================================================== the public functions
def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory=False, requires_grad=False,
                      check_invariants=None, is_coalesced=None):
    """torch.sparse_coo_tensor: a sparse tensor of `values` (its first dim runs over the nnz entries) at
    `indices` ([sparse_dim, nnz], int64, or anything tensor() takes: lists, NumPy arrays). Without size, each
    sparse dim is one past its largest index. is_coalesced=True promises sorted unique indices."""
    if isinstance(values, Tensor):
        if values.is_sparse:
            raise TypeError("sparse_coo_tensor(): values must be a dense tensor")
        dev = devices.get(device) if device is not None else values.device
        values = values.to(device=dev, dtype=dtypes.to_dtype(dtype, values.dtype))
    else:
        dev = devices.get(device)
        values = tensor(values, dtype=dtypes.to_dtype(dtype), device=dev)
    indices = _as_index_tensor(indices, dev)
    if indices.ndim != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(indices.shape)}")
    if values.ndim == 0:
        raise RuntimeError("values must have at least one dimension (its first runs over the nnz entries), got a "
                           "0-d tensor")
    sd, nnz = indices.shape
    if values.shape[0] != nnz:
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: {nnz}, nnz from "
                           f"values: {values.shape[0]}")
    dense_shape = tuple(values.shape[1:])
    if size is None:
        if not nnz:
            raise RuntimeError("sparse_coo_tensor(): the size of a tensor without entries must be given")
        rows = _host_rows(indices)
        shape = tuple(max(r) + 1 for r in rows) + dense_shape
    else:
        shape = tuple(int(s) for s in size)
        if len(shape) != sd + len(dense_shape):
            raise RuntimeError(f"number of dimensions must be sparse_dim ({sd}) + dense_dim ({len(dense_shape)}), but "
                               f"got {len(shape)}")
        if shape[sd:] != dense_shape:
            raise RuntimeError(f"values has incorrect size, expected {[nnz] + list(shape[sd:])}, got "
                               f"{list(values.shape)}")
    _check_indices(indices, shape, sd)
    out = SparseCOOTensor(indices, values, shape, bool(is_coalesced))
    if requires_grad:
        out.requires_grad_(True)
    return out


def to_sparse(input, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """Tensor.to_sparse(): the nonzero entries of a dense tensor as a coalesced sparse COO tensor (its first
    sparse_dim dims sparse, default all; an entry of the rest counts when any of its values is nonzero).
    Differentiable: the values are gathered from the input."""
    if isinstance(input, SparseCOOTensor):
        return input.to_sparse(sparse_dim, layout=layout, blocksize=blocksize, dense_dim=dense_dim)
    if layout not in (None, sparse_coo) or blocksize is not None:
        raise NotImplementedError(f"to_sparse(layout={layout}): webgrad has sparse COO tensors only")
    shape = tuple(input.shape)
    sd = len(shape) if sparse_dim is None else int(sparse_dim)
    if dense_dim is not None:
        sd = len(shape) - int(dense_dim)
    if not 0 <= sd <= len(shape):
        raise RuntimeError(f"to_sparse: sparse_dim {sd} is out of range for a {len(shape)}-d tensor")
    if sd == 0:
        raise RuntimeError("to_sparse: sparse_dim must be at least 1 (a 0-d sparse tensor is not supported)")
    mask = input if sd == len(shape) else (input != 0).reshape(shape[:sd] + (-1,)).any(-1)
    indices = mask.nonzero().t().contiguous()  # [sd, nnz], row-major order: sorted and unique
    flat = input.reshape((_prod(shape[:sd]),) + shape[sd:])
    values = flat.index_select(0, _linear(indices, shape[:sd]))
    return SparseCOOTensor(indices, values, shape, True)


def to_dense(input, dtype=None):
    return input.to_dense(dtype) if isinstance(input, SparseCOOTensor) else input


def _dense_operand(t, op):
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}(): expected a Tensor, got {type(t).__name__}")
    return t


def mm(mat1, mat2):
    """torch.sparse.mm / torch.spmm / torch.mm with a sparse operand: sparse [m, k] @ dense [k, n] -> dense
    [m, n] (gradients to the sparse values and the dense operand), dense @ sparse likewise."""
    if isinstance(mat1, SparseCOOTensor) and isinstance(mat2, SparseCOOTensor):
        raise NotImplementedError("sparse @ sparse is not supported: densify one side with .to_dense()")
    if isinstance(mat2, SparseCOOTensor):  # dense @ sparse = (sparse.t() @ dense.t()).t()
        dense = _dense_operand(mat1, "mm")
        if dense.ndim != 2:
            raise RuntimeError(f"mm(): expected 2-D tensors, got shapes {list(dense.shape)} and {list(mat2.shape)}")
        return mm(mat2.t(), dense.t()).t()
    if not isinstance(mat1, SparseCOOTensor):
        raise TypeError("sparse.mm(): one operand must be a sparse COO tensor")
    dense = _dense_operand(mat2, "mm")
    if mat1.sparse_dim() != 2 or mat1.dense_dim() or dense.ndim != 2:
        raise RuntimeError(f"mm(): expected a 2-D sparse matrix and a 2-D dense one, got sizes {list(mat1.shape)} "
                           f"(sparse_dim {mat1.sparse_dim()}) and {list(dense.shape)}")
    m, k = mat1.shape
    if dense.shape[0] != k:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({m}x{k} and {dense.shape[0]}x{dense.shape[1]})")
    if mat1.dtype is not dense.dtype:
        raise RuntimeError(f"expected mat1 and mat2 to have the same dtype, but got: {mat1.dtype.name} != "
                           f"{dense.dtype.name}")
    if mat1.device != dense.device:
        raise RuntimeError(f"expected all tensors to be on the same device, but found {mat1.device.type} and "
                           f"{dense.device.type}")
    out = zeros((m, dense.shape[1]), dtype=dense.dtype, device=dense.device)
    if not mat1._nnz():
        return out
    indices, values = mat1._sp_indices, mat1._sp_values
    contributions = dense.index_select(0, indices[1]) * values.unsqueeze(1)
    return out.index_add(0, indices[0], contributions)


def matmul(input, other):
    """matmul / @ with a sparse operand: 2-D sparse @ 1-D or 2-D dense, and dense @ 2-D sparse."""
    if isinstance(input, SparseCOOTensor) and isinstance(other, Tensor) and not other.is_sparse and other.ndim == 1:
        return mm(input, other.unsqueeze(1)).squeeze(1)
    if isinstance(other, SparseCOOTensor) and isinstance(input, Tensor) and not input.is_sparse and input.ndim == 1:
        return mm(input.unsqueeze(0), other).squeeze(0)
    return mm(input, other)


def addmm(mat, mat1, mat2, *, beta=1, alpha=1):
    """torch.sparse.addmm: beta * mat + alpha * (mat1 @ mat2), mat1 sparse."""
    return beta * mat + alpha * mm(mat1, mat2)


def add(input, other, alpha=1):
    """input + alpha * other where either is sparse: sparse + sparse is sparse (the entries of both, uncoalesced);
    dense + sparse of the same size is dense; sparse + dense is refused, as torch's."""
    a_sparse, b_sparse = isinstance(input, SparseCOOTensor), isinstance(other, SparseCOOTensor)
    if a_sparse and not b_sparse:  # torch's rule, numbers included (a number would fill every entry)
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
    if not isinstance(input, Tensor):
        raise TypeError(f"add(): expected a Tensor, got {type(input).__name__}")
    if tuple(input.shape) != tuple(other.shape):
        raise RuntimeError(f"add: expected 'self' and 'other' to have same size, but self has size "
                           f"{list(input.shape)} while other has size {list(other.shape)}")
    dtype = dtypes.promote_types(input.dtype, other.dtype)
    if a_sparse and b_sparse:
        if input.sparse_dim() != other.sparse_dim():
            raise RuntimeError("add: sparse tensors of different sparse_dim")
        values = other._sp_values.to(dtype=dtype)
        return SparseCOOTensor(_cat(input._sp_indices, other._sp_indices, 1),
                               _cat(input._sp_values.to(dtype=dtype), values * alpha if alpha != 1 else values, 0),
                               input.shape, False)
    sparse, dense = other, input
    sd = sparse.sparse_dim()
    shape = tuple(dense.shape)
    base = dense.to(dtype=dtype)
    values = sparse._sp_values.to(dtype=dtype)
    if alpha != 1:
        values = values * alpha
    flat = base.reshape((_prod(shape[:sd]),) + shape[sd:])
    if sparse._nnz():
        flat = flat.index_add(0, _linear(sparse._sp_indices, shape[:sd]), values)
    return flat.reshape(shape)


def sparse_sum(input, dim=None, dtype=None):
    """torch.sparse.sum: over every dim, a 0-d dense tensor; over some dims, a sparse tensor of the rest (dense
    where only dense dims remain)."""
    if not isinstance(input, SparseCOOTensor):
        return input.sum() if dim is None else input.sum(dim)
    values = input._sp_values if dtype is None else input._sp_values.to(dtype=dtype)
    if dim is None:
        return values.sum()
    dims = [dim] if isinstance(dim, int) else list(dim)
    n, sd = input.ndim, input.sparse_dim()
    dims = sorted({d % n for d in dims})
    dense_dims = [d - sd + 1 for d in dims if d >= sd]
    if dense_dims:
        values = values.sum(dense_dims)
    kept = [d for d in range(sd) if d not in dims]
    shape = tuple(s for d, s in enumerate(input.shape) if d not in dims)
    if not kept:
        return values.sum(0)
    if len(kept) == sd:
        return SparseCOOTensor(input._sp_indices, values, shape, input.is_coalesced())
    indices = input._sp_indices.index_select(0, tensor(kept, dtype=dtypes.int64, device=input.device))
    return SparseCOOTensor(indices, values, shape, False).coalesce()


def FloatTensor(indices, values, size=None):
    """The legacy constructor torch.sparse.FloatTensor(indices, values, size) (float32 values)."""
    return sparse_coo_tensor(indices, values, size, dtype=dtypes.float32)


def DoubleTensor(indices, values, size=None):
    return sparse_coo_tensor(indices, values, size, dtype=dtypes.float64)


def LongTensor(indices, values, size=None):
    return sparse_coo_tensor(indices, values, size, dtype=dtypes.int64)
