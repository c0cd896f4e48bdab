"""The CPU backend: the device interface implemented with NumPy. It is the numerical reference that
every other backend is tested against, so it favours plain, obviously-right NumPy over speed.

Storages are flat 1-D NumPy arrays; a View becomes an `as_strided` window onto one.
NumPy is optional for webgrad as a whole: this module is imported only when the CPU device is used.
"""

try:
    import numpy as np
except ImportError:  # pragma: no cover - exercised by the no-NumPy test in a subprocess
    np = None

from .. import _bounds, dtypes
from ..ops import table
from .interface import AUGMENT_COLOR_ORDERS, Backend

if np is not None:
    NP_DTYPES = {dtypes.float16: np.float16, dtypes.float32: np.float32, dtypes.float64: np.float64, dtypes.int32: np.int32, dtypes.uint8: np.uint8, dtypes.bool_: np.bool_}


def require_numpy():
    if np is None:
        raise RuntimeError(
            "the CPU device needs NumPy, which is not installed (pip install numpy, or webgrad[cpu]). "
            "In Pyodide without NumPy, use device='webgpu'."
        )


def _int_param(v):
    """A scalar parameter for an integer kernel: +-inf (clamp's "no bound") becomes the int32 limit."""
    if v == float("inf"):
        return 2**31 - 1
    if v == float("-inf"):
        return -2**31
    return int(v)


def _lowbias32(x):
    x = x.astype(np.uint32)
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return x


def _wide(a):
    """float16 operands of a product as float32: half convolutions accumulate in float32 and round once."""
    return a.astype(np.float32) if a.dtype == np.float16 else a


def _record(records, op, kind):
    rec = records.get(op)
    if rec is None:
        raise ValueError(f"unknown {kind} op {op!r}; the op table (webgrad/ops/table.py) has no such record")
    return rec


class CPUBackend(Backend):
    name = "cpu"

    def __init__(self):
        require_numpy()

    # ----------------------------------------------------------------- memory
    def empty(self, numel, dtype):
        return np.empty(numel, NP_DTYPES[dtype])

    def from_bytes(self, data, dtype):
        arr = np.frombuffer(bytes(data) if not isinstance(data, (bytes, bytearray)) else data, NP_DTYPES[dtype])
        return arr.copy()

    def to_bytes(self, view):
        return np.ascontiguousarray(self.array(view)).tobytes()

    @staticmethod
    def array(view):
        """The NumPy array a view describes (a window onto the storage, no copy)."""
        item = view.storage.itemsize
        base = view.storage[view.offset:] if view.numel else view.storage
        return np.lib.stride_tricks.as_strided(
            base, shape=view.shape, strides=tuple(s * item for s in view.strides), writeable=True
        )

    def _write(self, out, value):
        self.array(out)[...] = np.asarray(value).astype(NP_DTYPES[out.dtype], copy=False)

    # ----------------------------------------------------------------- elementwise
    def fill(self, out, value):
        self.array(out)[...] = value

    def copy(self, out, x):
        src = self.array(x)
        if out.dtype is dtypes.int32 and src.dtype.kind == "f":
            src = np.trunc(src)
        with np.errstate(over="ignore"):  # float32 -> float16 beyond 65504 is inf, silently (as PyTorch)
            self.array(out)[...] = src.astype(NP_DTYPES[out.dtype], copy=True)

    # unary and binary ops come from the op table (webgrad/ops/table.py): each record's `cpu` function
    # is the reference, computed in float64 (int64 for ops with an exact integer form) and rounded once.
    def unary(self, op, out, x, a=0.0, b=0.0):
        rec = _record(table.UNARY, op, "unary")
        v = self.array(x)
        with np.errstate(all="ignore"):
            if rec.result == table.BOOL:
                res = rec.cpu(v, a, b)
            elif not out.dtype.is_floating:
                if not rec.int_exact:
                    raise TypeError(f"unary {op!r} has no integer form; out is {out.dtype}")
                res = rec.cpu(v.astype(np.int64), _int_param(a), _int_param(b))
            else:
                res = rec.cpu(v.astype(np.float64), a, b)
        self._write(out, res)

    def unary_backward(self, op, out, grad, x, y, a=0.0, b=0.0):
        rec = _record(table.UNARY, op, "unary")
        if rec.grad_cpu is None:
            raise ValueError(f"unary op {op!r} has no derivative in the op table")
        g, xv, yv = (self.array(t).astype(np.float64) for t in (grad, x, y))
        with np.errstate(all="ignore"):
            self._write(out, g * rec.grad_cpu(xv, yv, a, b))

    def binary(self, op, out, x, y):
        rec = _record(table.BINARY, op, "binary")
        xv, yv = self.array(x), self.array(y)
        exact = rec.int_exact and xv.dtype.kind != "f" and yv.dtype.kind != "f"
        wide = np.int64 if exact else np.float64
        if rec.result == table.BOOL and op.startswith("logical"):
            wide = np.bool_
        with np.errstate(all="ignore"):
            self._write(out, rec.cpu(xv.astype(wide), yv.astype(wide)))

    def where(self, out, cond, x, y):
        self._write(out, np.where(self.array(cond), self.array(x), self.array(y)))

    # ----------------------------------------------------------------- reductions
    def reduce(self, op, out, x):
        v = self.array(x)
        if op == "sum":
            res = v.astype(np.float64).sum(axis=1) if v.dtype.kind == "f" else v.astype(np.int64).sum(axis=1)
        elif op == "prod":
            res = v.astype(np.float64).prod(axis=1) if v.dtype.kind == "f" else v.astype(np.int64).prod(axis=1)
        elif op == "max":
            res = v.max(axis=1)
        elif op == "min":
            res = v.min(axis=1)
        elif op == "argmax":
            res = v.argmax(axis=1)
        elif op == "argmin":
            res = v.argmin(axis=1)
        else:
            raise ValueError(f"unknown reduction {op!r}")
        self._write(out, res)

    def softmax(self, out, x, log=False):
        v = self.array(x).astype(np.float64)
        shifted = v - v.max(axis=1, keepdims=True)
        if log:
            res = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        else:
            e = np.exp(shifted)
            res = e / e.sum(axis=1, keepdims=True)
        self._write(out, res)

    def softmax_backward(self, out, grad, y, log=False):
        g, yv = self.array(grad).astype(np.float64), self.array(y).astype(np.float64)
        if log:
            res = g - np.exp(yv) * g.sum(axis=1, keepdims=True)
        else:
            res = yv * (g - (g * yv).sum(axis=1, keepdims=True))
        self._write(out, res)

    # ----------------------------------------------------------------- linear algebra
    def matmul(self, out, a, b, trans_a=False, trans_b=False, bias=None, relu=False):
        # BLAS in the tensors' own dtype (as PyTorch on the CPU): float32 training stays fast, and float64
        # gradient checks stay exact. A stride-0 batch is one matrix: multiply it once, not per batch.
        av, bv = self.array(a), self.array(b)
        if trans_a:
            av = av.transpose(0, 2, 1)
        if trans_b:
            bv = bv.transpose(0, 2, 1)
        if av.shape[0] == 1 or a.strides[0] == 0:
            av = av[:1]
        if bv.shape[0] == 1 or b.strides[0] == 0:
            bv = bv[:1]
        if av.dtype == np.float16:  # half products accumulate in float32 and round once (PyTorch, cuBLAS)
            av, bv = av.astype(np.float32), bv.astype(np.float32)
        # NumPy only reaches BLAS for 2-D operands; a 3-D matmul of strided views is ~10x slower
        res = (av[0] @ bv[0])[None] if av.shape[0] == 1 and bv.shape[0] == 1 else np.matmul(av, bv)
        if bias is not None:
            res += self.array(bias).astype(res.dtype)
        if relu:
            np.maximum(res, 0, out=res)
        self.array(out)[...] = res

    # ----------------------------------------------------------------- indexing
    # Indices outside [0, size) raise (negative ones too: NumPy would wrap them), with the message of the
    # op that called (see webgrad/_bounds.py); the WebGPU kernels report the same at the next read-back.
    @staticmethod
    def _checked(index, size, default):
        idx = np.asarray(index, np.intp)
        bad = (idx < 0) | (idx >= size)
        if bad.any():
            raise IndexError(_bounds.template(default).format(value=int(idx[bad].flat[0]), size=size))
        return idx

    def index_select(self, out, x, index):
        idx = self._checked(self.array(index), x.shape[1], _bounds.INDEX_SELECT)
        self._write(out, self.array(x)[:, idx, :])

    def index_select_backward(self, out, grad, index):
        res = np.zeros(out.shape, np.float64)
        idx = self._checked(self.array(index), out.shape[1], _bounds.INDEX_SELECT)
        np.add.at(res, (slice(None), idx, slice(None)), self.array(grad))
        self._write(out, res)

    def gather(self, out, x, index):
        idx = self._checked(self.array(index), x.shape[1], _bounds.GATHER)
        self._write(out, np.take_along_axis(self.array(x), idx, axis=1))

    def gather_backward(self, out, grad, index):
        res = np.zeros(out.shape, np.float64)
        idx = self._checked(self.array(index), out.shape[1], _bounds.GATHER)
        o, k, i = np.indices(idx.shape)
        np.add.at(res, (o, idx, i), self.array(grad))
        self._write(out, res)

    # ----------------------------------------------------------------- random numbers
    def random(self, out, dist, seed, offset, a=0.0, b=1.0):
        n = out.numel
        k = _lowbias32(np.array([seed & 0xFFFFFFFF], np.uint32))[0]

        def bits(j):
            return _lowbias32(_lowbias32(j ^ k) + k)

        c = (np.arange(n, dtype=np.uint64) + offset).astype(np.uint32)
        if dist == "normal":
            two_c = c * np.uint32(2)
            u1 = ((bits(two_c) >> np.uint32(8)).astype(np.float64) + 1.0) * 2.0 ** -24
            u2 = (bits(two_c + np.uint32(1)) >> np.uint32(8)).astype(np.float64) * 2.0 ** -24
            res = a + b * np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)
        else:
            u = (bits(c) >> np.uint32(8)).astype(np.float64) * 2.0 ** -24
            res = a + (b - a) * u if dist == "uniform" else a + np.floor(u * (b - a))
        self._write(out, res.reshape(out.shape))

    # ----------------------------------------------------------------- fused loss
    def _row_losses(self, logits, target, ignore_index, label_smoothing):
        """(each row's cross-entropy, 0 where ignored; whether its target counts), in float64."""
        z = self.array(logits).astype(np.float64)
        t = self.array(target).astype(np.int64)
        self._checked(np.where(t == ignore_index, 0, t), z.shape[1], _bounds.CROSS_ENTROPY)
        logp = z - z.max(axis=1, keepdims=True)
        logp = logp - np.log(np.exp(logp).sum(axis=1, keepdims=True))
        valid = t != ignore_index
        picked = np.take_along_axis(logp, np.where(valid, t, 0)[:, None], axis=1)[:, 0]
        c = z.shape[1]
        loss = np.where(valid, -(1.0 - label_smoothing) * picked - label_smoothing / c * logp.sum(axis=1), 0.0)
        return loss, valid

    def cross_entropy(self, out, logits, target, ignore_index=-100, label_smoothing=0.0):
        loss, valid = self._row_losses(logits, target, ignore_index, label_smoothing)
        self._write(out, np.stack([loss, valid], axis=1) if len(out.shape) == 2 else loss)

    def cross_entropy_mean(self, out, logits, target, ignore_index=-100, label_smoothing=0.0):
        loss, valid = self._row_losses(logits, target, ignore_index, label_smoothing)
        count = float(valid.sum())
        self._write(out, np.array([loss.sum() / count if count else np.nan, count]))

    def cross_entropy_backward(self, out, logits, target, grad, ignore_index=-100, label_smoothing=0.0):
        z = self.array(logits).astype(np.float64)
        t = self.array(target).astype(np.int64)
        e = np.exp(z - z.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
        valid = t != ignore_index
        c = z.shape[1]
        onehot = np.zeros_like(p)
        onehot[np.arange(len(t)), np.where(valid, t, 0)] = 1.0
        res = (p - ((1.0 - label_smoothing) * onehot + label_smoothing / c)) * self.array(grad)[:, None]
        self._write(out, np.where(valid[:, None], res, 0.0))

    # ----------------------------------------------------------------- convolution and pooling
    # Each kernel loops over the kh*kw taps of the window only: tap (i, j) of every output position is
    # one strided slice of the padded image, so the work is kh*kw NumPy operations at any image size.
    @staticmethod
    def _taps(padded, kernel, stride, dilation, out_hw):
        """Yield (i, j, view [N, C, OH, OW] of `padded` read by kernel tap (i, j))."""
        (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, stride, dilation, out_hw
        for i in range(kh):
            for j in range(kw):
                yield i, j, padded[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]

    @staticmethod
    def _pool_out(h, w, kernel, stride, padding, dilation=(1, 1)):
        return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                     for n, k, s, p, d in zip((h, w), kernel, stride, padding, dilation))

    def _padded(self, x, padding, fill=0.0):
        v = self.array(x).astype(np.float64)
        (ph, pw) = padding
        return np.pad(v, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)

    def _unfold(self, x, kernel, stride, padding, dilation, out_hw, dtype):
        """im2col of x as an array [N, C*kh*kw, OH*OW] of `dtype`."""
        n, c = x.shape[:2]
        cols = np.empty((n, c, kernel[0], kernel[1]) + tuple(out_hw), dtype)
        for i, j, tap in self._taps(self._padded(x, padding), kernel, stride, dilation, out_hw):
            cols[:, :, i, j] = tap
        return cols.reshape(n, c * kernel[0] * kernel[1], out_hw[0] * out_hw[1])

    def _fold(self, out, cols, kernel, stride, padding, dilation):
        """col2im: out [N, C, H, W] = the sum of the entries of cols [N, C*kh*kw, OH*OW] reading each pixel."""
        n, c, h, w = out.shape
        (ph, pw) = padding
        oh, ow = self._pool_out(h, w, kernel, stride, padding, dilation)
        src = cols.astype(np.float64).reshape(n, c, kernel[0], kernel[1], oh, ow)
        img = np.zeros((n, c, h + 2 * ph, w + 2 * pw))
        for i, j, tap in self._taps(img, kernel, stride, dilation, (oh, ow)):
            tap += src[:, :, i, j]  # one tap never reads a pixel twice, so += on the view is exact
        self._write(out, img[:, :, ph:ph + h, pw:pw + w])

    def im2col(self, out, x, kernel, stride, padding, dilation):
        oh, ow = self._pool_out(x.shape[2], x.shape[3], kernel, stride, padding, dilation)
        self._write(out, self._unfold(x, kernel, stride, padding, dilation, (oh, ow), np.float64))

    def col2im(self, out, cols, kernel, stride, padding, dilation):
        self._fold(out, self.array(cols), kernel, stride, padding, dilation)

    # conv2d: im2col + one BLAS product in the tensors' own dtype (as matmul above).
    def conv2d(self, out, x, weight, bias, stride, padding, dilation, keep=False):
        n, o, oh, ow = out.shape
        w = _wide(self.array(weight))
        cols = self._unfold(x, w.shape[2:], stride, padding, dilation, (oh, ow), w.dtype)
        res = np.matmul(w.reshape(o, -1), cols)  # [N, O, OH*OW]
        if bias is not None:
            res += self.array(bias)[:, None]
        self._write(out, res.reshape(out.shape))

    def conv2d_backward_input(self, out, grad, weight, stride, padding, dilation):
        w = _wide(self.array(weight))
        g = _wide(self.array(grad))
        n, o = g.shape[:2]
        dcols = np.matmul(w.reshape(o, -1).T, g.reshape(n, o, -1))  # [N, C*kh*kw, OH*OW]
        self._fold(out, dcols, w.shape[2:], stride, padding, dilation)

    def conv2d_backward_weight(self, out, grad, x, stride, padding, dilation, workspace=None):
        g = _wide(self.array(grad))
        n, o, oh, ow = g.shape
        cols = self._unfold(x, out.shape[2:], stride, padding, dilation, (oh, ow), g.dtype)
        # one product over images and positions together: [O, N*L] @ [N*L, C*kh*kw]
        self._write(out, np.tensordot(g.reshape(n, o, -1), cols, axes=([0, 2], [0, 2])).reshape(out.shape))

    def max_pool2d(self, out, indices, x, kernel, stride, padding, dilation):
        n, c, h, w = x.shape
        oh, ow = out.shape[2], out.shape[3]
        kw = kernel[1]
        padded = self._padded(x, padding, fill=-np.inf)
        inside = np.pad(np.ones((1, 1, h, w), bool), ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
        vals = np.stack([t for _, _, t in self._taps(padded, kernel, stride, dilation, (oh, ow))])
        real = np.stack([t for _, _, t in self._taps(inside, kernel, stride, dilation, (oh, ow))])
        real = np.broadcast_to(real, vals.shape)
        k = np.argmax(vals, axis=0)  # first maximum in row-major window order, as PyTorch
        # a window whose real cells are all -inf may have picked a padding cell: take its first real cell
        k = np.where(np.take_along_axis(real, k[None], 0)[0], k, np.argmax(real, axis=0))
        row = np.arange(oh)[:, None] * stride[0] - padding[0] + (k // kw) * dilation[0]
        col = np.arange(ow)[None, :] * stride[1] - padding[1] + (k % kw) * dilation[1]
        self._write(out, np.take_along_axis(vals, k[None], 0)[0])
        self._write(indices, row * w + col)

    def max_pool2d_backward(self, out, grad, indices, kernel=None, stride=None, padding=None, dilation=None):
        n, c, h, w = out.shape
        g = self.array(grad).astype(np.float64).reshape(n * c, -1)
        idx = self.array(indices).astype(np.intp).reshape(n * c, -1)
        res = np.zeros((n * c, h * w))
        np.add.at(res, (np.arange(n * c)[:, None], idx), g)
        self._write(out, res.reshape(out.shape))

    def _avg_divisor(self, hw, kernel, stride, padding, count_include_pad, out_hw):
        if count_include_pad:  # padding cells count; windows never reach past the padding (no ceil_mode)
            return float(kernel[0] * kernel[1])
        inside = np.pad(np.ones((1, 1) + hw), ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
        return sum(t for _, _, t in self._taps(inside, kernel, stride, (1, 1), out_hw))

    def avg_pool2d(self, out, x, kernel, stride, padding, count_include_pad=True):
        n, c, h, w = x.shape
        oh, ow = out.shape[2], out.shape[3]
        total = sum(t for _, _, t in self._taps(self._padded(x, padding), kernel, stride, (1, 1), (oh, ow)))
        self._write(out, total / self._avg_divisor((h, w), kernel, stride, padding, count_include_pad, (oh, ow)))

    def avg_pool2d_backward(self, out, grad, kernel, stride, padding, count_include_pad=True):
        n, c, h, w = out.shape
        (ph, pw), (oh, ow) = padding, grad.shape[2:]
        share = self.array(grad).astype(np.float64) / self._avg_divisor((h, w), kernel, stride, padding,
                                                                          count_include_pad, (oh, ow))
        img = np.zeros((n, c, h + 2 * ph, w + 2 * pw))
        for _, _, tap in self._taps(img, kernel, stride, (1, 1), (oh, ow)):
            tap += share
        self._write(out, img[:, :, ph:ph + h, pw:pw + w])

    # ----------------------------------------------------------------- batch normalisation
    # In float64 and rounded once into the tensors' dtype, as PyTorch's CPU kernels (two-pass statistics).
    def _channel(self, view, c, default):
        return np.full(c, default) if view is None else self._f64(view)

    def batch_norm(self, out, save, x, weight, bias, running_mean, running_var, training, momentum, eps,
                   count=None):
        v = self._f64(x)
        c = v.shape[1]
        if training:
            mean = v.mean(axis=(0, 2))
            var = ((v - mean[None, :, None]) ** 2).mean(axis=(0, 2))  # biased: what normalises
            if count is not None:
                self.array(count)[...] += 1
            if running_mean is not None:
                m = v.shape[0] * v.shape[2]
                factor = 1.0 / float(self.array(count).reshape(-1)[0]) if momentum is None else momentum
                self._write(running_mean, (1.0 - factor) * self._f64(running_mean) + factor * mean)
                self._write(running_var, (1.0 - factor) * self._f64(running_var) + factor * var * (m / (m - 1)))
        else:
            mean, var = self._f64(running_mean), self._f64(running_var)
        invstd = 1.0 / np.sqrt(var + eps)
        if save is not None:
            self._write(save, np.stack([mean, invstd]))
        scale = (invstd * self._channel(weight, c, 1.0))[None, :, None]
        self._write(out, (v - mean[None, :, None]) * scale + self._channel(bias, c, 0.0)[None, :, None])

    def batch_norm_backward(self, grad_input, grad_weight, grad_bias, grad, x, save, weight, training):
        g, v, (mean, invstd) = self._f64(grad), self._f64(x), self._f64(save)
        xhat = (v - mean[None, :, None]) * invstd[None, :, None]
        sum_g, sum_gx = g.sum(axis=(0, 2)), (g * xhat).sum(axis=(0, 2))
        if grad_weight is not None:
            self._write(grad_weight, sum_gx)
        if grad_bias is not None:
            self._write(grad_bias, sum_g)
        if grad_input is not None:
            scale = (invstd * self._channel(weight, v.shape[1], 1.0))[None, :, None]
            if training:
                m = v.shape[0] * v.shape[2]
                g = g - (sum_g / m)[None, :, None] - xhat * (sum_gx / m)[None, :, None]
            self._write(grad_input, g * scale)

    # ----------------------------------------------------------------- optimizer updates (in place)
    # One fused update per parameter, in float64 and rounded once into the tensors' dtype, following
    # PyTorch's single-tensor implementations (torch/optim/{sgd,adam,rmsprop}.py) step by step.
    def _f64(self, view):
        return self.array(view).astype(np.float64)

    def _optim_grad(self, param, grad, hyper):
        """The gradient an update uses: negated for maximize, then plus weight_decay * param."""
        g = self._f64(grad)
        if hyper["maximize"]:
            g = -g
        if hyper["weight_decay"] != 0 and not hyper.get("decoupled", False):
            g = g + hyper["weight_decay"] * self._f64(param)
        return g

    def _skipped(self, hyper):
        """hyper['skip_if'] holds a value above 0: the update changes nothing, and adds 1 to
        hyper['skipped_steps'] where given (see the interface)."""
        flag = hyper.get("skip_if")
        if flag is None or not float(self.array(flag).reshape(-1)[0]) > 0.0:
            return False
        if hyper.get("skipped_steps") is not None:
            self.array(hyper["skipped_steps"]).reshape(-1)[0] += 1
        return True

    def sgd_step(self, param, grad, momentum_buffer, hyper):
        if self._skipped(hyper):
            return
        g = self._optim_grad(param, grad, hyper)
        if momentum_buffer is not None:
            m = hyper["momentum"]
            buf = g if hyper["first"] else m * self._f64(momentum_buffer) + (1.0 - hyper["dampening"]) * g
            self._write(momentum_buffer, buf)
            g = g + m * buf if hyper["nesterov"] else buf
        self._write(param, self._f64(param) - hyper["lr"] * g)

    def adam_step(self, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, hyper):
        if self._skipped(hyper):
            return
        lr, b1, b2, t = hyper["lr"], hyper["beta1"], hyper["beta2"], hyper["step"]
        if hyper.get("skipped_steps") is not None:
            t -= float(self.array(hyper["skipped_steps"]).reshape(-1)[0])
        g = self._optim_grad(param, grad, hyper)
        p = self._f64(param)
        if hyper["decoupled"]:  # AdamW: decay the parameter itself, not through the gradient
            p = p * (1.0 - lr * hyper["weight_decay"])
        m = b1 * self._f64(exp_avg) + (1.0 - b1) * g
        v = b2 * self._f64(exp_avg_sq) + (1.0 - b2) * g * g
        self._write(exp_avg, m)
        self._write(exp_avg_sq, v)
        if max_exp_avg_sq is not None:
            v = np.maximum(self._f64(max_exp_avg_sq), v)
            self._write(max_exp_avg_sq, v)
        bias_correction1 = 1.0 - b1 ** t
        bias_correction2 = 1.0 - b2 ** t
        denom = np.sqrt(v) / bias_correction2 ** 0.5 + hyper["eps"]
        self._write(param, p - (lr / bias_correction1) * m / denom)

    def rmsprop_step(self, param, grad, square_avg, momentum_buffer, grad_avg, hyper):
        if self._skipped(hyper):
            return
        alpha, eps = hyper["alpha"], hyper["eps"]
        g = self._optim_grad(param, grad, hyper)
        sq = alpha * self._f64(square_avg) + (1.0 - alpha) * g * g
        self._write(square_avg, sq)
        if grad_avg is not None:  # centered: normalise by an estimate of the gradient's variance
            ga = alpha * self._f64(grad_avg) + (1.0 - alpha) * g
            self._write(grad_avg, ga)
            avg = np.sqrt(sq - ga * ga) + eps
        else:
            avg = np.sqrt(sq) + eps
        if momentum_buffer is not None:
            buf = hyper["momentum"] * self._f64(momentum_buffer) + g / avg
            self._write(momentum_buffer, buf)
            self._write(param, self._f64(param) - hyper["lr"] * buf)
        else:
            self._write(param, self._f64(param) - hyper["lr"] * g / avg)

    # ----------------------------------------------------------------- data augmentation (webgrad.transforms)
    def augment_crop_flip(self, out, x, seed, offset, pad, mode, fill, flip_p):
        v = self.array(x)
        n, _, h, w = v.shape
        oh, ow = out.shape[2:]
        left, top, right, bottom = pad
        k = _lowbias32(np.array([seed & 0xFFFFFFFF], np.uint32))[0]
        c = (np.arange(3 * n, dtype=np.uint64) + offset).astype(np.uint32)
        u = (_lowbias32(_lowbias32(c ^ k) + k) >> np.uint32(8)).astype(np.float64).reshape(n, 3) * 2.0 ** -24
        i = np.floor(u[:, 0] * (h + top + bottom - oh + 1)).astype(np.int64)
        j = np.floor(u[:, 1] * (w + left + right - ow + 1)).astype(np.int64)
        flipped = u[:, 2] < np.float32(flip_p)
        cols = np.where(flipped[:, None], np.arange(ow)[::-1], np.arange(ow))
        # padded coordinates -> image coordinates (-1: outside, the fill value)
        rows = _pad_index(i[:, None] + np.arange(oh) - top, h, mode)        # [N, OH]
        cols = _pad_index(j[:, None] + cols - left, w, mode)                 # [N, OW]
        res = v[np.arange(n)[:, None, None, None], np.arange(v.shape[1])[None, :, None, None],
                np.maximum(rows, 0)[:, None, :, None], np.maximum(cols, 0)[:, None, None, :]]
        outside = (rows < 0)[:, None, :, None] | (cols < 0)[:, None, None, :]
        self._write(out, np.where(outside, np.asarray(fill).astype(v.dtype), res))

    def augment_affine(self, out, x, scale, shift, channels_last=False):
        v = self.array(x)
        if channels_last:
            v = v.transpose(0, 3, 1, 2)
        a = np.asarray(scale, np.float32)[:, None, None]
        b = np.asarray(shift, np.float32)[:, None, None]
        self._write(out, v.astype(np.float32) * a + b)

    def augment_color(self, out, x, seed, offset, brightness, contrast, saturation):
        v = self.array(x)
        n, c = v.shape[:2]
        u8 = v.dtype == np.uint8
        bound = np.float32(255.0 if u8 else 1.0)
        k = _lowbias32(np.array([seed & 0xFFFFFFFF], np.uint32))[0]
        counters = (np.arange(4 * n, dtype=np.uint64) + offset).astype(np.uint32)
        bits = (_lowbias32(_lowbias32(counters ^ k) + k) >> np.uint32(8)).reshape(n, 4)
        u = bits.astype(np.float32) * np.float32(2.0 ** -24)
        lo = np.array([brightness[0], contrast[0], saturation[0]], np.float32)
        hi = np.array([brightness[1], contrast[1], saturation[1]], np.float32)
        factors = lo + (hi - lo) * u[:, 1:]
        orders = np.floor(bits[:, 0].astype(np.float64) * 6 * 2.0 ** -24).astype(np.int64)

        def blend(a, b, f):
            r = np.clip(f * a + (np.float32(1.0) - f) * b, np.float32(0.0), bound)
            return np.floor(r) if u8 else r

        def gray(img):
            if c == 1:
                return img[0]
            g = np.float32(0.2989) * img[0] + np.float32(0.587) * img[1] + np.float32(0.114) * img[2]
            return np.floor(g) if u8 else g

        res = np.empty(v.shape, np.float32)
        for i in range(n):  # image by image: each has its own order
            img = v[i].astype(np.float32)
            for op in AUGMENT_COLOR_ORDERS[orders[i]]:
                f = factors[i, op]
                if op == 0:
                    img = blend(img, np.float32(0.0), f)
                elif op == 1:
                    img = blend(img, np.float32(gray(img).mean(dtype=np.float64)), f)
                elif c != 1:
                    img = blend(img, gray(img), f)
            res[i] = img
        self._write(out, res)

    def augment_erase(self, out, x, seed, offset, p, scale, log_ratio, value):
        v = self.array(x)
        n, c, h, w = v.shape
        k = _lowbias32(np.array([seed & 0xFFFFFFFF], np.uint32))[0]
        counters = (np.arange(41 * n, dtype=np.uint64) + offset).astype(np.uint32)
        bits = (_lowbias32(_lowbias32(counters ^ k) + k) >> np.uint32(8)).reshape(n, 41)
        u = bits.astype(np.float32) * np.float32(2.0 ** -24)
        f = np.float32
        res = v.copy()
        for i in range(n):  # image by image: the attempts are a short sequential search
            if not u[i, 0] < f(p):
                continue
            for a in range(10):
                d = 1 + 4 * a
                area = f(h * w) * (f(scale[0]) + (f(scale[1]) - f(scale[0])) * u[i, d])
                ratio = np.exp(f(log_ratio[0]) + (f(log_ratio[1]) - f(log_ratio[0])) * u[i, d + 1])
                eh, ew = int(np.round(np.sqrt(area * ratio))), int(np.round(np.sqrt(area / ratio)))
                if eh < h and ew < w:
                    top = int(bits[i, d + 2]) * (h - eh + 1) >> 24
                    left = int(bits[i, d + 3]) * (w - ew + 1) >> 24
                    res[i, :, top:top + eh, left:left + ew] = value
                    break
        self._write(out, res)


def _pad_index(idx, size, mode):
    """Image row (or column) read at padded-relative coordinate idx (0..size-1 is the image), per mode."""
    if mode == "constant":
        return np.where((idx >= 0) & (idx < size), idx, -1)
    if mode == "edge":
        return np.clip(idx, 0, size - 1)
    if mode == "reflect":
        return np.where(idx < 0, -idx, np.where(idx >= size, 2 * size - 2 - idx, idx))
    return np.where(idx < 0, -idx - 1, np.where(idx >= size, 2 * size - 1 - idx, idx))  # symmetric
