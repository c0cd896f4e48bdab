"""Data types, with PyTorch's names and promotion rules:

float32 (the default for everything floating), float16 (mixed precision: webgrad.autocast; on WebGPU where the
adapter has the optional `shader-f16` feature), float64 (CPU only), int64 (``webgrad.long``: PyTorch's index and
label dtype; what integer data, ``arange``, ``randint``, ``argmax`` and ``.long()`` give), int32 (``webgrad.int``),
uint8 (raw bytes such as image data), bool (comparison results, masks), bfloat16 (below), int16 (``webgrad.short``)
and int8, wrapping on overflow as PyTorch's.

Every backend exchanges data in one *canonical* byte layout per dtype (little-endian, packed):
float32 -> 4 bytes 'f', float16 -> 2 bytes 'e' (IEEE half), bfloat16 -> 2 bytes (the upper half of the float32
bits, as torch's storages, torch.save and safetensors hold it), float64 -> 8 bytes 'd', int64 -> 8 bytes 'q',
int32 -> 4 bytes 'i', int16 -> 2 bytes 'h', int8 -> 1 byte 'b', uint8 -> 1 byte 'B', bool -> 1 byte (0 or 1).
How a backend stores a dtype internally is its own business (WebGPU keeps bools, bfloat16, int16 and int8 in 32-bit
words: below).

int64 on each device. On the CPU it is NumPy's int64: exact over the whole 64-bit range, wrapping on overflow as
PyTorch's does. WGSL has no 64-bit integers, so WebGPU keeps an int64 tensor in one 32-bit word per element, under
one rule: **every int64 value on WebGPU lies in the int32 range [-2**31, 2**31 - 1]; a value outside it is an
error, never a wrapped number.** The range is checked where values arrive (tensor(), from_numpy, .to("webgpu"),
loaded files: on the host, at once) and where the device makes new ones: int64 arithmetic (+, -, *, //, **, neg,
abs), sums, products and prefix sums, and float -> int64 conversions report a result outside the range through
the runtime's error word, raised at the next read-back (as an out-of-range index is). Within the range every
result is exact, and index-heavy kernels (embedding, cross-entropy targets, gather) read int64 indices at int32
speed. int32 keeps PyTorch's wrapping arithmetic on every device.

bfloat16. NumPy has no bfloat16, so the CPU backend stores a bfloat16 tensor as a float32 array whose
every value is exactly a bfloat16 (the low 16 bits of each float32 are zero). Kernels compute as they do for
float32 (so products and reductions accumulate in float32, as PyTorch's CPU does for bfloat16), and the backend
rounds every bfloat16 output once, to nearest even, in one place: CPUBackend.run, after each kernel, for each
output view whose dtype is bfloat16. Storing float32 words keeps every kernel's NumPy code as it is (no 16-bit
unpacking in each), at twice the memory of torch's; element_size() and the canonical bytes are bfloat16's (2).
WebGPU follows the same rule (_backends/webgpu/narrow.py): WGSL has no bfloat16, so a bfloat16 storage holds float32
words of bfloat16 values, every kernel computes it as float32, and the backend rounds each bfloat16 output once, in
one place, by one more dispatch (shaders/narrow.wgsl) after the kernel that wrote it.

int16 and int8 on WebGPU: WGSL storage arrays hold 32-bit words (a narrower store would need atomics), so each
element is an int32 word holding a value in its range; kernels compute in int32 and the backend wraps each int16
or int8 output into its range after the kernel (narrow.wgsl), as torch's arithmetic and casts wrap
(torch.tensor([200]).to(torch.int8) is -56 on every device).

Memory on WebGPU: bfloat16, int16 and int8 take 4 bytes per element of device memory there (twice bfloat16's and
int16's 2, four times int8's 1), though element_size(), nbytes, the bytes read back and the files saved are
torch's. A bfloat16 model on WebGPU saves no device memory over float32: it gives bfloat16's numerics (and
bfloat16 checkpoints load as they are), not its footprint; float16 (shader-f16) stores 2 bytes.

float64 on WebGPU: refused (WebGPU has no 64-bit floats) with an error that says to convert with .float() first.

complex64 (``webgrad.cfloat``) is a view over float32 (real, imag) pairs (webgrad/_complex.py): no backend stores
it as such, so check_storable refuses it at the storage level; complex128 (``cdouble``) is a name only.
"""


class DType:
    __slots__ = ("name", "itemsize", "fmt", "is_floating", "rank")

    def __init__(self, name, itemsize, fmt, is_floating, rank):
        self.name = name
        self.itemsize = itemsize  # bytes per element in the canonical layout
        self.fmt = fmt  # struct / array.array format character of the canonical layout
        self.is_floating = is_floating
        self.rank = rank  # order for type promotion: bool < uint8 < int8 < int16 < int32 < int64 < float16 ...

    @property
    def is_floating_point(self):
        return self.is_floating

    @property
    def is_signed(self):
        return self.name not in ("bool", "uint8")

    @property
    def is_complex(self):
        return False

    def __repr__(self):
        return f"{namespace()}.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))


class ComplexDType(DType):
    """complex64 (float32 real and imaginary parts; see webgrad/_complex.py) and complex128 (a name only)."""

    __slots__ = ()

    @property
    def is_complex(self):
        return True

    @property
    def is_signed(self):
        return True


def check_fill_value(value, dtype):
    """The Python number `value` as an integer tensor of `dtype` stores it (fill_, full, masked_fill, setitem),
    or torch's RuntimeError where it lies outside the range torch accepts: the dtype's own, and for uint8 down to
    -255 too, wrapped (torch's c10::overflows lets two's complement through: fill_(-1) gives 255). Backends would
    otherwise wrap any value (WebGPU) or raise NumPy's OverflowError (the CPU)."""
    if type(value) is not int or dtype.is_floating or dtype is bool_ or dtype.is_complex:
        return value
    bits = 8 * dtype.itemsize
    if dtype.is_signed:
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise RuntimeError(f"value cannot be converted to type {dtype.name} without overflow: {value}")
        return value
    if not -(1 << bits) < value < (1 << bits):
        raise RuntimeError(f"value cannot be converted to type {dtype.name} without overflow: {value}")
    return value % (1 << bits)


def namespace():
    """The name reprs give the package: "torch" where webgrad.as_torch() made `import torch` mean webgrad
    (scripts print torch.float32 and torch.Size, and some compare those strings), else "webgrad"."""
    import sys
    modules = sys.modules
    return "torch" if modules.get("torch") is modules.get("webgrad", False) else "webgrad"


bool_ = DType("bool", 1, "B", False, 0)
uint8 = DType("uint8", 1, "B", False, 1)
int8 = DType("int8", 1, "b", False, 2)
int16 = DType("int16", 2, "h", False, 3)
int32 = DType("int32", 4, "i", False, 4)
int64 = DType("int64", 8, "q", False, 5)
float16 = DType("float16", 2, "e", True, 6)
bfloat16 = DType("bfloat16", 2, None, True, 7)  # canonical bytes: the top half of a float32 (bf16_pack)
float32 = DType("float32", 4, "f", True, 8)
float64 = DType("float64", 8, "d", True, 9)
complex64 = ComplexDType("complex64", 8, None, False, 10)  # a view over float32 pairs (webgrad/_complex.py)
complex128 = ComplexDType("complex128", 16, None, False, 11)  # a name only (see check_storable)
COMPLEX128_ERROR = ("webgrad has no complex128 tensors: its complex dtype is complex64 (float32 real and imaginary "
                    "parts); convert with .float() before making complex numbers")

ALL = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)
_NAMES = {d.name: d for d in ALL}
_NAMES.update({d.name: d for d in (complex64, complex128)})
_NAMES.update({"cfloat": complex64, "cdouble": complex128, "complex32": None, "chalf": None})
_NAMES.update({"float": float32, "double": float64, "half": float16, "int": int32, "bool_": bool_, "long": int64,
               "int64": int64, "short": int16})

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


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
        return int64  # as torch: dtype=int is torch.int64
    if d is bool:
        return bool_
    if d is complex:
        return complex64
    name = getattr(d, "name", None) or str(d)
    name = name.replace("torch.", "")
    if _NAMES.get(name) is not None:
        return _NAMES[name]
    raise TypeError(f"unsupported dtype {d!r}: webgrad supports float32, float16, bfloat16, float64 (CPU), "
                    "int64, int32, int16, int8, uint8 and bool")


def check_storable(dtype):
    """Raise a clear TypeError for a dtype that has a name but no storage on any device (complex128), or no storage
    of its own (complex64, a view over float32 pairs)."""
    if dtype is complex128:
        raise TypeError(COMPLEX128_ERROR)
    if dtype is complex64:
        raise TypeError("this op has no complex64 path in webgrad: complex64 tensors support the arithmetic, "
                        "reductions and views that rotary embeddings use (see webgrad._complex); "
                        "torch.view_as_real(z) gives the (real, imag) pairs as a float32 tensor for anything else")


# ===================================================================== type promotion (torch.result_type)
def promote(a, b):
    """Result dtype of two dtypes of the same priority (torch.promote_types, restricted to our dtypes)."""
    if a is b:
        return a
    if {a, b} == {float16, bfloat16}:
        return float32
    if {a, b} == {uint8, int8}:  # neither holds the other's range
        return int16
    return a if a.rank > b.rank else b


def promote_types(type1, type2):
    """torch.promote_types: the smallest dtype both convert to (dtypes, their names or torch's)."""
    return promote(to_dtype(type1), to_dtype(type2))


def _combine(higher, lower):
    """torch's rule for operands of a lower priority (0-d tensors under tensors with dims, Python scalars under
    both): they raise the result only to a higher category (bool < integer < floating), never its width."""
    if higher is None:
        return lower
    if lower is None or higher.is_floating:
        return higher
    if higher is bool_ or lower.is_floating:
        return promote(higher, lower)
    return higher


_default_float = [float32]  # torch.set_default_dtype's choice: what float data and creation functions give


def default_float():
    """The dtype of float data and of creation functions without dtype= (torch.get_default_dtype())."""
    return _default_float[0]


def set_default_float(d):
    """torch.set_default_dtype: a floating dtype, as torch's (float64 and bfloat16 hold on the CPU only; WebGPU
    stores neither)."""
    d = to_dtype(d)
    if d is None or not d.is_floating:
        raise TypeError("only floating-point types are supported as the default type")
    _default_float[0] = d


def scalar_dtype(value):
    """The dtype a Python scalar has as a tensor (torch: int -> int64, float -> the default float32)."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int64
    if isinstance(value, complex):
        return complex64
    return _default_float[0]


def result_type(*operands):
    """torch.result_type over tensors and Python scalars (torch's takes two operands, this any number): tensors with dims first, then 0-d tensors, then
    scalars, each lower group only lifting the category (so int32 + 5 stays int32, int32 + a 0-d int64 tensor
    too, and int64 + float32 is float32). An operand is a Tensor-like (with .dtype and .ndim) or a number."""
    groups = [None, None, None]  # tensors with dims, 0-d tensors, scalars
    for x in operands:
        dtype = getattr(x, "dtype", None)
        if isinstance(dtype, DType):
            g = 0 if x.ndim else 1
        else:
            if not isinstance(x, (bool, int, float)):
                raise TypeError(f"result_type(): expected Tensors or numbers, got {type(x).__name__}")
            dtype, g = scalar_dtype(x), 2
        groups[g] = dtype if groups[g] is None else promote(groups[g], dtype)
    return _combine(groups[0], _combine(groups[1], groups[2]))


def promote_scalar(t, value):
    """Result dtype of `tensor <op> python_scalar`: a scalar only lifts the category (int -> float)."""
    return _combine(t, scalar_dtype(value))


# ===================================================================== bfloat16 bytes
def _numpy():
    try:
        import numpy as np
    except ImportError:
        np = None
    return np


def bf16_round_bits(bits):
    """float32 bit patterns (a NumPy uint32 array) rounded to bfloat16's, to nearest even, as torch's
    .to(torch.bfloat16): the low 16 bits come out zero. Every NaN becomes torch's one bfloat16 NaN (0x7FC0);
    values beyond bfloat16's largest finite number round to inf, as in torch."""
    np = _numpy()
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    rounded = (bits + (0x7FFF + ((bits >> 16) & 1))) & 0xFFFF0000
    return np.where(nan, np.uint32(0x7FC00000), rounded).astype(np.uint32)


def _round_bits_python(b):
    if (b & 0x7FFFFFFF) > 0x7F800000:
        return 0x7FC0
    return ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFFFFFF) >> 16


def bf16_pack(raw):
    """float32 canonical bytes -> bfloat16 canonical bytes (each value rounded to nearest even)."""
    np = _numpy()
    if np is not None:
        bits = np.frombuffer(raw, "<u4").astype(np.uint32)
        return (bf16_round_bits(bits) >> 16).astype("<u2").tobytes()
    import array
    words = array.array("I")
    words.frombytes(bytes(raw))
    return array.array("H", [_round_bits_python(b) for b in words]).tobytes()


def bf16_unpack(raw):
    """bfloat16 canonical bytes -> float32 canonical bytes (exact: two zero bytes below each value's two)."""
    raw = bytes(raw)
    out = bytearray(2 * len(raw))
    out[2::4], out[3::4] = raw[0::2], raw[1::2]
    return bytes(out)


# ===================================================================== int64 in 32-bit words (WebGPU)
def _range_error(value, where):
    return RuntimeError(
        f"{where}: int64 value {value} is outside the range WebGPU stores ([{INT32_MIN}, {INT32_MAX}]: WGSL has "
        "no 64-bit integers, so webgrad keeps int64 in 32 bits there); keep this tensor on the CPU device")


def narrow_int64(raw, where="int64 upload"):
    """Canonical int64 bytes -> int32 bytes (WebGPU's words), RuntimeError for a value outside int32."""
    try:
        import numpy as np
    except ImportError:
        np = None
    if np is not None:
        a = np.frombuffer(raw, "<i8")
        if a.size and (a.min() < INT32_MIN or a.max() > INT32_MAX):
            bad = a[(a < INT32_MIN) | (a > INT32_MAX)][0]
            raise _range_error(int(bad), where)
        return a.astype("<i4").tobytes()
    import array
    wide = array.array("q")
    wide.frombytes(bytes(raw))
    try:
        return array.array("i", wide).tobytes()
    except OverflowError:
        raise _range_error(next(v for v in wide if not INT32_MIN <= v <= INT32_MAX), where) from None


def widen_int32(raw):
    """int32 bytes -> canonical int64 bytes (sign-extended)."""
    try:
        import numpy as np
    except ImportError:
        np = None
    if np is not None:
        return np.frombuffer(raw, "<i4").astype("<i8").tobytes()
    import array
    narrow = array.array("i")
    narrow.frombytes(bytes(raw))
    return array.array("q", narrow).tobytes()
