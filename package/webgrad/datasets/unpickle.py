"""Reading the pickled CIFAR batches (the "python version" of CIFAR-10/100) without running the file.

pickle.load runs whatever a file names, and a dataset file comes from the user: it is read with webgrad's
own pickle machine (webgrad.io.unpickler), which builds plain values and, of NumPy, exactly what a CIFAR
batch holds: uint8 (or other plain numeric) arrays, rebuilt from their bytes, each checked before NumPy sees
it. Any other name is refused unrun; a file it cannot read raises UnpicklingError, which is both a
pickle.UnpicklingError and a ValueError, naming the file and the problem.
"""

from ..io.unpickler import Refused, Unpickler, UnpicklingError, short

# NumPy renamed numpy.core to numpy._core in 2.0, and pickles written by either keep the name they were
# written with
_CORE = ("numpy.core.multiarray", "numpy._core.multiarray")
_NUMERIC = ("numpy.core.numeric", "numpy._core.numeric")
# dtypes an array of a CIFAR batch may have (never "O": an object array would hold whatever the file says)
_DTYPES = {"u1", "i1", "u2", "i2", "u4", "i4", "u8", "i8", "f4", "f8", "b1"}
_NDARRAY = Refused("numpy.ndarray")


def _numpy():
    import numpy
    return numpy


def _reconstruct(cls, shape, dtype):
    # how NumPy pickles an array: _reconstruct(ndarray, (0,), b'b') makes an empty one, BUILD fills it
    if cls is not _NDARRAY or shape != (0,) or dtype not in (b"b", "b"):
        raise ValueError(f"_reconstruct() is read as NumPy writes it, (ndarray, (0,), b'b'), got {short(shape)}, "
                         f"{short(dtype)}")
    np = _numpy()
    return np.ndarray((0,), np.uint8)


def _dtype(name, align=False, copy=True):
    if name not in _DTYPES or type(align) is not bool or type(copy) is not bool:
        raise ValueError(f"numpy.dtype({short(name)}): a CIFAR batch holds plain numeric arrays")
    # always a copy: BUILD then sets its byte order, which on NumPy's shared instance would change the dtype
    # of every array of the process
    return _numpy().dtype(name, align, True)


def _frombuffer(buf, dtype, shape, order):
    np = _numpy()
    if not isinstance(buf, (bytes, bytearray)) or not isinstance(dtype, np.dtype) or dtype.str[1:] not in _DTYPES \
            or order not in ("C", "F") or not _dims(shape) or _count(shape) * dtype.itemsize != len(buf):
        raise ValueError(f"_frombuffer() of {len(buf) if isinstance(buf, (bytes, bytearray)) else short(buf)} bytes "
                         f"as {short(dtype)} {short(shape)}: the sizes do not agree")
    return np.frombuffer(bytes(buf), dtype).reshape(shape, order=order).copy()


def _dims(shape):
    return type(shape) is tuple and len(shape) <= 32 and all(type(n) is int and 0 <= n < 2**40 for n in shape)


def _count(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _encode(text, encoding="utf-8"):
    # protocol 2 written by Python 3 stores bytes as _codecs.encode(their latin-1 text, "latin1")
    if type(text) is not str or encoding not in ("latin1", "latin-1"):
        raise ValueError(f"_codecs.encode() is read for bytes (text, 'latin1'), got {short(text)}, {short(encoding)}")
    return text.encode("latin-1")


def _build(obj, state):
    np = _numpy()
    if type(obj) is np.ndarray:
        # (version, shape, dtype, is_fortran, raw data): the bytes must be exactly what the shape needs
        if type(state) is not tuple or len(state) != 5:
            raise ValueError(f"an array's state must be (version, shape, dtype, fortran, data), got {short(state)}")
        _, shape, dtype, fortran, raw = state
        if not _dims(shape) or not isinstance(dtype, np.dtype) or dtype.str[1:] not in _DTYPES or \
                type(fortran) is not bool or not isinstance(raw, (bytes, str)):
            raise ValueError(f"an array's state {short(shape)}, {short(dtype)} is not a plain numeric array")
        if _count(shape) * dtype.itemsize != len(raw):
            raise ValueError(f"an array of shape {list(shape)} ({dtype}) needs {_count(shape) * dtype.itemsize} bytes, "
                             f"its data holds {len(raw)}")
        obj.__setstate__(state)
    elif isinstance(obj, np.dtype) and type(state) is tuple and len(state) == 8 and state[0] == 3 and \
            state[1] in ("<", ">", "|", "=") and state[2:] == (None, None, None, -1, -1, 0):
        obj.__setstate__(state)  # a plain dtype's byte order (its fields, names and flags stay empty)
    else:
        raise ValueError(f"BUILD of a {type(obj).__name__} is not read in a CIFAR batch")


_ALLOWED = {("numpy", "ndarray"): _NDARRAY, ("numpy", "dtype"): _dtype, ("_codecs", "encode"): _encode}
_ALLOWED.update({(m, "_reconstruct"): _reconstruct for m in _CORE})
_ALLOWED.update({(m, "_frombuffer"): _frombuffer for m in _NUMERIC})


def _find_class(module, name):
    found = _ALLOWED.get((module, name))
    if found is None:
        raise ValueError(f"refused to load global {module}.{name}: a CIFAR batch holds only dicts, lists, strings and "
                         "NumPy arrays (the file is not a CIFAR batch, or it was crafted to run code)")
    return found


def load(path):
    """The object pickled in file `path`, read without running anything."""
    with open(path, "rb") as f:
        return loads(f.read(), path)


def loads(raw, where):
    """The object pickled in `raw` (Python 2 strings decoded as latin-1, as torchvision does). Errors are
    UnpicklingError (a ValueError) naming `where` (the file)."""
    return Unpickler(raw, _find_class, build=_build, encoding="latin1", what=str(where)).load()


__all__ = ["UnpicklingError", "load", "loads"]
