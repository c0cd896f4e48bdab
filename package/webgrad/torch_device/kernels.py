"""The webgpu device's ATen kernels: PyTorch's operators run on webgrad's kernels, registered at PrivateUse1.

Most compute ops come from the compile backend's table (``webgrad.torch_backend.aten_table.ATEN``: one
mapping serves both, written once), wrapped so that webgpu torch tensors become webgrad Tensors and results
become webgpu torch tensors again, with no copy either way. In-place variants (``add_``) run the functional
op and write the result through the target's view. Memory (empty, copy, moves between devices, ``.item()``),
views (PyTorch's own C++ view kernels, which only touch sizes and strides), random fills, batch norm and the
fused optimizers are written here. What no kernel covers goes to the CPU fallback (fallback.py).
"""

import math
import numbers

import torch

import webgrad as wg
from webgrad import dtypes
from webgrad.ops.elementwise import new
from webgrad import replay
from webgrad.random import fill_random
from webgrad._view import View
from webgrad._backends import kernels as K

from ..torch_backend import aten_table
from ..torch_backend.aten_table import ATEN, NEEDS_DEVICE, Unsupported
from . import storage as st
from .storage import DEVICE, device_mismatch, unwrap, wrap

aten = torch.ops.aten
_LIB = torch.library.Library("aten", "IMPL")
_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
KERNELS = {}  # OpOverload -> the Python kernel registered for it


def register(*ops):
    def deco(fn):
        for op in ops:
            _LIB.impl(op, fn, "PrivateUse1")
            KERNELS[op] = fn
        return fn
    return deco


# ------------------------------------------------------------------ arguments in, results out
def _to_webgrad(a, found):
    """A kernel argument with webgpu tensors as webgrad Tensors (noting their torch dtypes in `found`) and
    0-dim CPU tensors (wrapped numbers, torch.tensor(2.0)) as Python numbers, as PyTorch allows."""
    if isinstance(a, torch.Tensor):
        if a.is_cpu:
            if a.dim() == 0:
                return a.item()
            raise device_mismatch(a.device)
        found.append(a)
        return unwrap(a)  # (a tensor of another device raises PyTorch's error there)
    if isinstance(a, (list, tuple)):
        return type(a)([_to_webgrad(x, found) for x in a])
    return a


def _to_torch(out, inputs, fresh=True):
    """Webgrad results as webgpu torch tensors. fresh: the op is functional, so a result that shares memory
    with an input (a webgrad op that returned a view) is copied, and a broadcast view made dense: PyTorch
    assumes a functional op's result owns its memory."""
    if isinstance(out, wg.Tensor):
        if fresh:
            view = out._view
            storage = view.storage
            # (a storage no torch tensor holds yet, a kernel's new output, is none of the inputs')
            if st.held(storage) and any(st.storage_of(t) is storage for t in inputs):
                out = out.clone()
            elif not st.dense(view.shape, view.strides):  # (no broadcast, no gaps: valid in ATen)
                out = out.contiguous()
        return wrap(out)
    if isinstance(out, (list, tuple)):
        return type(out)([_to_torch(x, inputs, fresh) for x in out])
    return out


def functional(fn, op):
    """A kernel for ATen op `op` from `fn` (webgrad Tensors in, webgrad Tensors out)."""
    needs_device = op in NEEDS_DEVICE

    def kernel(*args, **kwargs):
        found = []
        wargs = [_to_webgrad(a, found) for a in args]
        wkwargs = {k: _to_webgrad(v, found) for k, v in kwargs.items()} if kwargs else {}
        if needs_device:
            wkwargs["target"] = st.webgrad_device()
        try:  # (no webgrad autograd to turn off: the unwrapped tensors never require grad)
            out = fn(*wargs, **wkwargs)
        except Unsupported as e:
            from .fallback import run_on_cpu
            return run_on_cpu(op, args, kwargs, why=str(e))
        return _to_torch(out, found)
    kernel.__name__ = f"webgpu_{op}"
    return kernel


def write_into(target, value):
    """Write webgrad Tensor `value` (broadcast to its shape, converted to its dtype) into webgpu tensor
    `target`'s memory, through its strides."""
    view = unwrap(target)
    st.forget_scalars(target)
    shape = tuple(target.shape)
    if tuple(value.shape) != shape:
        try:
            value = value.expand(*shape)
        except Exception:
            raise RuntimeError(f"output with shape {list(shape)} doesn't match the broadcast shape "
                               f"{list(value.shape)}") from None
    if view.numel():
        K.copy(view.device.backend, view._view, value._view)
    return target


_COUNTING = {aten.add_.Tensor, aten.add_.Scalar}


def _count_on_host(self, other, alpha=1):
    """self += alpha * other as one fill, where self is a one-element integer tensor whose value the host knows
    and the rest are integers: a module's counter (BatchNorm's num_batches_tracked.add_(1)) costs one kernel
    instead of an add and a copy back. False where that does not apply (the dynamic scalar the fill reads is a
    float32, exact below 2**24)."""
    if self.numel() != 1 or self.dtype.is_floating_point or self.dtype.is_complex or self.dtype is torch.bool:
        return False
    if isinstance(other, torch.Tensor):
        if other.dim() or other.device.type != "cpu" or other.dtype.is_floating_point or other.dtype is torch.bool:
            return False
        other = other.item()
    if type(other) is not int or type(alpha) is not int:
        return False
    known = st.known_scalar(self)
    if known is None or abs(known + alpha * other) >= 1 << 24:
        return False
    _set_count(self, known + alpha * other, alpha * other)
    return True


def in_place(fn, op):
    """The in-place variant's kernel (add_ from add): the functional result written through self's view."""
    counting = op in _COUNTING

    def kernel(self, *args, **kwargs):
        if counting and args and _count_on_host(self, args[0], kwargs.get("alpha", 1)):
            return self
        found = [self]
        wself = unwrap(self)
        wargs = _to_webgrad(args, found)
        wkwargs = {k: _to_webgrad(v, found) for k, v in kwargs.items()}
        try:
            out = fn(wself, *wargs, **wkwargs)
        except Unsupported as e:
            from .fallback import run_on_cpu
            return run_on_cpu(op, (self,) + args, kwargs, why=str(e))
        if isinstance(out, (tuple, list)):
            out = out[0]
        if out.dtype is not wself.dtype and out.dtype.is_floating and not wself.dtype.is_floating:
            raise RuntimeError(f"result type {st.TO_TORCH[out.dtype]} can't be cast to the desired output type "
                               f"{self.dtype}")
        return write_into(self, out)
    kernel.__name__ = f"webgpu_{op}"
    return kernel


# the compile table's entries that are views, or that the kernels below write for eager use: PyTorch's own view
# kernels make views of webgpu tensors, and the copies need the eager forms
_NOT_FROM_TABLE = {aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.alias.default,
                   aten.detach.default, aten.t.default, aten.permute.default, aten.transpose.int,
                   aten.expand.default, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims,
                   aten.squeeze.default, aten.slice.Tensor, aten.select.int, aten._to_copy.default,
                   aten.clone.default, aten.lift_fresh_copy.default, aten.empty_like.default,
                   aten._native_batch_norm_legit_functional.default,
                   aten._native_batch_norm_legit_no_training.default, aten.split_with_sizes.default,
                   aten.split.Tensor, aten.unbind.int, aten.ones_like.default, aten.zeros_like.default,
                   aten.full_like.default}


def _register_table():
    for op, fn in ATEN.items():
        # the foreach ops stay PyTorch's own loops over the per-tensor kernels (their in-place forms write
        # lists, which the generic in-place kernel does not)
        if op in _NOT_FROM_TABLE or op.overloadpacket.__name__.startswith("_foreach_"):
            continue
        register(op)(functional(fn, op))
        packet = getattr(aten, op.overloadpacket.__name__ + "_", None)
        inplace = getattr(packet, op._overloadname, None) if packet is not None else None
        if inplace is not None and inplace not in KERNELS:
            register(inplace)(in_place(fn, inplace))


# ------------------------------------------------------------------ memory: creation, copies, moves, scalars
def _dtype(dtype):
    return dtype if dtype is not None else torch.get_default_dtype()


@register(aten.empty.memory_format)
def empty(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    if memory_format in (torch.channels_last, torch.channels_last_3d):
        return st.empty(size, _dtype(dtype), torch.empty(size, device="meta", memory_format=memory_format).stride())
    return st.empty(size, _dtype(dtype))


@register(aten.empty_strided.default)
def empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    return st.empty(size, _dtype(dtype), tuple(stride))


@register(aten.arange.start_out)
def arange_out(start, end, step=1, *, out):
    """torch.arange(..., device="webgpu") with a dtype PyTorch routes here, and arange(out=): made on the device
    in out's dtype (out resized to their count, as ATen's out= ops are)."""
    values = aten_table._arange(start, end, step, dtype=out.dtype, target=st.webgrad_device())
    if tuple(out.shape) != tuple(values.shape):
        out.resize_(values.shape)
    return write_into(out, values)


def _fill(self, value):
    st.forget_scalars(self)
    view = unwrap(self)
    if view.numel():
        K.fill(view.device.backend, view._view, value)
    return self


def _filled_like(op, value):
    """ones_like, zeros_like and full_like (autograd's seed of every loss.backward() is a ones_like): a new tensor in
    the strides PyTorch's *_like ops give, filled by one kernel. Another device named gets its tensor there."""
    def filled(self, value, dtype, layout, device, pin_memory, memory_format):
        dtype = dtype or self.dtype
        value = _fill_value(value, dtype)
        strides = st.copy_strides(self, memory_format)
        if device is not None and torch.device(device).type != DEVICE.type:
            return torch.empty_strided(tuple(self.shape), strides, dtype=dtype, device=device).fill_(value)
        out = st.empty(self.shape, dtype, strides)
        if out.numel():
            K.fill(st.webgrad_device().backend, st.view_of(out), value)
        return out

    if value is None:
        def kernel(self, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
            return filled(self, fill_value, dtype, layout, device, pin_memory, memory_format)
    else:
        def kernel(self, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
            return filled(self, value, dtype, layout, device, pin_memory, memory_format)
    register(op)(kernel)


def _fill_value(value, dtype):
    """A fill value as a tensor of `dtype` holds it (full_like(ints, 2.7) is 2, as ATen's cast)."""
    if isinstance(value, torch.Tensor):
        value = value.item()
    if dtype is torch.bool:
        return bool(value)
    if not (dtype.is_floating_point or dtype.is_complex):
        try:
            return int(value)
        except (OverflowError, ValueError):  # (inf, nan)
            raise RuntimeError(f"value cannot be converted to type {dtype} without overflow") from None
    return value


_filled_like(aten.ones_like.default, 1)
_filled_like(aten.zeros_like.default, 0)
_filled_like(aten.full_like.default, None)


@register(aten.fill_.Scalar)
def fill_scalar(self, value):
    _fill(self, value)
    if self.numel() == 1:
        st.note_scalar(self, value)
    return self


@register(aten.fill_.Tensor)
def fill_tensor(self, value):
    if value.dim() != 0:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} "
                           "dimensions.")
    if value.device.type == DEVICE.type:
        return write_into(self, unwrap(value))
    return _fill(self, value.item())


@register(aten.zero_.default)
def zero_(self):
    _fill(self, 0)
    if self.numel() == 1:
        st.note_scalar(self, 0)
    return self


@register(aten._foreach_add_.Scalar)
def _foreach_add_scalar(tensors, scalar):
    """PyTorch's loop, except for one-element tensors whose value the host knows (the optimizers' step counts):
    their new value is written by one fill, not computed on the device and copied back. In a recorded step the
    fill reads a dynamic scalar that a replay hook advances, as it advances the host's copy."""
    for t in tensors:
        known = st.known_scalar(t) if t.numel() == 1 and t.dtype.is_floating_point else None
        if known is None:
            t.add_(scalar)
            continue
        _set_count(t, known + scalar, scalar)


def _set_count(t, value, step):
    """Write `value`, which the host knows, into one-element tensor `t`: deferred until something touches its
    memory (storage.defer_count), or in a recorded step one fill reading a dynamic scalar that a replay hook
    advances by `step` per replay, as it advances the host's copy."""
    backend = st.webgrad_device().backend
    if not backend.capturing:
        st.defer_count(t, value)
        return
    view = unwrap(t)
    counter = _dynamic(backend, _count_key(t), float(value))
    K.fill(backend, view._view, counter)
    st.note_scalar(t, value)
    if backend.capturing:
        _COUNTED.add(_count_key(t))
        replay.on_replay(lambda: _count(t, counter, step))


_COUNTED = set()  # count keys that a replay hook advances (see _foreach_add_scalar)


def _count_key(t):
    return ("count", t.untyped_storage().data_ptr(), t.storage_offset())


def _count(t, counter, step):
    value = counter.value + step
    counter.set(value)
    st.note_scalar(t, value if t.dtype.is_floating_point else int(value))


def copy_from(src, dst):
    """dst[...] = src across devices: webgpu <- webgpu (a device copy), webgpu <- cpu (an upload), cpu <-
    webgpu (a read-back); broadcasting src to dst's shape and converting its dtype, as Tensor.copy_."""
    if src.device.type == DEVICE.type and dst.device.type == DEVICE.type:
        if src is dst or (src.untyped_storage().data_ptr() == dst.untyped_storage().data_ptr() and
                          src.storage_offset() == dst.storage_offset() and src.stride() == dst.stride() and
                          src.shape == dst.shape and src.dtype is dst.dtype):
            return dst  # onto itself (a compiled graph that updated a buffer in place hands it back)
        return write_into(dst, unwrap(src))
    if dst.device.type == DEVICE.type:
        if src.device.type != "cpu":
            raise RuntimeError(f"copy from {src.device} to {dst.device}: webgpu tensors exchange data with the CPU")
        host = src.detach().to(dst.dtype).expand(dst.shape)
        target = unwrap(dst)
        if not host.numel():
            return dst
        value = unwrap(st.from_cpu(host.contiguous()))
        K.copy(target.device.backend, target._view, value._view)
        st.note_upload(dst, host)
        return dst
    if dst.device.type != "cpu":
        raise RuntimeError(f"copy from {src.device} to {dst.device}: webgpu tensors exchange data with the CPU")
    host = st.to_cpu(src)
    with torch.no_grad():
        dst.copy_(host)
    return dst


@register(aten.copy_.default)
def copy_(self, src, non_blocking=False):
    return copy_from(src, self)


@register(aten._copy_from.default)
def _copy_from(self, dst, non_blocking=False):
    return copy_from(self, dst)


@register(aten._copy_from_and_resize.default)
def _copy_from_and_resize(self, dst):
    if tuple(dst.shape) != tuple(self.shape):
        dst.resize_(self.shape)
    return copy_from(self, dst)


@register(aten._to_copy.default)
def _to_copy(self, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    """Copies keep the strides PyTorch's copies take (st.copy_strides: preserve_format keeps a dense tensor's
    own, a transposed one's too)."""
    dtype = dtype or self.dtype
    target = torch.device(device) if device is not None else self.device
    strides = st.copy_strides(self, memory_format)
    if target.type == "cpu":
        out = st.to_cpu(self, strides)
        return out if out.dtype is dtype else out.to(dtype)
    if target.type != DEVICE.type:
        raise RuntimeError(f"webgpu tensors move to the CPU or stay on webgpu, not to {target}")
    if self.device.type == "cpu":  # BackendSelect sends cpu -> webgpu moves here too
        return st.from_cpu(self, dtype, strides)
    if self.device.type != DEVICE.type:
        raise RuntimeError(f"copy from {self.device} to {target}: webgpu tensors exchange data with the CPU")
    x = unwrap(self)
    out = st.empty(self.shape, dtype, strides)
    if self.numel():
        K.copy(x.device.backend, unwrap(out)._view, x._view)
    return out


@register(aten.clone.default)
def clone(self, memory_format=None):
    return _to_copy(self, memory_format=memory_format)


@register(aten._local_scalar_dense.default)
def _local_scalar_dense(self):
    return st.to_cpu(self).item()


# views: PyTorch's own (CPU) view kernels touch only sizes, strides and the storage, never data
def _view_kernel(op):
    def kernel(*args, **kwargs):
        return op.redispatch(_CPU_KEYS, *args, **kwargs)
    return kernel


for _op in (aten.as_strided.default, aten.view.default, aten._reshape_alias.default, aten.unfold.default,
            aten.set_.source_Storage_storage_offset, aten.set_.source_Storage, aten.set_.source_Tensor):
    register(_op)(_view_kernel(_op))


@register(aten.set_.default)
def set_empty(self):
    _, held = st.new_storage(0, self.dtype)
    return aten.set_.source_Storage_storage_offset.redispatch(_CPU_KEYS, self, held, 0, [0], [1])


@register(aten.resize_.default)
def resize_(self, size, memory_format=None):
    size = tuple(size)
    if tuple(self.shape) == size:
        return self
    numel = math.prod(size)
    strides = list(View.contiguous_strides(size))
    offset = self.storage_offset()
    held = self.untyped_storage()
    st.forget_scalars(self)
    if (offset + numel) * self.dtype.itemsize > held.nbytes():
        # new memory, holding the old elements first (as PyTorch's resize_ keeps them)
        old = unwrap(self).contiguous() if self.numel() else None
        storage, held = st.new_storage(numel, self.dtype)
        if old is not None:
            n = min(old.numel(), numel)
            K.copy(old.device.backend, View(storage, (n,), (1,), 0, old.dtype), old._view.reshaped((old.numel(),)) if
                                    n == old.numel() else old.reshape(-1)[:n]._view)
        offset = 0
    return aten.set_.source_Storage_storage_offset.redispatch(_CPU_KEYS, self, held, offset, list(size), strides)


# ------------------------------------------------------------------ random numbers (webgrad's generator)
@register(aten.normal_.default)
def normal_(self, mean=0.0, std=1.0, generator=None):
    return _random(self, "normal", mean, std)


@register(aten.uniform_.default)
def uniform_(self, from_=0.0, to=1.0, generator=None):
    return _random(self, "uniform", from_, to)


@register(getattr(aten.random_, "from"))
def random_from(self, from_, to=None, generator=None):
    if to is None:
        raise Unsupported("random_ without an upper bound")
    return _random(self, "randint", from_, to)


@register(aten.random_.to)
def random_to(self, to, generator=None):
    return _random(self, "randint", 0, to)


def _random(self, dist, a, b):
    x = unwrap(self)
    if not x.numel():
        return self
    if dist == "randint" and x.dtype.is_floating:
        target = new(tuple(x.shape), dtypes.int32, x.device)
        fill_random(target, dist, a, b)
        K.copy(x.device.backend, x._view, target._view)
    else:
        fill_random(x, dist, a, b)
    return self


def _bernoulli(shape, device, p, dtype):
    """1 where a uniform draw of webgrad's generator is below p (a number, or a webgrad Tensor broadcast to
    shape), else 0, in dtype."""
    u = new(tuple(shape), dtypes.float32, device)
    if u.numel():
        fill_random(u, "uniform", 0.0, 1.0)
    with wg.no_grad():
        return (u < p).to(dtype=dtype)


@register(aten.bernoulli_.float)
def bernoulli_(self, p=0.5, generator=None):
    x = unwrap(self)
    write_into(self, _bernoulli(x.shape, x.device, p, x.dtype))
    return self


@register(aten.bernoulli_.Tensor)
def bernoulli_tensor_(self, p, generator=None):
    x = unwrap(self)
    write_into(self, _bernoulli(x.shape, x.device, unwrap(p), x.dtype))
    return self


@register(aten.bernoulli.default)
def bernoulli(self, generator=None):
    """torch.bernoulli(probabilities): draws in the probabilities' shape and dtype."""
    x = unwrap(self)
    return wrap(_bernoulli(x.shape, x.device, x, x.dtype))


@register(aten.bernoulli.p)
def bernoulli_p(self, p, generator=None):
    x = unwrap(self)
    return wrap(_bernoulli(x.shape, x.device, p, x.dtype))


def _draws(shape, dist, device, a=0.0, b=1.0):
    """float32 draws of webgrad's generator: "uniform" on [a, b) or "normal" (mean a, std b)."""
    out = new(tuple(shape), dtypes.float32, device)
    if out.numel():
        fill_random(out, dist, a, b)
    return out


def _transformed(self, dist, transform, a=0.0, b=1.0):
    """self filled with transform(draws) (the distributions PyTorch samples by transforming uniforms)."""
    x = unwrap(self)
    if x.numel():
        with wg.no_grad():
            write_into(self, transform(_draws(x.shape, dist, x.device, a, b)))
    return self


@register(aten.exponential_.default)
def exponential_(self, lambd=1.0, generator=None):
    return _transformed(self, "uniform", lambda u: -wg.log1p(-u) / lambd)


@register(aten.geometric_.default)
def geometric_(self, p, generator=None):
    return _transformed(self, "uniform", lambda u: (wg.log1p(-u) / math.log1p(-p)).ceil().clamp(min=1))


@register(aten.log_normal_.default)
def log_normal_(self, mean=1.0, std=2.0, generator=None):
    return _transformed(self, "normal", wg.exp, mean, std)


@register(aten.cauchy_.default)
def cauchy_(self, median=0.0, sigma=1.0, generator=None):
    return _transformed(self, "uniform", lambda u: median + sigma * wg.tan(math.pi * (u - 0.5)))


def _normal(mean, std):
    """mean + std * N(0, 1) draws, broadcast, in the dtype of the tensor among them (float32 for numbers)."""
    found = []
    m, s = _to_webgrad((mean, std), found)
    shape = torch.broadcast_shapes(*(tuple(t.shape) for t in found))
    with wg.no_grad():
        out = m + s * _draws(shape, "normal", st.webgrad_device())
        dtype = found[0].dtype
        return wrap(out.to(dtype=st.TO_WEBGRAD[dtype]).contiguous()) if out.numel() else st.empty(shape, dtype)


register(aten.normal.Tensor_float)(lambda mean, std=1.0, *, generator=None: _normal(mean, std))
register(aten.normal.Tensor_Tensor)(lambda mean, std, *, generator=None: _normal(mean, std))
register(aten.normal.float_Tensor)(lambda mean, std, *, generator=None: _normal(mean, std))


@register(aten.native_dropout.default)
def native_dropout(x, p, train):
    if train is False or p == 0.0:
        w = unwrap(x)
        return _to_torch((w.clone(), wg.ones(tuple(w.shape), dtype=dtypes.bool_, device=w.device)), [x])
    w = unwrap(x)
    u = new(tuple(w.shape), dtypes.float32, w.device)
    fill_random(u, "uniform", 0.0, 1.0)
    with wg.no_grad():
        keep = u >= p
        out = wg.where(keep, w * (1.0 / (1.0 - p)), 0.0) if p < 1.0 else w * 0.0
    return _to_torch((out, keep), [x])


@register(aten.native_dropout_backward.default)
def native_dropout_backward(grad, mask, scale):
    g, m = unwrap(grad), unwrap(mask)
    with wg.no_grad():
        return _to_torch(wg.where(m, g * scale, 0.0), [grad])


# ------------------------------------------------------------------ ops written for eager use
@register(aten.native_batch_norm.default)
def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """(out, save_mean, save_invstd); the running statistics updated in place on the device."""
    found = []
    x, w, b, rm, rv = _to_webgrad((input, weight, bias, running_mean, running_var), found)
    if not aten_table._fusable_bn(x, w, b, rm, rv) or momentum is None:
        from .fallback import run_on_cpu
        return run_on_cpu(aten.native_batch_norm.default, (input, weight, bias, running_mean, running_var,
                                                            training, momentum, eps), {},
                          why="batch norm is mapped for float32 [N, C, ...] inputs with a momentum")
    for t in (running_mean, running_var):
        if t is not None:
            st.forget_scalars(t)
    out, save = aten_table.batch_norm_fused(x, w, b, rm, rv, training, momentum, eps)
    if not training:
        empty = wg.empty(0, dtype=x.dtype, device=x.device)
        return wrap(out), wrap(empty), wrap(empty.clone())
    return wrap(out), _to_torch(save[0].contiguous(), found), _to_torch(save[1].contiguous(), found)


register(aten._native_batch_norm_legit.default)(native_batch_norm)  # (the same arguments and results)


@register(aten._batch_norm_with_update.default)
def batch_norm_with_update(input, weight, bias, running_mean, running_var, momentum, eps):
    """native_batch_norm in training, and the empty reserve ATen's CPU kernel returns."""
    return (*native_batch_norm(input, weight, bias, running_mean, running_var, True, momentum, eps),
            torch.empty(0, dtype=torch.uint8, device=input.device))


@register(aten.native_layer_norm_backward.default)
def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    found = []
    g, x, mu, r, w, b = _to_webgrad((grad_out, input, mean, rstd, weight, bias), found)
    k = len(normalized_shape)
    dims = tuple(range(x.ndim - k, x.ndim))
    outer = tuple(range(x.ndim - k))
    with wg.no_grad():
        xhat = (x - mu) * r
        gw = (g * xhat).sum(outer) if output_mask[1] and w is not None else None
        gb = g.sum(outer) if output_mask[2] and b is not None else None
        gx = None
        if output_mask[0]:
            gy = g * w if w is not None else g
            n = 1
            for d in dims:
                n *= x.shape[d]
            gx = r * (gy - gy.mean(dims, keepdim=True) - xhat * (gy * xhat).mean(dims, keepdim=True))
    return tuple(_to_torch(t, found) if t is not None else None for t in (gx, gw, gb))


# ------------------------------------------------------------------ fused optimizers (fused=True)
# torch.optim's fused=True paths run webgrad's update kernels: one dispatch per parameter (SGD, whose
# recorded updates webgrad groups further), or one for many parameters (Adam's multi-tensor kernel where the
# backend has it). Per-step values (lr, Adam's step count) reach the kernels as the backend's dynamic scalars:
# in a recorded step (replayable) a replay hook advances them as the recorded _foreach_add_ advances the
# device's step counts, so no value is read back and each replay computes with its own step.
_SCALARS = {}  # (backend, key) -> the backend's dynamic scalar (a new device after webgpu.reset() makes its own)


def _dynamic(backend, key, value):
    if not backend.supports_capture:
        return value
    held = _SCALARS.get((backend, key))
    if held is None:
        held = _SCALARS[backend, key] = backend.scalar(value)
    elif held.value != value:
        held.set(value)
    return held


def _views(tensors):
    return [unwrap(t) if t is not None else None for t in tensors] if tensors else None


def _check_fused(params, grad_scale, found_inf):
    if grad_scale is not None or found_inf is not None:
        raise Unsupported("fused optimizer steps with a GradScaler (grad_scale, found_inf) are not mapped")
    for p in params:
        if not p.is_contiguous() or p.dtype is not torch.float32:
            raise Unsupported("fused optimizer steps on non-contiguous or non-float32 parameters are not mapped")


def _fused_sgd(params, grads, momentum_buffer_list, weight_decay, momentum, lr, dampening, nesterov, maximize,
               is_first_step, grad_scale=None, found_inf=None):
    _check_fused(params, grad_scale, found_inf)
    if isinstance(lr, torch.Tensor):
        lr = st.host_scalar(lr)
    ps, gs, bufs = _views(params), _views(grads), _views(momentum_buffer_list)
    backend = ps[0].device.backend
    hyper = dict(lr=float(lr), momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                 nesterov=nesterov, maximize=maximize, first=is_first_step)
    for i, (p, g) in enumerate(zip(ps, gs)):
        st.forget_scalars(params[i])
        K.sgd_step(backend, p._view, g.contiguous()._view, bufs[i]._view if bufs and momentum else None, hyper)
    _submit(backend)


register(aten._fused_sgd_.default)(_fused_sgd)
register(aten._fused_sgd_.tensor_lr)(_fused_sgd)


def _fused_adam(decoupled):
    def kernel(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
               weight_decay, eps, amsgrad, maximize, grad_scale=None, found_inf=None):
        _check_fused(params, grad_scale, found_inf)
        if isinstance(lr, torch.Tensor):
            lr = st.host_scalar(lr)
        ps, gs = [st.view_of(p) for p in params], [_dense_view(g) for g in grads]
        ms, vs = [st.view_of(m) for m in exp_avgs], [st.view_of(v) for v in exp_avg_sqs]
        vmax = [st.view_of(m) for m in max_exp_avg_sqs] if amsgrad else [None] * len(ps)
        backend = st.webgrad_device().backend
        # the step counts, as the optimizer's _foreach_add_ just left them (host copies: no read-back)
        counts = [st.host_scalar(t) if t.device.type == DEVICE.type else t.item() for t in state_steps]
        base = dict(beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                    maximize=maximize, decoupled=decoupled, lr=_dynamic(backend, ("lr", id(params[0])), float(lr)))
        capturing = backend.capturing
        if not (capturing or _CAPTURED_STEPS) and counts and all(n == counts[0] for n in counts):
            # An eager step whose parameters have all taken as many steps (the usual case) reads one step scalar:
            # one write a step instead of one per parameter (each a staged upload while the last step's kernels
            # still read the slot). A recorded step keeps one per count, which its replay hooks advance.
            hyper = dict(base, step=_dynamic(backend, ("steps", id(params[0])), float(counts[0])))
            steps, hypers = None, [hyper] * len(ps)
        else:
            steps = [_dynamic(backend, _count_key(t), float(n)) for t, n in zip(state_steps, counts)]
            hypers = [dict(base, step=s) for s in steps]
        for p in params + exp_avgs + exp_avg_sqs:
            st.forget_scalars(p)
        if backend.has(K.adam_steps):
            K.adam_steps(backend, ps, gs, ms, vs, vmax, hypers)
        else:
            for p, g, m, v, mx, hyper in zip(ps, gs, ms, vs, vmax, hypers):
                K.adam_step(backend, p, g, m, v, mx, hyper)
        if capturing:
            _CAPTURED_STEPS.append(True)
            # step counts that _foreach_add_scalar's hook does not advance were counted on the device by the
            # recorded step (one each per step): their scalars follow
            pairs = [(t, s) for t, s in zip(state_steps, steps) if t.device.type == DEVICE.type and
                     _count_key(t) not in _COUNTED]
            if pairs:
                replay.on_replay(lambda pairs=pairs: _advance(pairs))
        _submit(backend)
    return kernel


def _submit(backend):
    """Start the step's queued work at the end of a fused optimizer step, as webgrad's own optimizers do
    (optim.optimizer._submit). Eager work is otherwise submitted only at a read-back or every Runtime.FLUSH_AFTER
    dispatches: with the loss read every 10 steps, the GPU sat idle while the host issued ten steps and the host
    then waited for all ten, so a step cost its host time plus its GPU time instead of the larger of the two; and
    each step's new step count was staged behind the last step's unsubmitted kernels (an upload buffer and a copy a
    step). A step being recorded is submitted by its replays."""
    if not backend.capturing:
        backend.submit()


# Set once a fused Adam step has been recorded: from then on eager steps too keep one step scalar per count, the
# ones the recorded step's replay hooks advance from their own values.
_CAPTURED_STEPS = []


def _dense_view(t):
    """The webgrad View of webgpu tensor `t`'s data, made contiguous (a copy) where it is not."""
    view = st.view_of(t)
    return view if view.is_contiguous() else unwrap(t).contiguous()._view


def _advance(pairs):
    for t, scalar in pairs:
        value = scalar.value + 1.0
        scalar.set(value)
        st.note_scalar(t, value)


register(aten._fused_adam_.default)(_fused_adam(False))
register(aten._fused_adamw_.default)(_fused_adam(True))


def out_variant(functional_kernel, op):
    """The out= overload's kernel: the functional kernel's results written into the out tensors (resized where
    their shape differs, as PyTorch's out= ops do)."""
    outs = [a.name for a in op._schema.arguments if a.kwarg_only and a.alias_info is not None and
            a.alias_info.is_write]

    def kernel(*args, **kwargs):
        targets = [kwargs.pop(name) for name in outs]
        result = functional_kernel(*args, **kwargs)
        results = result if isinstance(result, (tuple, list)) else (result,)
        for target, value in zip(targets, results):
            if target.device.type != DEVICE.type:
                raise device_mismatch(target.device)
            if tuple(target.shape) != tuple(value.shape):
                target.resize_(value.shape)
            write_into(target, unwrap(value))
        return targets[0] if len(targets) == 1 else tuple(targets)
    kernel.__name__ = f"webgpu_{op}"
    return kernel


def _register_out_variants():
    """out= overloads of the ops with kernels: same arguments plus kwarg-only outputs."""
    for op, fn in list(KERNELS.items()):
        schema = op._schema
        if schema.is_mutable:
            continue
        names = [a.name for a in schema.arguments]
        packet = op.overloadpacket
        for overload in packet.overloads():
            candidate = getattr(packet, overload)
            if candidate in KERNELS:
                continue
            args = candidate._schema.arguments
            plain = [a.name for a in args if not (a.kwarg_only and a.alias_info is not None and a.alias_info.is_write)]
            if plain == names and len(plain) < len(args):
                register(candidate)(out_variant(fn, candidate))


# ------------------------------------------------------------------ composites whose decomposition wants float64
# ATen's linalg.pinv and linalg.matrix_rank make their default tolerances as float64 scalars on the input's device,
# and renorm's backward takes its norms in float64 off CUDA: the device has no float64. Registered at
# AutogradPrivateUse1 (consulted before the composite kernel for webgpu tensors), these run webgrad's own op
# instead, with its float32 tolerances; pinv through its ATen overload with tolerance tensors, whose
# PrivateUse1 kernel the table gives and whose backward is ATen's formula.
_AUTOGRAD = torch.library.Library("aten", "IMPL")


def _scalar(value):
    """A float tolerance as the 0-dim CPU tensor the Tensor overloads take (None stays None)."""
    return None if value is None else torch.tensor(float(value))


def _pinv(self, *, atol=None, rtol=None, hermitian=False):
    return aten.linalg_pinv.atol_rtol_tensor(self, atol=atol, rtol=rtol, hermitian=hermitian)


def _matrix_rank(self, *, atol=None, rtol=None, hermitian=False):
    from .fused_autograd import _plain
    if not (_plain(self) and all(type(t) in (type(None), torch.Tensor) for t in (atol, rtol))):
        return aten.linalg_matrix_rank.atol_rtol_tensor.decompose(self, atol=atol, rtol=rtol, hermitian=hermitian)
    found = []
    x, a, r = _to_webgrad((self, atol, rtol), found)
    with wg.no_grad():
        return _to_torch(wg.linalg.matrix_rank(x, atol=a, rtol=r, hermitian=hermitian), found)


def _renorm(self, p, dim, maxnorm):
    from .fused_autograd import _apply, _plain
    if not (_plain(self) and self.dtype in (torch.float32, torch.float16)):
        return torch._refs.renorm(self, p, dim, maxnorm)
    return _apply(lambda x: wg.renorm(x, p, dim, maxnorm), self)


for _name, _fn in {
        "linalg_pinv": lambda self, rcond, hermitian=False: _pinv(self, atol=_scalar(0.0), rtol=_scalar(rcond),
                                                                  hermitian=hermitian),
        "linalg_pinv.atol_rtol_float": lambda self, *, atol=None, rtol=None, hermitian=False: _pinv(
            self, atol=_scalar(atol), rtol=_scalar(rtol), hermitian=hermitian),
        "linalg_pinv.rcond_tensor": lambda self, rcond, hermitian=False: _pinv(
            self, atol=_scalar(0.0), rtol=rcond, hermitian=hermitian),
        "pinverse": lambda self, rcond=1e-15: _pinv(self, atol=_scalar(0.0), rtol=_scalar(rcond)),
        "linalg_matrix_rank": lambda self, tol, hermitian=False: _matrix_rank(self, atol=_scalar(tol),
                                                                              rtol=_scalar(0.0), hermitian=hermitian),
        "linalg_matrix_rank.tol_tensor": lambda self, tol, hermitian=False: _matrix_rank(
            self, atol=tol, rtol=_scalar(0.0), hermitian=hermitian),
        "linalg_matrix_rank.atol_rtol_tensor": _matrix_rank,
        "linalg_matrix_rank.atol_rtol_float": lambda self, *, atol=None, rtol=None, hermitian=False: _matrix_rank(
            self, atol=_scalar(atol), rtol=_scalar(rtol), hermitian=hermitian),
        "renorm": _renorm}.items():
    _AUTOGRAD.impl(_name, _fn, "AutogradPrivateUse1")

_register_table()
# what index_put_ and x[idx] = v reach through PyTorch's index_put_ (unsafe only skips bounds checks)
register(aten._index_put_impl_.default)(in_place(
    lambda x, indices, values, accumulate=False, unsafe=False: aten_table._index_put_general(
        x, indices, values, accumulate), aten._index_put_impl_.default))
_register_out_variants()
