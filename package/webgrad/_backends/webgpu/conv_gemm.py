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

from ..._view import View
from ...dtypes import float16, float32
from . import typed
from .elementwise import copy, fill
from .f16 import copy as half_copy
from .matmul_plan import parse_config_spec
from .dispatch import Kernel
from .views import contiguous_view

_LAYOUT = ((0, "read"), (1, "read"), (2, "write"), (3, "read"), (4, "uniform"))
_KERNELS = {}
F32 = ("f32", "f32", "f32")  # the element types (AT, GT, OT) of conv_gemm.wgsl's ELEMENT_TYPES


# The tile overrides' defaults in conv_gemm.wgsl (a plan's constants may leave them out)
TILE_DEFAULTS = dict(WG_X=16, WG_Y=16, TM=8, TN=8, BK=8, NBUF=2)


def tile_declarations(constants):
    """The text of conv_gemm.wgsl's ``//! splice TILES`` for a pipeline's override constants ((name, value)
    pairs or a dict): the sizes of the workgroup tiles As [TILE_STAGES][TILE_BK][TILE_BM4] and Bs [..][TILE_BN4]
    as WGSL constants, so that the multiply's row index k is a constant (see As in the shader). One module per
    tile shape; the other overrides stay pipeline constants."""
    c = dict(TILE_DEFAULTS, **dict(constants))
    sizes = (("TILE_STAGES", c["NBUF"]), ("TILE_BK", c["BK"]), ("TILE_BM4", c["WG_Y"] * c["TM"] // 4),
             ("TILE_BN4", c["WG_X"] * c["TN"] // 4))
    return "".join(f"const {name}: u32 = {value}u;\n" for name, value in sizes)


def shader(types=F32, constants=()):
    """conv_gemm.wgsl with element types (AT, GT, OT) (see its header) and the workgroup tiles of a pipeline's
    override constants (tile_declarations); float16 ones need shader-f16."""
    return typed.typed_shader("conv_gemm.wgsl", tuple(zip(("AT", "GT", "OT"), types)),
                              (("TILES", tile_declarations(constants)),))


def _types(dtype, split):
    """(main kernel's, reduction's) element types for operands of `dtype`: a split's partials are f32."""
    if dtype is float32:
        return F32, F32
    if dtype is not float16:
        raise TypeError(f"conv_gemm: float32 or float16 operands, got {dtype.name}")
    return ("f16", "f16", "f32" if split else "f16"), ("f32", "f16", "f16")


# Measured and dropped (H200, bench train --amp, ResNet-18 at batch 128): a variant that summed each BK
# step's products in packed half registers (vec4<f16> fma, half workgroup tiles) and added them into the
# f32 accumulators once per step ran 4,327 samples/s against 4,981 for these f32 products; it would
# also have left PyTorch's numerics (f32 accumulation).


# Tile configurations: WG_X x WG_Y threads, each a TM x TN block, cover a (WG_Y*TM) x (WG_X*TN) tile of
# the product; BK is the K step staged in workgroup memory (NBUF = 2 buffers, or 1, of BK*(BM+BN) floats:
# at most 16 KiB, WebGPU's default limit). Each thread loads 1 to 4 pieces of 4 elements per tile per step.
CONFIGS = {
    "128x128": dict(WG_X=16, WG_Y=16, TM=8, TN=8, BK=8),
    "64x128": dict(WG_X=16, WG_Y=8, TM=8, TN=8, BK=8),
    "128x64": dict(WG_X=8, WG_Y=16, TM=8, TN=8, BK=8),
    "64x64": dict(WG_X=16, WG_Y=16, TM=4, TN=4, BK=16),
    "32x64": dict(WG_X=16, WG_Y=8, TM=4, TN=4, BK=16),
    "64x32": dict(WG_X=8, WG_Y=16, TM=4, TN=4, BK=16),
    "32x32": dict(WG_X=8, WG_Y=8, TM=4, TN=4, BK=16),
    "16x64": dict(WG_X=16, WG_Y=4, TM=4, TN=4, BK=16),
    # matmul.wgsl's "w" twins (see WARP_TILED, SWIZZLE in conv_gemm.wgsl): the same register tiles, threads
    # in 8 x 4 blocks per subgroup and XOR-swizzled workgroup tiles (no bank conflicts on the scalar
    # stores of a piece along k: the weight's rows, and the gathered image of a weight gradient)
    "128x128w": dict(WG_X=16, WG_Y=16, TM=8, TN=8, BK=8, WARP_TILED=1, SWIZZLE=1),
    "64x128w": dict(WG_X=16, WG_Y=8, TM=8, TN=8, BK=8, WARP_TILED=1, SWIZZLE=1),
    "128x64w": dict(WG_X=8, WG_Y=16, TM=8, TN=8, BK=8, WARP_TILED=1, SWIZZLE=1),
    # BK = 16 in one buffer (NBUF=1, two barriers per step): rows along k are read 64 bytes at a time
    "128x128w16": dict(WG_X=16, WG_Y=16, TM=8, TN=8, BK=16, NBUF=1, WARP_TILED=1, SWIZZLE=1),
    "64x128w16": dict(WG_X=16, WG_Y=8, TM=8, TN=8, BK=16, NBUF=1, WARP_TILED=1, SWIZZLE=1),
    "128x64w16": dict(WG_X=8, WG_Y=16, TM=8, TN=8, BK=16, NBUF=1, WARP_TILED=1, SWIZZLE=1),
}


def _check(c, max_workgroup_bytes=16384):
    nt = c["WG_X"] * c["WG_Y"]
    bm, bn = c["WG_Y"] * c["TM"], c["WG_X"] * c["TN"]
    if c["TM"] not in (4, 8) or c["TN"] not in (4, 8) or c["BK"] % 4 or not 4 <= c["BK"] <= 32 or nt > 256:
        raise ValueError(f"bad conv_gemm config {c}")
    for rows in (bm, bn):
        pieces = c["BK"] * rows // 4
        if pieces % nt or not 1 <= pieces // nt <= 4:
            raise ValueError(f"bad conv_gemm config {c}: tile loads do not split evenly over the threads")
    if c.get("WARP_TILED") and (c["WG_X"] % 8 or c["WG_Y"] % 4):
        raise ValueError(f"bad conv_gemm config {c}: WARP_TILED needs WG_X % 8 == 0 and WG_Y % 4 == 0")
    if c.get("SWIZZLE") and (c["WG_X"] % 8 or c["WG_Y"] % 8 or bm % 32 or bn % 32 or 8 % (c["BK"] // 4)):
        raise ValueError(f"bad conv_gemm config {c}: SWIZZLE needs WG_X, WG_Y multiples of 8, tile sides of "
                         "32 and BK in 4, 8, 16, 32")
    if c.get("NBUF", 2) not in (1, 2):
        raise ValueError(f"bad conv_gemm config {c}: NBUF must be 1 or 2")
    if c.get("NBUF", 2) * c["BK"] * (bm + bn) * 4 > max_workgroup_bytes:
        raise ValueError(f"bad conv_gemm config {c}: over {max_workgroup_bytes} bytes of workgroup memory")


for _c in CONFIGS.values():
    _check(_c)


def add_config(spec, max_workgroup_bytes=32768):
    """Register an experimental configuration (tools/conv_sweep.py), spec as matmul_plan.parse_config_spec
    (without KS: conv_gemm.wgsl has no K split inside the workgroup); returns its name."""
    name, c = parse_config_spec(spec)
    if c.pop("KS") != 1:
        raise ValueError(f"bad conv_gemm config {spec!r}: no KS here")
    _check(c, max_workgroup_bytes)
    CONFIGS[name] = c
    return name

MAX_WORKGROUPS_PER_DIM = 65535
# Workgroups that fill a 132-SM H100/H200: a product with at least FULL tiles runs unsplit; one with
# fewer splits K until about TARGET workgroups run (4 per SM of the 128-thread big tiles), each split
# keeping at least MIN_SPLIT_STEPS K steps so that writing its partial tile stays small next to its work.
# Measured on an H200 (bench profile, ResNet-18 at batch 128): 64x64 tiles of 64 threads ran the 8x8 maps'
# products at 19 TFLOP/s against 26 for 64x128 tiles, and a weight gradient of [256, 2304] over K = 8192
# took 1060 us unsplit as 144 such tiles.
FULL = 256
TARGET = 512
MIN_SPLIT_STEPS = 16
MAX_SPLITS = 256
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


# Where the big tile is chosen and 128 x 128 tiles fit with little waste (both sides at least 128), the
# warp-tiled, swizzled 128x128 tile with BK = 16 in one buffer takes its place. Measured on an H200 with
# tools/conv_sweep.py (ResNet-18, CIFAR variant, batch 128; log/log.txt, 24 Nov 2026):
# forward 128->128 at 16x16, 321.7 us against 356.7 as 64x128 (30.0 against 27.1 TFLOP/s); it was the
# fastest configuration, or within 2% of it, at the planner's K split for the forward products and weight
# gradients of every stage with 128 to 512 channels (weight gradient 512->512 at 4x4: 2155 against 2833 us;
# forward 256->256 at 8x8: 1203 against 1387 us; those two timed with the GPU's clocks not yet up, which the
# sweep now prevents, so the ratios are the figures to trust, not the times). 64-channel products (M = 64)
# keep 64x128: a 128-row tile would be half empty. A short K (the 1x1 shortcuts' forward, K = 64 to 256:
# a few steps of 16, two barriers each) was not measured on it and keeps the plain tile.
# The whole step (bench profile, ResNet-18 at batch 128, one H200 call, this rule's wheel beside its base):
# GPU sum 20,219.6 against 21,577.5 us; bench scale's peak 892.9 MiB with the kept scratch (Runtime.split_k_scratch).
BIG_W16 = "128x128w16"
BIG_W16_MAX_WASTE = 1.15  # the weight gradient of 64->128 (N = 576 in 640 columns) is in: 1116 against 1196 us
BIG_W16_MIN_K = 512


def choose_config(M, N, K):
    """The big 64x128 (or 128x64) tile when it fills the GPU, or when K is long enough for split-K to
    make up the parallelism (128x128w16 where it fits); else thinner tiles of 128 or 256 threads."""
    if M <= 16:
        return "16x64"
    big = "64x128" if N >= M else "128x64"
    if _waste(big, M, N) <= 1.2 and (_tiles(big, M, N) >= FULL or K >= 1024):
        return BIG_W16 if _waste(BIG_W16, M, N) <= BIG_W16_MAX_WASTE and K >= BIG_W16_MIN_K else big
    small = "32x64" if N >= M else "64x32"
    if _tiles("64x64", M, N) >= FULL // 2 and _waste("64x64", M, N) <= 1.2 or K >= 1024 and \
            _waste("64x64", M, N) <= _waste(small, M, N):
        return "64x64"
    if _tiles(small, M, N) >= FULL // 4 or K >= 1024:
        return small
    return "32x32"


def choose_splits(cfg, M, N, steps):
    tiles = _tiles(cfg, M, N)
    if tiles >= FULL:
        return 1
    return max(1, min(-(-TARGET // tiles), steps // MIN_SPLIT_STEPS, MAX_SCRATCH // (M * N), MAX_SPLITS))


class ConvPlan:
    __slots__ = ("entry", "constants", "params", "workgroups", "scratch", "reduce", "types")

    def __init__(self, entry, constants, params, workgroups, scratch=0, reduce=None, types=F32):
        self.types = types
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


_PARAMS = struct.Struct("<20I4i")
_PHASE = struct.Struct("<12I4i")  # a row of Params.ph (PHASED's phase table)
PHASE_ROWS = 4
NO_PHASES = bytes(PHASE_ROWS * _PHASE.size)  # the table of every plan but PHASED's


def plan(wgrad, M, N, K, a_off, lda, a_blk, a_bs, img_off, ch, ih, iw, qh, qw, window, taps, o_off,
         has_bias=False, bias_off=0, relu=False, out_steps=None, config=None, splits=None, dtype=float32):
    """One product of conv_gemm.wgsl (see its header): out [M, N] = A [M, K] @ G (or Gᵀ with wgrad).
    window: (KH, KW); taps: (SY, SX, DY, DX, PY, PX) as in the shader; out_steps: the NCHW output's
    (plane, row, column) strides, by default (qh*qw, qw, 1). Offsets in floats. config / splits force
    a tile configuration / a K split (else FORCED's, else chosen from the sizes). Cached: the same
    arguments return the same plan object (run() keys its Launches on it). dtype: the operands' and the
    output's element type, float32 or float16 (f32 products and sums either way)."""
    return _plan(wgrad, M, N, K, a_off, lda, a_blk, a_bs, img_off, ch, ih, iw, qh, qw, window, taps, o_off,
                 has_bias, bias_off, relu, out_steps, config or FORCED["config"], splits or FORCED["splits"], dtype)


@functools.lru_cache(maxsize=1024)
def _plan(wgrad, M, N, K, a_off, lda, a_blk, a_bs, img_off, ch, ih, iw, qh, qw, window, taps, o_off,
          has_bias, bias_off, relu, out_steps, config, splits, dtype):
    config = config or choose_config(M, N, K)
    c = CONFIGS[config]
    bm, bn = _shape(config)
    steps = -(-K // c["BK"])
    if splits is None:
        splits = choose_splits(config, M, N, steps)
    splits = max(1, min(splits, steps))
    split_steps = -(-steps // splits) if steps else 0
    splits = -(-steps // split_steps) if steps else 1  # no empty split
    split = splits > 1
    qp = qh * qw
    o_plane, o_row, osx = out_steps or (qp, qw, 1)
    a_blk = 0 if K <= a_blk else a_blk  # 0: one block, a plain row-major matrix
    a_vec = a_blk % 4 == 0 and lda % 4 == 0 and a_off % 4 == 0 and a_bs % 4 == 0
    out_vec = o_off % 4 == 0 and (N % 4 == 0 if wgrad else qp % 4 == 0 and (o_plane, o_row, osx) == (qp, qw, 1))
    store_vec = N % 4 == 0 if split else out_vec
    workgroups = (-(-N // bn), -(-M // bm), splits)
    if max(workgroups) > MAX_WORKGROUPS_PER_DIM:
        raise ValueError(f"convolution too large for one dispatch: workgroups {workgroups}")
    for v in (a_off, img_off, o_off, bias_off, splits * M * N, M * N):
        if not 0 <= v < 2**32:
            raise ValueError("conv2d: offsets and sizes must fit in u32")
    kh, kw = window
    sy, sx, dy, dx, py, px = taps
    shape = dict(WGRAD=int(wgrad), HAS_BIAS=int(has_bias), RELU=int(relu), QP=qp, QW=qw, OSX=osx)
    constants = dict(c, SPLIT=int(split), A_BLK=a_blk, KH=kh, KW=kw, **shape)
    params = _PARAMS.pack(M, N, K, steps, a_off, img_off, o_off, bias_off, lda, a_bs, ch, ih, iw, qh, splits,
                          split_steps, o_plane, o_row, sy, sx, dy, dx, py, px) + NO_PHASES
    entry = "conv_gemm_" + ("v" if a_vec else "s") + ("4" if store_vec else "1")
    main_types, reduce_types = _types(dtype, split)
    main = ConvPlan(entry, tuple(sorted(constants.items())), params, workgroups, types=main_types)
    if not split:
        return main
    reduce_vec = out_vec and N % 4 == 0
    groups = -(-(M * N // 4 if reduce_vec else M * N) // RED_OUT)
    grid = (groups, 1, 1) if groups <= MAX_WORKGROUPS_PER_DIM else \
        (MAX_WORKGROUPS_PER_DIM, -(-groups // MAX_WORKGROUPS_PER_DIM), 1)
    reduce = ConvPlan("conv_reduce4" if reduce_vec else "conv_reduce1",
                      tuple(sorted(dict(shape, SPLIT=0).items())), params, grid, types=reduce_types)
    main.scratch, main.reduce = splits * M * N, reduce
    return main


def phase_table(kh, kw, stride, padding, dilation, H, W):
    """The phases of a strided input gradient as PHASED runs them in one dispatch, row-major over (h % sh,
    w % sw): ((i0, nu, su, oy, dy), (j0, nv, sv, ox, dx)) each (phase_taps'), or None where PHASED cannot
    take them: more than PHASE_ROWS phases, an output size that is no multiple of the stride (phases of
    unequal grids), or a count of taps along x that is not a power of two (the shader splits a tap index
    with a shift)."""
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    if sh * sw > PHASE_ROWS or H % sh or W % sw:
        return None
    rows = [phase_taps(kh, sh, ph, dh, r) for r in range(sh)]
    cols = [phase_taps(kw, sw, pw, dw, r) for r in range(sw)]
    if any(c[1] & (c[1] - 1) for c in cols):
        return None
    return tuple((r, c) for r in rows for c in cols)


def _phase_slices(cfg, M, N, steps, forced):
    """K slices per phase (0 for a phase without taps): one each where a phase's tiles fill the GPU; else
    about TARGET workgroups in all, each phase's slices in proportion to its K steps so that every slice
    does about the same work (3x3 at stride 2: 1, 2, 2 and 4 taps)."""
    tiles = _tiles(cfg, M, N)
    live = [s for s in steps if s]
    if forced:
        want = [forced if s else 0 for s in steps]
    elif tiles >= FULL:
        want = [1 if s else 0 for s in steps]
    else:
        unit = -(-TARGET // (tiles * sum(s / min(live) for s in live)))
        want = [max(1, min(round(unit * s / min(live)), s // MIN_SPLIT_STEPS, MAX_SPLITS)) if s else 0
                for s in steps]
    out = []
    for s, n in zip(steps, want):
        n = max(1, min(n, s)) if s else 0
        per = -(-s // n) if s else 0
        out.append((-(-s // per) if s else 0, per))  # no empty slice
    return out


# PHASED's tiles. Measured on an H200 (tools/conv_sweep.py --cases dgrad:64-128-32-s2 dgrad:128-256-16-s2
# dgrad:256-512-8-s2, ResNet-18 at batch 128; each input gradient's weight copy,
# product and conv_unphase): choose_config's tiles took 303.7, 267.9 and 282.1 us; these 275.8, 234.5 and
# 244.5, the fastest of every configuration at the balanced K slices. The one-dispatch-per-phase products
# they replace took about 311, 289 and 311 us there (bench replay --each).
PHASED_NARROW = "64x128w16"  # 64 input channels or fewer
PHASED_WIDE = "128x64w16"


def plan_phased(table, C, Nb, O, kk, kw, a_off, img_off, OH, OW, o_off, H, W, stride, config=None, splits=None,
                dtype=float32):
    """The two dispatches of a strided input gradient as PHASED (see conv_gemm.wgsl): out [Nb, C, H, W] at
    o_off from dY [Nb, O, OH, OW] at img_off and the weight transposed to [C, kh, kw, O] at a_off. table:
    phase_table's. None where the scratch would pass MAX_SCRATCH or where O is no multiple of 4 (then one
    product per phase)."""
    return _plan_phased(table, C, Nb, O, kk, kw, a_off, img_off, OH, OW, o_off, H, W, stride,
                        config or FORCED["config"], splits or FORCED["splits"], dtype)


@functools.lru_cache(maxsize=256)
def _plan_phased(table, C, Nb, O, kk, kw, a_off, img_off, OH, OW, o_off, H, W, stride, config, splits, dtype):
    sh, sw = stride
    qh, qw = H // sh, W // sw
    N = Nb * qh * qw
    Ks = [O * ty[1] * tx[1] for ty, tx in table]
    config = config or (PHASED_NARROW if C <= 64 else PHASED_WIDE)
    c = CONFIGS[config]
    bm, bn = _shape(config)
    steps = [-(-K // c["BK"]) for K in Ks]
    slices = _phase_slices(config, C, N, steps, splits)
    total = sum(n for n, _ in slices)
    if total * C * N > MAX_SCRATCH or O % 4 or a_off % 4:  # (A is read as vec4s along o)
        return None
    rows, z = [], 0
    for ((i0, _, su, oy, dy), (j0, nv, sv, ox, dx)), K, st, (n, per) in zip(table, Ks, steps, slices):
        rows.append(_PHASE.pack(z, n, st, per, K, i0 * kw + j0, su * kw, sv, max(nv, 1).bit_length() - 1, 0, 0, 0,
                                -dy, -dx, oy, ox))
        z += n
    table_bytes = b"".join(rows) + bytes((PHASE_ROWS - len(rows)) * _PHASE.size)
    numel = Nb * C * H * W
    workgroups = (-(-N // bn), -(-C // bm), total)
    if max(workgroups) > MAX_WORKGROUPS_PER_DIM:
        raise ValueError(f"convolution too large for one dispatch: workgroups {workgroups}")
    for v in (a_off, img_off, o_off, total * C * N, numel):
        if not 0 <= v < 2**32:
            raise ValueError("conv2d: offsets and sizes must fit in u32")
    lda = kk * O
    grid = dict(QP=qh * qw, QW=qw)
    constants = dict(c, SPLIT=1, A_BLK=0, KH=1, KW=1, WGRAD=0, HAS_BIAS=0, RELU=0, OSX=1, PH_O=O, **grid)
    params = _PARAMS.pack(C, N, max(Ks), max(steps), a_off, img_off, 0, 0, lda, 0, O, OH, OW, qh, total, 0,
                          0, 0, 1, 1, 0, 0, 0, 0) + table_bytes
    main_types, reduce_types = _types(dtype, True)
    main = ConvPlan("conv_phased" + ("4" if N % 4 == 0 else "1"),
                    tuple(sorted(constants.items())), params, workgroups, types=main_types)
    vec = W % 4 == 0 and o_off % 4 == 0
    groups = -(-(numel // 4 if vec else numel) // 256)
    red_grid = (groups, 1, 1) if groups <= MAX_WORKGROUPS_PER_DIM else \
        (MAX_WORKGROUPS_PER_DIM, -(-groups // MAX_WORKGROUPS_PER_DIM), 1)
    red_params = _PARAMS.pack(C, N, 0, 0, 0, 0, o_off, 0, 0, 0, 0, H, W, qh, numel, 0, 0, 0, sh, sw, 0, 0, 0, 0) \
        + table_bytes
    main.reduce = ConvPlan("conv_unphase" + ("4" if vec else "1"), tuple(sorted(grid.items())), red_params, red_grid, types=reduce_types)
    main.scratch = total * C * N
    return main


def _kernel(entry, types, constants):
    tiles = tile_declarations(constants)
    kernel = _KERNELS.get((entry, types, tiles))
    if kernel is None:
        kernel = _KERNELS[entry, types, tiles] = Kernel(shader(types, constants), entry, _LAYOUT)
    return kernel


def run(rt, p, a, img, out, bias=None):
    """Record plan p on storages a (binding 0), img, out and bias (None: none)."""
    launches = rt.memo.get(p)
    if launches is None:
        launches = rt.memo[p] = tuple(rt.launch(_kernel(q.entry, q.types, q.constants), q.constants, q.params,
                                                q.workgroups)
                                      for q in (p, p.reduce) if q is not None)
    if bias is None:
        bias = a  # any read-only buffer: HAS_BIAS is off
    if p.reduce is None:
        rt.run(launches[0], (a, img, out, bias))
        return
    scratch = rt.split_k_scratch(p.scratch)  # one kept per runtime, shared with matmul's (see there)
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
             (sh, sw, dh, dw, -ph, -pw), out.offset, bias is not None,
             bias.offset if bias is not None else 0, relu, dtype=out.dtype)
    run(rt, p, weight.storage, x.storage, out.storage, bias.storage if bias is not None else None)


# Convolutions with fewer output channels than this keep matmul.wgsl's per-image products (conv.py):
# measured on an H200 (bench train, replayed), the MNIST CNN (conv 1->16 on 28x28, 16->32 on 14x14) ran
# 12% (batch 128) and 20% (batch 1024) slower on these kernels, while every convolution of ResNet-18
# (64 to 512 channels, 32x32 to 4x4 maps) ran faster: 25.4 -> 19.1 ms of convolution per step at batch 128.
MIN_CHANNELS = 64
# The forward product alone wins from 16 output channels: the MNIST CNN at batch 1024 on an H200 (bench
# replay --each, one call): conv 16->32 on 14x14 163.7 -> 142.2 us, 1->16 on
# 28x28 67.3 -> 57.4 us, the step's GPU span 988.4 -> 955.7 us, bench train 902k -> 942k samples/s. Its
# input and weight gradients stay on the per-image products (753 against 226 us for the CNN's input
# gradient, tools/conv_sweep.py --model cnn). Fewer channels were not measured.
# conv_direct.py takes the forward products of at most 32 output channels before this (conv.py).
MIN_FORWARD_CHANNELS = 16


def suits(out_channels, forward=False):
    """Whether a convolution with this many output channels runs here (else on the per-image products):
    its forward product (forward=True), or all three (float16 takes all three here or none)."""
    return out_channels >= (MIN_FORWARD_CHANNELS if forward else MIN_CHANNELS)


def phase_taps(k, s, p, d, r):
    """The window taps i of one stride phase: input-gradient rows h = r + s*y receive dY[(h + p - i*d) / s]
    from the taps where that is a whole position, an arithmetic progression i0, i0 + step, ... (empty
    possibly). Returns (i0, count, step, row offset (r + p - i0*d) / s, row step per tap step*d/s)."""
    taps = [i for i in range(k) if (r + p - i * d) % s == 0]
    if not taps:
        return 0, 0, 1, 0, 0
    step = taps[1] - taps[0] if len(taps) > 1 else 1
    return taps[0], len(taps), step, (r + p - taps[0] * d) // s, step * d // s


def backward_input(rt, out, grad, weight, geom):
    """out [N, C, H, W] = the input gradient, Wᵀ [C, O*kh*kw] @ G(dY). Stride 1: one product whose
    gather reads dY[h + p - i*d]. Stride s: a product per output phase (h % s, w % s) over that phase's
    taps only (see conv_gemm.wgsl): all of them in one dispatch (PHASED, then conv_unphase) where
    phase_table and plan_phased take them; else one dispatch each, its taps of W copied into a [C, O*taps]
    matrix."""
    Nb, C, H, W = out.shape
    O, _, kh, kw = weight.shape
    OH, OW = grad.shape[2:]
    (sh, sw), (ph, pw), (dh, dw) = geom
    kk = kh * kw
    if (sh, sw) == (1, 1):
        p = plan(False, C, Nb * H * W, O * kk, weight.offset, kk, kk, C * kk, grad.offset, O, OH, OW, H, W,
                 (kh, kw), (1, 1, -dh, -dw, ph, pw), out.offset, dtype=out.dtype)
        run(rt, p, weight.storage, grad.storage, out.storage)
        return
    dtype = out.dtype
    table = phase_table(kh, kw, (sh, sw), (ph, pw), (dh, dw), H, W)
    p = table and plan_phased(table, C, Nb, O, kk, kw, 0, grad.offset, OH, OW, out.offset, H, W, (sh, sw),
                              dtype=dtype)
    if p:
        # the weight once as [C, kh, kw, O] (at offset 0 of its storage): each tap's O values in a row
        wt = contiguous_view(rt.storage(C * kk * O, dtype), (C, kh, kw, O), dtype)
        (half_copy if dtype is float16 else copy)(
            rt, wt, View(weight.storage, (C, kh, kw, O), (kk, kw, 1, C * kk), weight.offset, dtype))
        run(rt, p, wt.storage, grad.storage, out.storage)
        return
    phases = [(ry, rx, phase_taps(kh, sh, ph, dh, ry), phase_taps(kw, sw, pw, dw, rx))
              for ry in range(min(sh, H)) for rx in range(min(sw, W))]
    if any(ty[1] * tx[1] == 0 for _, _, ty, tx in phases):
        # Phases without taps (a 1x1 window at stride 2: 3 of 4) get zeros from one contiguous fill: as
        # products of K = 0 their strided scalar stores took 78 us for a [128, 64, 32, 32] input gradient
        # (H200), more than the phase with taps (54 us).
        _zero(rt, out)
    for ry, rx, (i0, nu, su, oy, dy), (j0, nv, sv, ox, dx) in phases:
        K = O * nu * nv
        if not K:
            continue
        # this phase's taps: wp [C, O, nu, nv] = W[o, c, i0 + u*su, j0 + v*sv]
        wp = contiguous_view(rt.storage(C * K, dtype), (C, O, nu, nv), dtype)
        (half_copy if dtype is float16 else copy)(
            rt, wp, View(weight.storage, (C, O, nu, nv), (kk, C * kk, su * kw, sv), weight.offset + i0 * kw + j0,
                         dtype))
        qh, qw = -(-(H - ry) // sh), -(-(W - rx) // sw)
        p = plan(False, C, Nb * qh * qw, K, wp.offset, K, K, 0, grad.offset, O, OH, OW, qh, qw, (nu, nv),
                 (1, 1, -dy, -dx, oy, ox), out.offset + ry * W + rx, out_steps=(H * W, sh * W, sw), dtype=dtype)
        run(rt, p, wp.storage, grad.storage, out.storage)


def backward_weight(rt, out, grad, x, geom):
    """out [O, C, kh, kw] = dY [O, N*OH*OW] @ G(x)ᵀ (K: every position of every image, split across
    workgroups when the output alone is too small to fill the GPU)."""
    Nb, C, H, W = x.shape
    O, _, kh, kw = out.shape
    OH, OW = grad.shape[2:]
    (sh, sw), (ph, pw), (dh, dw) = geom
    P = OH * OW
    p = plan(True, O, C * kh * kw, Nb * P, grad.offset, P, P, O * P, x.offset, C, H, W, OH, OW, (kh, kw),
             (sh, sw, dh, dw, -ph, -pw), out.offset, dtype=out.dtype)
    run(rt, p, grad.storage, x.storage, out.storage)


def _zero(rt, out):
    """out = 0 for a float32 or float16 view (float16: zeros filled in float32 scratch, then cast; only
    the phases without taps of a strided 1x1 input gradient take this)."""
    if out.dtype is float32:
        fill(rt, out, 0.0)
        return
    tmp = contiguous_view(rt.storage(out.numel, float32), out.shape, float32)
    fill(rt, tmp, 0.0)
    half_copy(rt, out, tmp)
