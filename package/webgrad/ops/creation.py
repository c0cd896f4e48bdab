"""Creation and random ops beyond the basic makers, as torch: empty_strided, Tensor.new_empty_strided,
empty_permuted, scalar_tensor, logspace, randint_like, torch.normal's four forms, bernoulli, the in-place
random fills cauchy_, exponential_, geometric_ and log_normal_, torch.fill, torch.zero_, resize_ and
resize_as_.

Random values come from webgrad.random's counter-based stream (uniform or normal numbers drawn by the
device's random kernel), transformed with elementwise ops: the same seed gives the same numbers on every
device. normal's result is mean + std * N(0, 1), so its gradient flows to tensor means and stds as torch's
does; bernoulli's gradient is zeros, as torch's.
"""

import math
import operator
import warnings

from .. import _autograd, devices, dtypes, random
from .._tensor import Tensor, _check_layout, _scalar_arg, _size_arg, empty, full, linspace, tensor
from .._view import View
from .core import broadcast_shapes
from .elementwise import record_zero_grad, where
from .inplace import check_inplace
from .._backends import kernels


# ===================================================================== uninitialised, with a layout
def _strided(name, size, stride, dtype, device, requires_grad):
    size = _size_arg(name, (), tuple(size))
    stride = tuple(operator.index(s) for s in stride)
    if len(stride) != len(size):
        raise RuntimeError(f"{name}(): mismatch in length of strides and shape: {len(size)} != {len(stride)}")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"{name}(): negative strides are not supported, got {list(stride)}")
    dtype, dev = dtypes.to_dtype(dtype, dtypes.default_float()), devices.get(device)
    span = 1 + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else 0
    t = Tensor._make(View(dev.backend.empty(span, dtype), size, stride, 0, dtype), dev)
    return t.requires_grad_(True) if requires_grad else t


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """An uninitialised tensor of `size` with the given strides (over a storage just large enough)."""
    _check_layout("empty_strided", layout, pin_memory)
    return _strided("empty_strided", size, stride, dtype, device, requires_grad)


def new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                      pin_memory=False):
    """empty_strided with this tensor's dtype and device unless given (Tensor.new_empty_strided)."""
    _check_layout("new_empty_strided", layout, pin_memory)
    return _strided("new_empty_strided", size, stride, self.dtype if dtype is None else dtype,
                    self.device if device is None else device, requires_grad)


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, requires_grad=False,
                   pin_memory=False):
    """An uninitialised tensor of `size` laid out in memory in the dim order physical_layout (outermost first)."""
    _check_layout("empty_permuted", layout, pin_memory)
    size = _size_arg("empty_permuted", (), tuple(size))
    order = [operator.index(d) for d in physical_layout]
    if sorted(order) != list(range(len(size))):
        raise RuntimeError(f"empty_permuted(): physical_layout {order} is not a permutation of the dims of "
                           f"{list(size)}")
    stride, acc = [0] * len(size), 1
    for d in reversed(order):
        stride[d] = acc
        acc *= size[d]
    return _strided("empty_permuted", size, stride, dtype, device, requires_grad)


def scalar_tensor(s, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A 0-d tensor holding s (float32 unless dtype says otherwise)."""
    _check_layout("scalar_tensor", layout, pin_memory)
    return full((), _scalar_arg("scalar_tensor", s), dtype=dtypes.to_dtype(dtype, dtypes.default_float()),
                device=device,
                requires_grad=requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, layout=None, device=None, requires_grad=False,
             pin_memory=False):
    """base ** linspace(start, end, steps) (start and end numbers or 0-d tensors)."""
    _check_layout("logspace", layout, pin_memory)
    exponents = linspace(_scalar_arg("logspace", start), _scalar_arg("logspace", end), steps, dtype=dtypes.float64,
                         device="cpu").tolist()
    out_dtype = dtypes.to_dtype(dtype, dtypes.default_float())
    values = [float(base) ** e for e in exponents]
    if not out_dtype.is_floating:
        values = [int(v) for v in values]
    return tensor(values, dtype=out_dtype, device=device, requires_grad=requires_grad) if values else \
        empty(0, dtype=out_dtype, device=device, requires_grad=requires_grad)


def range_(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """torch.range (deprecated in PyTorch, with its warning): start, start + step, ... up to end included,
    floor((end - start) / step) + 1 values, of the default float dtype unless dtype says otherwise (also for
    integer bounds, unlike arange)."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=2)
    _check_layout("range", layout)
    if end is None:
        raise TypeError("range() missing required argument 'end'")
    start, end, step = (_scalar_arg("range", v) for v in (start, end, step))
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    count = int(math.floor((end - start) / step)) + 1
    values = [start + i * step for i in range(count)]
    result = tensor(values, dtype=dtypes.to_dtype(dtype, dtypes.default_float()), device=device,
                    requires_grad=requires_grad)
    if out is not None:
        out.resize_(tuple(result.shape)).copy_(result)
        return out
    return result


# ===================================================================== random
def randint_like(input, low=0, high=None, *, dtype=None, layout=None, device=None, requires_grad=False,
                 memory_format=None, generator=None):
    """Integers from [low, high) in input's shape (randint_like(input, high) or (input, low, high)), with
    input's dtype and device unless given."""
    _check_layout("randint_like", layout)
    if high is None:
        low, high = 0, low
    return random.randint(low, high, tuple(input.shape), generator=generator,
                          dtype=input.dtype if dtype is None else dtype,
                          device=input.device if device is None else device, requires_grad=requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None, device=None,
           pin_memory=False, requires_grad=False):
    """torch.normal: normal(mean_tensor, std_tensor), normal(mean_tensor, std=1.0), normal(mean, std_tensor),
    normal(mean, std, size). Tensor means and stds broadcast; the result is mean + std * N(0, 1), so their
    gradients are torch's."""
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    if not tensors:
        if size is None:
            raise TypeError("normal(): with a float mean and std, size is required")
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
        _check_layout("normal", layout, pin_memory)
        result = random.randn(size=_size_arg("normal", (), tuple(size)), generator=generator,
                              dtype=dtype, device=device) * float(std) + float(mean)
        result = result.requires_grad_(True) if requires_grad else result
    else:
        if size is not None:
            raise TypeError("normal(): size is only taken with a float mean and std")
        shape = broadcast_shapes(*(tuple(t.shape) for t in tensors), op="normal")
        like = tensors[0]
        if not isinstance(std, Tensor) and std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
        noise = random.randn(size=shape, generator=generator, dtype=like.dtype, device=like.device)
        result = noise * std + mean
    if out is not None:
        return out.copy_(result)
    return result


def bernoulli(input, p=None, *, generator=None, out=None):
    """1.0 with probability input (or p, in input's shape), else 0.0, in input's dtype; its gradient is zeros."""
    prob = input if p is None else p
    u = random.rand(size=tuple(input.shape), generator=generator, dtype=dtypes.float32, device=input.device)
    drawn = (u < prob).to(input.dtype)
    if input.dtype.is_floating and _autograd.is_grad_enabled() and input.requires_grad:
        record_zero_grad(drawn, "Bernoulli", (input,))
    if out is not None:
        return out.copy_(drawn)
    return drawn


def bernoulli_(self, p=0.5, *, generator=None):
    """Fill with 1 (probability p, a number or a tensor broadcast to this shape) or 0."""
    check_inplace(self, "bernoulli_")
    prob = p if not isinstance(p, Tensor) else p.expand(*self.shape)
    u = random.rand(size=tuple(self.shape), generator=generator, dtype=dtypes.float32, device=self.device)
    return _fill_with(self, (u < prob).to(self.dtype), "bernoulli_")


def _fill_with(x, values, op):
    """x's elements replaced by values (no gradient reaches x's old values, as for fill_)."""
    check_inplace(x, op)
    with _autograd.no_grad():
        kernels.copy(x.device.backend, x._view, values.to(x.dtype)._view)
    _autograd.note_write(x._view.storage)
    return x


def _uniform_like(x, generator):
    """Uniform numbers in (0, 1] in x's shape, float32 (float64 for a float64 x)."""
    dtype = dtypes.float64 if x.dtype is dtypes.float64 else dtypes.float32
    return 1.0 - random.rand(size=tuple(x.shape), generator=generator, dtype=dtype, device=x.device)


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Fill with Cauchy-distributed numbers: median + sigma * tan(pi * (u - 1/2))."""
    if sigma <= 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    u = _uniform_like(self, generator)
    return _fill_with(self, ((u - 0.5) * math.pi).tan() * sigma + median, "cauchy_")


def exponential_(self, lambd=1.0, *, generator=None):
    """Fill with exponentially distributed numbers of rate lambd: -log(u) / lambd."""
    if lambd <= 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    u = _uniform_like(self, generator)
    return _fill_with(self, u.log() * (-1.0 / lambd), "exponential_")


def geometric_(self, p, *, generator=None):
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...): ceil(log(u) / log(1-p))."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    u = _uniform_like(self, generator)
    trials = (u.log() * (1.0 / math.log1p(-p))).ceil()
    return _fill_with(self, where(trials < 1, 1.0, trials), "geometric_")


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fill with exp of normal numbers of the given mean and std."""
    if std <= 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    noise = random.randn(size=tuple(self.shape), generator=generator,
                         dtype=dtypes.float64 if self.dtype is dtypes.float64 else dtypes.float32, device=self.device)
    return _fill_with(self, (noise * std + mean).exp(), "log_normal_")


# ===================================================================== fills and resizing
def fill(input, value):
    """A tensor of input's shape and dtype filled with value (a number or a 0-d tensor); input's gradient is
    zeros, a tensor value's the sum of the output's."""
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"fill only supports 0-dimension value tensor but got tensor with {value.ndim} "
                               "dimensions.")
        value = value.to(input.dtype)
    else:
        value = full((), value, dtype=input.dtype, device=input.device)
    every = full(tuple(input.shape), True, dtype=dtypes.bool_, device=input.device)
    return where(every, value, input)


def resize_(self, *sizes, memory_format=None):
    """Give this tensor the shape `sizes` (contiguous): its first elements are kept, new ones are undefined."""
    shape = _size_arg("resize_", sizes, None)
    if self.requires_grad and _autograd.is_grad_enabled():
        raise RuntimeError("cannot resize variables that require grad")
    numel = 1
    for s in shape:
        numel *= s
    v = self._view
    if v.is_contiguous() and numel <= v.numel:  # the same storage, seen with the new shape
        self._view = View(v.storage, shape, View.contiguous_strides(shape), v.offset, v.dtype)
        return self
    storage = self.device.backend.empty(numel, v.dtype)
    keep = min(numel, v.numel)
    if keep:
        source = self.contiguous()._view
        kernels.copy(self.device.backend, View(storage, (keep,), (1,), 0, v.dtype),
                     View(source.storage, (keep,), (1,), source.offset, v.dtype))
    self._view = View(storage, shape, View.contiguous_strides(shape), 0, v.dtype)
    return self


def resize_as_(self, other, memory_format=None):
    """resize_ to other's shape."""
    return resize_(self, tuple(other.shape))
