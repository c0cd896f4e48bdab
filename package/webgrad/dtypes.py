"""Data types, as webgrad needs for training in a browser:

float32 (the default for everything floating), float16 (mixed precision: webgrad.autocast; on WebGPU where the
adapter has the optional `shader-f16` feature), float64 (CPU only: precise gradient checks), int32 (indices, labels, counts), uint8 (raw bytes such as
image data, converted to float on the device) and bool (comparison results, masks).

Every backend exchanges data in one *canonical* byte layout per dtype (little-endian, packed):
float32 -> 4 bytes 'f', float16 -> 2 bytes 'e' (IEEE half), float64 -> 8 bytes 'd', int32 -> 4 bytes 'i', uint8 -> 1 byte 'B', bool -> 1 byte (0 or 1).
How a backend stores a dtype internally is its own business (WebGPU keeps bools in 32-bit words).
"""


class DType:
    __slots__ = ("name", "itemsize", "fmt", "is_floating", "rank")

    def __init__(self, name, itemsize, fmt, is_floating, rank):
        self.name = name
        self.itemsize = itemsize  # bytes per element in the canonical layout
        self.fmt = fmt  # struct / array.array format character of the canonical layout
        self.is_floating = is_floating
        self.rank = rank  # order for type promotion: bool < uint8 < int32 < float16 < float32 < float64

    def __repr__(self):
        return f"webgrad.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))


bool_ = DType("bool", 1, "B", False, 0)
uint8 = DType("uint8", 1, "B", False, 1)
int32 = DType("int32", 4, "i", False, 2)
float16 = DType("float16", 2, "e", True, 3)
float32 = DType("float32", 4, "f", True, 4)
float64 = DType("float64", 8, "d", True, 5)

ALL = (bool_, uint8, int32, float16, float32, float64)
_NAMES = {d.name: d for d in ALL}
_NAMES.update({"float": float32, "double": float64, "half": float16, "int": int32, "bool_": bool_, "int64": int32, "long": int32})


_warned_int64 = []


def warn_int64_once(where):
    """One warning per process that a 64-bit integer request got int32 (webgrad's only integer type:
    WGSL has no 64-bit integers, and one integer type keeps CPU and WebGPU results identical)."""
    if not _warned_int64:
        import warnings
        _warned_int64.append(True)
        warnings.warn(f"{where}: webgrad's integers are int32 on every device (webgrad.long is webgrad.int32); "
                      "values beyond +-2**31 are refused when converted", stacklevel=3)


def _by_name(name):
    return _NAMES[name]


def to_dtype(d, default=None):
    """Accept a webgrad dtype, a name, a NumPy dtype, a torch dtype or a Python type; return a DType."""
    if d is None:
        return default
    if isinstance(d, DType):
        return d
    if d is float:
        return float32
    if d is int:
        return int32
    if d is bool:
        return bool_
    name = getattr(d, "name", None) or str(d)
    name = name.replace("torch.", "")
    if name in _NAMES:
        return _NAMES[name]
    raise TypeError(f"unsupported dtype {d!r}: webgrad supports float32, float16, float64 (CPU), int32, uint8 and bool")


def promote(a, b):
    """Result dtype of a binary op between two tensor dtypes (PyTorch's order, restricted to our dtypes)."""
    if a is b:
        return a
    return a if a.rank > b.rank else b


def scalar_dtype(value):
    """The dtype a Python scalar would have as a tensor."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int32
    return float32


def promote_scalar(t, value):
    """Result dtype of `tensor <op> python_scalar`: a scalar only lifts the category (int -> float)."""
    s = scalar_dtype(value)
    if s.is_floating and not t.is_floating:
        return float32
    if t is bool_ and s is not bool_:
        return s
    return t
