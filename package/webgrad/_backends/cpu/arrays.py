"""NumPy arrays over CPU storages: the helpers every CPU kernel shares.

Storages are flat 1-D NumPy arrays; a View becomes an `as_strided` window onto one. NumPy is optional for
webgrad as a whole: this package is imported only when the CPU device is used.
"""

try:
    import numpy as np
except ImportError:  # pragma: no cover - exercised by the no-NumPy test in a subprocess
    np = None

from ... import _bounds, dtypes

NP_DTYPES = {}  # (empty without NumPy: the package still imports, and CPUBackend() says what is missing)
if np is not None:
    NP_DTYPES = {dtypes.float16: np.float16, dtypes.float32: np.float32, dtypes.float64: np.float64,
                 dtypes.int64: np.int64, dtypes.int32: np.int32, dtypes.uint8: np.uint8, dtypes.bool_: np.bool_,
                 dtypes.int16: np.int16, dtypes.int8: np.int8,
                 dtypes.bfloat16: np.float32}  # bfloat16: float32 words holding bfloat16 values (webgrad/dtypes.py)


def require_numpy():
    if np is None:
        raise RuntimeError(
            "the CPU device needs NumPy, which is not installed (pip install numpy, or webgrad[cpu]). "
            "In Pyodide without NumPy, use device='webgpu'."
        )


def array(view):
    """The NumPy array a view describes (a window onto the storage, no copy)."""
    item = view.storage.itemsize
    base = view.storage[view.offset:] if view.numel else view.storage
    return np.lib.stride_tricks.as_strided(
        base, shape=view.shape, strides=tuple(s * item for s in view.strides), writeable=True
    )


def write(out, value):
    """out[...] = value, converted to out's dtype (a kernel computes in float64 and rounds once here)."""
    array(out)[...] = np.asarray(value).astype(NP_DTYPES[out.dtype], copy=False)


def round_bfloat16(a):
    """Round a float32 array (a bfloat16 view's window) to bfloat16 values in place."""
    bits = a.view(np.uint32)
    bits[...] = dtypes.bf16_round_bits(bits)


def f64(view):
    return array(view).astype(np.float64)


def wide(a):
    """float16 operands of a product as float32: half products accumulate in float32 and round once."""
    return a.astype(np.float32) if a.dtype == np.float16 else a


def int_param(v):
    """A scalar parameter for an integer kernel: +-inf (clamp's "no bound") becomes the int64 limit."""
    if v == float("inf"):
        return 2**63 - 1
    if v == float("-inf"):
        return -2**63
    return int(v)


def lowbias32(x):
    """The u32 hash of the random stream (kernels.random)."""
    x = x.astype(np.uint32)
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return x


def checked(index, size, default):
    """`index` as an intp array, every entry in [0, size), else IndexError with the op's message."""
    idx = np.asarray(index, np.intp)
    bad = (idx < 0) | (idx >= size)
    if bad.any():
        raise IndexError(_bounds.template(default).format(value=int(idx[bad].flat[0]), size=size))
    return idx
