"""The WebGPU backend: the device interface (_backends/interface.py) on top of the runtime.

Memory methods live here; each kernel family has its own module (elementwise, reduce, scan, softmax_loss,
index, rng, matmul, conv, batch_norm, optim, augment, ...) holding its shader's Python side, and registers its
launchers on the records of _backends/kernels.py, which :meth:`run` calls. Beyond the interface, the backend
offers what graph capture needs: :meth:`write` (new data into an existing storage), :meth:`scalar` (a
DynamicScalar) and :meth:`capture`.
"""

from ... import dtypes
from .. import kernels
from ..interface import Backend
# the kernel families: importing them registers their launchers on the records of _backends/kernels.py
from . import (amp, augment, batch_norm, check, conv, elementwise, f16, grad_norm, index, matmul, optim,  # noqa: F401
               linalg, reduce, rng, scan, softmax_loss)
from . import attention, dropout, layer_norm, masked, softmax_masked  # noqa: F401  (the transformer's kernels)
from . import sampling, sorting  # noqa: F401  (topk and multinomial)
from . import value_checks  # noqa: F401  (check_values, device_error_flag)
from . import scans, scatter, search  # noqa: F401  (scatter_reduce, compact, scan, searchsorted, histc)
from . import narrow
from .memory import Storage
from .runtime import default_runtime
from .views import check_view, contiguous_view

# (bfloat16, int8 and int16 in 32-bit words: narrow.py)
_SUPPORTED = (dtypes.float32, dtypes.int64, dtypes.int32, dtypes.uint8, dtypes.bool_, dtypes.float16) + narrow.NARROW


def _check_dtype(dtype, backend):
    if dtype not in _SUPPORTED:
        dtypes.check_storable(dtype)
        if dtype is dtypes.float64:
            raise TypeError("the WebGPU backend has no float64 (WebGPU has no 64-bit floats): convert to float32 "
                            "first, e.g. t.float().to('webgpu') (a NumPy float64 array: torch.from_numpy(a)"
                            ".float()), or model.float() for a float64 model")
        raise TypeError(
            f"the WebGPU backend has no {dtype}; it stores float32, float16 (with the adapter feature shader-f16), "
            "bfloat16, int64 (in the int32 range), int32, int16, int8, uint8 and bool"
        )
    if dtype in narrow.WIDE:
        backend.narrow_seen = True
    elif dtype is dtypes.float16 and not backend.half_seen:
        if not backend.runtime.has_f16:
            raise f16.missing_feature_error(backend.runtime)
        backend.half_seen = True


class WebGPUBackend(Backend):
    name = "webgpu"
    supports_capture = True

    def __init__(self, runtime=None):
        self.runtime = runtime or default_runtime()
        self.features = self.runtime.features
        self.half_seen = False  # whether a float16 storage was made (then f16.run routes every kernel call)
        self.narrow_seen = False  # whether a bfloat16, int8 or int16 storage was made (then narrow.run routes them)

    # ----------------------------------------------------------------- memory
    def empty(self, numel, dtype):
        _check_dtype(dtype, self)
        return self.runtime.storage(numel, dtype)

    def from_bytes(self, data, dtype):
        _check_dtype(dtype, self)
        data = _byte_view(data)
        if dtype is dtypes.int64:  # held as int32 words, each value checked to fit (webgrad/dtypes.py)
            if len(data) % 8:
                raise ValueError(f"{len(data)} bytes is not a whole number of int64 elements (8 bytes each)")
            words = dtypes.narrow_int64(data, "to('webgpu')")
            storage = self.runtime.storage(len(words) // 4, dtype)
            if words:
                self.runtime.write(storage, words, 0)
            return storage
        if len(data) % dtype.itemsize:
            raise ValueError(f"{len(data)} bytes is not a whole number of {dtype} elements ({dtype.itemsize} bytes each)")
        numel = len(data) // dtype.itemsize
        if dtype in narrow.WIDE:  # held as 32-bit words (narrow.py)
            storage = self.runtime.storage(numel, dtype)
            if numel:
                self.runtime.write(storage, narrow.words(data, dtype), 0)
            return storage
        if dtype is dtypes.bool_:
            # Canonical bools are bytes; on the GPU each is a word: upload the bytes, widen on the GPU.
            raw = self.from_bytes(data, dtypes.uint8)
            storage = self.runtime.storage(numel, dtype)
            elementwise.copy(self.runtime, contiguous_view(storage, (numel,), dtype),
                             contiguous_view(raw, (numel,), dtypes.uint8))
            return storage
        storage = self.runtime.storage(numel, dtype)
        self.write(storage, data)
        return storage

    def write(self, storage, data, offset=0):
        """Overwrite elements [offset, offset + n) of a storage with canonical bytes (bool excepted).

        This is how new inputs reach a captured graph."""
        if not isinstance(storage, Storage):
            raise TypeError(f"write() needs a WebGPU storage, not {type(storage).__name__}")
        dtype = storage.dtype
        if dtype is dtypes.bool_:
            raise TypeError("write() takes float32, int32, int64 or uint8 storages; copy bools from a uint8 storage")
        data = _byte_view(data)
        if dtype is dtypes.int64:  # canonical 8-byte values into int32 words, each checked to fit
            if len(data) % 8:
                raise ValueError(f"{len(data)} bytes is not a whole number of int64 elements (8 bytes each)")
            data, dtype = memoryview(dtypes.narrow_int64(data, "write")), dtypes.int32
        elif dtype in narrow.WIDE:  # canonical bytes into the 32-bit words it holds
            if len(data) % dtype.itemsize:
                raise ValueError(f"{len(data)} bytes is not a whole number of {dtype} elements")
            data, dtype = memoryview(narrow.words(data, dtype)), narrow.WIDE[dtype]
        end = offset + len(data) // dtype.itemsize
        if len(data) % dtype.itemsize or offset < 0 or end > storage.numel:
            raise ValueError(f"{len(data)} bytes at element {offset} do not fit a storage of {storage.numel} {dtype}")
        start = offset * dtype.itemsize
        if start % 4 or len(data) % 4:  # uint8 or float16 that does not cover whole words
            if start % 4 or end != storage.numel:
                raise ValueError(f"{dtype} writes must start and end on a 4-byte word (or at the storage's end)")
            data = bytes(data) + bytes(-len(data) % 4)
        self.runtime.write(storage, data, start)

    def to_bytes(self, view):
        plan = self._read_plan(view)
        if plan is None:
            return b""
        storage, start, nbytes, skip, length = plan
        return _canonical(_part(self.runtime.read(storage, start, nbytes), skip, length), view.dtype)

    def read_into(self, view, out):
        """Write `view`'s canonical bytes into writable buffer `out` (exactly that many bytes): straight from the
        mapped staging buffer where the view is read as it is stored, else through to_bytes."""
        plan = self._read_plan(view)
        if plan is None:
            return
        storage, start, nbytes, skip, length = plan
        if skip == 0 and length == nbytes and view.dtype is not dtypes.int64 and view.dtype not in narrow.WIDE:
            self.runtime.read_into(storage, start, out)
        else:
            memoryview(out).cast("B")[:] = memoryview(self.to_bytes(view)).cast("B")

    async def to_bytes_async(self, view):
        plan = self._read_plan(view)
        if plan is None:
            return b""
        storage, start, nbytes, skip, length = plan
        return _canonical(_part(await self.runtime.read_async(storage, start, nbytes), skip, length), view.dtype)

    def _read_plan(self, view):
        """(storage, byte start, bytes to read, bytes to skip, canonical length) for reading `view`,
        first converting it on the GPU into a contiguous canonical copy where needed."""
        check_view(view, "view")
        n, dtype = view.numel, view.dtype
        if n == 0:
            return None
        if dtype in (dtypes.float32, dtypes.int32, dtypes.int64) and view.is_contiguous():
            return view.storage, 4 * view.offset, 4 * n, 0, 4 * n
        if dtype in narrow.WIDE:  # words read as they are, narrowed on the host (_canonical)
            if view.is_contiguous():
                return view.storage, 4 * view.offset, 4 * n, 0, 4 * n
            tmp = contiguous_view(self.runtime.storage(n, dtype), view.shape, dtype)
            self._run_wide(kernels.copy, (narrow.wide(tmp), narrow.wide(view)), {})
            return self._read_plan(tmp)
        if dtype.itemsize < 4 and dtype is not dtypes.bool_ and view.is_contiguous():  # uint8, float16
            size = dtype.itemsize
            start = (view.offset * size) & ~3
            end = -(-(view.offset + n) * size // 4) * 4
            return view.storage, start, end - start, view.offset * size - start, n * size
        # Strided, or bool (words on the GPU, bytes canonically): gather into a packed copy first.
        target = dtypes.uint8 if dtype is dtypes.bool_ else dtype
        tmp = contiguous_view(self.runtime.storage(n, target), view.shape, target)
        self.run(kernels.copy, tmp, view)
        return self._read_plan(tmp)

    def synchronize(self):
        self.runtime.synchronize()

    def submit(self):
        self.runtime.flush()

    @property
    def errors_pending(self):
        return self.runtime.errors_armed

    # ----------------------------------------------------------------- graph capture
    def scalar(self, value, kind="f32"):
        """A DynamicScalar: pass it as a kernel scalar that must change between replays."""
        return self.runtime.scalar(value, kind)

    def capture(self, replacing=None, plannable=False):
        """``with backend.capture() as graph:`` records the work issued inside; ``graph.replay()``."""
        return self.runtime.capture(replacing, plannable)

    @property
    def capturing(self):
        return self.runtime.capturing

    def outside_capture(self):
        return self.runtime.outside_capture()

    # ----------------------------------------------------------------- kernels
    def run(self, kernel, *args, **kwargs):
        if self.narrow_seen:  # bfloat16, int8 or int16 storages exist: narrow.run widens and narrows their views
            return narrow.run(self.runtime, kernel, args, kwargs, self._run_wide)
        if self.half_seen:  # float16 storages exist: each record's float16 policy applies (f16.run)
            return f16.run(self.runtime, kernel, args, kwargs)
        impl = kernel.impls.get("webgpu")
        if impl is None:
            raise NotImplementedError(f"the webgpu backend has no kernel {kernel.name!r}")
        return impl(self.runtime, *args, **kwargs)

    def _run_wide(self, kernel, args, kwargs):
        """run() on views with no bfloat16, int8 or int16 among them."""
        if self.half_seen:
            return f16.run(self.runtime, kernel, args, kwargs)
        impl = kernel.impls.get("webgpu")
        if impl is None:
            raise NotImplementedError(f"the webgpu backend has no kernel {kernel.name!r}")
        return impl(self.runtime, *args, **kwargs)


def _part(data, skip, length):
    """data[skip:skip + length], without a copy where that is all of it (a bytearray's slice copies)."""
    return data if skip == 0 and length == len(data) else data[skip:skip + length]


def _canonical(data, dtype):
    """Bytes read from the GPU in the canonical layout: int64's int32 words widened to 8 bytes, the 32-bit words
    of bfloat16, int16 and int8 narrowed (narrow.py)."""
    if dtype is dtypes.int64:
        return dtypes.widen_int32(data)
    return narrow.canonical(data, dtype) if dtype in narrow.WIDE else data


def _byte_view(data):
    """`data` as a flat memoryview of bytes (copied only if it is not contiguous)."""
    view = memoryview(data)
    if not view.c_contiguous:
        view = memoryview(view.tobytes())
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view
