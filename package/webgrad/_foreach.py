"""torch._foreach_*: an op applied to each tensor of a list (EMA updates, hand-written optimizers and gradient
clipping call them). PyTorch fuses the list into few kernels; here each tensor is its own op, with the same
results. Out-of-place forms return a tuple, in-place forms change the tensors and return the list, as torch's.

The second operand may be a number or a 0-d tensor (for every tensor), or a list of numbers or tensors (one per
tensor), as PyTorch's Scalar, ScalarList, Tensor and TensorList overloads.
"""

from ._tensor import Tensor

_UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor", "frac",
          "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sin",
          "sinh", "sqrt", "tan", "tanh", "trunc")
_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "clamp_max", "clamp_min", "pow")


def _check(tensors, *others):
    if not isinstance(tensors, (list, tuple)) or not all(isinstance(t, Tensor) for t in tensors):
        raise TypeError("_foreach ops take a list of tensors as their first argument")
    if not tensors:
        raise RuntimeError("Tensor list must have at least one tensor.")
    for other in others:
        if isinstance(other, (list, tuple)) and len(other) != len(tensors):
            kind = "Tensor lists" if all(isinstance(o, Tensor) for o in other) else "Tensor list and scalar list"
            raise RuntimeError(f"{kind} must have the same number of tensors, got {len(tensors)} and {len(other)}")


def _each(other, n):
    """The operand of each of n tensors: a list as given, one number or tensor repeated."""
    return list(other) if isinstance(other, (list, tuple)) else [other] * n


def _unary(name):
    def op(self):
        _check(self)
        return tuple(getattr(t, name)() for t in self)

    def op_(self):
        _check(self)
        for t in self:
            getattr(t, name + "_")()
        return self
    return op, op_


def _binary(name):
    def call(t, o, inplace, alpha):
        fn = getattr(t, name + "_" if inplace else name)
        return fn(o, alpha=alpha) if alpha is not None else fn(o)

    def op(self, other, *, alpha=None):
        _check(self, other)
        return tuple(call(t, o, False, alpha) for t, o in zip(self, _each(other, len(self))))

    def op_(self, other, *, alpha=None):
        _check(self, other)
        for t, o in zip(self, _each(other, len(self))):
            call(t, o, True, alpha)
        return self
    return op, op_


for _name in _UNARY:
    globals()["_foreach_" + _name], globals()["_foreach_" + _name + "_"] = _unary(_name)
for _name in _BINARY:
    globals()["_foreach_" + _name], globals()["_foreach_" + _name + "_"] = _binary(_name)
_foreach_pow_binary = globals()["_foreach_pow"]


def _foreach_pow(self, exponent):  # noqa: F811  (also a number raised to each tensor: torch._foreach_pow(2.0, xs))
    if not isinstance(self, (list, tuple)):
        _check(exponent)
        return tuple(self ** t for t in exponent)
    return _foreach_pow_binary(self, exponent)


def _foreach_lerp(self, tensors1, weight):
    _check(self, tensors1, weight)
    return tuple(t.lerp(e, w) for t, e, w in zip(self, tensors1, _each(weight, len(self))))


def _foreach_lerp_(self, tensors1, weight):
    _check(self, tensors1, weight)
    for t, e, w in zip(self, tensors1, _each(weight, len(self))):
        t.lerp_(e, w)
    return self


def _addc(name, inplace):
    def op(self, tensor1, tensor2, value=1):
        _check(self, tensor1, tensor2, value)
        results = [getattr(t, name + ("_" if inplace else ""))(a, b, value=v)
                   for t, a, b, v in zip(self, tensor1, tensor2, _each(value, len(self)))]
        return self if inplace else tuple(results)
    return op


_foreach_addcmul, _foreach_addcmul_ = _addc("addcmul", False), _addc("addcmul", True)
_foreach_addcdiv, _foreach_addcdiv_ = _addc("addcdiv", False), _addc("addcdiv", True)


def _foreach_norm(self, ord=2, dtype=None):
    """Each tensor's vector norm (torch.linalg.vector_norm over all its elements)."""
    from .linalg import vector_norm
    _check(self)
    return tuple(vector_norm(t, ord, dtype=dtype) for t in self)


def _foreach_max(self):
    _check(self)
    return tuple(t.max() for t in self)


def _foreach_clone(self):
    _check(self)
    return tuple(t.clone() for t in self)


def _foreach_copy_(self, src, non_blocking=False):
    _check(self, src)
    for t, s in zip(self, src):
        t.copy_(s)
    return self


def _foreach_zero_(self):
    _check(self)
    for t in self:
        t.zero_()
    return self


NAMES = sorted(name for name in globals() if name.startswith("_foreach_") and name != "_foreach_pow_binary")
