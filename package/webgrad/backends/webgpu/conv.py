"""im2col / col2im and 2-D max / average pooling over NCHW float32 images (shaders/conv_pool.wgsl)."""

import struct

from ...dtypes import float32, int32
from .elementwise import fill, materialize
from .runtime import Kernel, Shader
from .views import check_view

SHADER = Shader("conv_pool.wgsl", {})
_PLAIN = ((0, "write"), (1, "read"), (4, "uniform"))
IM2COL = Kernel(SHADER, "im2col", _PLAIN)
COL2IM = Kernel(SHADER, "col2im", _PLAIN)
MAX_POOL = Kernel(SHADER, "max_pool2d", ((0, "write"), (1, "read"), (2, "write"), (4, "uniform")))
MAX_POOL_BACKWARD = Kernel(SHADER, "max_pool2d_backward", ((1, "read"), (2, "write"), (3, "write"), (4, "uniform")))
AVG_POOL = Kernel(SHADER, "avg_pool2d", _PLAIN)
AVG_POOL_BACKWARD = Kernel(SHADER, "avg_pool2d_backward", _PLAIN)

# n, C, H, W, OH, OW, kh, kw, sh, sw | ph, pw | dh, dw, x_offset, out_offset, index_offset, include_pad
_PARAMS = struct.Struct("<10I2i6I")
WORKGROUP = 256


def _pair(v, name):
    pair = (v, v) if isinstance(v, int) else tuple(v)
    if len(pair) != 2 or not all(isinstance(n, int) for n in pair):
        raise ValueError(f"{name} must be an int or a (height, width) pair of ints, got {v!r}")
    return pair


def _geometry(kernel, stride, padding, dilation=(1, 1)):
    k, s, p, d = (_pair(v, n) for v, n in ((kernel, "kernel"), (stride, "stride"), (padding, "padding"), (dilation, "dilation")))
    if min(k) < 1 or min(s) < 1 or min(d) < 1 or min(p) < 0:
        raise ValueError(f"bad window: kernel {k}, stride {s}, padding {p}, dilation {d}")
    return k, s, p, d


def _out_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _image(view, name):
    check_view(view, name, dtype=float32, contiguous=True, ndim=4)
    return view.shape


def _launch(rt, kernel, storages, n, C, H, W, OH, OW, geom, x_offset, out_offset, index_offset=0, include_pad=False):
    if n == 0:
        return
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = geom
    params = _PARAMS.pack(n, C, H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, x_offset, out_offset, index_offset,
                          int(include_pad))
    groups = min(-(-n // WORKGROUP), rt.limits["max_compute_workgroups_per_dimension"])
    rt.dispatch(kernel, (), storages, params, (groups, 1, 1))


def _pooled(x_shape, geom, out, name="out"):
    N, C, H, W = x_shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = geom
    OH, OW = _out_size(H, kh, sh, ph, dh), _out_size(W, kw, sw, pw, dw)
    if out.shape != (N, C, OH, OW):
        raise ValueError(f"{name} has shape {out.shape}, expected {(N, C, OH, OW)}")
    return OH, OW


def im2col(rt, out, x, kernel, stride, padding, dilation):
    geom = _geometry(kernel, stride, padding, dilation)
    N, C, H, W = _image(x, "x")
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = geom
    OH, OW = _out_size(H, kh, sh, ph, dh), _out_size(W, kw, sw, pw, dw)
    check_view(out, "out", dtype=float32, contiguous=True, ndim=3)
    if out.shape != (N, C * kh * kw, OH * OW):
        raise ValueError(f"im2col: out has shape {out.shape}, expected {(N, C * kh * kw, OH * OW)}")
    if x.storage is out.storage:
        x = materialize(rt, x)
    _launch(rt, IM2COL, (out.storage, x.storage), out.numel, C, H, W, OH, OW, geom, x.offset, out.offset)


def col2im(rt, out, cols, kernel, stride, padding, dilation):
    geom = _geometry(kernel, stride, padding, dilation)
    N, C, H, W = _image(out, "out")
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = geom
    OH, OW = _out_size(H, kh, sh, ph, dh), _out_size(W, kw, sw, pw, dw)
    check_view(cols, "cols", dtype=float32, contiguous=True, ndim=3)
    if cols.shape != (N, C * kh * kw, OH * OW):
        raise ValueError(f"col2im: cols has shape {cols.shape}, expected {(N, C * kh * kw, OH * OW)}")
    if cols.storage is out.storage:
        cols = materialize(rt, cols)
    _launch(rt, COL2IM, (out.storage, cols.storage), out.numel, C, H, W, OH, OW, geom, cols.offset, out.offset)


def max_pool2d(rt, out, indices, x, kernel, stride, padding, dilation):
    geom = _geometry(kernel, stride, padding, dilation)
    N, C, H, W = _image(x, "x")
    check_view(out, "out", dtype=float32, contiguous=True, ndim=4)
    check_view(indices, "indices", dtype=int32, contiguous=True, ndim=4)
    OH, OW = _pooled(x.shape, geom, out)
    if indices.shape != out.shape:
        raise ValueError(f"indices has shape {indices.shape}, expected {out.shape}")
    if x.storage in (out.storage, indices.storage):
        x = materialize(rt, x)
    _launch(rt, MAX_POOL, (out.storage, x.storage, indices.storage), out.numel, C, H, W, OH, OW, geom,
            x.offset, out.offset, indices.offset)


def max_pool2d_backward(rt, out, grad, indices):
    N, C, H, W = _image(out, "out")
    check_view(grad, "grad", dtype=float32, contiguous=True, ndim=4)
    check_view(indices, "indices", dtype=int32, contiguous=True, ndim=4)
    if grad.shape != indices.shape or grad.shape[:2] != (N, C):
        raise ValueError(f"max_pool2d_backward: grad {grad.shape}, indices {indices.shape} and out {out.shape} disagree")
    grad, indices = (materialize(rt, v) if v.storage is out.storage else v for v in (grad, indices))
    fill(rt, out, 0.0)
    OH, OW = grad.shape[2:]
    geom = ((1, 1), (1, 1), (0, 0), (1, 1))  # unused: the indices say where each gradient goes
    _launch(rt, MAX_POOL_BACKWARD, (grad.storage, indices.storage, out.storage), grad.numel, C, H, W, OH, OW, geom,
            grad.offset, out.offset, indices.offset)


def avg_pool2d(rt, out, x, kernel, stride, padding, count_include_pad=True):
    geom = _geometry(kernel, stride, padding)
    N, C, H, W = _image(x, "x")
    check_view(out, "out", dtype=float32, contiguous=True, ndim=4)
    OH, OW = _pooled(x.shape, geom, out)
    if x.storage is out.storage:
        x = materialize(rt, x)
    _launch(rt, AVG_POOL, (out.storage, x.storage), out.numel, C, H, W, OH, OW, geom, x.offset, out.offset,
            include_pad=count_include_pad)


def avg_pool2d_backward(rt, out, grad, kernel, stride, padding, count_include_pad=True):
    geom = _geometry(kernel, stride, padding)
    N, C, H, W = _image(out, "out")
    check_view(grad, "grad", dtype=float32, contiguous=True, ndim=4)
    OH, OW = _pooled(out.shape, geom, grad, "grad")
    if grad.storage is out.storage:
        grad = materialize(rt, grad)
    _launch(rt, AVG_POOL_BACKWARD, (out.storage, grad.storage), out.numel, C, H, W, OH, OW, geom, grad.offset,
            out.offset, include_pad=count_include_pad)
