"""torch.finfo and torch.iinfo: the numerical limits of webgrad's dtypes, under PyTorch's attribute names, values,
repr and errors. Models written for PyTorch mask scores with ``finfo(dtype).min`` and guard divisions with
``finfo(dtype).eps``, so these answer for every dtype webgrad names, bfloat16 included."""

from . import dtypes

# name -> (bits, eps, max, smallest normal, resolution): IEEE formats' limits, as torch.finfo reports them
_FLOATS = {
    "float16": (16, 2.0 ** -10, 65504.0, 2.0 ** -14, 1e-3),
    "bfloat16": (16, 2.0 ** -7, (2 - 2.0 ** -7) * 2.0 ** 127, 2.0 ** -126, 1e-2),
    "float32": (32, 2.0 ** -23, (2 - 2.0 ** -23) * 2.0 ** 127, 2.0 ** -126, 1e-6),
    "float64": (64, 2.0 ** -52, (2 - 2.0 ** -52) * 2.0 ** 1023, 2.0 ** -1022, 1e-15),
}
# name -> (bits, min, max)
_INTS = {"uint8": (8, 0, 255), "int8": (8, -128, 127), "int16": (16, -2 ** 15, 2 ** 15 - 1),
         "int32": (32, -2 ** 31, 2 ** 31 - 1), "int64": (64, -2 ** 63, 2 ** 63 - 1)}


class finfo:
    """torch.finfo(type=None): bits, eps, max, min, tiny (= smallest_normal), resolution and dtype (its name) of
    a floating dtype; without a type, of the default dtype (torch.get_default_dtype())."""

    __slots__ = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype")

    def __init__(self, type=None):
        d = dtypes.default_float() if type is None else dtypes.to_dtype(type)
        if d.name not in _FLOATS:
            raise TypeError("torch.finfo() requires a floating point input type. Use torch.iinfo to handle "
                            "'torch.finfo'")
        self.bits, self.eps, self.max, self.tiny, self.resolution = _FLOATS[d.name]
        self.min = -self.max
        self.smallest_normal = self.tiny
        self.dtype = d.name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """torch.iinfo(type): bits, min, max and dtype (its name) of an integer dtype (not bool, as in torch)."""

    __slots__ = ("bits", "min", "max", "dtype")

    def __init__(self, type):
        d = dtypes.to_dtype(type)
        if d is dtypes.bool_:
            raise TypeError("torch.bool is not supported by torch.iinfo")
        if d.name not in _INTS:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to handle 'torch.iinfo'")
        self.bits, self.min, self.max = _INTS[d.name]
        self.dtype = d.name

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"
