"""Direct convolutions for narrow products on GPUs (shaders/conv_direct.wgsl): conv2d with at most MAX_ROWS
output channels and the stride-1 input gradient with at most MAX_ROWS input channels, both over at least
MIN_POSITIONS positions, and a weight gradient of at most MAX_UNITS 4x4 blocks. conv.py routes a GPU
adapter's convolutions here where conv_gemm.py does not take them (its gradients from
conv_gemm.MIN_CHANNELS output channels), instead of matmul.wgsl's per-image products; software adapters
keep their im2col + matmul_cpu path.

Measured on an H200 (bench replay --each, the MNIST CNN at batch 1024),
against the per-image products and conv_gemm:
    conv 1->16 on 28x28, forward             57 -> 44 us  (two positions per thread; 52 with one)
    conv 16->32 on 14x14, forward           142 -> 123 us (two; 135 with one)
    conv 16->32, input gradient             224 -> 147 us (two; 193 with one)
    conv 1->16, weight gradient              87 -> 71 us (then the chunks' sum: too small for the top 12)
    the step's GPU span                     944 -> 809 us; bench train replay 953k -> 1,109k samples/s
                                            (the two wheels alternating in one call)
The weight gradient of conv 16->32 (288 blocks) ran 246 us against 199 on the per-image products with two
blocks per thread, and 212 against 198 (51.2 against 29.8 at batch 128) split along k over two workgroups of
144 threads, and ResNet-18's stem (64 channels, an earlier version of the tiles) 109
against 58 us on conv_gemm: both stay there (MAX_UNITS, and conv_gemm first). Through Dawn (Pyodide under
Node) the CNN's replayed step did not move: 1.21-1.23M samples/s against 1.16-1.22M for the previous wheel,
alternating in one call.

The weight gradient's partials are summed by the backend's row sum (reduce.py), not a kernel of this file:
H200, the same call, the MNIST CNN's GPU span 812.2 against 809.3 us at batch 1024 and
237.6 against 234.5 at batch 128, against a dedicated 32-lane sum (8.3 and 6.5 us).

Plans are pure Python and cached; a plan's Launches are kept in the runtime's memo.
"""

import functools
import os
import struct

from ..._view import View
from ...dtypes import float32
from .reduce import reduce
from .dispatch import Kernel, PlannedDispatch, Shader, grid

SHADER = Shader("conv_direct.wgsl", {})
_LAYOUT = ((0, "read"), (1, "read"), (2, "write"), (3, "read"), (4, "uniform"))
_FORWARD_CONSTANTS = ("KH", "KW", "QW", "QP", "A_BLK", "MV", "CCH", "PPT", "OSX", "HAS_BIAS", "RELU")
_WGRAD_CONSTANTS = ("KH", "KW", "QW", "QP", "QT", "K4", "M4", "UNITS", "LANES")
FORWARD = Kernel(SHADER, "conv_direct", _LAYOUT, _FORWARD_CONSTANTS)
WGRAD = Kernel(SHADER, "conv_direct_wgrad", _LAYOUT, _WGRAD_CONSTANTS)
_PARAMS = struct.Struct("<17I4i3I")

THREADS = 256
A_TILE = 1024          # vec4s of staged A (conv_direct.wgsl)
MAX_ROWS = 32          # conv_direct: rows held in each thread's registers (8 vec4s)
# conv_direct: two positions per thread (each staged weight vec4 feeds both), and only for products of at
# least MIN_POSITIONS positions (two workgroups of 512 positions per SM of a 132-SM GPU). Measured on an
# H200, the MNIST CNN's conv 16->32: at batch 1024 (200,704 positions) two per thread ran its input gradient
# in 147 against 193 us for one and 224 on the per-image products, its forward in 123 against 135 and 142
# on conv_gemm; at batch 128 (25,088 positions) the direct kernels lost: input gradient 62.9 (one per thread)
# or 75.0 (two) against 39.1 us per image, forward 42.3 or 53.1 against 26.2 on conv_gemm, the step's GPU
# span 276.2 against 247.4 us (, 8 and 11).
PPT = 2
MIN_POSITIONS = 2 * 132 * PPT * 256
MAX_UNITS = THREADS    # conv_direct_wgrad: 4x4 blocks of dW, one per thread
TILE_VEC4S = 768       # conv_direct_wgrad: xs + ds, 12 KiB (with the 4 KiB of lanes, 16 KiB)
# conv_direct_wgrad's chunks: about TARGET_CHUNKS workgroups (8 of 256 threads per SM of a 132-SM
# H100/H200), each at least MIN_CHUNK_TILES tiles, the partials at most MAX_SCRATCH floats. Measured (MNIST
# conv 1->16 at batch 1024): 264 chunks 94 us, 1056 71 us, 2112 82 us.
TARGET_CHUNKS = 1056
MIN_CHUNK_TILES = 4
MAX_SCRATCH = 1 << 22

# WEBGRAD_CONV_DIRECT=0 turns the direct kernels off (conv.py then takes conv_gemm.py or matmul.wgsl's
# per-image products, as before them); PPT and CHUNKS force a parameter (benchmark sweeps, tests).
FORCED = {"off": os.environ.get("WEBGRAD_CONV_DIRECT") == "0",
          "ppt": int(os.environ.get("WEBGRAD_CONV_DIRECT_PPT") or 0) or None,
          "chunks": int(os.environ.get("WEBGRAD_CONV_DIRECT_CHUNKS") or 0) or None}


def suits(rows, positions):
    """Whether conv_direct takes a product of this many rows (conv2d: output channels; its stride-1 input
    gradient: input channels) over this many positions (images x output planes)."""
    return not FORCED["off"] and rows <= MAX_ROWS and positions >= MIN_POSITIONS


def suits_wgrad(out_channels, k):
    """Whether conv_direct_wgrad takes a weight gradient [out_channels, k] (k = C*kh*kw)."""
    return not FORCED["off"] and -(-out_channels // 4) * -(-k // 4) <= MAX_UNITS


def _params(M, K, positions, a_off, lda, a_bs, g_off, ch, ih, iw, o_off, bias_off, o_plane, o_row, taps, chunk=0,
            chunks=0):
    sy, sx, dy, dx, py, px = taps
    for v in (a_off, g_off, o_off, bias_off, positions, M * K):
        if not 0 <= v < 2**32:
            raise ValueError("conv2d: offsets and sizes must fit in u32")
    return _PARAMS.pack(M, K, positions, a_off, lda, a_bs, g_off, ch, ih, iw, o_off, bias_off, o_plane, o_row,
                        chunk, sy, sx, dy, dx, py, px, chunks, 0, 0)


class DirectPlan(PlannedDispatch):
    __slots__ = ("scratch",)

    def __init__(self, kernel, constants, params, workgroups, scratch=0):
        super().__init__(kernel, constants, params, workgroups)
        self.scratch = scratch  # conv_direct_wgrad: floats of partial sums (chunks per output), else 0


@functools.lru_cache(maxsize=512)
def plan(M, K, a_off, lda, a_blk, a_bs, img_off, ch, ih, iw, qh, qw, window, taps, o_off, has_bias=False,
         bias_off=0, relu=False, out_steps=None, n_images=1, ppt=None):
    """conv_direct: out [M, n_images*qh*qw] = A [M, K] @ G, into an NCHW tensor (out_steps: its (plane,
    row, column) strides, by default (qh*qw, qw, 1)); arguments as conv_gemm.plan's."""
    if M > MAX_ROWS:
        raise ValueError(f"conv_direct: at most {MAX_ROWS} rows, got {M}")
    kh, kw = window
    mv = -(-M // 4)
    qp = qh * qw
    positions = n_images * qp
    ppt = ppt or FORCED["ppt"] or PPT
    o_plane, o_row, osx = out_steps or (qp, qw, 1)
    constants = dict(KH=kh, KW=kw, QW=qw, QP=qp, A_BLK=0 if K <= a_blk else a_blk, MV=mv,
                     CCH=max(1, min(ch, A_TILE // (kh * kw * mv))), PPT=ppt, OSX=osx, HAS_BIAS=int(has_bias),
                     RELU=int(relu))
    if kh * kw * mv > A_TILE:
        raise ValueError(f"conv_direct: a {kh}x{kw} window of {M} rows does not fit the staged weights")
    params = _params(M, K, positions, a_off, lda, a_bs, img_off, ch, ih, iw, o_off, bias_off, o_plane, o_row, taps)
    return DirectPlan(FORWARD, constants, params, grid(-(-positions // (THREADS * ppt))))


def _tile_positions(m4, k4):
    """conv_direct_wgrad's QT: the largest power of two of positions whose tiles (rows of QT + 1) fit
    TILE_VEC4S."""
    qt = 1
    while (2 * qt + 1) * (m4 + k4) <= TILE_VEC4S and qt < 256:
        qt *= 2
    return qt


@functools.lru_cache(maxsize=512)
def plan_wgrad(M, K, grad_off, img_off, ch, ih, iw, qh, qw, window, taps, n_images, chunks=None):
    """conv_direct_wgrad: dW [M, K] = dY [M, n_images*qh*qw] @ G(x)ᵀ, partial sums per chunk of positions
    ([M*K][chunks], see conv_direct.wgsl's write_row), for backward_weight to sum into dW."""
    m4, k4 = -(-M // 4), -(-K // 4)
    units = m4 * k4
    if units > MAX_UNITS:
        raise ValueError(f"conv_direct: a weight gradient of at most {MAX_UNITS} 4x4 blocks, got {units}")
    qt = _tile_positions(m4, k4)
    qp = qh * qw
    positions = n_images * qp
    tiles = -(-positions // qt)
    chunks = chunks or FORCED["chunks"] or min(TARGET_CHUNKS, max(1, tiles // MIN_CHUNK_TILES),
                                               max(1, MAX_SCRATCH // (M * K)))
    chunk = -(-tiles // max(1, min(chunks, tiles))) * qt
    chunks = -(-positions // chunk)
    kh, kw = window
    constants = dict(KH=kh, KW=kw, QW=qw, QP=qp, QT=qt, K4=k4, M4=m4, UNITS=units, LANES=THREADS // units)
    params = _params(M, K, positions, grad_off, 0, 0, img_off, ch, ih, iw, 0, 0, 0, 0, taps, chunk, chunks)
    return DirectPlan(WGRAD, constants, params, grid(chunks), chunks * M * K)


def run(rt, p, a, img, out, bias=None):
    """Record plan p on storages a (binding 0), img, out and bias (None: none; HAS_BIAS is off)."""
    rt.record(p, (a, img, out, a if bias is None else bias))


# ------------------------------------------------------------------ the three convolution products
def forward(rt, out, x, weight, bias, geom, relu=False):
    """out [N, O, OH, OW] = conv2d(x, weight) + bias (then ReLU), O <= MAX_ROWS."""
    Nb, C, H, W = x.shape
    O, _, kh, kw = weight.shape
    OH, OW = out.shape[2:]
    (sh, sw), (ph, pw), (dh, dw) = geom
    K = C * kh * kw
    p = plan(O, K, weight.offset, K, K, 0, x.offset, C, H, W, OH, OW, (kh, kw), (sh, sw, dh, dw, -ph, -pw),
             out.offset, bias is not None, bias.offset if bias is not None else 0, relu, n_images=Nb)
    run(rt, p, weight.storage, x.storage, out.storage, bias.storage if bias is not None else None)


def backward_input(rt, out, grad, weight, geom):
    """Stride 1: out [N, C, H, W] = Wᵀ [C, O*kh*kw] @ G(dY), C <= MAX_ROWS (the weight read as Wᵀ in
    blocks of kh*kw: no transposed copy)."""
    Nb, C, H, W = out.shape
    O, _, kh, kw = weight.shape
    OH, OW = grad.shape[2:]
    (sh, sw), (ph, pw), (dh, dw) = geom
    if (sh, sw) != (1, 1):
        raise ValueError("conv_direct: the input gradient of a stride-1 convolution only")
    kk = kh * kw
    p = plan(C, O * kk, weight.offset, kk, kk, C * kk, grad.offset, O, OH, OW, H, W, (kh, kw),
             (1, 1, -dh, -dw, ph, pw), out.offset, n_images=Nb)
    run(rt, p, weight.storage, grad.storage, out.storage)


def backward_weight(rt, out, grad, x, geom):
    """out [O, C, kh, kw] = dY [O, N*OH*OW] @ G(x)ᵀ: partial sums per chunk of positions into the runtime's
    split-K scratch, then the backend's row sum of each output's partials (reduce.py)."""
    Nb, C, H, W = x.shape
    O, _, kh, kw = out.shape
    OH, OW = grad.shape[2:]
    (sh, sw), (ph, pw), (dh, dw) = geom
    outputs = O * C * kh * kw
    p = plan_wgrad(O, C * kh * kw, grad.offset, x.offset, C, H, W, OH, OW, (kh, kw), (sh, sw, dh, dw, -ph, -pw),
                   Nb)
    chunks = p.scratch // outputs
    scratch = rt.split_k_scratch(p.scratch)  # the runtime's one kept split-K scratch (see there)
    run(rt, p, grad.storage, x.storage, scratch)
    reduce(rt, "sum", out.reshaped((outputs, 1)), View(scratch, (outputs, chunks, 1), (chunks, 1, 1), 0, float32))
