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
from .interface import Backend

if np is not None:
    NP_DTYPES = {dtypes.float32: np.float32, dtypes.float64: np.float64, dtypes.int32: np.int32, dtypes.uint8: np.uint8, dtypes.bool_: np.bool_}


def require_numpy():
    if np is None:
        raise RuntimeError(
            "the CPU device needs NumPy, which is not installed (pip install numpy, or webgrad[cpu]). "
            "In Pyodide without NumPy, use device='webgpu'."
        )


def _erf(x):
    # NumPy has no erf; math.erf vectorised is exact to double precision.
    import math
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _float(f):
    """Compute in float64 and round once to float32, so the reference is as exact as float32 allows."""
    def wrapped(x, a, b):
        with np.errstate(all="ignore"):
            return f(x.astype(np.float64), a, b)
    return wrapped


def _sigmoid(x):
    return np.where(x >= 0, 1.0 / (1.0 + np.exp(-np.abs(x))), np.exp(-np.abs(x)) / (1.0 + np.exp(-np.abs(x))))


def _softplus(x, beta, threshold):
    bx = beta * x
    return np.where(bx > threshold, x, np.log1p(np.exp(np.minimum(bx, threshold))) / beta)


_SQRT_2_OVER_PI = 0.7978845608028654

# op -> f(x, a, b). Ops that keep integer dtypes exact are applied to the raw array.
_UNARY_FLOAT = {
    "exp": lambda x, a, b: np.exp(x),
    "log": lambda x, a, b: np.log(x),
    "sqrt": lambda x, a, b: np.sqrt(x),
    "rsqrt": lambda x, a, b: 1.0 / np.sqrt(x),
    "sin": lambda x, a, b: np.sin(x),
    "cos": lambda x, a, b: np.cos(x),
    "reciprocal": lambda x, a, b: 1.0 / x,
    "sigmoid": lambda x, a, b: _sigmoid(x),
    "tanh": lambda x, a, b: np.tanh(x),
    "gelu": lambda x, a, b: 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0))),
    "gelu_tanh": lambda x, a, b: 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x ** 3))),
    "silu": lambda x, a, b: x * _sigmoid(x),
    "softplus": lambda x, a, b: _softplus(x, a, b),
    "rdiv": lambda x, a, b: a / x,
    "pow": lambda x, a, b: np.power(x, a),
    "rpow": lambda x, a, b: np.power(a, x),
}
_UNARY_EXACT = {  # valid for ints and floats alike
    "neg": lambda x, a, b: -x,
    "abs": lambda x, a, b: np.abs(x),
    "sign": lambda x, a, b: np.sign(x),
    "square": lambda x, a, b: x * x,
    "relu": lambda x, a, b: np.maximum(x, 0),
    "leaky_relu": lambda x, a, b: np.where(x > 0, x, x * a),
    "clamp": lambda x, a, b: np.minimum(np.maximum(x, a), b),
    "affine": lambda x, a, b: x * a + b,
    "rsub": lambda x, a, b: a - x,
    "floor": lambda x, a, b: np.floor(x),
    "ceil": lambda x, a, b: np.ceil(x),
    "round": lambda x, a, b: np.round(x),  # half to even, as torch.round
    "trunc": lambda x, a, b: np.trunc(x),
}
_UNARY_BOOL = {
    "eq": lambda x, a, b: x == a,
    "ne": lambda x, a, b: x != a,
    "lt": lambda x, a, b: x < a,
    "le": lambda x, a, b: x <= a,
    "gt": lambda x, a, b: x > a,
    "ge": lambda x, a, b: x >= a,
    "logical_not": lambda x, a, b: ~x.astype(np.bool_),
    "isnan": lambda x, a, b: np.isnan(x),
    "isinf": lambda x, a, b: np.isinf(x),
}


def _d_gelu(x):
    cdf = 0.5 * (1.0 + _erf(x / np.sqrt(2.0)))
    return cdf + x * np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)


def _d_gelu_tanh(x):
    inner = _SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)
    t = np.tanh(inner)
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x * x)


# op -> f'(x) given (x, y=f(x), a, b); the kernel returns grad * f'.
_UNARY_DERIVATIVE = {
    "abs": lambda x, y, a, b: np.sign(x),
    "exp": lambda x, y, a, b: y,
    "log": lambda x, y, a, b: 1.0 / x,
    "sqrt": lambda x, y, a, b: 0.5 / y,
    "rsqrt": lambda x, y, a, b: -0.5 * y / x,
    "sin": lambda x, y, a, b: np.cos(x),
    "cos": lambda x, y, a, b: -np.sin(x),
    "reciprocal": lambda x, y, a, b: -y * y,
    "relu": lambda x, y, a, b: (x > 0).astype(np.float64),
    "sigmoid": lambda x, y, a, b: y * (1.0 - y),
    "tanh": lambda x, y, a, b: 1.0 - y * y,
    "gelu": lambda x, y, a, b: _d_gelu(x),
    "gelu_tanh": lambda x, y, a, b: _d_gelu_tanh(x),
    "silu": lambda x, y, a, b: _sigmoid(x) * (1.0 + x * (1.0 - _sigmoid(x))),
    "softplus": lambda x, y, a, b: np.where(a * x > b, 1.0, _sigmoid(a * x)),
    "leaky_relu": lambda x, y, a, b: np.where(x > 0, 1.0, a),
    "clamp": lambda x, y, a, b: ((x >= a) & (x <= b)).astype(np.float64),
    "pow": lambda x, y, a, b: np.where(a == 0, 0.0, a * np.power(x, a - 1.0)),
    "rpow": lambda x, y, a, b: y * np.log(a),
    "rdiv": lambda x, y, a, b: -y / x,
}

_BINARY = {
    "add": np.add if np else None,
    "sub": np.subtract if np else None,
    "mul": np.multiply if np else None,
    "minimum": np.minimum if np else None,
    "maximum": np.maximum if np else None,
    "eq": np.equal if np else None,
    "ne": np.not_equal if np else None,
    "lt": np.less if np else None,
    "le": np.less_equal if np else None,
    "gt": np.greater if np else None,
    "ge": np.greater_equal if np else None,
    "logical_and": np.logical_and if np else None,
    "logical_or": np.logical_or if np else None,
    "logical_xor": np.logical_xor if np else None,
}


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
        self.array(out)[...] = src.astype(NP_DTYPES[out.dtype], copy=True)

    def unary(self, op, out, x, a=0.0, b=0.0):
        v = self.array(x)
        if op in _UNARY_BOOL:
            with np.errstate(all="ignore"):
                res = _UNARY_BOOL[op](v, a, b)
        elif op in _UNARY_EXACT and not out.dtype.is_floating:
            res = _UNARY_EXACT[op](v.astype(np.int64), _int_param(a), _int_param(b))
        elif op in _UNARY_EXACT:
            res = _float(_UNARY_EXACT[op])(v, a, b)
        elif op in _UNARY_FLOAT:
            res = _float(_UNARY_FLOAT[op])(v, a, b)
        else:
            raise ValueError(f"unknown unary op {op!r}")
        self._write(out, res)

    def unary_backward(self, op, out, grad, x, y, a=0.0, b=0.0):
        g, xv, yv = (self.array(t).astype(np.float64) for t in (grad, x, y))
        with np.errstate(all="ignore"):
            self._write(out, g * _UNARY_DERIVATIVE[op](xv, yv, a, b))

    def binary(self, op, out, x, y):
        xv, yv = self.array(x), self.array(y)
        with np.errstate(all="ignore"):
            if op in _BINARY:
                if out.dtype.is_floating or op in ("eq", "ne", "lt", "le", "gt", "ge"):
                    xv, yv = (v.astype(np.float64) if v.dtype.kind == "f" else v for v in (xv, yv))
                res = _BINARY[op](xv, yv)
            elif op == "div":
                res = xv.astype(np.float64) / yv.astype(np.float64)
            elif op == "pow":
                if out.dtype.is_floating:
                    res = np.power(xv.astype(np.float64), yv.astype(np.float64))
                else:
                    res = np.power(xv.astype(np.int64), yv.astype(np.int64))
            elif op == "atan2":
                res = np.arctan2(xv.astype(np.float64), yv.astype(np.float64))
            else:
                raise ValueError(f"unknown binary op {op!r}")
        self._write(out, res)

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
        # NumPy only reaches BLAS for 2-D operands; a 3-D matmul of strided views is ~10x slower
        res = (av[0] @ bv[0])[None] if av.shape[0] == 1 and bv.shape[0] == 1 else np.matmul(av, bv)
        if bias is not None:
            res += self.array(bias)
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
    def cross_entropy(self, out, logits, target, ignore_index=-100, label_smoothing=0.0):
        z = self.array(logits).astype(np.float64)
        t = self.array(target).astype(np.int64)
        self._checked(np.where(t == ignore_index, 0, t), z.shape[1], _bounds.CROSS_ENTROPY)
        logp = z - z.max(axis=1, keepdims=True)
        logp = logp - np.log(np.exp(logp).sum(axis=1, keepdims=True))
        valid = t != ignore_index
        picked = np.take_along_axis(logp, np.where(valid, t, 0)[:, None], axis=1)[:, 0]
        c = z.shape[1]
        loss = np.where(valid, -(1.0 - label_smoothing) * picked - label_smoothing / c * logp.sum(axis=1), 0.0)
        self._write(out, np.stack([loss, valid], axis=1) if len(out.shape) == 2 else loss)

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
        w = self.array(weight)
        cols = self._unfold(x, w.shape[2:], stride, padding, dilation, (oh, ow), w.dtype)
        res = np.matmul(w.reshape(o, -1), cols)  # [N, O, OH*OW]
        if bias is not None:
            res += self.array(bias)[:, None]
        self._write(out, res.reshape(out.shape))

    def conv2d_backward_input(self, out, grad, weight, stride, padding, dilation):
        w = self.array(weight)
        g = self.array(grad)
        n, o = g.shape[:2]
        dcols = np.matmul(w.reshape(o, -1).T, g.reshape(n, o, -1))  # [N, C*kh*kw, OH*OW]
        self._fold(out, dcols, w.shape[2:], stride, padding, dilation)

    def conv2d_backward_weight(self, out, grad, x, stride, padding, dilation, workspace=None):
        g = self.array(grad)
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

    def sgd_step(self, param, grad, momentum_buffer, hyper):
        g = self._optim_grad(param, grad, hyper)
        if momentum_buffer is not None:
            m = hyper["momentum"]
            buf = g if hyper["first"] else m * self._f64(momentum_buffer) + (1.0 - hyper["dampening"]) * g
            self._write(momentum_buffer, buf)
            g = g + m * buf if hyper["nesterov"] else buf
        self._write(param, self._f64(param) - hyper["lr"] * g)

    def adam_step(self, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, hyper):
        lr, b1, b2, t = hyper["lr"], hyper["beta1"], hyper["beta2"], hyper["step"]
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
