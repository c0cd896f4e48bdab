"""Bitwise ops and shifts on integer and bool tensors (torch.bitwise_*, the & | ^ ~ << >> operators).

The kernels are op-table records (ops/table.py: bitwise_and, ..., bitwise_not); here they get PyTorch's dtype
rules: floating operands are refused, bool operands give the logical ops (the same bits), and shifts of bools
are refused. Nothing is differentiable: integer results have no gradient.
"""

from .. import dtypes
from .._tensor import Tensor
from . import elementwise
from .inplace import in_place

_KERNEL_NAMES = {"bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
                 "bitwise_not": "bitwise_not", "bitwise_left_shift": "lshift", "bitwise_right_shift": "rshift"}
_LOGICAL = {"bitwise_and": "logical_and", "bitwise_or": "logical_or", "bitwise_xor": "logical_xor"}


def _result_dtype(name, input, other):
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError(f"{name}(): expected a Tensor, got {type(input).__name__}")
    for value in (input, other):
        if not isinstance(value, (Tensor, bool, int, float)):
            raise TypeError(f"{name}(): unsupported operand type {type(value).__name__}")
    dtype = dtypes.result_type(input, other)
    if dtype.is_floating:
        raise _not_for(name, dtype)
    return dtype


_TORCH_TYPE_NAMES = {"float16": "Half", "bfloat16": "BFloat16", "float32": "Float", "float64": "Double", "bool": "Bool"}


def _not_for(name, dtype):
    """PyTorch's error for an operand type the op does not take (its kernel's name, the dtype's C++ name)."""
    return NotImplementedError(f"\"{_KERNEL_NAMES[name]}_cpu\" not implemented for "
                               f"'{_TORCH_TYPE_NAMES.get(dtype.name, dtype.name)}'")


def _binary(name):
    def fn(input, other):
        dtype = _result_dtype(name, input, other)
        if dtype is dtypes.bool_:
            if name not in _LOGICAL:
                raise _not_for(name, dtype)
            if not isinstance(input, Tensor):
                input = elementwise._scalar_operand(other, input, name)
            if not isinstance(other, Tensor):
                other = elementwise._scalar_operand(input, other, name)
            return getattr(elementwise, _LOGICAL[name])(input, other)
        return elementwise.function(name)(input, other)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name} of integer or bool tensors (or a tensor and a Python int), as torch's."
    return fn


bitwise_and, bitwise_or, bitwise_xor = _binary("bitwise_and"), _binary("bitwise_or"), _binary("bitwise_xor")
bitwise_left_shift, bitwise_right_shift = _binary("bitwise_left_shift"), _binary("bitwise_right_shift")


def bitwise_not(input):
    """~input for integer and bool tensors, as torch.bitwise_not."""
    if not isinstance(input, Tensor):
        raise TypeError(f"bitwise_not(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if input.dtype.is_floating:
        raise _not_for("bitwise_not", input.dtype)
    if input.dtype is dtypes.bool_:
        return elementwise.logical_not(input)
    return elementwise.function("bitwise_not")(input)


def _invert(self):  # the ~ operator: PyTorch's TypeError for floating tensors
    if self.dtype.is_floating:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    return bitwise_not(self)


def _reflected(fn):
    return lambda self, other: fn(other, self)


FUNCTIONS = {fn.__name__: fn for fn in (bitwise_and, bitwise_or, bitwise_xor, bitwise_not, bitwise_left_shift,
                                        bitwise_right_shift)}
METHODS = {**FUNCTIONS, **{name + "_": in_place(name + "_", fn) for name, fn in FUNCTIONS.items()}}
OPERATORS = {
    "__and__": bitwise_and, "__or__": bitwise_or, "__xor__": bitwise_xor, "__invert__": _invert,
    "__rand__": _reflected(bitwise_and), "__ror__": _reflected(bitwise_or), "__rxor__": _reflected(bitwise_xor),
    "__lshift__": bitwise_left_shift, "__rshift__": bitwise_right_shift,
    "__rlshift__": _reflected(bitwise_left_shift), "__rrshift__": _reflected(bitwise_right_shift),
    "__iand__": METHODS["bitwise_and_"], "__ior__": METHODS["bitwise_or_"], "__ixor__": METHODS["bitwise_xor_"],
    "__ilshift__": METHODS["bitwise_left_shift_"], "__irshift__": METHODS["bitwise_right_shift_"],
}
