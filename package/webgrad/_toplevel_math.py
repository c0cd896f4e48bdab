"""torch.* math and utility functions written as compositions of webgrad's ops: gcd and lcm, unravel_index,
can_cast, asarray, the deprecated norms and chain_matmul, the *_copy forms of views, the poisson and binomial
samplers, and the small predicates (is_signed, isreal, is_same_size, ...)."""

import warnings

from . import dtypes
from ._autograd import is_grad_enabled, no_grad, record
from ._tensor import Tensor, UntypedStorage, from_numpy, tensor, zeros_like
from .ops.elementwise import where


def _tensor_arg(value, op, name="input"):
    if not isinstance(value, Tensor):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(value).__name__}")
    return value


# ======================================================== gcd and lcm
def _integers(input, other, op):
    _tensor_arg(input, op)
    _tensor_arg(other, op, "other")
    for t in (input, other):
        if t.dtype.is_floating or t.dtype.is_complex or t.dtype is dtypes.bool_:
            raise NotImplementedError(f'"{op}" not implemented for \'{t.dtype.name}\': it takes integer tensors')
    kind = dtypes.promote_types(input.dtype, other.dtype)
    return input.to(kind), other.to(kind)


def gcd(input, other):
    """The greatest common divisor of each pair (non-negative; gcd(0, 0) = 0). Euclid's algorithm on whole tensors:
    each round replaces (a, b) by (b, a mod b) where b is non-zero; the rounds stop once every b is zero, at most
    about 92 rounds for int64 (the host reads one bool per round)."""
    a, b = _integers(input, other, "gcd")
    a, b = a.abs(), b.abs()
    while bool((b != 0).any().item()):
        nonzero = b != 0
        rest = a % where(nonzero, b, 1)
        a, b = where(nonzero, b, a), where(nonzero, rest, 0)
    return a + zeros_like(b)  # the broadcast shape, a tensor of its own


def lcm(input, other):
    """The least common multiple of each pair (non-negative; 0 where either is 0)."""
    a, b = _integers(input, other, "lcm")
    divisor = gcd(a, b)
    return ((a // where(divisor == 0, 1, divisor)) * b).abs()


def gcd_(input, other):
    return input.copy_(gcd(input, other))


def lcm_(input, other):
    return input.copy_(lcm(input, other))


# ========================================================== predicates
def is_signed(input):
    return _tensor_arg(input, "is_signed").dtype.is_signed


def isreal(input):
    """True where the element has no imaginary part (every element of a real tensor)."""
    _tensor_arg(input, "isreal")
    if input.dtype.is_complex:
        return input.imag == 0
    return (input == input) | (input != input)  # True everywhere, NaN included, on the input's device


def is_same_size(input, other):
    return tuple(_tensor_arg(input, "is_same_size").shape) == tuple(_tensor_arg(other, "is_same_size", "other").shape)


def is_inference(input):
    """Whether the tensor was made in inference mode. webgrad's inference_mode has no_grad's semantics and makes
    ordinary tensors, so this is False."""
    _tensor_arg(input, "is_inference")
    return False


def is_distributed(input):
    _tensor_arg(input, "is_distributed")
    return False


def get_device(input):
    """-1 for a CPU tensor, as PyTorch's; 0 for a WebGPU tensor (webgrad has one WebGPU device)."""
    return -1 if _tensor_arg(input, "get_device").device.type == "cpu" else 0


def is_storage(obj):
    return isinstance(obj, UntypedStorage)


def typename(obj):
    """A name for obj's type, as torch.typename: a tensor's legacy type ('torch.FloatTensor'), else module.qualname."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module, qualname = obj.__class__.__module__ or "", obj.__class__.__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


def can_cast(from_, to):
    """Whether torch's casting rules allow from_ -> to without going down a category (complex > floating > integral
    > bool)."""
    for name, value in (("from_", from_), ("to", to)):
        if not isinstance(value, dtypes.DType):
            raise TypeError(f"can_cast(): argument '{name}' must be torch.dtype, not {type(value).__name__}")

    def rank(d):
        return 3 if d.is_complex else 2 if d.is_floating else 0 if d is dtypes.bool_ else 1
    return rank(from_) <= rank(to)


# ====================================================== index arithmetic
def unravel_index(indices, shape):
    """The coordinates of flat indices into an array of `shape` (a tuple of int64 tensors shaped as indices), as
    torch.unravel_index; indices wrap modulo the element count, as PyTorch's do."""
    if not isinstance(indices, Tensor):
        raise TypeError(f"unravel_index(): expected 'indices' to be a Tensor, got {type(indices).__name__}")
    if indices.dtype.is_floating or indices.dtype.is_complex or indices.dtype is dtypes.bool_:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(not isinstance(s, int) or isinstance(s, bool) for s in shape):
        raise TypeError(f"expected 'shape' to be int or sequence of ints, but got {shape!r}")
    if any(s < 0 for s in shape):
        raise ValueError("'shape' cannot have negative values, but got " + str(tuple(shape)))
    total = 1
    for s in shape:
        total *= s
    flat = indices.long() % max(total, 1)
    coords, stride = [], total
    for s in shape:
        stride //= max(s, 1)
        coords.append((flat // max(stride, 1)) % max(s, 1))
    return tuple(coords)


# =================================================== deprecated matrix helpers
def adjoint(input):
    """The conjugate transpose of the last two dims, as torch.adjoint."""
    if _tensor_arg(input, "adjoint").ndim < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of matrices. Got "
                           f"{input.ndim}-D tensor.")
    out = input.transpose(-2, -1)
    return out.conj() if input.dtype.is_complex else out


def chain_matmul(*matrices, out=None):
    """The product of 2-D matrices left to right, as the deprecated torch.chain_matmul (linalg.multi_dot's)."""
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
                  "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than multiple "
                  "parameters.", UserWarning, stacklevel=2)
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for m in matrices:
        if _tensor_arg(m, "chain_matmul", "matrices").ndim != 2:
            raise RuntimeError(f"Tensor dimension is {m.ndim}, expected 2 instead.")
    from .linalg import multi_dot
    result = matrices[0].clone() if len(matrices) == 1 else multi_dot(list(matrices))
    return result if out is None else out.copy_(result)


def frobenius_norm(input, dim, keepdim=False):
    """sqrt of the sum of squares over `dim` (at most two dims), as the deprecated torch.frobenius_norm."""
    warnings.warn("at::frobenius_norm is deprecated and it is just left for JIT compatibility. It will be removed in "
                  "a future PyTorch release. Please use `linalg.vector_norm(A, 2., dim, keepdim)` instead",
                  UserWarning, stacklevel=2)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) > 2:
        raise RuntimeError(f"Expected at most 2 dimensions, but got {len(dims)} dimensions instead.")
    from .linalg import vector_norm
    return vector_norm(input, 2.0, dims, keepdim)


def nuclear_norm(input, dim=None, keepdim=False):
    """The sum of singular values over two dims (the last two by default), as the deprecated torch.nuclear_norm:
    nuclear_norm(input, keepdim=False) or nuclear_norm(input, dim, keepdim=False)."""
    warnings.warn("at::nuclear_norm is deprecated and it is just left for JIT compatibility. It will be removed in a "
                  "future PyTorch release. Please use `linalg.matrix_norm(A, 'nuc', dim, keepdim)` instead",
                  UserWarning, stacklevel=2)
    if isinstance(dim, bool):  # nuclear_norm(input, keepdim)
        dim, keepdim = None, dim
    dims = (-2, -1) if dim is None else tuple(dim)
    if len(dims) != 2:
        raise RuntimeError(f"nuclear_norm requires a 'dim' argument of size 2. Got 'dim' of size {len(dims)}.")
    from .linalg import matrix_norm
    return matrix_norm(input, "nuc", dims, keepdim)


# ========================================================= detach, *_copy
def detach(input):
    return _tensor_arg(input, "detach").detach()


def detach_(input):
    return _tensor_arg(input, "detach_").detach_()


def detach_copy(input):
    """A detached copy of its own storage (PyTorch's has no gradient formula either)."""
    return _tensor_arg(input, "detach_copy").detach().clone()


def select_copy(input, dim, index):
    return _tensor_arg(input, "select_copy").select(dim, index).clone()


def slice_copy(input, dim=0, start=None, end=None, step=1):
    """input[start:end:step] along dim, in a tensor of its own, as torch.slice_copy."""
    _tensor_arg(input, "slice_copy")
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    index = [slice(None)] * input.ndim
    index[dim] = slice(start, end, step)
    return input[tuple(index)].clone()


def split_copy(input, split_size, dim=0):
    if not isinstance(split_size, int) or isinstance(split_size, bool):
        raise TypeError(f"split_copy(): argument 'split_size' (position 2) must be int, not "
                        f"{type(split_size).__name__}")
    return tuple(piece.clone() for piece in _tensor_arg(input, "split_copy").split(split_size, dim))


def view_as_real_copy(input):
    from . import view_as_real
    return view_as_real(input).clone()


def view_as_complex_copy(input):
    from . import view_as_complex
    return view_as_complex(input).clone()


# ===================================================== in-place forms
def addmv_(input, mat, vec, *, beta=1, alpha=1):
    return input.addmv_(mat, vec, beta=beta, alpha=alpha)


def as_strided_(input, size, stride, storage_offset=None):
    """Gives input the shape `size` and the strides `stride` over its own storage, starting at storage_offset (its
    current offset by default), and returns it, as torch.as_strided_. The window must lie inside the storage. A
    tensor that takes part in autograd is refused (webgrad records no in-place restriding in the graph)."""
    from ._view import View
    _tensor_arg(input, "as_strided_")
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(size)} != {len(stride)}")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got strides: {list(stride)}")
    if input.requires_grad and is_grad_enabled():
        raise RuntimeError("as_strided_(): cannot restride a tensor that requires grad in place (use as_strided)")
    v = input._view
    offset = v.offset if storage_offset is None else int(storage_offset)
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
    needed = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1 if all(size) else 0
    available = input.untyped_storage().nbytes() // input.dtype.itemsize
    if needed > available:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, and "
                           f"itemsize {input.dtype.itemsize} requiring a storage size of "
                           f"{needed * input.dtype.itemsize} are out of bounds for storage of size "
                           f"{available * input.dtype.itemsize}")
    input._view = View(v.storage, size, stride, offset, v.dtype)
    return input

def conj_physical_(input):
    """Conjugates a complex tensor in place (a real tensor is its own conjugate) and returns it."""
    if _tensor_arg(input, "conj_physical_").dtype.is_complex:
        input.copy_(input.conj())
    return input


# =============================================================== samplers
def _sampled(out, inputs):
    """PyTorch's samplers have a zero gradient in their parameters: record one, so backward through a sample works."""
    return record(out, "PoissonBackward0", inputs, lambda g: tuple(None if t is None else zeros_like(t)
                                                                   for t in inputs))


def poisson(input, generator=None):
    """One Poisson draw per element at rate `input`, as torch.poisson (float32 and float64 rates)."""
    if generator is not None:
        raise NotImplementedError("poisson(): a generator argument is not supported; webgrad.manual_seed seeds it")
    if not _tensor_arg(input, "poisson").dtype.is_floating:
        raise NotImplementedError(f'"poisson" not implemented for \'{input.dtype.name}\': rates must be floating')
    with no_grad():
        if input.numel() and bool((input < 0).any().item()):
            raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
        from .distributions import Poisson
        out = Poisson(input.detach(), validate_args=False).sample()
    return _sampled(out, (input,))


def binomial(count, prob, generator=None):
    """One Binomial(count, prob) draw per element, as torch.binomial (floating count and prob)."""
    if generator is not None:
        raise NotImplementedError("binomial(): a generator argument is not supported; webgrad.manual_seed seeds it")
    for name, t in (("count", count), ("prob", prob)):
        if not _tensor_arg(t, "binomial", name).dtype.is_floating:
            raise ValueError(f"binomial only supports floating-point dtypes for {name}, got: {t.dtype.name}")
    with no_grad():
        from .distributions import Binomial
        out = Binomial(count.detach(), probs=prob.detach().clamp(0, 1), validate_args=False).sample()
    return _sampled(out, (count, prob))


# ================================================================= asarray
def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """A tensor from obj, as torch.asarray: a tensor or NumPy array is shared (no copy) when its dtype and device
    already match and copy is not True; copy=False raises ValueError where sharing is impossible; anything else
    (lists, scalars) is converted as torch.tensor would."""
    import numpy as np
    from .devices import device as to_device
    want_dtype = None if dtype is None else dtypes.to_dtype(dtype)
    want_device = None if device is None else to_device(device)
    if isinstance(obj, np.ndarray) and not copy:
        if obj.dtype.kind in "fiub" and obj.strides and min(obj.strides) >= 0 or obj.ndim == 0:
            shared = from_numpy(obj)
            obj = shared  # shares the array's memory; the tensor rules below decide whether a copy is needed
    if isinstance(obj, Tensor):
        same_dtype = want_dtype is None or want_dtype is obj.dtype
        same_device = want_device is None or want_device == obj.device
        if copy is False and not same_dtype:
            raise ValueError(f"can't alias tensor with dtype '{obj.dtype.name}' into dtype '{want_dtype.name}'.")
        if copy is False and not same_device:
            raise ValueError(f"can't alias tensor on device '{obj.device}' into device '{want_device}'.")
        out = obj.to(device=want_device, dtype=want_dtype)
        if copy and out is obj:
            out = obj.clone()
        if requires_grad:
            out.requires_grad_(True)
        return out
    if copy is False:
        raise ValueError(f"can't alias an object of type {type(obj).__name__} without copying it")
    return tensor(obj, dtype=want_dtype, device=want_device, requires_grad=requires_grad)


FUNCTIONS = {name: globals()[name] for name in (
    "gcd", "gcd_", "lcm", "lcm_", "is_signed", "isreal", "is_same_size", "is_inference", "unravel_index", "can_cast",
    "asarray", "typename", "adjoint", "chain_matmul", "frobenius_norm", "nuclear_norm", "detach", "detach_",
    "poisson", "binomial", "addmv_", "as_strided_", "conj_physical_", "select_copy", "slice_copy", "split_copy",
    "detach_copy", "view_as_real_copy", "view_as_complex_copy", "get_device", "is_storage",
    "is_distributed")}
