"""Where ops become public: the Tensor's methods and operators and the ``webgrad.*`` functions.

Everything is declared here, by name, in one place: the hand-written ops of each family in the lists
below, and the op table's records (ops/table.py) by their ``expose`` field. ``webgrad/__init__.py``
re-exports :data:`FUNCTIONS`; nothing else attaches methods to Tensor.
"""

from .. import _complex, _householder, _printing, _tensor, linalg
from .._tensor import Tensor
from . import composed, conv, elementwise, inplace, loss, masked, matmul, reduce, shape, table
from . import elementwise_math, sampling, sorting
from . import creation, joining, movement, products
from . import logic, numeric, scans, scatter, selection, statistics
from . import bitwise, structured
from . import spectral_windows, stft

# ----------------------------------------------------------------------------- hand-written functions
_HAND_WRITTEN = {
    elementwise: "add sub mul div true_divide divide floor_divide remainder pow clamp clip affine where clone "
                 "contiguous maximum minimum gelu nan_to_num eq ne lt le gt ge greater greater_equal less less_equal not_equal "
                 "logical_and logical_or logical_xor",
    reduce: "sum prod mean max min argmax argmin amax amin var std var_mean std_mean logsumexp softmax log_softmax "
            "cumsum",
    matmul: "matmul mm bmm dot linear",
    shape: "view reshape flatten unflatten permute transpose swapaxes swapdims movedim moveaxis t expand expand_as "
           "broadcast_to squeeze unsqueeze narrow cat concat concatenate stack split chunk unbind select index_select "
           "gather take_along_dim flip repeat tril triu diagonal diag",
    loss: "cross_entropy nll_loss mse_loss l1_loss smooth_l1_loss huber_loss binary_cross_entropy "
          "binary_cross_entropy_with_logits",
    conv: "conv2d conv_transpose2d max_pool2d avg_pool2d adaptive_avg_pool2d pad",
    composed: "addcmul addcdiv",
    masked: "masked_fill",
    sorting: "topk sort argsort msort",
    sampling: "multinomial",
    elementwise_math: "polygamma mvlgamma lerp clamp_min clamp_max rsub renorm frexp ldexp float_power positive",
}

FUNCTIONS = {name: getattr(module, name) for module, names in _HAND_WRITTEN.items() for name in names.split()}
_ALONE = object()


def _where(condition, input=_ALONE, other=_ALONE):
    """torch.where(cond, x, y): x where cond is true, else y; torch.where(cond) alone is nonzero(cond,
    as_tuple=True)."""
    if input is _ALONE and other is _ALONE:
        if not isinstance(condition, Tensor):
            raise TypeError("where(): condition must be a bool Tensor")
        return selection.nonzero(condition, as_tuple=True)
    if input is _ALONE or other is _ALONE:
        raise TypeError("where() takes a condition alone, or a condition, input and other")
    return elementwise.where(condition, input, other)


FUNCTIONS["where"] = _where
FUNCTIONS["broadcast_shapes"] = lambda *shapes: _tensor.Size(elementwise.broadcast_shapes(
    *((s,) if isinstance(s, int) else tuple(s) for s in shapes)))  # an int is a 1-D shape, as torch's

# Compositions of the ops above, one module per family (their gradients come from the ops they use).
_COMPOSED = {
    joining: "atleast_1d atleast_2d atleast_3d hstack vstack row_stack dstack column_stack tensor_split hsplit vsplit "
             "dsplit split_with_sizes unsafe_split unsafe_chunk broadcast_tensors meshgrid",
    movement: "ravel roll rot90 fliplr flipud tile repeat_interleave diag_embed diagflat as_strided constant_pad_nd",
    products: "einsum tensordot addmm addmv addr addbmm baddbmm mv outer ger inner vdot kron cdist cross block_diag "
              "cartesian_prod combinations",
    creation: "empty_strided empty_permuted scalar_tensor logspace randint_like normal bernoulli fill resize_as_",
    inplace: "zero_ fill_",
}
FUNCTIONS.update({name: getattr(module, name) for module, names in _COMPOSED.items() for name in names.split()})
FUNCTIONS.update(movement.COPIES)  # alias_copy, view_copy, ...: a view op's result, copied
_COMPOSED_METHODS = {name: FUNCTIONS[name] for name in (
    "tensor_split hsplit vsplit dsplit split_with_sizes unsafe_split unsafe_chunk ravel roll rot90 fliplr flipud tile "
    "repeat_interleave diag_embed diagflat as_strided narrow_copy addmm addmv addr addbmm baddbmm mv outer ger inner "
    "vdot kron cross").split()}
_COMPOSED_METHODS.update(unfold=movement.unfold, sum_to_size=movement.sum_to_size, bernoulli=creation.bernoulli,
                         **{name: getattr(creation, name) for name in ("new_empty_strided bernoulli_ cauchy_ exponential_ "
                                                                        "geometric_ log_normal_ resize_ resize_as_").split()})
_COMPOSED_METHODS.update({name + "_": inplace.in_place(name + "_", FUNCTIONS[name])
                          for name in "addmm addmv addr addbmm baddbmm".split()})
_COMPOSED_METHODS.update({name + "_": inplace.view_in_place(name + "_", FUNCTIONS[name])
                          for name in "unsqueeze squeeze t transpose swapdims swapaxes".split()})

# Indexing and scatters, order statistics, logic and numerical reductions (compositions and kernels of their
# own): (module, functions, the Tensor methods among them).
_FAMILIES = (
    (logic, "all any count_nonzero isclose allclose equal isin isneginf isposinf signbit",
     "all any count_nonzero isclose allclose equal isneginf isposinf signbit"),
    (numeric, "aminmax nansum nanmean trace dist diff gradient trapezoid trapz cumulative_trapezoid cov corrcoef",
     "aminmax nansum nanmean trace dist diff cov corrcoef"),
    (scatter, "scatter scatter_add scatter_reduce index_add index_copy index_fill index_reduce index_put put take "
              "masked_scatter select_scatter slice_scatter diagonal_scatter as_strided_scatter",
     "scatter scatter_add scatter_reduce index_add index_copy index_fill index_reduce index_put put take "
     "masked_scatter select_scatter slice_scatter diagonal_scatter as_strided_scatter"),
    (selection, "nonzero nonzero_static argwhere masked_select unique unique_consecutive searchsorted bucketize",
     "nonzero nonzero_static argwhere masked_select unique unique_consecutive"),
    (scans, "cumprod logcumsumexp cummax cummin", "cumprod logcumsumexp cummax cummin"),
    (statistics, "kthvalue median nanmedian mode quantile nanquantile histc histogram histogramdd",
     "kthvalue median nanmedian mode quantile nanquantile histc histogram"),
    (structured, "bincount tril_indices triu_indices vander", "bincount"),
)
_FAMILY_IN_PLACE = ("scatter scatter_add scatter_reduce index_add index_copy index_fill index_reduce index_put put "
                    "masked_scatter cumprod")
for _module, _functions, _methods in _FAMILIES:
    FUNCTIONS.update({name: getattr(_module, name) for name in _functions.split()})
    _COMPOSED_METHODS.update({name: getattr(_module, name) for name in _methods.split()})
_COMPOSED_METHODS.update({name + "_": inplace.in_place(name + "_", FUNCTIONS[name])
                          for name in _FAMILY_IN_PLACE.split()})
_COMPOSED_METHODS.update(linalg.TENSOR_METHODS)  # inverse, det, svd, qr, cholesky, ... (webgrad/linalg.py)
_COMPOSED_METHODS.update(_householder.FUNCTIONS)  # geqrf, ormqr (webgrad/_householder.py)
FUNCTIONS.update(bitwise.FUNCTIONS)  # bitwise_and, ..., bitwise_left_shift: integers and bools (ops/bitwise.py)
_COMPOSED_METHODS.update(bitwise.METHODS)

# ----------------------------------------------------------------------------- Tensor methods
_METHODS = (
    "add sub mul div true_divide floor_divide remainder pow maximum minimum clamp clip where clone contiguous "
    "eq ne lt le gt ge greater greater_equal less less_equal not_equal logical_and logical_or logical_xor "
    "sum prod mean max min argmax argmin amax amin var std logsumexp softmax log_softmax cumsum "
    "matmul mm bmm dot view reshape flatten unflatten permute transpose swapaxes swapdims movedim moveaxis t expand "
    "expand_as broadcast_to squeeze unsqueeze narrow split chunk unbind select index_select gather take_along_dim "
    "flip repeat tril triu diagonal diag nan_to_num addcmul addcdiv masked_fill"
    " topk sort argsort msort multinomial"
    " mvlgamma lerp clamp_min clamp_max renorm frexp ldexp float_power positive"
).split()
_IN_PLACE = ("add sub mul div pow clamp clip maximum minimum tril triu nan_to_num addcmul addcdiv"
             " mvlgamma lerp clamp_min clamp_max renorm ldexp").split()


def _reflected(fn):
    return lambda self, other: fn(other, self)


def _where_method(self, condition, other):  # x.where(cond, y) means where(cond, x, y)
    return elementwise.where(condition, self, other)


_OPERATORS = {
    "__add__": elementwise.add, "__radd__": _reflected(elementwise.add),
    "__sub__": elementwise.sub, "__rsub__": _reflected(elementwise.sub),
    "__mul__": elementwise.mul, "__rmul__": _reflected(elementwise.mul),
    "__truediv__": elementwise.div, "__rtruediv__": _reflected(elementwise.div),
    "__floordiv__": elementwise.floor_divide, "__rfloordiv__": _reflected(elementwise.floor_divide),
    "__mod__": elementwise.remainder, "__rmod__": elementwise_math.rmod, "__rdiv__": elementwise_math.rdiv,
    "polygamma": elementwise_math._polygamma_method,
    "polygamma_": inplace.in_place("polygamma_", elementwise_math._polygamma_method),
    "__pow__": elementwise.pow, "__rpow__": _reflected(elementwise.pow),
    "__matmul__": matmul.matmul, "__rmatmul__": _reflected(matmul.matmul),
    "__neg__": elementwise.function("neg"), "__pos__": lambda self: self,
    "__abs__": elementwise.function("abs"), **bitwise.OPERATORS,  # & | ^ ~ << >>: bitwise, as torch's
    "__eq__": elementwise.eq, "__ne__": elementwise.ne, "__lt__": elementwise.lt, "__le__": elementwise.le,
    "__gt__": elementwise.gt, "__ge__": elementwise.ge,
    "__getitem__": shape.getitem, "__setitem__": shape.setitem,
    "__repr__": _printing.format_tensor,  # summarised as PyTorch's (_printing.py)
    "where": _where_method,
    "view_as": lambda self, other: shape.view(self, *other.shape),
    "reshape_as": lambda self, other: shape.reshape(self, *other.shape),
    "zero_": inplace.zero_, "fill_": inplace.fill_, "masked_fill_": masked.masked_fill_, "copy_": inplace.copy_,
    "uniform_": inplace.uniform_, "normal_": inplace.normal_,
}


def install(op):
    """Expose op-table record `op` as its `expose` field says: webgrad.<name> (FUNCTIONS), Tensor.<name>,
    Tensor.<name>_ . (nn.functional and nn Modules read the table themselves.)"""
    fn = elementwise.function(op.name)
    if "function" in op.expose:
        FUNCTIONS[op.name] = fn
    if "method" in op.expose:
        setattr(Tensor, op.name, fn)
    if "inplace" in op.expose:
        name = op.name + "_"
        setattr(Tensor, name, inplace.unary_in_place(name, fn, op, op.name in elementwise._GRAD_FROM_OUTPUT)
                if op.kind == "unary" else inplace.in_place(name, fn))
    return fn


def register(op):
    """Add a record to the op table at run time and expose it (webgrad.<name>, Tensor methods). A WebGPU
    backend created before compiles its shaders from the old table: call webgrad.webgpu.reset() first."""
    import webgrad  # the package namespace, complete by the time anyone registers an op
    table.register(op)
    fn = install(op)
    if "function" in op.expose:
        setattr(webgrad, op.name, fn)
    return fn


for _name in _METHODS:
    setattr(Tensor, _name, FUNCTIONS[_name])
for _name in _IN_PLACE:
    setattr(Tensor, _name + "_", inplace.in_place(_name + "_", FUNCTIONS[_name]))
for _name, _method in _OPERATORS.items():
    setattr(Tensor, _name, _method)
for _name, _method in _COMPOSED_METHODS.items():
    setattr(Tensor, _name, _method)
for _op in (*table.UNARY.values(), *table.BINARY.values()):
    install(_op)
Tensor.__iadd__, Tensor.__isub__ = Tensor.add_, Tensor.sub_
Tensor.__imul__, Tensor.__itruediv__ = Tensor.mul_, Tensor.div_

# complex64 (_complex.py): the functions that exist for it, the real tensor's side of them (x.real is x,
# x.is_complex() is False, ...), the functions that hand a complex operand to its implementation, and every
# other Tensor method refusing a complex tensor.
FUNCTIONS.update(_complex.FUNCTIONS)
Tensor.real = property(lambda self: self, lambda self, value: self.copy_(value) and None,
                       doc="The real part: the tensor itself for a real tensor (writable), as torch's.")
Tensor.imag = property(_complex.imag, doc="The imaginary part (complex tensors only; a real one raises).")
for _name in "is_complex is_conj is_neg resolve_conj resolve_neg conj conj_physical angle".split():
    setattr(Tensor, _name, _complex.FUNCTIONS[_name])
for _name in _complex.DISPATCH:
    if _name in FUNCTIONS:
        _real_fn = FUNCTIONS[_name]
        FUNCTIONS[_name] = _complex.dispatching(_name, _real_fn)
        if _complex.DISPATCH[_name] is not _complex.METHOD and Tensor.__dict__.get(_name) is _real_fn:
            setattr(Tensor, _name, FUNCTIONS[_name])  # real.mul(z): the complex product
_complex.seal()

# torch.stft / torch.istft and the windows they take (ops/stft.py, ops/spectral_windows.py). The methods are
# attached after the seal: a complex tensor has both (istft's input is complex).
FUNCTIONS.update({name: getattr(spectral_windows, name) for name in spectral_windows.__all__})
FUNCTIONS.update(stft=stft.stft, istft=stft.istft)
Tensor.stft, Tensor.istft = stft.stft, stft.istft

# NumPy-style names PyTorch gives the same ops (torch.absolute is torch.abs, x.arctan2(y) is x.atan2(y)), for
# functions and Tensor methods, in-place ones included. Methods call the target by name, so a complex tensor
# gets its own implementation (or its refusal) of the target.
_ALIASES = {"absolute": "abs", "multiply": "mul", "subtract": "sub", "negative": "neg", "fix": "trunc",
            "arccos": "acos", "arccosh": "acosh", "arcsin": "asin", "arcsinh": "asinh", "arctan": "atan",
            "arctan2": "atan2", "arctanh": "atanh"}


def _method_alias(alias, target):
    def method(self, *args, **kwargs):
        return getattr(self, target)(*args, **kwargs)
    method.__name__ = method.__qualname__ = alias
    method.__doc__ = f"Alias of Tensor.{target}, as torch's."
    return method


FUNCTIONS["range"] = creation.range_  # torch.range: deprecated in PyTorch, still in old scripts
for _alias, _target in _ALIASES.items():
    FUNCTIONS[_alias] = FUNCTIONS[_target]
    for _suffix in ("", "_"):
        if hasattr(Tensor, _target + _suffix) and not hasattr(Tensor, _alias + _suffix):
            setattr(Tensor, _alias + _suffix, _method_alias(_alias + _suffix, _target + _suffix))


def _function_in_place(name):
    """torch.<name>_(input, ...): input.<name>_(...), the function form PyTorch has of these in-place ops."""
    def function(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"torch.{name}(input, ...): input.{name}(...), in place."
    return function


# the in-place ops PyTorch also has as torch.<name>_ functions
_IN_PLACE_FUNCTIONS = ("abs acos acosh asin asinh atan atanh ceil clamp clamp_max clamp_min clip cos cosh deg2rad erf "
                       "erfc exp exp2 expm1 floor frac i0 index_put ldexp log log10 log1p log2 logit nan_to_num neg "
                       "rad2deg reciprocal relu round rsqrt sigmoid sin sinc sinh sqrt square tan tanh trunc xlogy "
                       "arccos arccosh arcsin arcsinh arctan arctanh fix negative").split()
for _name in _IN_PLACE_FUNCTIONS:
    if hasattr(Tensor, _name + "_") and _name + "_" not in FUNCTIONS:
        FUNCTIONS[_name + "_"] = _function_in_place(_name + "_")
