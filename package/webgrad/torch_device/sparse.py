"""Sparse COO tensors on the webgpu device: ``torch.sparse_coo_tensor(..., device="webgpu")``, ``.to("webgpu")``,
and their products with dense tensors on the GPU.

    adj = torch.sparse_coo_tensor(edges, weights, (n, n)).to("webgpu")   # or dense.to_sparse() on the device
    out = torch.sparse.mm(adj, x)                                          # also torch.mm, torch.spmm, adj @ x

PyTorch builds a sparse tensor of a device through the SparsePrivateUse1 dispatch key, whose constructor only a
C++ kernel could make into a SparseTensorImpl. So a webgpu sparse tensor is a tensor subclass instead
(:class:`SparseTensor`, layout ``torch.sparse_coo``, device ``webgpu``) that holds its ``indices`` (int64
[sparse_dim, nnz]) and ``values`` ([nnz, *dense dims]) as plain webgpu tensors, and answers ATen ops in
``__torch_dispatch__``. Autograd sits above it, so the gradients are PyTorch's own formulas (those of ``mm``,
``to_dense``...) running on these ops.

The ops are compositions of dense kernels of the device, with nothing of the dense shape made where the result
is dense anyway:

- sparse @ dense: ``zeros(m, n).index_add_(0, rows, values[:, None] * dense.index_select(0, cols))``; dense @
  sparse the same on the transposes; ``addmm``, ``sparse.mm``, ``spmm`` and ``@`` reach the same kernel;
- ``to_dense``: the values ``index_add``-ed at their linear positions;
- ``coalesce``: the indices read back (one sync), sorted and made unique on the host; the values summed on the
  device by ``index_add``;
- ``dense.to_sparse()``: ``nonzero`` (data-dependent: a sync), then the values gathered;
- ``t``/``transpose`` of sparse dims, negation, products and quotients by scalars, sums, sparse + sparse
  (indices concatenated), dense + sparse (``index_add``), ``dense.sparse_mask(sparse)``, ``detach``, ``clone``,
  ``.cpu()``, dtype casts, and the metadata (``_nnz``, ``indices``, ``values``, ``is_coalesced``...).

Any other op runs as the dense fallback does (fallback.py): on the CPU, with one warning naming it, or a
NotImplementedError in strict mode (except in the backward pass, where an error would abort the process: there
it runs on the CPU with a warning; see SparseTensor.__torch_dispatch__). A tensor made from user indices has them checked against its size (one
read-back), as webgrad checks its own: an index out of range is PyTorch's error, never a write outside a buffer.
"""

import math
import warnings

import torch

from webgrad._view import View

from . import fallback
from . import storage as st
from .storage import DEVICE

aten = torch.ops.aten
_OPS = {}  # OpOverload -> handler(*args, **kwargs)


def _handles(*ops):
    def deco(fn):
        for op in ops:
            _OPS[op] = fn
        return fn
    return deco


class SparseTensor(torch.Tensor):
    """A sparse COO tensor on the webgpu device (see the module doc). Made by PyTorch's own constructors and
    conversions, never directly."""

    @staticmethod
    def __new__(cls, indices, values, size, coalesced):
        out = torch.Tensor._make_wrapper_subclass(cls, size, dtype=values.dtype, layout=torch.sparse_coo,
                                                  device=DEVICE)
        out._sp_indices, out._sp_values, out._sp_coalesced = indices, values, bool(coalesced)
        return out

    def __repr__(self, *, tensor_contents=None):
        # PyTorch's layout of a sparse tensor, with the prefix (and so the indent) of a plain tensor
        first, *rest = torch._tensor_str._str(self, tensor_contents=tensor_contents).split("\n")
        cut = len(type(self).__name__) - len("tensor")
        return "\n".join(["tensor(" + first[cut + len("tensor("):]] + [line[cut:] for line in rest])

    def __reduce_ex__(self, protocol):  # (pickled as the CPU tensor it holds, moved back on load)
        return _rebuild, (self.cpu(),)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        try:
            return _dispatch(func, args, kwargs or {})
        except Exception as error:
            if torch._C._current_graph_task_id() == -1:
                raise
            # In the backward pass any error leaving __torch_dispatch__ aborts the process: PyTorch unwinds
            # through the device's stream guard, which calls into Python with the error still pending. So
            # strict mode lets the op run on the CPU there, saying so, and any other error is printed before
            # it propagates.
            if isinstance(error, NotImplementedError) and fallback.get_fallback() == "error":
                warnings.warn(f"webgpu: {func} on a sparse tensor runs on the CPU in the backward pass despite "
                              f"strict mode (an error there would abort the process): {error}", stacklevel=2)
                with fallback.strict(False):
                    return _dispatch(func, args, kwargs or {})
            warnings.warn(f"webgpu: {func} on a sparse tensor failed in the backward pass: "
                          f"{type(error).__name__}: {error}", stacklevel=2)
            raise


def _dispatch(func, args, kwargs):
    handler = _OPS.get(func)
    if handler is not None:
        out = handler(*args, **kwargs)
        if out is not NotImplemented:
            return out
    return _on_cpu(func, args, kwargs)


def _rebuild(cpu):
    return cpu.to(DEVICE)


def _make(indices, values, size, coalesced=False):
    return SparseTensor(indices, values, tuple(size), coalesced)


def _sparse_dims(t):
    return t._sp_indices.shape[0]


def _sparse_shape(t):
    return tuple(t.shape[:_sparse_dims(t)])


def _linear(indices, shape):
    """Each entry's position in the row-major order of the sparse dims `shape` (int64 [nnz])."""
    if indices.shape[0] == 1:
        return indices[0]
    weights = torch.tensor(View.contiguous_strides(tuple(shape)), dtype=torch.int64).to(indices.device)
    return (indices * weights[:, None]).sum(0)


# ------------------------------------------------------------------ construction and moves
def _check_indices(indices, size, sparse_dim):
    """PyTorch's errors for indices that do not fit `size` (one read-back of their bounds)."""
    if indices.dim() != 2 or indices.shape[0] != sparse_dim:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(indices.shape)}")
    if indices.shape[1] == 0:
        return
    bounds = torch.stack([indices.amin(1), indices.amax(1)]).cpu()
    for d in range(sparse_dim):
        low, high = int(bounds[0, d]), int(bounds[1, d])
        if low < 0:
            raise RuntimeError(f"found negative index {low} for dim {d}")
        if high >= size[d]:
            raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is {size[d]} but found "
                               f"index {high}")


def _with_dims_and_tensors(sparse_dim, dense_dim, size, indices, values, *, dtype=None, layout=None, device=None,
                           pin_memory=None, is_coalesced=None):
    """aten._sparse_coo_tensor_with_dims_and_tensors at SparsePrivateUse1: every webgpu sparse tensor PyTorch
    makes (torch.sparse_coo_tensor, .to("webgpu") of a CPU one) comes through here."""
    if indices.device.type != DEVICE.type or values.device.type != DEVICE.type:
        raise RuntimeError(f"sparse_coo_tensor: indices and values must be on {DEVICE.type}, found "
                           f"{indices.device} and {values.device}")
    if dtype is not None and values.dtype != dtype:
        values = values.to(dtype)
    if values.dim() != dense_dim + 1:
        raise RuntimeError(f"values has incorrect number of dimensions: expected {dense_dim + 1}, "
                           f"got {values.dim()}")
    _check_indices(indices, size, sparse_dim)
    return _make(indices.to(torch.int64), values, size, bool(is_coalesced))


def _empty_with_dims(sparse_dim, dense_dim, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    """aten._sparse_coo_tensor_with_dims: an empty sparse tensor (torch.sparse_coo_tensor(size), zeros_like)."""
    dtype = dtype if dtype is not None else torch.get_default_dtype()
    indices = torch.zeros(sparse_dim, 0, dtype=torch.int64, device=DEVICE)
    values = torch.zeros(0, *size[sparse_dim:sparse_dim + dense_dim], dtype=dtype, device=DEVICE)
    return _make(indices, values, size, True)


_LIB = torch.library.Library("aten", "IMPL")
_LIB.impl("_sparse_coo_tensor_with_dims_and_tensors", _with_dims_and_tensors, "SparsePrivateUse1")
_LIB.impl("_sparse_coo_tensor_with_dims", _empty_with_dims, "SparsePrivateUse1")


def to_cpu(t):
    """The CPU sparse tensor holding `t`'s entries."""
    return torch.sparse_coo_tensor(t._sp_indices.cpu(), t._sp_values.cpu(), t.shape,
                                   is_coalesced=t._sp_coalesced)


@_handles(aten._to_copy.default)
def _to_copy(self, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None):
    if layout not in (None, torch.sparse_coo):
        return NotImplemented
    values = self._sp_values if dtype is None else self._sp_values.to(dtype)
    if device is not None and torch.device(device).type != DEVICE.type:
        moved = torch.sparse_coo_tensor(self._sp_indices.cpu(), values.cpu(), self.shape,
                                        is_coalesced=self._sp_coalesced)
        return moved if torch.device(device).type == "cpu" else moved.to(device)
    return _make(self._sp_indices.clone(), values.clone() if values is self._sp_values else values, self.shape,
                 self._sp_coalesced)


@_handles(aten.clone.default)
def _clone(self, memory_format=None):
    return _make(self._sp_indices.clone(), self._sp_values.clone(), self.shape, self._sp_coalesced)


@_handles(aten.detach.default, aten.alias.default)
def _detach(self):
    return _make(self._sp_indices, self._sp_values, self.shape, self._sp_coalesced)


@_handles(aten._to_dense.default)
def _to_dense(self, dtype=None, masked_grad=None):
    values = self._sp_values if dtype is None else self._sp_values.to(dtype)
    shape = tuple(self.shape)
    sparse = _sparse_shape(self)
    flat = torch.zeros((math.prod(sparse),) + shape[len(sparse):], dtype=values.dtype, device=DEVICE)
    if values.shape[0]:
        flat.index_add_(0, _linear(self._sp_indices, sparse), values)
    return flat.view(shape)


@_handles(aten._to_sparse.default, aten._to_sparse.sparse_dim)
def _dense_to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """dense.to_sparse() on the device: the positions where any element of a sparse index is nonzero."""
    if layout not in (None, torch.sparse_coo) or blocksize is not None:
        return NotImplemented
    if isinstance(self, SparseTensor):
        return self
    sparse_dim = self.dim() - (dense_dim or 0) if sparse_dim is None else sparse_dim
    shape = tuple(self.shape)
    nonzero = self != 0
    if sparse_dim < self.dim():
        nonzero = nonzero.flatten(sparse_dim).any(-1)
    indices = nonzero.nonzero().t().contiguous()
    values = self.reshape((math.prod(shape[:sparse_dim]),) + shape[sparse_dim:]).index_select(
        0, _linear(indices, shape[:sparse_dim]))
    return _make(indices, values, shape, True)


_LIB.impl("_to_sparse", lambda self, *, layout=None, blocksize=None, dense_dim=None: _dense_to_sparse(
    self, layout=layout, blocksize=blocksize, dense_dim=dense_dim), "PrivateUse1")
_LIB.impl("_to_sparse.sparse_dim", lambda self, sparse_dim: _dense_to_sparse(self, sparse_dim), "PrivateUse1")


# ------------------------------------------------------------------ what a sparse tensor is
@_handles(aten._nnz.default)
def _nnz(self):
    return self._sp_values.shape[0]


@_handles(aten.sparse_dim.default)
def _sparse_dim(self):
    return _sparse_dims(self)


@_handles(aten.dense_dim.default)
def _dense_dim(self):
    return self._sp_values.dim() - 1


@_handles(aten.is_coalesced.default)
def _is_coalesced(self):
    return self._sp_coalesced


@_handles(aten._coalesced_.default)
def _set_coalesced(self, coalesced):
    self._sp_coalesced = bool(coalesced)
    return self


@_handles(aten._indices.default)
def _raw_indices(self):
    return self._sp_indices


@_handles(aten._values.default)
def _raw_values(self):
    return self._sp_values


def _checked(name, part):
    def read(self):
        if not self._sp_coalesced:
            raise RuntimeError(f"Cannot get {name} on an uncoalesced tensor, please call .coalesce() first")
        return getattr(self, part)
    return read


_handles(aten.indices.default)(_checked("indices", "_sp_indices"))
_handles(aten.values.default)(_checked("values", "_sp_values"))


@_handles(aten.coalesce.default, aten._coalesce.default)
def _coalesce(self):
    """Unique sorted indices, duplicates summed: the indices sorted on the host (one read-back), the values
    added up on the device."""
    if self._sp_coalesced:
        return self
    sparse = _sparse_shape(self)
    linear = _linear(self._sp_indices, sparse).cpu()
    unique, inverse = torch.unique(linear, sorted=True, return_inverse=True)
    strides = View.contiguous_strides(sparse)
    indices = torch.stack([unique // s % n for s, n in zip(strides, sparse)]) if sparse else \
        torch.zeros(0, unique.numel(), dtype=torch.int64)
    values = self._sp_values
    summed = torch.zeros((unique.numel(),) + tuple(values.shape[1:]), dtype=values.dtype, device=DEVICE)
    if values.shape[0]:
        summed.index_add_(0, inverse.to(DEVICE), values)
    return _make(indices.to(DEVICE), summed, self.shape, True)


# ------------------------------------------------------------------ arithmetic
def _transposed(self, dim0, dim1):
    n = self.dim()
    dim0, dim1 = dim0 % n, dim1 % n
    sd = _sparse_dims(self)
    if dim0 >= sd or dim1 >= sd:
        return NotImplemented  # (a dense dim: the CPU's)
    order = list(range(sd))
    order[dim0], order[dim1] = order[dim1], order[dim0]
    shape = list(self.shape)
    shape[dim0], shape[dim1] = shape[dim1], shape[dim0]
    indices = self._sp_indices.index_select(0, torch.tensor(order).to(DEVICE))
    return _make(indices, self._sp_values, shape, False)


_handles(aten.transpose.int)(_transposed)
_handles(aten.t.default)(lambda self: _transposed(self, 0, 1) if self.dim() == 2 else NotImplemented)


@_handles(aten.neg.default)
def _neg(self):
    return _make(self._sp_indices, -self._sp_values, self.shape, self._sp_coalesced)


def _is_scalar(x):
    return not isinstance(x, torch.Tensor) or (x.dim() == 0 and not isinstance(x, SparseTensor))


def _scaled(values_op):
    def handler(a, b):
        if not isinstance(a, SparseTensor) or not _is_scalar(b):
            return NotImplemented
        if isinstance(b, torch.Tensor) and b.device.type != DEVICE.type:
            b = b.item()
        return _make(a._sp_indices, values_op(a._sp_values, b), a.shape, a._sp_coalesced)
    return handler


_handles(aten.mul.Tensor, aten.mul.Scalar)(_scaled(torch.mul))
_handles(aten.div.Tensor, aten.div.Scalar)(_scaled(torch.div))


@_handles(aten.add.Tensor)
def _add(a, b, alpha=1):
    if isinstance(a, SparseTensor) and isinstance(b, SparseTensor):
        if a.shape != b.shape or a.dense_dim() != b.dense_dim():
            return NotImplemented  # (PyTorch's error, from the CPU)
        values = torch.cat([a._sp_values, b._sp_values * alpha if alpha != 1 else b._sp_values])
        return _make(torch.cat([a._sp_indices, b._sp_indices], 1), values, a.shape, False)
    if not isinstance(a, SparseTensor) and isinstance(b, SparseTensor) and a.device.type == DEVICE.type \
            and a.shape == b.shape and a.dtype == b.dtype:
        sparse = _sparse_shape(b)
        out = a.clone().reshape((math.prod(sparse),) + tuple(a.shape[len(sparse):]))
        if b._sp_values.shape[0]:
            out.index_add_(0, _linear(b._sp_indices, sparse), b._sp_values, alpha=alpha)
        return out.view(a.shape)
    return NotImplemented


@_handles(aten.sum.default)
def _sum(self, dtype=None):
    return self._sp_values.sum(dtype=dtype)


@_handles(aten.sparse_mask.default)
def _sparse_mask(self, mask):
    """x.sparse_mask(sparse): x's values at the mask's indices (what a sparse tensor's gradient is). A dense x is
    gathered from; a sparse one is coalesced and its entries found by a search on the host (one read-back)."""
    if not isinstance(mask, SparseTensor) or self.device.type != DEVICE.type or self.shape != mask.shape \
            or _sparse_dims(mask) != (_sparse_dims(self) if isinstance(self, SparseTensor) else _sparse_dims(mask)):
        return NotImplemented
    sparse = _sparse_shape(mask)
    wanted = _linear(mask._sp_indices, sparse)
    if not isinstance(self, SparseTensor):
        flat = self.reshape((math.prod(sparse),) + tuple(self.shape[len(sparse):]))
        return _make(mask._sp_indices, flat.index_select(0, wanted), mask.shape, mask._sp_coalesced)
    have = _coalesce(self)
    have_linear, wanted = _linear(have._sp_indices, sparse).cpu(), wanted.cpu()
    at = torch.searchsorted(have_linear, wanted).clamp(max=max(have_linear.numel() - 1, 0))
    found = have_linear[at] == wanted if have_linear.numel() else torch.zeros_like(wanted, dtype=torch.bool)
    values = have._sp_values.index_select(0, at.to(DEVICE)) if have_linear.numel() else torch.zeros(
        (wanted.numel(),) + tuple(have._sp_values.shape[1:]), dtype=self.dtype, device=DEVICE)
    keep = found.to(DEVICE).view((-1,) + (1,) * (values.dim() - 1))
    return _make(mask._sp_indices, values * keep, mask.shape, mask._sp_coalesced)


# ------------------------------------------------------------------ products with dense tensors
def _check_mm(a, b):
    if a.dim() != 2 or b.dim() != 2:
        return False
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
                           f"{b.shape[0]}x{b.shape[1]})")
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected mat1 and mat2 to have the same dtype, but got: {a.dtype} != {b.dtype}")
    return True


def _sparse_dense(sparse, dense):
    """sparse [m, k] (2 sparse dims) @ dense [k, n] -> dense [m, n]: each entry's row of the dense operand,
    scaled, added into its output row."""
    rows, cols = sparse._sp_indices[0], sparse._sp_indices[1]
    out = torch.zeros(sparse.shape[0], dense.shape[1], dtype=dense.dtype, device=DEVICE)
    if rows.shape[0]:
        out.index_add_(0, rows, dense.index_select(0, cols) * sparse._sp_values[:, None])
    return out


def _product(a, b):
    """a @ b for one sparse and one dense webgpu matrix; NotImplemented for other operands."""
    if not _check_mm(a, b):
        return NotImplemented
    if isinstance(a, SparseTensor) and not isinstance(b, SparseTensor) and a.dense_dim() == 0:
        return _sparse_dense(a, b) if b.device.type == DEVICE.type else NotImplemented
    if isinstance(b, SparseTensor) and not isinstance(a, SparseTensor) and b.dense_dim() == 0:
        if a.device.type != DEVICE.type:
            return NotImplemented
        return _sparse_dense(_transposed(b, 0, 1), a.t()).t().contiguous()
    return NotImplemented


@_handles(aten.mm.default, aten._sparse_mm.default)
def _mm(a, b):
    return _product(a, b)


@_handles(aten.addmm.default, aten._sparse_addmm.default)
def _addmm(input, a, b, beta=1, alpha=1):
    product = _product(a, b)
    if product is NotImplemented or isinstance(input, SparseTensor):
        return NotImplemented
    if alpha != 1:
        product = product * alpha
    return product if beta == 0 else product + (input * beta if beta != 1 else input)


# ------------------------------------------------------------------ everything else: on the CPU
def _on_cpu(func, args, kwargs):
    """An op the handlers do not cover, as the dense fallback runs one: sparse arguments as CPU sparse tensors,
    dense ones read back, the results (sparse or dense) moved back to the device. In-place ops on a sparse
    argument take the CPU result's entries."""
    name = str(func)
    fallback.note_fallback(name, "sparse")

    def down(a):
        if isinstance(a, SparseTensor):
            return to_cpu(a)
        if isinstance(a, torch.Tensor) and a.device.type == DEVICE.type:
            return st.to_cpu(a)
        if isinstance(a, (list, tuple)):
            return type(a)(down(x) for x in a)
        return a

    cpu_args, cpu_kwargs = down(list(args)), {k: down(v) for k, v in kwargs.items()}
    if "device" in cpu_kwargs and cpu_kwargs["device"] is not None and \
            torch.device(cpu_kwargs["device"]).type == DEVICE.type:
        cpu_kwargs["device"] = torch.device("cpu")
    out = func(*cpu_args, **cpu_kwargs)
    mutated = [a for i, a in enumerate(func._schema.arguments)
               if a.alias_info is not None and a.alias_info.is_write and i < len(args)]
    for arg in mutated:
        target, result = args[func._schema.arguments.index(arg)], cpu_args[func._schema.arguments.index(arg)]
        if isinstance(target, SparseTensor):
            back = result.to(DEVICE)
            target._sp_indices, target._sp_values = back._sp_indices, back._sp_values
            target._sp_coalesced = back._sp_coalesced
        elif isinstance(target, torch.Tensor) and target.device.type == DEVICE.type:
            with torch.no_grad():
                target.copy_(result)
    if mutated and len(func._schema.returns) == 1:
        return args[func._schema.arguments.index(mutated[0])]

    def up(value):
        if isinstance(value, torch.Tensor):
            return value.to(DEVICE) if value.is_sparse else st.from_cpu(value)
        if isinstance(value, (list, tuple)):
            return type(value)(up(v) for v in value)
        return value
    return up(out)
