"""How a torch tensor on "webgpu" holds its data: a torch storage whose data pointer names a webgrad storage.

A webgpu tensor is a plain ``torch.Tensor`` (dispatch key PrivateUse1) over a ``torch.UntypedStorage`` on the
webgpu device. That storage owns no memory: its data pointer is a unique address that this module maps to a
webgrad storage (GPU memory). PyTorch's own C++ makes views, ``.data``, ``detach()`` and ``nn.Parameter`` of
such a tensor by sharing the torch storage, so they all reach the same webgrad storage; a kernel builds the
webgrad view from the tensor's sizes, strides and storage offset, exactly as a CUDA kernel reads its tensor.
When the torch storage dies (its last tensor is gone) the mapping is dropped and the webgrad storage returns
to webgrad's buffer pool.

Integers: torch's int64 tensors (labels, indices) are webgrad int64 tensors, which WebGPU keeps in 32 bits
(WGSL has no 64-bit integers; see webgrad.dtypes): values beyond the int32 range do not fit.
"""

import weakref

import torch

import webgrad as wg
from webgrad import dtypes
from webgrad._tensor import Tensor
from webgrad._view import View
from webgrad._backends import kernels

DEVICE = torch.device("webgpu", 0)
_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
_set_storage = torch.ops.aten.set_.source_Storage_storage_offset
_redispatch_set = _set_storage._handle.redispatch_boxed  # (OpOverload.redispatch, less its Python frame)
_empty_tensor = torch._C._acc.create_empty_tensor
_from_pointer = torch._C._construct_storage_from_data_pointer

# torch dtype <-> webgrad dtype: the dtypes webgpu tensors may have
TO_WEBGRAD = {torch.float32: dtypes.float32, torch.float16: dtypes.float16, torch.int64: dtypes.int64,
              torch.int32: dtypes.int32, torch.uint8: dtypes.uint8, torch.bool: dtypes.bool_}
TO_TORCH = {w: t for t, w in TO_WEBGRAD.items()}
TO_TORCH[dtypes.float64] = torch.float64  # (webgrad's CPU backend only: what from_webgrad may be handed)

_by_pointer = {}  # data pointer -> webgrad storage
_dtype_of = {}  # data pointer -> the torch dtype its elements have (a storage is typed in webgrad)
_pending = {}  # data pointer -> CPU bytes of a storage loaded by torch.load, typed when a tensor first views it
_pointer_of = {}  # id(webgrad storage) -> (data pointer, weak reference to the torch storage)
_key_of = {}  # data pointer -> the id(webgrad storage) it is filed under in _pointer_of
_free_pointers = []
_next_pointer = [1 << 44]
_STRIDE = 1 << 40  # address space between two storages: larger than any byte offset inside one

_device = []  # the webgrad device that holds the data: set once by webgrad.torch_device


def device_mismatch(other):
    """PyTorch's error for an op given tensors of two devices."""
    return RuntimeError("Expected all tensors to be on the same device, but found at least two devices, "
                        f"{DEVICE} and {other}!")


def webgrad_device():
    if not _device:
        raise RuntimeError("the webgpu device is not registered: import webgrad.torch_device")
    return _device[0]


def webgrad_dtype(torch_dtype):
    """The webgrad dtype that stores `torch_dtype`; TypeError naming the dtype where webgpu has none."""
    dtype = TO_WEBGRAD.get(torch_dtype)
    if dtype is None or not webgrad_device().backend.name == "cpu" and dtype is dtypes.float64:
        raise TypeError(f"the webgpu device does not support dtype {torch_dtype}: webgpu tensors are float32, "
                        "float16, int64, int32, uint8 or bool")
    return dtype


def _release(pointer):
    # (runs each time a torch storage dies: a step frees a dozen; the maps that are usually empty are asked only
    # when they are not)
    if _deferred:
        _deferred.pop(pointer, None)
    _by_pointer.pop(pointer, None)
    _dtype_of.pop(pointer, None)
    if _pending:
        _pending.pop(pointer, None)
    if _host_scalars:
        _host_scalars.pop(pointer, None)
    key = _key_of.pop(pointer, None)
    if key is None:  # (a storage torch.load made that no tensor typed)
        _pointer_of.pop(("loaded", pointer), None)
    else:
        entry = _pointer_of.get(key)
        if entry is not None and entry[0] == pointer:
            del _pointer_of[key]
    _free_pointers.append(pointer)


def _file(pointer, storage, held):
    """Map `pointer` (the data pointer of torch storage `held`) to webgrad `storage` until `held` dies."""
    key = id(storage)
    _by_pointer[pointer] = storage
    _key_of[pointer] = key
    _pointer_of[key] = (pointer, weakref.ref(held, lambda _, p=pointer: _release(p)))


def held(storage):
    """Whether a torch storage stands for webgrad `storage` (some webgpu tensor may view it)."""
    return id(storage) in _pointer_of


def torch_storage(storage, numel, torch_dtype):
    """The torch storage standing for webgrad `storage` (made on first use; the same object while alive)."""
    entry = _pointer_of.get(id(storage))
    if entry is not None:
        held = entry[1]()
        if held is not None:
            return held
    pointer = _free_pointers.pop() if _free_pointers else _new_pointer()
    held = _from_pointer(pointer, DEVICE, numel * torch_dtype.itemsize)
    _file(pointer, storage, held)
    _dtype_of[pointer] = torch_dtype
    return held


def preserve(held):
    """Give torch storage `held` a copy of its data in new webgrad memory, so that its old memory may be
    rewritten (a replayed graph writes its outputs where it wrote them last time) without changing what the
    tensors over `held` read."""
    pointer = held.data_ptr()
    old = _by_pointer.get(pointer)
    if old is None:
        return
    dtype = TO_WEBGRAD[_dtype_of[pointer]]
    n = _storage_numel(old)
    backend = webgrad_device().backend
    new = backend.empty(n, dtype)
    kernels.copy(backend, View(new, (n,), (1,), 0, dtype), View(old, (n,), (1,), 0, dtype))
    forget_scalars_at(pointer)
    key = _key_of.get(pointer)
    if key is not None and _pointer_of.get(key, (None,))[0] == pointer:
        del _pointer_of[key]
    _file(pointer, new, held)


def _new_pointer():
    pointer = _next_pointer[0]
    _next_pointer[0] += _STRIDE
    return pointer


def _storage_numel(storage):
    n = getattr(storage, "numel", None)  # a WebGPU runtime Storage
    return n if isinstance(n, int) else len(storage)  # a NumPy array (the CPU backend)


def wrap(x, torch_dtype=None):
    """A webgpu torch tensor viewing webgrad Tensor `x`'s data (no copy). `torch_dtype`: what PyTorch should
    see (the one of `x`'s dtype unless told otherwise)."""
    view = x._view
    storage = view.storage
    if torch_dtype is None:
        torch_dtype = TO_TORCH[view.dtype]
    entry = _pointer_of.get(id(storage))
    held = entry[1]() if entry is not None else None
    if held is None:
        held = torch_storage(storage, _storage_numel(storage), torch_dtype)
    return _redispatch_set(_CPU_KEYS, _empty_tensor([0], torch_dtype), held, view.offset, view.shape, view.strides)


def storage_of(t):
    """The webgrad storage under webgpu tensor `t` (every read and write of a webgpu tensor's memory asks for it,
    so deferred counts are written here first: see defer_count)."""
    pointer = t.untyped_storage().data_ptr()
    if _deferred and pointer in _deferred:
        _write_deferred(pointer)
    storage = _by_pointer.get(pointer)
    if storage is None:
        if pointer in _pending:
            return _type_pending(pointer, t.dtype)
        if t.device.type != DEVICE.type:
            raise device_mismatch(t.device)
        raise RuntimeError(f"a tensor on {t.device} whose storage webgrad does not know (made outside "
                           "webgrad.torch_device?)")
    return storage


# data pointer -> {storage offset: value}: one-element counts (an optimizer's step counts) whose new value the host
# knows and whose write into GPU memory waits for the first kernel or read-back that touches the storage. Adam's
# per-parameter counts advance every step, and only the host reads them (the fused optimizers take the host's
# copy), so an eager step writes none of them: one dispatch each per step saved.
_deferred = {}


def defer_count(t, value):
    """Set one-element webgpu tensor `t` to `value` (known to the host) without a kernel now: storage_of writes
    it before anything else touches the memory."""
    _deferred.setdefault(t.untyped_storage().data_ptr(), {})[t.storage_offset()] = value
    note_scalar(t, value)


def _write_deferred(pointer):
    counts = _deferred.pop(pointer)
    storage = _by_pointer.get(pointer)
    if storage is None:  # (a storage loaded by torch.load: typed at its first use, which holds no deferred count)
        return
    dtype = TO_WEBGRAD[_dtype_of[pointer]]
    backend = webgrad_device().backend
    with backend.outside_capture():  # (written once, now: never part of a step being recorded)
        for offset, value in counts.items():
            kernels.fill(backend, View(storage, (1,), (1,), offset, dtype), value)


def _type_pending(pointer, torch_dtype):
    """A loaded storage's bytes become a webgrad storage of the dtype of the first tensor that views them."""
    raw = _pending.pop(pointer)
    dtype = webgrad_dtype(torch_dtype)
    typed = raw.view(torch_dtype) if raw.numel() % torch_dtype.itemsize == 0 else raw[:0].view(torch_dtype)
    storage = webgrad_device().backend.from_bytes(host_bytes(typed, dtype), dtype) if typed.numel() else \
        webgrad_device().backend.empty(1, dtype)
    _, ref = _pointer_of.pop(("loaded", pointer))
    _by_pointer[pointer] = storage
    _key_of[pointer] = id(storage)
    _pointer_of[id(storage)] = (pointer, ref)
    _dtype_of[pointer] = torch_dtype
    return storage


def load_storage(cpu_storage):
    """A webgpu torch storage holding `cpu_storage`'s bytes (torch.load with map_location="webgpu"): the upload
    waits for the first tensor that views it, which says the elements' dtype."""
    pointer = _free_pointers.pop() if _free_pointers else _new_pointer()
    held = _from_pointer(pointer, DEVICE, cpu_storage.nbytes())
    raw = torch.empty(cpu_storage.nbytes(), dtype=torch.uint8)
    if cpu_storage.nbytes():
        raw.untyped_storage().copy_(cpu_storage)
    _pending[pointer] = raw
    _key_of[pointer] = None
    _pointer_of[("loaded", pointer)] = (pointer, weakref.ref(held, lambda _, p=pointer: _release(p)))
    return held


def _storage_bytes(t):
    """A uint8 tensor over a storage of another dtype (torch's untyped storage copies, as torch.save makes):
    its bytes, read from the whole storage as that dtype, on the CPU."""
    pointer = t.untyped_storage().data_ptr()
    if pointer in _pending:
        raw = _pending[pointer]
    else:
        storage, dtype = storage_of(t), _dtype_of[pointer]
        n = _storage_numel(storage)
        whole = Tensor._make(View(storage, (n,), (1,), 0, TO_WEBGRAD[dtype]), webgrad_device())
        raw = torch.frombuffer(bytearray(whole.device.backend.to_bytes(whole._view)),
                               dtype=_TORCH_STORED[whole.dtype]).to(dtype).view(torch.uint8)
    return raw.as_strided(tuple(t.shape), t.stride(), t.storage_offset()).clone()


def is_byte_view(t):
    """Whether uint8 tensor `t` views the bytes of a storage of another dtype."""
    if t.dtype is not torch.uint8:
        return False
    pointer = t.untyped_storage().data_ptr()
    return pointer in _pending or _dtype_of.get(pointer, torch.uint8) is not torch.uint8


def view_of(t):
    """The webgrad View of webgpu tensor `t`'s data (what a kernel takes)."""
    dtype = TO_WEBGRAD.get(t.dtype)
    if dtype is None:
        webgrad_dtype(t.dtype)  # raises, naming the dtype
    return View(storage_of(t), t.shape, t.stride(), t.storage_offset(), dtype)


def unwrap(t):
    """The webgrad Tensor viewing webgpu tensor `t`'s data (no copy)."""
    return Tensor._make(view_of(t), _device[0] if _device else webgrad_device())


def new_storage(numel, torch_dtype):
    """A webgpu tensor's fresh storage: (webgrad storage, torch storage). A float64 tensor of no elements is
    allowed where the device has no float64 (it holds no value to lose): ATen makes such placeholders for the
    statistics of an empty batch norm."""
    if numel == 0 and torch_dtype is torch.float64:
        storage = webgrad_device().backend.empty(1, dtypes.float32)  # (never read: unwrap refuses float64)
        return storage, torch_storage(storage, 1, torch_dtype)
    dtype = webgrad_dtype(torch_dtype)
    storage = webgrad_device().backend.empty(max(numel, 1), dtype)
    return storage, torch_storage(storage, max(numel, 1), torch_dtype)


def empty(shape, torch_dtype, strides=None):
    """A new webgpu tensor (contents undefined), contiguous unless `strides` are given."""
    shape = tuple(shape)
    if strides is None:
        strides = View.contiguous_strides(shape)
    numel = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
    _, held = new_storage(numel, torch_dtype)
    return _redispatch_set(_CPU_KEYS, _empty_tensor([0], torch_dtype), held, 0, shape, tuple(strides))


# Host copies of one-element tensors whose value the host knows because a kernel here wrote it (zeros, fill_,
# _foreach_add_ of a number): the fused optimizers read their step counts from them without a read-back.
# {pointer: {offset: value}}. Every write into existing memory through this package (write_into, fills, the
# fallback's write-back, to_webgrad's sharing) forgets the storage's entries first, so an entry is current.
_host_scalars = {}


def note_scalar(t, value):
    """A kernel has just written `value` into one-element tensor `t`."""
    _host_scalars.setdefault(t.untyped_storage().data_ptr(), {})[t.storage_offset()] = value


def known_scalar(t):
    entry = _host_scalars.get(t.untyped_storage().data_ptr())
    return entry.get(t.storage_offset()) if entry else None


def forget_scalars(t):
    """`t`'s memory is about to be written by other means: its host copies are no longer current."""
    if _host_scalars:
        _host_scalars.pop(t.untyped_storage().data_ptr(), None)


def forget_scalars_at(pointer):
    _host_scalars.pop(pointer, None)


def host_scalar(t):
    """The value of one-element webgpu tensor `t`, from the host copy where there is one, else read back."""
    value = known_scalar(t)
    return value if value is not None else to_cpu(t).item()


def live_storages():
    """How many webgrad storages webgpu tensors hold now (for tests of memory release)."""
    return len(_by_pointer)


def host_bytes(t, dtype):
    """CPU torch tensor `t` as the canonical bytes of webgrad `dtype`, contiguous."""
    c = t.detach()
    if c.dtype is not _TORCH_STORED[dtype]:
        c = c.to(_TORCH_STORED[dtype])
    return c.contiguous().reshape(-1).view(torch.uint8).numpy()


_TORCH_STORED = TO_TORCH  # the canonical bytes of each webgrad dtype are those of this torch dtype


def copy_strides(t, memory_format=None):
    """The strides PyTorch gives a copy of `t` (``.to()``, ``.cpu()``, ``clone()``) in `memory_format`:
    preserve_format (the default) keeps t's own where they are non-overlapping and dense (a transposed or permuted
    dense tensor stays so), else takes dense ones in the order of t's; torch.empty_like's rule, asked of a meta
    tensor."""
    if memory_format in (None, torch.preserve_format) and t.is_contiguous():
        return tuple(t.stride())
    meta = torch.empty_strided(tuple(t.shape), t.stride(), dtype=t.dtype, device="meta")
    return tuple(torch.empty_like(meta, memory_format=memory_format or torch.preserve_format).stride())


def dense(shape, strides):
    """Whether a tensor of `shape` and `strides` covers a span of memory once each (non-overlapping and dense):
    then that span, read or written as it lies, holds the tensor."""
    if strides == View.contiguous_strides(shape):
        return True
    expected = 1
    for size, stride in sorted((d for d in zip(shape, strides) if d[0] != 1), key=lambda d: d[1]):
        if stride != expected:
            return False
        expected *= size
    return True


def to_cpu(t, strides=None):
    """Webgpu tensor `t` read back as a CPU torch tensor of its shape and dtype (a copy): contiguous, or with
    `strides` (dense ones: what copy_strides gives), read as the memory lies where t has those strides."""
    shape = tuple(t.shape)
    if not t.numel():
        return torch.empty_strided(shape, tuple(strides) if strides is not None else View.contiguous_strides(shape),
                                   dtype=t.dtype)
    if strides is not None and tuple(strides) != View.contiguous_strides(shape) and t.numel() > 1:
        strides = tuple(strides)
        if tuple(t.stride()) == strides and dense(shape, strides) and not is_byte_view(t):
            span = unwrap(t)
            n = t.numel()
            flat = Tensor._make(View(span._view.storage, (n,), (1,), t.storage_offset(), span.dtype), span.device)
            return _read(flat, t.dtype).as_strided(shape, strides)
        return torch.empty_strided(shape, strides, dtype=t.dtype).copy_(to_cpu(t))
    if is_byte_view(t):
        return _storage_bytes(t)
    return _read(unwrap(t), t.dtype).reshape(shape)


def _read(x, torch_dtype):
    """Webgrad Tensor `x` read back, flat, as a CPU torch tensor of `torch_dtype`."""
    raw = x.device.backend.to_bytes(x._view)
    if not len(raw):
        return torch.empty(0, dtype=torch_dtype)
    raw = raw if isinstance(raw, bytearray) else bytearray(raw)  # (torch.frombuffer wants writable memory)
    out = torch.frombuffer(raw, dtype=_TORCH_STORED[x.dtype])
    return out if out.dtype is torch_dtype else out.to(torch_dtype)


def read_into(t, out):
    """Webgpu tensor `t`'s values written into CPU tensor `out` (contiguous, of t's dtype and size): on WebGPU one
    copy, from the mapped read-back buffer straight into out's memory."""
    if out.dtype is not t.dtype or out.numel() != t.numel() or not out.is_contiguous() or out.device.type != "cpu":
        raise ValueError(f"read_into: out must be a contiguous CPU tensor of {t.dtype} with {t.numel()} elements")
    x = unwrap(t)
    backend = x.device.backend
    if not hasattr(backend, "read_into") or is_byte_view(t) or _TORCH_STORED[x.dtype] is not t.dtype:
        out.copy_(to_cpu(t).reshape(out.shape))
    elif out.numel():
        backend.read_into(x._view, out.reshape(-1).view(torch.uint8).numpy())
    return out


def from_cpu(t, torch_dtype=None, strides=None):
    """CPU torch tensor `t` as a new webgpu tensor (a copy), of `torch_dtype` if given: contiguous, or with
    `strides` (dense ones: what copy_strides gives), uploaded as the memory lies where t has those strides."""
    torch_dtype = torch_dtype or t.dtype
    dtype = webgrad_dtype(torch_dtype)
    shape = tuple(t.shape)
    if not t.numel():
        return empty(shape, torch_dtype, tuple(strides) if strides is not None else None)
    if t._is_zerotensor():  # (autograd's zero gradients: no memory to read)
        t = torch.zeros(shape, dtype=t.dtype)
    if strides is None or tuple(strides) == View.contiguous_strides(shape) or t.numel() == 1:
        strides, flat = View.contiguous_strides(shape), t
    else:
        strides = tuple(strides)
        host = t if tuple(t.stride()) == strides and dense(shape, strides) else \
            torch.empty_strided(shape, strides, dtype=t.dtype).copy_(t)
        flat = host.as_strided((host.numel(),), (1,), host.storage_offset())
    storage = webgrad_device().backend.from_bytes(host_bytes(flat, dtype), dtype)
    held = torch_storage(storage, t.numel(), torch_dtype)
    out = _empty_tensor([0], torch_dtype)
    out = _set_storage.redispatch(_CPU_KEYS, out, held, 0, list(shape), list(strides))
    note_upload(out, t)
    return out


def note_upload(t, host):
    """Webgpu tensor `t` has just received CPU tensor `host`'s values: where it is a one-element integer tensor
    (a counter such as num_batches_tracked), the host keeps its value (kernels._count_on_host), else forgets any."""
    forget_scalars(t)
    if t.numel() == 1 and not (t.dtype.is_floating_point or t.dtype.is_complex or t.dtype is torch.bool):
        note_scalar(t, int(host.item()))


def to_webgrad(t):
    """A webgpu torch tensor as a webgrad Tensor on webgrad's device, sharing its memory."""
    if t.device.type != DEVICE.type:
        raise ValueError(f"to_webgrad expects a tensor on {DEVICE.type}, got one on {t.device}")
    forget_scalars(t)  # webgrad code may write into it
    return unwrap(t)


def from_webgrad(x):
    """A webgrad Tensor (on the device that backs "webgpu") as a webgpu torch tensor sharing its memory."""
    if not isinstance(x, wg.Tensor):
        raise TypeError(f"from_webgrad expects a webgrad.Tensor, got {type(x).__name__}")
    if x.device != webgrad_device():
        raise ValueError(f"from_webgrad: the tensor is on webgrad's {x.device}; the webgpu torch device is backed "
                         f"by webgrad's {webgrad_device()}")
    return wrap(x)
