"""Convolution, im2col / col2im and 2-D max / average pooling over NCHW float32 images.

On a GPU, 3x3 stride-1 convolutions with at least winograd.MIN_CHANNELS channels on both sides (ResNet's)
take Winograd F(4x4, 3x3) or F(2x2, 3x3) (winograd.py, shaders/winograd.wgsl) for the forward product and
both gradients; the rest as follows.
On a GPU, conv2d and its two gradients with at least conv_gemm.MIN_CHANNELS output channels, and the
forward product past conv_direct.MAX_ROWS of them, are implicit-GEMM products over the whole batch
(conv_gemm.py, shaders/conv_gemm.wgsl): the image is unfolded on the fly, never stored. Forward:
out [O, N*OH*OW] = W [O, C*kh*kw] @ cols(x), the bias (and a ReLU) in the store. Input gradient:
Wᵀ [C, O*kh*kw] @ a gather of dY, one product per stride phase. Weight gradient: dY [O, N*OH*OW] @
cols(x)ᵀ, its long K split across workgroups when the output is small.
Narrower products take direct kernels (conv_direct.py, shaders/conv_direct.wgsl): conv2d with at most
conv_direct.MAX_ROWS output channels and the stride-1 input gradient with at most that many input channels,
over conv_direct.MIN_POSITIONS positions or more (two per thread, every row in its registers), and a weight
gradient of at most conv_direct.MAX_UNITS 4x4 blocks (partial sums per chunk of positions, then their row
sums).
What is left (narrow products over fewer positions, a strided input gradient, a narrow weight gradient of
more blocks, or everything narrow with WEBGRAD_CONV_DIRECT=0) runs as before the direct kernels: the
forward from conv_gemm.MIN_FORWARD_CHANNELS on conv_gemm, else on the matmul kernel (shaders/matmul.wgsl),
one product per image, whose b operand is the image unfolded on the fly (B_GATHER). Forward:
out[n] = W @ cols(x[n]); weight gradient: one batch-reduce product, sum over images of
dY[n] @ cols(x[n])ᵀ; input gradient (stride 1): a convolution of dY with the weight transposed to
[C, O*kh*kw] and the window reversed (negated dilation and padding); with a larger stride, Wᵀ @ dY then
col2im.
On a software adapter (matmul_plan's "cpu" profile) the image is unfolded explicitly by im2col instead,
and the input gradient is Wᵀ @ dY then col2im: its matmul kernel has no gather (see matmul_cpu.wgsl).
im2col, col2im and pooling are shaders/conv_pool.wgsl.
"""

import struct

from ..._view import View
from ...dtypes import float16, float32
from .. import kernels
from . import conv_direct, conv_gemm, matmul_plan, winograd
from .elementwise import copy, fill, materialize
from .matmul import profile, run_plan
from .dispatch import Kernel, Shader
from .views import INDEX, check_view, contiguous_view

SHADER = Shader("conv_pool.wgsl", {})
_PLAIN = ((0, "write"), (1, "read"), (4, "uniform"))
IM2COL = Kernel(SHADER, "im2col", _PLAIN)
# Software adapters: a thread per row instead of per element (no per-element index divisions)
IM2COL_ROWS = Kernel(SHADER, "im2col_rows", _PLAIN)
COL2IM_ROWS = Kernel(SHADER, "col2im_rows", _PLAIN)
MAX_POOL_ROWS = Kernel(SHADER, "max_pool2d_rows", ((0, "write"), (1, "read"), (2, "write"), (4, "uniform")))
MAX_POOL_BACKWARD_GATHER_ROWS = Kernel(SHADER, "max_pool2d_backward_gather_rows",
                                       ((0, "write"), (1, "read"), (2, "write"), (4, "uniform")))
COL2IM = Kernel(SHADER, "col2im", _PLAIN)
MAX_POOL = Kernel(SHADER, "max_pool2d", ((0, "write"), (1, "read"), (2, "write"), (4, "uniform")))
MAX_POOL_BACKWARD = Kernel(SHADER, "max_pool2d_backward", ((1, "read"), (2, "write"), (3, "write"), (4, "uniform")))
MAX_POOL_BACKWARD_GATHER = Kernel(SHADER, "max_pool2d_backward_gather", ((0, "write"), (1, "read"), (2, "write"), (4, "uniform")))
# GPUs, MaxPool2d(2) on even planes: a thread per window (see conv_pool.wgsl)
MAX_POOL_2X2 = Kernel(SHADER, "max_pool2d_2x2", ((0, "write"), (1, "read"), (2, "write"), (4, "uniform")))
MAX_POOL_2X2_BACKWARD = Kernel(SHADER, "max_pool2d_2x2_backward", ((0, "write"), (1, "read"), (2, "write"),
                                                                   (4, "uniform")))
AVG_POOL = Kernel(SHADER, "avg_pool2d", _PLAIN)
AVG_POOL_BACKWARD = Kernel(SHADER, "avg_pool2d_backward", _PLAIN)

# n, C, H, W, OH, OW, kh, kw, sh, sw | ph, pw | dh, dw, x_offset, out_offset, index_offset, include_pad, rows_padded
_PARAMS = struct.Struct("<10I2i7I")
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


def _launch(rt, kernel, storages, n, C, H, W, OH, OW, geom, x_offset, out_offset, index_offset=0, include_pad=False,
            workgroup=WORKGROUP, rows_padded=0):
    if n == 0:
        return
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = geom
    params = _PARAMS.pack(n, C, H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, x_offset, out_offset, index_offset,
                          int(include_pad), rows_padded or C * kh * kw)
    groups = min(-(-n // workgroup), rt.limits["max_compute_workgroups_per_dimension"])
    rt.dispatch(kernel, (), storages, params, (groups, 1, 1))


def _pooled(x_shape, geom, out, name="out"):
    N, C, H, W = x_shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = geom
    OH, OW = _out_size(H, kh, sh, ph, dh), _out_size(W, kw, sw, pw, dw)
    if out.shape != (N, C, OH, OW):
        raise ValueError(f"{name} has shape {out.shape}, expected {(N, C, OH, OW)}")
    return OH, OW


@kernels.im2col.implement("webgpu")
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
    if rt.variant["conv_rows"]:  # a thread per row (see conv_pool.wgsl's im2col_rows)
        _launch(rt, IM2COL_ROWS, (out.storage, x.storage), N * C * kh * kw, C, H, W, OH, OW, geom, x.offset,
                out.offset, workgroup=64)
        return
    _launch(rt, IM2COL, (out.storage, x.storage), out.numel, C, H, W, OH, OW, geom, x.offset, out.offset)


@kernels.col2im.implement("webgpu")
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
    if rt.variant["conv_rows"]:
        _launch(rt, COL2IM_ROWS, (out.storage, cols.storage), N * C * H, C, H, W, OH, OW, geom, cols.offset,
                out.offset, workgroup=64)
        return
    _launch(rt, COL2IM, (out.storage, cols.storage), out.numel, C, H, W, OH, OW, geom, cols.offset, out.offset)


def _even_2x2(geom, H, W, OH, OW):
    """MaxPool2d(2) whose windows tile the planes exactly: every pixel in one window."""
    return geom == ((2, 2), (2, 2), (0, 0), (1, 1)) and (H, W) == (2 * OH, 2 * OW)


@kernels.max_pool2d.implement("webgpu")
def max_pool2d(rt, out, indices, x, kernel, stride, padding, dilation):
    geom = _geometry(kernel, stride, padding, dilation)
    N, C, H, W = _image(x, "x")
    check_view(out, "out", dtype=float32, contiguous=True, ndim=4)
    check_view(indices, "indices", dtype=INDEX, contiguous=True, ndim=4)
    OH, OW = _pooled(x.shape, geom, out)
    if indices.shape != out.shape:
        raise ValueError(f"indices has shape {indices.shape}, expected {out.shape}")
    if x.storage in (out.storage, indices.storage):
        x = materialize(rt, x)
    if rt.variant["conv_rows"]:
        _launch(rt, MAX_POOL_ROWS, (out.storage, x.storage, indices.storage), N * C * OH, C, H, W, OH, OW, geom,
                x.offset, out.offset, indices.offset, workgroup=64)
        return
    kernel = MAX_POOL_2X2 if _even_2x2(geom, H, W, OH, OW) else MAX_POOL
    _launch(rt, kernel, (out.storage, x.storage, indices.storage), out.numel, C, H, W, OH, OW, geom,
            x.offset, out.offset, indices.offset)


@kernels.max_pool2d_backward.implement("webgpu")
def max_pool2d_backward(rt, out, grad, indices, kernel=None, stride=None, padding=None, dilation=None):
    N, C, H, W = _image(out, "out")
    check_view(grad, "grad", dtype=float32, contiguous=True, ndim=4)
    check_view(indices, "indices", dtype=INDEX, contiguous=True, ndim=4)
    if grad.shape != indices.shape or grad.shape[:2] != (N, C):
        raise ValueError(f"max_pool2d_backward: grad {grad.shape}, indices {indices.shape} and out {out.shape} disagree")
    grad, indices = (materialize(rt, v) if v.storage is out.storage else v for v in (grad, indices))
    OH, OW = grad.shape[2:]
    if kernel is not None:
        geom = _geometry(kernel, stride, padding, dilation)
        (kh, kw), (sh, sw), _, (dh, dw) = geom
        if sh >= dh * (kh - 1) + 1 and sw >= dw * (kw - 1) + 1 and rt.variant["conv_rows"]:  # a thread per image row
            _launch(rt, MAX_POOL_BACKWARD_GATHER_ROWS, (out.storage, grad.storage, indices.storage), N * C * H, C, H,
                    W, OH, OW, geom, grad.offset, out.offset, indices.offset, workgroup=64)
            return
        if _even_2x2(geom, H, W, OH, OW):  # a thread per window writes its four pixels
            _launch(rt, MAX_POOL_2X2_BACKWARD, (out.storage, grad.storage, indices.storage), grad.numel, C, H, W,
                    OH, OW, geom, grad.offset, out.offset, indices.offset)
            return
        if sh >= dh * (kh - 1) + 1 and sw >= dw * (kw - 1) + 1:  # windows never overlap: gather
            _launch(rt, MAX_POOL_BACKWARD_GATHER, (out.storage, grad.storage, indices.storage), out.numel, C, H, W,
                    OH, OW, geom, grad.offset, out.offset, indices.offset)
            return
    fill(rt, out, 0.0)
    geom = ((1, 1), (1, 1), (0, 0), (1, 1))  # unused: the indices say where each gradient goes
    _launch(rt, MAX_POOL_BACKWARD, (grad.storage, indices.storage, out.storage), grad.numel, C, H, W, OH, OW, geom,
            grad.offset, out.offset, indices.offset)


@kernels.avg_pool2d.implement("webgpu")
def avg_pool2d(rt, out, x, kernel, stride, padding, count_include_pad=True):
    geom = _geometry(kernel, stride, padding)
    N, C, H, W = _image(x, "x")
    check_view(out, "out", dtype=float32, contiguous=True, ndim=4)
    OH, OW = _pooled(x.shape, geom, out)
    if x.storage is out.storage:
        x = materialize(rt, x)
    _launch(rt, AVG_POOL, (out.storage, x.storage), out.numel, C, H, W, OH, OW, geom, x.offset, out.offset,
            include_pad=count_include_pad)


@kernels.avg_pool2d_backward.implement("webgpu")
def avg_pool2d_backward(rt, out, grad, kernel, stride, padding, count_include_pad=True):
    geom = _geometry(kernel, stride, padding)
    N, C, H, W = _image(out, "out")
    check_view(grad, "grad", dtype=float32, contiguous=True, ndim=4)
    OH, OW = _pooled(out.shape, geom, grad, "grad")
    if grad.storage is out.storage:
        grad = materialize(rt, grad)
    _launch(rt, AVG_POOL_BACKWARD, (out.storage, grad.storage), out.numel, C, H, W, OH, OW, geom, grad.offset,
            out.offset, include_pad=count_include_pad)


# ------------------------------------------------------------------------------ convolution
def _conv_operands(name, image, weight, out_hw_view, geom):
    """Check a convolution's image and weight; (N, C, H, W), (O, kh, kw), (OH, OW)."""
    N, C, H, W = _image(image, name)
    check_view(weight, "weight", dtype=float32, contiguous=True, ndim=4)
    O, Cw, kh, kw = weight.shape
    (sh, sw), (ph, pw), (dh, dw) = geom
    if Cw != C:
        raise ValueError(f"conv2d: weight {weight.shape} does not match {C} input channels")
    return (N, C, H, W), (O, kh, kw), (_out_size(H, kh, sh, ph, dh), _out_size(W, kw, sw, pw, dw))


def _gather(H, W, OW, kh, kw, geom):
    (sh, sw), (ph, pw), (dh, dw) = geom
    return (H, W, OW, kh, kw, sh, sw, dh, dw, ph, pw)


def _conv_geom(stride, padding, dilation):
    s, p, d = (_pair(v, n) for v, n in ((stride, "stride"), (padding, "padding"), (dilation, "dilation")))
    if min(s) < 1 or min(d) < 1 or min(p) < 0:
        raise ValueError(f"bad convolution: stride {s}, padding {p}, dilation {d}")
    return s, p, d


def _padded_rows(C, window):
    """Rows of a software adapter's unfolded matrix: C*kh*kw rounded up to a multiple of 4, so that the
    product's K is vec4-aligned (conv1 of MNIST, 1 x 3 x 3 = 9 rows, would otherwise take matmul_cpu's
    f32 loads: 4x the loads for its forward product and its weight gradient)."""
    return -(-C * window[0] * window[1] // 4) * 4


def _unfolded(rt, x, window, geom, OH, OW):
    """im2col of image batch x into a pooled storage: a contiguous [N, Kp, OH*OW] view, Kp =
    _padded_rows (the rows past C*kh*kw are zeros). The explicit route of software adapters, whose
    matmul kernel (matmul_cpu.wgsl) reads vec4s of a stored matrix (Runtime.software)."""
    N, C, H, W = x.shape
    (kh, kw), ((sh, sw), (ph, pw), (dh, dw)) = window, geom
    kp = _padded_rows(C, window)
    cols = contiguous_view(rt.storage(N * kp * OH * OW, float32), (N, kp, OH * OW), float32)
    if x.storage is cols.storage:
        x = materialize(rt, x)
    _launch(rt, IM2COL_ROWS, (cols.storage, x.storage), N * kp, C, H, W, OH, OW,
            ((kh, kw), (sh, sw), (ph, pw), (dh, dw)), x.offset, cols.offset, workgroup=64, rows_padded=kp)
    return cols


def _padded_weight(rt, weight, kp):
    """weight [O, C, kh, kw] as a contiguous [O, kp] matrix, zero past C*kh*kw (see _padded_rows)."""
    O = weight.shape[0]
    kk = weight.numel // O
    if kp == kk:
        return weight
    padded = contiguous_view(rt.storage(O * kp, float32), (O, kp), float32)
    fill(rt, padded, 0.0)
    copy(rt, View(padded.storage, (O, kk), (kp, 1), padded.offset, float32),
         View(weight.storage, (O, kk), (kk, 1), weight.offset, float32))
    return padded


@kernels.conv2d.implement("webgpu")
def conv2d(rt, out, x, weight, bias, stride, padding, dilation, keep=False, relu=False):
    """The convolution; with keep, on a software adapter, returns the unfolded image for the weight
    gradient (conv2d_backward_weight's workspace: one im2col pass less per training step), else None.
    relu (not part of the device interface): ReLU applied in the product's store, after the bias."""
    geom = _conv_geom(stride, padding, dilation)
    (N, C, H, W), (O, kh, kw), (OH, OW) = _conv_operands("x", x, weight, out, geom)
    check_view(out, "out", dtype=float32, contiguous=True, ndim=4)
    if out.shape != (N, O, OH, OW):
        raise ValueError(f"conv2d: out has shape {out.shape}, expected {(N, O, OH, OW)}")
    if bias is not None:
        check_view(bias, "bias", dtype=float32, contiguous=True, ndim=1)
        if bias.shape != (O,):
            raise ValueError(f"conv2d: bias has shape {bias.shape}, expected ({O},)")
    if out.numel == 0:
        return
    x, weight, bias = (materialize(rt, v) if v is not None and v.storage is out.storage else v for v in (x, weight, bias))
    # out[n] [O, OH*OW] = weight [O, C*kh*kw] (one matrix for every image) @ cols(x[n]) + bias per row
    if rt.variant["conv_unfold"]:
        cols = _unfolded(rt, x, (kh, kw), geom, OH, OW)
        kp = cols.shape[1]
        w = _padded_weight(rt, weight, kp)
        p = matmul_plan.plan(N, O, OH * OW, kp, False, False, bias is not None, relu, w.offset, 0,
                             out.offset, bias.offset if bias is not None else 0, 0, kp * OH * OW, bias_rows=True,
                             profile=profile(rt))
        run_plan(rt, p, w.storage, cols.storage, out.storage, bias.storage if bias is not None else None)
        return cols if keep else None
    if winograd.suits(C, O, (kh, kw), geom):
        winograd.forward(rt, out, x, weight, bias, geom, relu)
        return None
    if conv_direct.suits(O, N * OH * OW):
        conv_direct.forward(rt, out, x, weight, bias, geom, relu)
        return None
    if conv_gemm.suits(O, forward=True):
        conv_gemm.forward(rt, out, x, weight, bias, geom, relu)
        return None
    p = matmul_plan.plan(N, O, OH * OW, C * kh * kw, False, False, bias is not None, relu, weight.offset, x.offset,
                         out.offset, bias.offset if bias is not None else 0, 0, C * H * W, bias_rows=True,
                         gather=_gather(H, W, OW, kh, kw, geom), profile=profile(rt))
    run_plan(rt, p, weight.storage, x.storage, out.storage, bias.storage if bias is not None else None)


@kernels.conv2d_backward_weight.implement("webgpu")
def conv2d_backward_weight(rt, out, grad, x, stride, padding, dilation, workspace=None):
    geom = _conv_geom(stride, padding, dilation)
    check_view(out, "out", dtype=float32, contiguous=True, ndim=4)
    (N, C, H, W), (O, kh, kw), (OH, OW) = _conv_operands("x", x, out, out, geom)
    check_view(grad, "grad", dtype=float32, contiguous=True, ndim=4)
    if grad.shape != (N, O, OH, OW):
        raise ValueError(f"conv2d_backward_weight: grad has shape {grad.shape}, expected {(N, O, OH, OW)}")
    if out.numel == 0:
        return
    grad, x = (materialize(rt, v) if v.storage is out.storage else v for v in (grad, x))
    # dW [O, C*kh*kw] = sum over images n of dY[n] [O, OH*OW] @ cols(x[n])ᵀ: a batch-reduce product
    # (items = N), whose K loop runs over every image's positions
    if rt.variant["conv_unfold"]:
        kp = _padded_rows(C, (kh, kw))
        cols = workspace  # conv2d's unfolded x, when the forward kept it
        if cols is None or cols.shape != (N, kp, OH * OW):
            cols = _unfolded(rt, x, (kh, kw), geom, OH, OW)
        kk = C * kh * kw
        # dW padded to [O, kp] (its extra columns, products with the zero rows, are dropped by the copy)
        dw = out if kp == kk else contiguous_view(rt.storage(O * kp, float32), (O, kp), float32)
        p = matmul_plan.plan(1, O, kp, OH * OW, False, True, False, False, grad.offset, 0, dw.offset, 0,
                             O * OH * OW, kp * OH * OW, items=N, profile=profile(rt))
        run_plan(rt, p, grad.storage, cols.storage, dw.storage)
        if dw is not out:
            copy(rt, View(out.storage, (O, kk), (kk, 1), out.offset, float32),
                 View(dw.storage, (O, kk), (kp, 1), dw.offset, float32))
        return
    if winograd.suits(C, O, (kh, kw), geom):
        winograd.backward_weight(rt, out, grad, x, geom)
        return
    if conv_gemm.suits(O):
        conv_gemm.backward_weight(rt, out, grad, x, geom)
        return
    if conv_direct.suits_wgrad(O, C * kh * kw):
        conv_direct.backward_weight(rt, out, grad, x, geom)
        return
    p = matmul_plan.plan(1, O, C * kh * kw, OH * OW, False, True, False, False, grad.offset, x.offset, out.offset, 0,
                         O * OH * OW, C * H * W, items=N, gather=_gather(H, W, OW, kh, kw, geom), profile=profile(rt))
    run_plan(rt, p, grad.storage, x.storage, out.storage)


@kernels.conv2d_backward_input.implement("webgpu")
def conv2d_backward_input(rt, out, grad, weight, stride, padding, dilation):
    geom = _conv_geom(stride, padding, dilation)
    check_view(out, "out", dtype=float32, contiguous=True, ndim=4)
    (N, C, H, W), (O, kh, kw), (OH, OW) = _conv_operands("out", out, weight, out, geom)
    check_view(grad, "grad", dtype=float32, contiguous=True, ndim=4)
    if grad.shape != (N, O, OH, OW):
        raise ValueError(f"conv2d_backward_input: grad has shape {grad.shape}, expected {(N, O, OH, OW)}")
    if out.numel == 0:
        return
    grad, weight = (materialize(rt, v) if v.storage is out.storage else v for v in (grad, weight))
    (sh, sw), (ph, pw), (dh, dw) = geom
    kk = kh * kw
    if not rt.variant["conv_unfold"] and winograd.suits(O, C, (kh, kw), geom):
        winograd.backward_input(rt, out, grad, weight, geom)
        return
    if not rt.variant["conv_unfold"] and conv_gemm.suits(O):
        conv_gemm.backward_input(rt, out, grad, weight, geom)
        return
    if not rt.variant["conv_unfold"] and (sh, sw) == (1, 1) and conv_direct.suits(C, N * H * W):
        conv_direct.backward_input(rt, out, grad, weight, geom)
        return
    if (sh, sw) != (1, 1) or rt.variant["conv_unfold"]:
        # dcols [N, C*kh*kw, OH*OW] = Wᵀ @ dY[n], folded back onto the image by col2im
        cols = contiguous_view(rt.storage(N * C * kk * OH * OW, float32), (N, C * kk, OH * OW), float32)
        p = matmul_plan.plan(N, C * kk, OH * OW, O, True, False, False, False, weight.offset, grad.offset, 0, 0,
                             0, O * OH * OW, profile=profile(rt))
        run_plan(rt, p, weight.storage, grad.storage, cols.storage)
        col2im(rt, out, cols, (kh, kw), (sh, sw), (ph, pw), (dh, dw))
        return
    # Stride 1: dX[n, c, h, w] = sum over o, i, j of W[o, c, i, j] * dY[n, o, h + ph - i*dh, w + pw - j*dw],
    # a convolution of dY: out[n] [C, H*W] = Wt [C, O*kh*kw] @ cols'(dY[n]), where cols' unfolds the
    # OH x OW planes of dY with dilation -d and padding -p (so that row (o, i, j) reads h + p - i*d).
    # Wt is W with its first two dims swapped: a small copy.
    wt = contiguous_view(rt.storage(C * O * kk, float32), (C, O, kk), float32)
    copy(rt, wt, View(weight.storage, (C, O, kk), (kk, C * kk, 1), weight.offset, float32))
    p = matmul_plan.plan(N, C, H * W, O * kk, False, False, False, False, 0, grad.offset, out.offset, 0, 0,
                         O * OH * OW, gather=(OH, OW, W, kh, kw, 1, 1, -dh, -dw, -ph, -pw), profile=profile(rt))
    run_plan(rt, p, wt.storage, grad.storage, out.storage)


# ------------------------------------------------------------------ float16 (the records' HALF policy)
# conv_gemm's (or winograd's) float16 kernels when every view is a contiguous float16 NCHW tensor of its own
# storage and the convolution is one conv_gemm takes (a GPU adapter, at least conv_gemm.MIN_CHANNELS output
# channels); else NotImplemented, and f16.run goes through float32 (which also raises the errors for operands
# that do not fit).


def _native_conv(rt, out_channels, out, *inputs):
    """Whether conv_gemm takes this convolution natively: a GPU adapter, conv_gemm's channel counts, and
    every view (None: no bias) contiguous float16 with a storage apart from out's. Shapes: the callers."""
    if rt.variant["conv_unfold"] or not conv_gemm.suits(out_channels):
        return False
    for v in (out, *inputs):
        if v is not None and not (isinstance(v, View) and v.dtype is float16 and v.is_contiguous()
                                  and (v is out or v.storage is not out.storage)):
            return False
    return True


def _conv_sizes(x_shape, weight_shape, geom):
    """(N, O, OH, OW): the output shape of a convolution of 4-D shapes (None where they do not match)."""
    if len(x_shape) != 4 or len(weight_shape) != 4 or x_shape[1] != weight_shape[1]:
        return None
    (sh, sw), (ph, pw), (dh, dw) = geom
    N, C, H, W = x_shape
    O, _, kh, kw = weight_shape
    return N, O, _out_size(H, kh, sh, ph, dh), _out_size(W, kw, sw, pw, dw)


@kernels.conv2d.implement("webgpu", half=True)
def conv2d_half(rt, out, x, weight, bias, stride, padding, dilation, keep=False, relu=False):
    geom = _conv_geom(stride, padding, dilation)
    size = _conv_sizes(x.shape, weight.shape, geom)
    if size is None or out.shape != size or not _native_conv(rt, size[1], out, x, weight, bias) or \
            bias is not None and bias.shape != (size[1],):
        return NotImplemented
    if out.numel:
        (winograd if winograd.suits(x.shape[1], size[1], weight.shape[2:], geom) else conv_gemm).forward(
            rt, out, x, weight, bias, geom, relu)
    return None


@kernels.conv2d_backward_input.implement("webgpu", half=True)
def conv2d_backward_input_half(rt, out, grad, weight, stride, padding, dilation):
    geom = _conv_geom(stride, padding, dilation)
    size = _conv_sizes(out.shape, weight.shape, geom)
    if size is None or grad.shape != size or not _native_conv(rt, size[1], out, grad, weight):
        return NotImplemented
    if out.numel:
        (winograd if winograd.suits(out.shape[1], size[1], weight.shape[2:], geom) else conv_gemm).backward_input(
            rt, out, grad, weight, geom)
    return None


@kernels.conv2d_backward_weight.implement("webgpu", half=True)
def conv2d_backward_weight_half(rt, out, grad, x, stride, padding, dilation, workspace=None):
    geom = _conv_geom(stride, padding, dilation)
    size = _conv_sizes(x.shape, out.shape, geom)
    if size is None or grad.shape != size or not _native_conv(rt, size[1], out, grad, x):
        return NotImplemented
    if out.numel:
        (winograd if winograd.suits(x.shape[1], size[1], out.shape[2:], geom) else conv_gemm
         ).backward_weight(rt, out, grad, x, geom)
    return None
