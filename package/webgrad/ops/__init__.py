"""Every op, gathered in one namespace and attached to Tensor as methods and operators.

Each family module holds forward and backward side by side; this file only wires names.
"""

from . import conv, elementwise, inplace, loss, matmul, reduce, shape
from .._tensor import Tensor

_FAMILIES = (elementwise, reduce, matmul, shape, loss, conv)

# the public functional namespace: webgrad.exp(x), webgrad.cat([...]), ...
FUNCTIONS = {}
for _mod in _FAMILIES:
    for _name in dir(_mod):
        _obj = getattr(_mod, _name)
        if callable(_obj) and not _name.startswith("_") and getattr(_obj, "__module__", "").startswith(_mod.__name__):
            FUNCTIONS[_name] = _obj
# helpers that are module-level functions but not user-facing ops
for _private in ("new", "broadcast_shapes", "expanded_view", "check_same_device", "unbroadcast", "full_scalar_like",
                 "full_scalar_like_dtype", "operand", "values_indices", "check_inplace", "cast", "getitem", "setitem"):
    FUNCTIONS.pop(_private, None)
FUNCTIONS["broadcast_shapes"] = lambda *shapes: elementwise.broadcast_shapes(*(tuple(s) for s in shapes))

_METHOD_NAMES = (
    "exp log sqrt rsqrt sin cos reciprocal sigmoid tanh relu neg abs sign floor ceil round trunc square clamp clip "
    "isnan isinf logical_not add sub mul div true_divide floor_divide remainder pow maximum minimum atan2 "
    "eq ne lt le gt ge greater greater_equal less less_equal not_equal logical_and logical_or logical_xor "
    "where clone contiguous sum mean max min argmax argmin amax amin var std logsumexp softmax log_softmax "
    "matmul mm bmm dot view reshape flatten unflatten permute transpose swapaxes swapdims t expand expand_as "
    "broadcast_to squeeze unsqueeze narrow split chunk unbind select index_select gather take_along_dim flip "
    "repeat movedim moveaxis"
).split()
for _name in _METHOD_NAMES:
    setattr(Tensor, _name, FUNCTIONS[_name])


def _reflected(fn):
    return lambda self, other: fn(other, self)


def _where_method(self, condition, other):  # x.where(cond, y) means where(cond, x, y)
    return elementwise.where(condition, self, other)


Tensor.where = _where_method
Tensor.view_as = lambda self, other: shape.view(self, *other.shape)
Tensor.reshape_as = lambda self, other: shape.reshape(self, *other.shape)
Tensor.__add__ = elementwise.add
Tensor.__radd__ = _reflected(elementwise.add)
Tensor.__sub__ = elementwise.sub
Tensor.__rsub__ = _reflected(elementwise.sub)
Tensor.__mul__ = elementwise.mul
Tensor.__rmul__ = _reflected(elementwise.mul)
Tensor.__truediv__ = elementwise.div
Tensor.__rtruediv__ = _reflected(elementwise.div)
Tensor.__floordiv__ = elementwise.floor_divide
Tensor.__rfloordiv__ = _reflected(elementwise.floor_divide)
Tensor.__mod__ = elementwise.remainder
Tensor.__pow__ = elementwise.pow
Tensor.__rpow__ = _reflected(elementwise.pow)
Tensor.__matmul__ = matmul.matmul
Tensor.__rmatmul__ = _reflected(matmul.matmul)
Tensor.__neg__ = elementwise.neg
Tensor.__pos__ = lambda self: self
Tensor.__abs__ = elementwise.abs
Tensor.__invert__ = elementwise.logical_not
Tensor.__and__ = elementwise.logical_and
Tensor.__or__ = elementwise.logical_or
Tensor.__xor__ = elementwise.logical_xor
Tensor.__eq__ = elementwise.eq
Tensor.__ne__ = elementwise.ne
Tensor.__lt__ = elementwise.lt
Tensor.__le__ = elementwise.le
Tensor.__gt__ = elementwise.gt
Tensor.__ge__ = elementwise.ge
Tensor.__getitem__ = shape.getitem
Tensor.__setitem__ = shape.setitem

for _name, _method in inplace.build_methods(FUNCTIONS).items():
    setattr(Tensor, _name, _method)
Tensor.zero_ = inplace.zero_
Tensor.fill_ = inplace.fill_
Tensor.copy_ = inplace.copy_
Tensor.uniform_ = inplace.uniform_
Tensor.normal_ = inplace.normal_
