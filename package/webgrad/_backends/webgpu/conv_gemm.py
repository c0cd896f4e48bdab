"""Implicit-GEMM convolutions for GPUs (shaders/conv_gemm.wgsl): conv2d, its input gradient and its
weight gradient, each one register-tiled product over the whole batch (the batch folded into the
product's long dimension), the unfolded image gathered on the fly. conv.py routes a GPU adapter's
convolutions here; software adapters keep their explicit im2col + matmul_cpu path (conv.py).

Planning (tile configuration, K split, override constants, Params) is pure Python and cached; a
plan's Launches are kept in the runtime's memo, so a repeated convolution packs nothing.
"""

import functools
import os
import struct

from ...dtypes import float32
from .runtime import Kernel, Shader

SHADER = Shader("conv_gemm.wgsl", {})
_LAYOUT = ((0, "read"), (1, "read"), (2, "write"), (3, "read"), (4, "uniform"))
_KERNELS = {}

# Tile configurations: WG_X x WG_Y threads, each a TM x TN block, cover a (WG_Y*TM) x (WG_X*TN) tile of
# the product; BK is the K step staged in workgroup memory (2 buffers of BK*(BM+BN) floats: at most
# 16 KiB, WebGPU's default limit). Each thread loads 1 to 4 pieces of 4 elements per tile per step.
CONFIGS = {
    "128x128": dict(WG_X=16, WG_Y=16, TM=8, TN=8, BK=8),
    "64x128": dict(WG_X=16, WG_Y=8, TM=8, TN=8, BK=8),
    "128x64": dict(WG_X=8, WG_Y=16, TM=8, TN=8, BK=8),
    "64x64": dict(WG_X=8, WG_Y=8, TM=8, TN=8, BK=16),
    "64x64t": dict(WG_X=16, WG_Y=16, TM=4, TN=4, BK=16),
    "32x64": dict(WG_X=16, WG_Y=8, TM=4, TN=4, BK=16),
    "64x32": dict(WG_X=8, WG_Y=16, TM=4, TN=4, BK=16),
    "32x32": dict(WG_X=8, WG_Y=8, TM=4, TN=4, BK=16),
    "16x64": dict(WG_X=16, WG_Y=4, TM=4, TN=4, BK=16),
}


def _check(c):
    nt = c["WG_X"] * c["WG_Y"]
    bm, bn = c["WG_Y"] * c["TM"], c["WG_X"] * c["TN"]
    if c["TM"] not in (4, 8) or c["TN"] not in (4, 8) or c["BK"] % 4 or nt > 256:
        raise ValueError(f"bad conv_gemm config {c}")
    for rows in (bm, bn):
        pieces = c["BK"] * rows // 4
        if pieces % nt or not 1 <= pieces // nt <= 4:
            raise ValueError(f"bad conv_gemm config {c}: tile loads do not split evenly over the threads")
    if 2 * c["BK"] * (bm + bn) * 4 > 16384:
        raise ValueError(f"bad conv_gemm config {c}: over 16 KiB of workgroup memory")


for _c in CONFIGS.values():
    _check(_c)

MAX_WORKGROUPS_PER_DIM = 65535
WAVE = 264            # workgroups that fill a big GPU (2 per SM of a 132-SM H100/H200)
MIN_SPLIT_STEPS = 16  # K steps a split keeps at least (its partial tile's write stays small next to them)
MAX_SPLITS = 128
MAX_SCRATCH = 1 << 24  # floats
RED_OUT = 32          # conv_reduce: outputs (or vec4s) per workgroup

# WEBGRAD_CONV_CONFIG=<name> / WEBGRAD_CONV_SPLITS=<n> force a tile configuration / a K split
# (benchmark sweeps and tests); FORCED may also be set from Python.
FORCED = {"config": os.environ.get("WEBGRAD_CONV_CONFIG") or None,
          "splits": int(os.environ.get("WEBGRAD_CONV_SPLITS") or 0) or None}


def _shape(cfg):
    c = CONFIGS[cfg]
    return c["WG_Y"] * c["TM"], c["WG_X"] * c["TN"]


def _tiles(cfg, M, N):
    bm, bn = _shape(cfg)
    return -(-M // bm) * -(-N // bn)


def _waste(cfg, M, N):
    bm, bn = _shape(cfg)
    return (-(-M // bm) * bm) * (-(-N // bn) * bn) / (M * N)


def choose_config(M, N, K):
    """The largest tile that still gives about a wave of workgroups without much padding; small
    outputs with a long K take 64x64 tiles and split K (choose_splits)."""
    if M <= 16:
        return "16x64"
    candidates = ["128x128", "128x64" if M > N else "64x128", "64x64"]
    for cfg in candidates:
        if _tiles(cfg, M, N) >= WAVE and _waste(cfg, M, N) <= 1.15:
            return cfg
    if K >= 2048:  # split-K makes up the parallelism
        return "64x64"
    for cfg in ("64x64t", "32x64" if N >= M else "64x32"):
        if _tiles(cfg, M, N) >= WAVE // 2 and _waste(cfg, M, N) <= 1.3:
            return cfg
    return "32x32"


def choose_splits(cfg, M, N, steps):
    tiles = _tiles(cfg, M, N)
    if tiles >= WAVE // 2:
        return 1
    want = -(-WAVE // tiles)
    return max(1, min(want, steps // MIN_SPLIT_STEPS, MAX_SCRATCH // (M * N), MAX_SPLITS))


class ConvPlan:
    __slots__ = ("entry", "constants", "params", "workgroups", "scratch", "reduce")

    def __init__(self, entry, constants, params, workgroups, scratch=0, reduce=None):
        self.entry = entry
        self.constants = constants
        self.params = params
        self.workgroups = workgroups
        self.scratch = scratch
        self.reduce = reduce

    def __repr__(self):
        c = dict(self.constants)
        return (f"ConvPlan({self.entry}, {c['WG_Y'] * c['TM']}x{c['WG_X'] * c['TN']}, "
                f"workgroups={self.workgroups}, scratch={self.scratch})")


_PARAMS = struct.Struct("<16I")


@functools.lru_cache(maxsize=1024)
def plan(wgrad, M, N, K, a_off, lda, a_blk, a_bs, img_off, ch, ih, iw, qh, qw, window, taps, o_off,
         has_bias=False, bias_off=0, relu=False, config=None, splits=None):
    """One product of conv_gemm.wgsl (see its header): out [M, N] = A [M, K] @ G (or Gᵀ with wgrad).
    window: (KH, KW); taps: (SY, SX, DY, DX, PY, PX, VY, VX) as in the shader. Offsets in floats."""
    config = config or FORCED["config"] or choose_config(M, N, K)
    c = CONFIGS[config]
    bm, bn = _shape(config)
    steps = -(-K // c["BK"])
    if splits is None:
        splits = FORCED["splits"] or choose_splits(config, M, N, steps)
    splits = max(1, min(splits, steps))
    split_steps = -(-steps // splits) if steps else 0
    splits = -(-steps // split_steps) if steps else 1  # no empty split
    split = splits > 1
    qp = qh * qw
    a_vec = a_blk % 4 == 0 and lda % 4 == 0 and a_off % 4 == 0 and (a_bs % 4 == 0 or K <= a_blk)
    out_vec = o_off % 4 == 0 and (N % 4 == 0 if wgrad else qp % 4 == 0)
    store_vec = N % 4 == 0 if split else out_vec
    workgroups = (-(-N // bn), -(-M // bm), splits)
    if max(workgroups) > MAX_WORKGROUPS_PER_DIM:
        raise ValueError(f"convolution too large for one dispatch: workgroups {workgroups}")
    for v in (a_off, img_off, o_off, bias_off, splits * M * N, M * N):
        if not 0 <= v < 2**32:
            raise ValueError("conv2d: offsets and sizes must fit in u32")
    kh, kw = window
    sy, sx, dy, dx, py, px, vy, vx = taps
    shape = dict(WGRAD=int(wgrad), HAS_BIAS=int(has_bias), RELU=int(relu), QP=qp)
    constants = dict(c, SPLIT=int(split), A_BLK=a_blk, KH=kh, KW=kw, QW=qw, SY=sy, SX=sx, DY=dy, DX=dx,
                     PY=py, PX=px, VY=vy, VX=vx, **shape)
    params = _PARAMS.pack(M, N, K, steps, a_off, img_off, o_off, bias_off, lda, a_bs, ch, ih, iw, qh, splits,
                          split_steps)
    entry = "conv_gemm_" + ("v" if a_vec else "s") + ("4" if store_vec else "1")
    main = ConvPlan(entry, tuple(sorted(constants.items())), params, workgroups)
    if not split:
        return main
    reduce_vec = out_vec and N % 4 == 0
    groups = -(-(M * N // 4 if reduce_vec else M * N) // RED_OUT)
    grid = (groups, 1, 1) if groups <= MAX_WORKGROUPS_PER_DIM else \
        (MAX_WORKGROUPS_PER_DIM, -(-groups // MAX_WORKGROUPS_PER_DIM), 1)
    reduce = ConvPlan("conv_reduce4" if reduce_vec else "conv_reduce1",
                      tuple(sorted(dict(shape, SPLIT=0).items())), params, grid)
    main.scratch, main.reduce = splits * M * N, reduce
    return main


def _kernel(entry):
    kernel = _KERNELS.get(entry)
    if kernel is None:
        kernel = _KERNELS[entry] = Kernel(SHADER, entry, _LAYOUT)
    return kernel


def run(rt, p, a, img, out, bias=None):
    """Record plan p on storages a (binding 0), img, out and bias (None: none)."""
    launches = rt.memo.get(p)
    if launches is None:
        launches = rt.memo[p] = tuple(rt.launch(_kernel(q.entry), q.constants, q.params, q.workgroups)
                                      for q in (p, p.reduce) if q is not None)
    if bias is None:
        bias = a  # any read-only buffer: HAS_BIAS is off
    if p.reduce is None:
        rt.run(launches[0], (a, img, out, bias))
        return
    scratch = rt.storage(p.scratch, float32)
    rt.run(launches[0], (a, img, scratch, bias))
    rt.run(launches[1], (scratch, img, out, bias))  # binding 1 unused by the reduction


# ------------------------------------------------------------------ the three convolution products
def forward(rt, out, x, weight, bias, geom, relu=False):
    """out [N, O, OH, OW] = conv2d(x, weight) + bias (then ReLU). geom: ((sh, sw), (ph, pw), (dh, dw))."""
    Nb, C, H, W = x.shape
    O, _, kh, kw = weight.shape
    OH, OW = out.shape[2:]
    (sh, sw), (ph, pw), (dh, dw) = geom
    K = C * kh * kw
    p = plan(False, O, Nb * OH * OW, K, weight.offset, K, K, 0, x.offset, C, H, W, OH, OW, (kh, kw),
             (sh, sw, dh, dw, -ph, -pw, 1, 1), out.offset, bias is not None,
             bias.offset if bias is not None else 0, relu)
    run(rt, p, weight.storage, x.storage, out.storage, bias.storage if bias is not None else None)


def backward_input(rt, out, grad, weight, geom):
    """out [N, C, H, W] = the input gradient: Wᵀ [C, O*kh*kw] @ G(dY), G gathering dY[(h + p - i*d) / s]."""
    Nb, C, H, W = out.shape
    O, _, kh, kw = weight.shape
    OH, OW = grad.shape[2:]
    (sh, sw), (ph, pw), (dh, dw) = geom
    kk = kh * kw
    p = plan(False, C, Nb * H * W, O * kk, weight.offset, kk, kk, C * kk, grad.offset, O, OH, OW, H, W,
             (kh, kw), (1, 1, -dh, -dw, ph, pw, sh, sw), out.offset)
    run(rt, p, weight.storage, grad.storage, out.storage)


def backward_weight(rt, out, grad, x, geom):
    """out [O, C, kh, kw] = dY [O, N*OH*OW] @ G(x)ᵀ (K: every position of every image, split across
    workgroups when the output alone is too small to fill the GPU)."""
    Nb, C, H, W = x.shape
    O, _, kh, kw = out.shape
    OH, OW = grad.shape[2:]
    (sh, sw), (ph, pw), (dh, dw) = geom
    P = OH * OW
    p = plan(True, O, C * kh * kw, Nb * P, grad.offset, P, P, O * P, x.offset, C, H, W, OH, OW, (kh, kw),
             (sh, sw, dh, dw, -ph, -pw, 1, 1), out.offset)
    run(rt, p, grad.storage, x.storage, out.storage)
