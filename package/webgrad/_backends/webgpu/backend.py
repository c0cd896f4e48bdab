"""The WebGPU backend: the device interface (backends/device.py) on top of the runtime.

Memory methods live here; each kernel family has its own module (elementwise, reduce, softmax_loss,
index, rng, matmul, conv, optim) holding its shader's Python side, and the methods below only route
to them. Beyond the interface, the backend offers what graph capture needs: :meth:`write` (new data
into an existing storage), :meth:`scalar` (a DynamicScalar) and :meth:`capture`.
"""

from ... import dtypes
from ..interface import Backend
from . import (amp, augment, batch_norm, check, conv, elementwise, f16, grad_norm, index, matmul, optim, reduce, rng,
               softmax_loss)
from .runtime import Storage, default_runtime
from .views import check_view, contiguous_view

_SUPPORTED = (dtypes.float32, dtypes.int32, dtypes.uint8, dtypes.bool_, dtypes.float16)


def _check_dtype(dtype, backend):
    if dtype not in _SUPPORTED:
        raise TypeError(
            f"the WebGPU backend has no {dtype} (WebGPU has no 64-bit floats); it stores "
            "float32, float16 (with the adapter feature shader-f16), int32, uint8 and bool"
        )
    if dtype is dtypes.float16:
        f16.enable(backend)  # or a clear error naming the missing feature


class WebGPUBackend(Backend):
    name = "webgpu"
    supports_capture = True

    def __init__(self, runtime=None):
        self.runtime = runtime or default_runtime()

    # ----------------------------------------------------------------- memory
    def empty(self, numel, dtype):
        _check_dtype(dtype, self)
        return self.runtime.storage(numel, dtype)

    def from_bytes(self, data, dtype):
        _check_dtype(dtype, self)
        data = _byte_view(data)
        if len(data) % dtype.itemsize:
            raise ValueError(f"{len(data)} bytes is not a whole number of {dtype} elements ({dtype.itemsize} bytes each)")
        numel = len(data) // dtype.itemsize
        if dtype is dtypes.bool_:
            # Canonical bools are bytes; on the GPU each is a word: upload the bytes, widen on the GPU.
            raw = self.from_bytes(data, dtypes.uint8)
            storage = self.runtime.storage(numel, dtype)
            elementwise.copy(self.runtime, contiguous_view(storage, (numel,), dtype), contiguous_view(raw, (numel,), dtypes.uint8))
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
            raise TypeError("write() takes float32, int32 or uint8 storages; copy bools from a uint8 storage")
        data = _byte_view(data)
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
        return self.runtime.read(storage, start, nbytes)[skip:skip + length]

    async def to_bytes_async(self, view):
        plan = self._read_plan(view)
        if plan is None:
            return b""
        storage, start, nbytes, skip, length = plan
        return (await self.runtime.read_async(storage, start, nbytes))[skip:skip + length]

    def _read_plan(self, view):
        """(storage, byte start, bytes to read, bytes to skip, canonical length) for reading `view`,
        first converting it on the GPU into a contiguous canonical copy where needed."""
        check_view(view, "view")
        n, dtype = view.numel, view.dtype
        if n == 0:
            return None
        if dtype in (dtypes.float32, dtypes.int32) and view.is_contiguous():
            return view.storage, 4 * view.offset, 4 * n, 0, 4 * n
        if dtype.itemsize < 4 and dtype is not dtypes.bool_ and view.is_contiguous():  # uint8, float16
            size = dtype.itemsize
            start = (view.offset * size) & ~3
            end = -(-(view.offset + n) * size // 4) * 4
            return view.storage, start, end - start, view.offset * size - start, n * size
        # Strided, or bool (words on the GPU, bytes canonically): gather into a packed copy first.
        target = dtypes.uint8 if dtype is dtypes.bool_ else dtype
        tmp = contiguous_view(self.runtime.storage(n, target), view.shape, target)
        (f16.copy if dtype is dtypes.float16 else elementwise.copy)(self.runtime, tmp, view)
        return self._read_plan(tmp)

    def synchronize(self):
        self.runtime.synchronize()

    def submit(self):
        self.runtime.flush()

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

    def check_finite(self, view, nan_message, inf_message, error=FloatingPointError):
        """Report a NaN (inf) in the contiguous float32 `view` at the next read-back: raise
        error(nan_message), or, when `error` is a plain callable, call error(message) there. Not part of the
        device interface: no sync of its own (webgrad.replayable's check_finite)."""
        check.check_finite(self.runtime, view, self.runtime.error_code(nan_message, error),
                           self.runtime.error_code(inf_message, error))

    # ----------------------------------------------------------------- elementwise
    def fill(self, out, value):
        elementwise.fill(self.runtime, out, value)

    def copy(self, out, x):
        elementwise.copy(self.runtime, out, x)

    def unary(self, op, out, x, a=0.0, b=0.0):
        elementwise.unary(self.runtime, op, out, x, a, b)

    def unary_backward(self, op, out, grad, x, y, a=0.0, b=0.0):
        elementwise.unary_backward(self.runtime, op, out, grad, x, y, a, b)

    def binary(self, op, out, x, y):
        elementwise.binary(self.runtime, op, out, x, y)

    def where(self, out, cond, x, y):
        elementwise.where(self.runtime, out, cond, x, y)

    # ----------------------------------------------------------------- reductions
    def reduce(self, op, out, x):
        reduce.reduce(self.runtime, op, out, x)

    def softmax(self, out, x, log=False):
        softmax_loss.softmax(self.runtime, out, x, log)

    def softmax_backward(self, out, grad, y, log=False):
        softmax_loss.softmax_backward(self.runtime, out, grad, y, log)

    # ----------------------------------------------------------------- linear algebra
    def matmul(self, out, a, b, trans_a=False, trans_b=False, bias=None, relu=False):
        matmul.matmul(self.runtime, out, a, b, trans_a, trans_b, bias, relu)

    # ----------------------------------------------------------------- indexing
    def index_select(self, out, x, index_):
        index.index_select(self.runtime, out, x, index_)

    def index_select_backward(self, out, grad, index_):
        index.index_select_backward(self.runtime, out, grad, index_)

    def gather(self, out, x, index_):
        index.gather(self.runtime, out, x, index_)

    def gather_backward(self, out, grad, index_):
        index.gather_backward(self.runtime, out, grad, index_)

    # ----------------------------------------------------------------- random numbers
    def random(self, out, dist, seed, offset, a=0.0, b=1.0):
        rng.random(self.runtime, out, dist, seed, offset, a, b)

    # ----------------------------------------------------------------- fused loss
    def cross_entropy(self, out, logits, target, ignore_index=-100, label_smoothing=0.0):
        softmax_loss.cross_entropy(self.runtime, out, logits, target, ignore_index, label_smoothing)

    def cross_entropy_mean(self, out, logits, target, ignore_index=-100, label_smoothing=0.0):
        softmax_loss.cross_entropy_mean(self.runtime, out, logits, target, ignore_index, label_smoothing)

    def cross_entropy_backward(self, out, logits, target, grad, ignore_index=-100, label_smoothing=0.0):
        softmax_loss.cross_entropy_backward(self.runtime, out, logits, target, grad, ignore_index, label_smoothing)

    # ----------------------------------------------------------------- convolution and pooling
    def im2col(self, out, x, kernel, stride, padding, dilation):
        conv.im2col(self.runtime, out, x, kernel, stride, padding, dilation)

    def col2im(self, out, cols, kernel, stride, padding, dilation):
        conv.col2im(self.runtime, out, cols, kernel, stride, padding, dilation)

    def conv2d(self, out, x, weight, bias, stride, padding, dilation, keep=False):
        return conv.conv2d(self.runtime, out, x, weight, bias, stride, padding, dilation, keep)

    def conv2d_backward_input(self, out, grad, weight, stride, padding, dilation):
        conv.conv2d_backward_input(self.runtime, out, grad, weight, stride, padding, dilation)

    def conv2d_backward_weight(self, out, grad, x, stride, padding, dilation, workspace=None):
        conv.conv2d_backward_weight(self.runtime, out, grad, x, stride, padding, dilation, workspace)

    def max_pool2d(self, out, indices, x, kernel, stride, padding, dilation):
        conv.max_pool2d(self.runtime, out, indices, x, kernel, stride, padding, dilation)

    def max_pool2d_backward(self, out, grad, indices, kernel=None, stride=None, padding=None, dilation=None):
        conv.max_pool2d_backward(self.runtime, out, grad, indices, kernel, stride, padding, dilation)

    def avg_pool2d(self, out, x, kernel, stride, padding, count_include_pad=True):
        conv.avg_pool2d(self.runtime, out, x, kernel, stride, padding, count_include_pad)

    def avg_pool2d_backward(self, out, grad, kernel, stride, padding, count_include_pad=True):
        conv.avg_pool2d_backward(self.runtime, out, grad, kernel, stride, padding, count_include_pad)

    # ----------------------------------------------------------------- batch normalisation
    def batch_norm(self, out, save, x, weight, bias, running_mean, running_var, training, momentum, eps,
                   count=None):
        batch_norm.batch_norm(self.runtime, out, save, x, weight, bias, running_mean, running_var, training,
                              momentum, eps, count)

    def batch_norm_backward(self, grad_input, grad_weight, grad_bias, grad, x, save, weight, training):
        batch_norm.batch_norm_backward(self.runtime, grad_input, grad_weight, grad_bias, grad, x, save, weight,
                                       training)

    # ----------------------------------------------------------------- optimizer updates
    def sgd_step(self, param, grad, momentum_buffer, hyper):
        optim.sgd_step(self.runtime, param, grad, momentum_buffer, hyper)

    def adam_step(self, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, hyper):
        optim.adam_step(self.runtime, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, hyper)

    def rmsprop_step(self, param, grad, square_avg, momentum_buffer, grad_avg, hyper):
        optim.rmsprop_step(self.runtime, param, grad, square_avg, momentum_buffer, grad_avg, hyper)

    # ----------------------------------------------------------------- data augmentation
    def augment_crop_flip(self, out, x, seed, offset, pad, mode, fill, flip_p):
        augment.crop_flip(self.runtime, out, x, seed, offset, pad, mode, fill, flip_p)

    def augment_affine(self, out, x, scale, shift, channels_last=False):
        augment.affine(self.runtime, out, x, scale, shift, channels_last)

    def augment_color(self, out, x, seed, offset, brightness, contrast, saturation):
        augment.color(self.runtime, out, x, seed, offset, brightness, contrast, saturation)

    def augment_erase(self, out, x, seed, offset, p, scale, log_ratio, value):
        augment.erase(self.runtime, out, x, seed, offset, p, scale, log_ratio, value)

    def clip_grad_norm(self, out, grads, max_norm, norm_type, nonfinite_message=None):
        """Fused clip_grad_norm_ (not part of the device interface: nn.utils composes ops elsewhere): out
        (float32 [1]) = the norm_type-norm of all `grads` (contiguous float32 views) together, each scaled
        in place by min(max_norm / (norm + 1e-6), 1); a non-finite norm raises
        RuntimeError(nonfinite_message) at the next read-back when a message is given."""
        code = self.runtime.error_code(nonfinite_message, RuntimeError) if nonfinite_message else 0
        grad_norm.clip_grad_norm(self.runtime, out, grads, max_norm, norm_type, code)

    def amp_unscale_check(self, grads, inv_scale, found_inf):
        """GradScaler's fused unscale (not part of the device interface): each of `grads` (contiguous float32
        views) *= inv_scale in place, and found_inf (float32, one element) set to 1.0 where one held inf/NaN;
        six gradients a dispatch (amp.py)."""
        amp.unscale_check(self.runtime, grads, inv_scale, found_inf)

    def amp_restore_if(self, out, saved, found):
        """GradScaler's undo of a step (not part of the device interface): out = saved where found (float32,
        one element) is above 0; see amp.py."""
        amp.restore_if(self.runtime, out, saved, found)


def _byte_view(data):
    """`data` as a flat memoryview of bytes (copied only if it is not contiguous)."""
    view = memoryview(data)
    if not view.c_contiguous:
        view = memoryview(view.tobytes())
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view
