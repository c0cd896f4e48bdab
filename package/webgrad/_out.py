"""The out= keyword of PyTorch's functions (torch.add(a, b, out=c), torch.matmul(a, b, out=c)).

webgrad's ops always allocate their result; out= then copies it into `out` (cast to out's dtype), as
PyTorch's semantics ask: `out` is written in place and returned. An `out` of another shape is resized
(given new storage), as PyTorch resizes it. As in PyTorch, out= is refused where autograd would need
to record the op.
"""

import functools

from ._autograd import is_grad_enabled, no_grad
from ._tensor import Tensor

# the functions of the webgrad namespace that take out= (those of them webgrad has are wrapped)
NAMES = ("add", "sub", "mul", "div", "true_divide", "pow", "matmul", "mm", "bmm", "dot", "cat", "stack", "exp", "log",
         "sqrt", "abs", "neg", "sigmoid", "tanh", "clamp", "clip", "maximum", "minimum", "where", "sum", "mean",
         "prod", "amax", "amin", "argmax", "argmin", "max", "min", "softmax", "log_softmax", "floor", "ceil",
         "round", "sin", "cos", "remainder", "lerp", "addcmul", "addcdiv", "eq", "ne", "lt", "le", "gt", "ge",
         "logical_and", "logical_or", "logical_not", "index_select", "gather", "cumsum", "arange", "linspace",
         "zeros", "ones", "full", "empty", "rand", "randn", "randint", "randperm", "square", "rsqrt", "exp2",
         "log2", "reciprocal", "sign", "relu")


def with_out(fn):
    """fn, also accepting out= (see the module doc)."""
    @functools.wraps(fn)
    def wrapper(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        if isinstance(out, (tuple, list)):
            raise TypeError(f"{fn.__name__}(): out= with several tensors is not supported; use the returned values")
        if not isinstance(out, Tensor):
            raise TypeError(f"{fn.__name__}(): argument 'out' must be Tensor, not {type(out).__name__}")
        if is_grad_enabled() and (out.requires_grad or any(isinstance(a, Tensor) and a.requires_grad
                                                              for a in args)):
            raise RuntimeError(f"{fn.__name__}(): functions with out=... arguments don't support automatic "
                               "differentiation, but one of the arguments requires grad.")
        if "device" in getattr(fn, "__code__", (lambda: 0).__code__).co_varnames and "device" not in kwargs:
            kwargs["device"] = out.device  # creation functions: build on out's device
        with no_grad():
            result = fn(*args, **kwargs)
            if not isinstance(result, Tensor):
                raise TypeError(f"{fn.__name__}(): out= needs a function with one tensor result")
            if tuple(result.shape) != tuple(out.shape):
                fresh = result.to(device=out.device, dtype=out.dtype, copy=True)
                out._view = fresh._view  # resized, as PyTorch resizes an out tensor of another shape
            else:
                out.copy_(result)
        return out

    return wrapper


def add_out_argument(namespace):
    """Wrap the functions of `namespace` (the webgrad module's globals) that PyTorch gives out=."""
    for name in NAMES:
        fn = namespace.get(name)
        if callable(fn) and not getattr(fn, "_takes_out", False):
            wrapped = with_out(fn)
            wrapped._takes_out = True
            namespace[name] = wrapped
