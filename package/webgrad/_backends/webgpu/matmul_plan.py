"""How to dispatch shaders/matmul.wgsl for one batched matrix product: entry point, tile
configuration (WGSL override constants), K split, uniform parameters and workgroup count.

Pure Python, no GPU calls: the native and browser runtimes share it.

    p = plan(batch, M, N, K, trans_a, trans_b, has_bias, relu,
             a_offset, b_offset, out_offset, bias_offset, a_batch_stride, b_batch_stride,
             items=1, bias_rows=False, gather=None)
    pipeline: module from p.shader, entry point p.entry_point, override constants p.constants
    bindings (group 0): 0 a, 1 b, 2 out, 3 bias (a's buffer when there is none), 4 uniform p.params
    dispatch: p.workgroups
    when p.reduce is not None (split-K, p.splits > 1): bind a scratch buffer of p.scratch floats as
    out (binding 2) of that dispatch instead, then dispatch p.reduce (the same fields: entry point,
    constants, params, workgroups) with bindings 0 scratch, 1 any, 2 out, 3 bias, 4 its params.

Semantics: out[z] = sum over r < items of op(a[z*items + r]) @ op(b[z*items + r]) (+ bias) (then
relu), out contiguous [batch, M, N]; a stored [M, K] row-major, or [K, M] when trans_a; b stored
[K, N], or [N, K] when trans_b. The bias has N entries (one per column), or M with bias_rows.
Offsets and batch strides (per item) are in float32 elements; a batch stride of 0 reuses one matrix.
gather = (H, W, OW, kh, kw, sy, sx, dy, dx, py, px) makes op(b) an image unfolded on the fly instead
(see matmul.wgsl's unfolded4): b's items are images of H x W planes, b_batch_stride apart.
"""

import functools
import os
import struct

SHADER = "matmul.wgsl"

# Tile configurations: a slice of WG_X x WG_Y threads, each computing TM x TN outputs, covers a tile
# of (WG_Y*TM) x (WG_X*TN); BK is the K step staged in workgroup memory (double-buffered). KS > 1
# splits K inside the workgroup over KS slices (KS * WG_X * WG_Y threads) whose partial sums are
# added at the end: for small outputs with a long K (MNIST's 128x784 @ 784x128), where one slice per
# tile would leave most of the GPU idle. choose_config picks one; `python -m webgrad.bench kernels
# --configs ...` sweeps them.
CONFIGS = {
    "128x128": dict(WG_X=16, WG_Y=16, TM=8, TN=8, BK=8, KS=1),   # 256 threads, 16 KiB
    "64x128": dict(WG_X=16, WG_Y=8, TM=8, TN=8, BK=8, KS=1),     # 128 threads, 12 KiB
    "128x64": dict(WG_X=8, WG_Y=16, TM=8, TN=8, BK=8, KS=1),     # 128 threads, 12 KiB
    "64x64": dict(WG_X=16, WG_Y=16, TM=4, TN=4, BK=16, KS=1),    # 256 threads, 16 KiB
    "64x32": dict(WG_X=8, WG_Y=16, TM=4, TN=4, BK=16, KS=1),     # 128 threads, 12 KiB
    "32x64": dict(WG_X=16, WG_Y=8, TM=4, TN=4, BK=16, KS=1),     # 128 threads, 12 KiB
    "32x32": dict(WG_X=8, WG_Y=8, TM=4, TN=4, BK=16, KS=1),      # 64 threads, 8 KiB
    "32x32k4": dict(WG_X=8, WG_Y=8, TM=4, TN=4, BK=8, KS=4),     # 256 threads, 16 KiB
    "32x32k2": dict(WG_X=8, WG_Y=8, TM=4, TN=4, BK=16, KS=2),    # 128 threads, 16 KiB
    "16x32k4": dict(WG_X=8, WG_Y=4, TM=4, TN=4, BK=8, KS=4),     # 128 threads, 12 KiB
    "32x16k4": dict(WG_X=4, WG_Y=8, TM=4, TN=4, BK=8, KS=4),     # 128 threads, 12 KiB
    "16x16k8": dict(WG_X=4, WG_Y=4, TM=4, TN=4, BK=8, KS=8),     # 128 threads, 16 KiB
    "64x16": dict(WG_X=4, WG_Y=16, TM=4, TN=4, BK=16, KS=1),     # 64 threads, 10 KiB
    "16x64": dict(WG_X=16, WG_Y=4, TM=4, TN=4, BK=16, KS=1),     # 64 threads, 10 KiB
    "64x32k2": dict(WG_X=8, WG_Y=8, TM=8, TN=4, BK=8, KS=2),     # 128 threads, 12 KiB
    # Large products ("w": threads in 8 x 4 subgroup blocks, WARP_TILED; tiles XOR-swizzled, SWIZZLE; see
    # matmul.wgsl): the same 8x8 register blocks, fewer shared-memory wavefronts per k and no bank
    # conflicts on the scalar stores of a K-contiguous operand (NN's a, NT's and TT's b).
    "128x128w": dict(WG_X=16, WG_Y=16, TM=8, TN=8, BK=8, KS=1, WARP_TILED=1, SWIZZLE=1),           # 16 KiB
    "64x128w": dict(WG_X=16, WG_Y=8, TM=8, TN=8, BK=8, KS=1, WARP_TILED=1, SWIZZLE=1),             # 12 KiB
    "128x64w": dict(WG_X=8, WG_Y=16, TM=8, TN=8, BK=8, KS=1, WARP_TILED=1, SWIZZLE=1),             # 12 KiB
    # BK = 16 in one buffer (two barriers per step): a K-contiguous operand's rows are read 64 bytes at a
    # time instead of 32, half the cache lines per loaded vec4
    "128x128w16": dict(WG_X=16, WG_Y=16, TM=8, TN=8, BK=16, KS=1, NBUF=1, WARP_TILED=1, SWIZZLE=1),  # 16 KiB
    "64x128w16": dict(WG_X=16, WG_Y=8, TM=8, TN=8, BK=16, KS=1, NBUF=1, WARP_TILED=1, SWIZZLE=1),    # 12 KiB
}

MAX_WORKGROUPS_PER_DIM = 65535

# Large products run on the warp-tiled, swizzled 128x128 tiles ("w": the same register tiles, another
# thread mapping and workgroup layout) where choose_config picks the plain big tile and 128x128 tiles still
# fill the GPU (>= BIG_W_MIN_TILES of them). H200, `python -m webgrad.bench kernels --sizes 2048 4096
# --trans --configs 64x128 64x128w 128x128w 128x128w16 64x128w16`, GFLOP/s at 4096^3 NN/TN/NT/TT:
# 64x128 33.4k/36.7k/28.6k/32.9k; 128x128w 37.4k/37.9k/33.5k/37.1k; 128x128w16 35.4k/38.1k/35.2k/35.0k
# (2048^3 alike: NT 23.9k -> 34.0k as 128x128w16). So NT (b K-contiguous, transposed into workgroup
# memory) takes the BK=16 twin, the rest 128x128w. The 64x128w/128x64w twins were no faster than the plain
# tiles; the wide layer at batch 128 takes 128x128w16 (WIDE_TWIN below; 25.9k as 128x128w, 26.4k plain).
# A gathered (convolution) operand keeps the plain tiles, and so does a short K (the weight
# gradients of a batch, K = 128: not measured on the twins).
BIG_W_MIN_TILES = 256
BIG_W_MIN_K = 512
# The wide plan (a side of at most 128, split 8 ways: see choose_config) runs as 128x128w16. H200, one call
# (`bench kernels --sizes --shapes 1,128,4096,4096,0,0 1,128,4096,4096,0,1 1,128,4096,3072,0,1 --configs
# 128x128 128x128w16 128x128w`, log), TFLOP/s as 128x128 / 128x128w16 /
# 128x128w, all split 8 ways: 128x4096 @ 4096x4096 NN 26.9 / 29.3 / 26.0, NT 26.3 / 28.0 / 25.9,
# 128x4096 @ 3072 NT 25.8 / 27.2 / 25.4. The wide MLP's step (bench scale, same call, alternating):
# 117.3k and 119.5k samples/s as 128x128, 122.2k and 123.0k as 128x128w16; peak memory the same.
WIDE_TWIN = "128x128w16"
# A weight gradient X^T @ dY over a batch of 128 to 511 rows (TN, a short K) with 128x128 tiles enough to fill
# the GPU takes the BK = 16 twin too: the wide MLP's at batch 128 (H200, `bench kernels --sizes --shapes
# 1,4096,4096,128,1,0 1,4096,3072,128,1,0 --configs 64x128 128x64 128x128 128x128w 128x128w16 64x128w
# 64x128w16`): [4096, 4096] 145.1 us as 64x128 (the plan's), 144.1 as 128x128w,
# 132.7 as 128x128w16; [4096, 3072] 110.2, 109.5, 100.7 us. Other short-K products were not measured.
SHORT_K_TWIN_MIN = 128
# Tiles past a browser's default 16 KiB of workgroup memory lost on the H200 (fewer workgroups per SM), so
# every configuration stays within it. `bench kernels --sizes 4096 --trans --configs 128x128w 128x128w16
# 16,16,8,8,16 16,16,8,8,16,w 16,16,8,8,32,w,nbuf1 16,8,8,8,16,w`, 4096^3
# NN TFLOP/s: 37.4 as 128x128w, 35.4 as 128x128w16; 28.1 double-buffered at BK = 16 (32 KiB, swizzled or
# not), 31.2 at BK = 32 in one buffer (32 KiB), 27.8 as 64x128 double-buffered at BK = 16 (24 KiB).


# Products of the middle size, too few 128x128 tiles or too short a K for the rules above (a transformer's
# projections at a few thousand tokens: [4096, 384] @ [384, 1536]), run as 64x128w16 instead of the plain
# 64x128 or 128x64 tiles from K = 384 (the shortest K measured). H200, `python -m webgrad.bench kernels --sizes
# --shapes <the 12 products of gpt-6x384's step> --configs 128x64 64x128 64x128w16 ...`, GFLOP/s of the
# plain tile against 64x128w16: NT, K = 384: N = 1152 23.8k -> 26.3k, N = 384 18.3k -> 19.7k, N = 1536
# 27.2k -> 30.2k; NT 4096x384 over K = 1536 19.5k -> 20.3k; NN over K = 1152, 384, 1536 with N = 384 20.1k,
# 18.4k, 20.4k -> 21.7k, 20.3k, 21.5k, N = 1536 over K = 384 27.2k -> 30.1k; the TN weight gradients over
# K = 4096, split as the plan splits them: [1152, 384] 22.2k -> 23.0k, [384, 384] 20.9k -> 23.1k,
# [1536, 384] 23.7k -> 24.4k, [384, 1536] 24.5k -> 24.3k. At gpt2-small's sizes most products take the
# rules above; its TN weight gradients over K = 8192 read 26.6k -> 26.3k.
MID_TWIN = "64x128w16"
MID_TWIN_MIN_K = 384


# A middle-size product with too few tiles for two workgroups per SM and a long K splits it 4 ways across
# workgroups. H200, `python -m webgrad.bench kernels --sizes --shapes 1,4096,384,1536,0,1 1,4096,384,1536,0,0
# 1,4096,384,1152,0,0 1,4096,384,384,0,0 --configs 64x128w16 ... --splits 1 2 3 4` (a GPT's products with
# N = 384: 192 tiles), GFLOP/s unsplit / split 2 / 3 / 4 ways: NT over K = 1536 20.3k / 25.6k / 24.7k / 27.4k,
# NN 21.9k / 26.1k / 25.4k / 28.1k, NN over K = 1152 21.6k / 25.4k / 24.5k / 27.1k; over K = 384 the plan's
# 64x64 tiles stay (22.3k unsplit, 17.5k split 2 ways).
# From MID_SPLIT_BELOW_TILES to MID_LONG_K_BELOW_TILES tiles, a K of at least MID_SPLIT_LONG_K splits too. H200,
# `python -m webgrad.bench kernels --sizes --no-numpy --shapes <the products> --configs 64x128w16 128x128w16
# --splits 1 2 4` (the product alone): gpt2-small's weight
# gradients [3072, 768] and [768, 3072] over K = 8192 (288 tiles) 26.3k GFLOP/s unsplit, 30.6k split 2 ways,
# 34.3k split 4; in its replayed step (bench replay --each) 1,473 -> 1,123 us each, its reduction ~15 us.
# (A GPT's [4096, 384] over K = 384 read 21.8k-22.3k as 64x64 and 25.1k-25.7k as the twin split 2 ways, but in
# the replayed step the twin's two products and reductions took 702 us against 704: 64x64 stays.)
MID_SPLIT_BELOW_TILES = 256
MID_SPLIT_MIN_K = 1024
MID_LONG_K_BELOW_TILES = 512
MID_SPLIT_LONG_K = 4096  # (measured at K = 8192 only)
MID_SPLITS = 4


def _mid_splits(batch, M, N, K, steps):
    tiles = _tiles(MID_TWIN, batch, M, N)
    if K < MID_SPLIT_MIN_K or tiles >= MID_LONG_K_BELOW_TILES:
        return 1
    if tiles >= MID_SPLIT_BELOW_TILES and K < MID_SPLIT_LONG_K:
        return 1
    return max(1, min(MID_SPLITS, steps // MIN_SPLIT_STEPS, MAX_SCRATCH // (batch * M * N)))


# A weight gradient (TN: xᵀ @ grad over the tokens) of the middle size over a long K, with few tiles (a decoder of
# width 320-768: [1536, 384] over 4,096-16,384 tokens), splits its K so that about WEIGHT_GRAD_WORKGROUPS
# workgroups run, up to WEIGHT_GRAD_MAX_SPLITS: the 128-thread tiles of the twin wait on memory latency with four
# splits' worth of workgroups. H200, `python -m webgrad.bench kernels --sizes --no-numpy --shapes
# 1,1536,384,16384,1,0 1,960,320,8192,1,0 1,384,1536,16384,1,0 1,1152,384,4096,1,0 1,1536,384,4096,1,0
# 1,384,1536,4096,1,0 1,2304,768,8192,1,0 --configs 64x128w16 ... --splits 1 2 4 8 16`, GFLOP/s split 4 / 8 / 16
# ways (the plan took 4-6): [1536, 384] over 16,384 25.7k / 30.3k / 33.6k, [384, 1536] the same, [960, 320] over
# 8,192 18.6k / 25.8k / 23.5k (19.9k as planned, 6 ways), [1152, 384] over 4,096 25.4k / 23.6k / 26.7k, [1536, 384]
# over 4,096 24.7k / 26.6k / 28.4k; [2304, 768] over 8,192 (216 tiles) 32.2k / 32.6k / 30.6k. cuBLAS ran them at
# 38-50k.
WEIGHT_GRAD_MIN_K = 4096
WEIGHT_GRAD_WORKGROUPS = 1024
WEIGHT_GRAD_MAX_SPLITS = 16


def _weight_grad_splits(batch, M, N, K, steps):
    tiles = _tiles(MID_TWIN, batch, M, N)
    if K < WEIGHT_GRAD_MIN_K or tiles >= MID_SPLIT_BELOW_TILES:
        return 1
    want = -(-WEIGHT_GRAD_WORKGROUPS // tiles)
    most = min(WEIGHT_GRAD_MAX_SPLITS, steps // MIN_SPLIT_STEPS, MAX_SCRATCH // (batch * M * N))
    return max(1, min(want, most))


# A plain (NN) product with a very long K and too few 128x128 tiles for the rules above: a language model's input
# gradient through its output layer, [rows, width] = dLogits [rows, vocab] @ W [vocab, width]. It runs as 128x128w16
# split across workgroups so that about LONG_NN_WORKGROUPS of them run (2 to 8 splits). H200, `python -m
# webgrad.bench kernels --sizes --no-numpy --shapes 1,4096,512,32000,0,0 1,4096,768,32000,0,0 1,2048,512,32000,0,0
# 1,4096,512,16384,0,0 --configs 128x64 64x128w16 128x128w 128x128w16 --splits 1 2 4 8`, GFLOP/s as the plan chose
# before (the mid twin split 4 ways, or 128x64) against 128x128w16 split 2 / 4 / 8 ways: [4096, 512] over K = 32,000
# 27.9k against 36.2k / 36.3k / 36.4k (4,786 -> 3,694 us, a Llama-8x512 step's output layer), [4096, 768] 31.2k
# against 36.1k / 36.5k / 36.5k, [2048, 512] 20.7k against 33.7k / 36.1k / 36.1k, [4096, 512] over K = 16,384 27.5k
# against 36.1k / 36.0k / 35.8k. Unsplit, 128x128w16 read 27.1k, 25.8k, 13.5k, 27.0k. Transposed operands were not
# measured (they keep the rules below).
LONG_NN_TWIN = "128x128w16"
LONG_NN_MIN_K = 16384
LONG_NN_MIN_TILES = 64
LONG_NN_WORKGROUPS = 512
LONG_NN_MAX_SPLITS = 8


def _long_nn(batch, M, N, K, trans_a, trans_b, items):
    """Whether a product takes LONG_NN_TWIN split across workgroups (see LONG_NN_TWIN)."""
    return (not trans_a and not trans_b and items == 1 and K >= LONG_NN_MIN_K
            and LONG_NN_MIN_TILES <= _tiles(LONG_NN_TWIN, batch, M, N) < BIG_W_MIN_TILES
            and _waste(LONG_NN_TWIN, M, N) <= 1.2)


def _long_nn_splits(batch, M, N, steps):
    want = -(-LONG_NN_WORKGROUPS // _tiles(LONG_NN_TWIN, batch, M, N))
    most = min(LONG_NN_MAX_SPLITS, steps // MIN_SPLIT_STEPS, MAX_SCRATCH // (batch * M * N))
    return max(1, min(max(2, want), most))


def _big_twin(cfg, batch, M, N, K, trans_a, trans_b, items=1):
    if cfg == "128x128":  # only the wide plan (choose_config) gets here with it: see WIDE_TWIN
        return WIDE_TWIN
    if cfg not in ("64x128", "128x64"):
        return cfg
    if _tiles("128x128w", batch, M, N) >= BIG_W_MIN_TILES and _waste("128x128w", M, N) <= 1.2:
        if K >= BIG_W_MIN_K:
            return "128x128w16" if trans_b and not trans_a else "128x128w"
        if trans_a and not trans_b and K >= SHORT_K_TWIN_MIN:  # a weight gradient over a batch
            return "128x128w16"
    if _long_nn(batch, M, N, K, trans_a, trans_b, items):
        return LONG_NN_TWIN
    # (not measured on batch-reduce products, such as ResNet-18's weight gradients: they keep their tiles)
    mid = items == 1 and K >= MID_TWIN_MIN_K and _waste(MID_TWIN, M, N) <= 1.2
    return MID_TWIN if mid else cfg


# Split-K across workgroups (GPU profile): when a product has fewer than SPLIT_BELOW_TILES tiles (under
# 3/4 of an H100's 132 SMs), its K steps are split so that about TARGET_WORKGROUPS workgroups run (4 per
# SM), each split keeping at least MIN_SPLIT_STEPS K steps per slice so that writing its partial tile
# stays small next to its work, at most MAX_SPLITS splits (the reduction reads them all) and a scratch
# buffer of at most MAX_SCRATCH floats. Measured on an H100 (a CNN's conv2 weight gradient at batch
# 1024, [32, 200704] @ [200704, 144]: 5 tiles): 1967 us unsplit as 16x16k8, 378 us split 30 ways,
# 200 us + 9 us of reduction split 106 ways as 32x32k4; 64 tiles of 1024x10 @ K = 1568 gained 7 us
# from 3 splits, 98 tiles of 10x1568 @ K = 1024 nothing.
SPLIT_BELOW_TILES = 96
TARGET_WORKGROUPS = 528
MIN_SPLIT_STEPS = 8
MAX_SPLITS = 256
MAX_SCRATCH = 1 << 24
BIG_TILE_WORKGROUPS = 256
# choose_config takes the big tile with split-K for a product of at least this K and this many big tiles.
# 16 takes in ResNet-18's weight gradients at batch 128 (H200, bench profile): [128, 1152] over K = 128
# images x 256 positions 1431 -> 593 us as 64x128 split 15 ways (32x32k4 unsplit before); [256, 2304]
# over 128 x 64, 942 -> 567 us split 4 ways (32x64 before). MNIST's products have too few big tiles.
BIG_SPLIT_MIN_K = 1024
BIG_SPLIT_MIN_TILES = 16
# choose_config: a product whose outputs are at most SMALL_SIDE on one side and at least SMALL_SIDE_WIDE on
# the other (with a long K) takes 128x128 tiles split across workgroups.
SMALL_SIDE = 128
SMALL_SIDE_WIDE = 2048
LONG_K = 8192  # from here on choose_config counts on split-K for parallelism and takes 32x32 tiles
REDUCE_OUTPUTS = 32  # matmul_reduce: outputs (or vec4s) per workgroup, each summed by 8 threads
REDUCE_LANES = 8  # matmul_reduce's threads per output; at most this many splits take matmul_reduce_few4
REDUCE_FEW_THREADS = 256  # matmul_reduce_few4: vec4s of outputs per workgroup, one a thread
# vec4 stores for products whose workgroups walk at most this much K (see _plan); WEBGRAD_MATMUL_VEC_STORE_MAX_K=<k>
# sets it (benchmarks: 0 stores every product one element at a time)
VEC_STORE_MAX_K = int(os.environ.get("WEBGRAD_MATMUL_VEC_STORE_MAX_K") or 512)
# The 128x128 tiles (8x8 outputs a thread, 256 threads), unsplit, store vec4s only up to a K of 256: beyond it their
# main loop lost more than the stores gained (a split product's partial tiles keep VEC_STORE_MAX_K: not measured). H200, `python -m webgrad.bench kernels --sizes --no-numpy --shapes ...`, the plan
# against WEBGRAD_MATMUL_VEC_STORE_MAX_K=0 in one call, GFLOP/s vec4 / scalar stores: K = 512: [4096, 1536] NN
# (128x128w) 27.0k / 32.4k, NT (128x128w16) 29.9k / 30.9k, [4096, 32000] NT 31.4k / 34.2k; K = 128: [4096, 4096] TN
# 32.4k / 28.2k. Smaller tiles keep VEC_STORE_MAX_K: 64x128w16 at K = 512 read 26.6k / 24.2k ([4096, 512] NT), at
# K = 384 30.2k / 29.0k ([4096, 1536] NT); 64x64 at K = 256 20.4k / 18.3k. End to end (bench scale --no-torch, the
# settings alternating twice in one call): every product on scalar stores took llama-8x512 from 90,261 to 91,983
# tokens/s but gpt-6x384 from 284,473 down to 275,495; this rule (against WEBGRAD_MATMUL_VEC_STORE_MAX_K_BIG=512, the
# rule before) llama-8x512 90,257 / 90,318 -> 92,075 / 92,060, gpt-6x384 284,484 / 284,877 -> 285,013 / 284,482,
# widemlp 129,872 / 130,329 -> 130,636 / 131,172 samples/s.
VEC_STORE_MAX_K_BIG = int(os.environ.get("WEBGRAD_MATMUL_VEC_STORE_MAX_K_BIG") or 256)
BIG_TILE_AREA = 128 * 128

# WEBGRAD_MATMUL_SPLITS=<n> forces the K split of every product (n >= 1; benchmarks and tests).
_FORCED_SPLITS = int(os.environ.get("WEBGRAD_MATMUL_SPLITS") or 0) or None

# WEBGRAD_MATMUL_CONFIG=<name> forces one configuration (for benchmarking and tests).
_FORCED = os.environ.get("WEBGRAD_MATMUL_CONFIG") or None

# Profiles: "gpu" (matmul.wgsl: many cores, enough workgroups to fill them) or "cpu" (a software
# adapter, lavapipe or SwiftShader: matmul_cpu.wgsl). The caller says which (matmul.profile(rt)).
PROFILES = ("gpu", "cpu")


def config_shape(cfg):
    c = CONFIGS[cfg]
    return c["WG_Y"] * c["TM"], c["WG_X"] * c["TN"]


def check_config(c, max_workgroup_bytes=16384):
    """Raise ValueError unless the configuration satisfies the shader's limits."""
    c.setdefault("KS", 1)
    nbuf = c.get("NBUF", 2)
    nt = c["WG_X"] * c["WG_Y"]
    bm, bn = c["WG_Y"] * c["TM"], c["WG_X"] * c["TN"]
    if c["TM"] not in (4, 8) or c["TN"] not in (4, 8) or c["BK"] % 4 or nt * c["KS"] > 256 or nbuf not in (1, 2):
        raise ValueError(f"bad matmul config {c}")
    if c.get("WARP_TILED") and (c["WG_X"] % 8 or c["WG_Y"] % 4):
        raise ValueError(f"bad matmul config {c}: WARP_TILED needs WG_X % 8 == 0 and WG_Y % 4 == 0")
    if c.get("SWIZZLE") and (c["WG_X"] % 8 or c["WG_Y"] % 8 or 8 % (c["BK"] // 4)):
        raise ValueError(f"bad matmul config {c}: SWIZZLE needs WG_X, WG_Y multiples of 8 and BK in 4, 8, 16, 32")
    for rows in (bm, bn):
        vec4s = c["BK"] * rows // 4
        if vec4s % nt or not 1 <= vec4s // nt <= 4:
            raise ValueError(f"bad matmul config {c}: tile loads do not split evenly over threads")
    if c["KS"] > 1 and c["KS"] * nbuf * c["BK"] * bm < bm * bn:
        raise ValueError(f"bad matmul config {c}: As cannot hold a slice's partial sums")
    if c["KS"] * nbuf * c["BK"] * (bm + bn) * 4 > max_workgroup_bytes:
        raise ValueError(f"bad matmul config {c}: over {max_workgroup_bytes} bytes of workgroup memory")


for _c in CONFIGS.values():
    check_config(_c)


def parse_config_spec(spec):
    """An experimental tile configuration from "WG_X,WG_Y,TM,TN,BK[,KS][,w][,nbuf1]" (benchmark sweeps):
    w = warp-tiled and swizzled (the "w" configurations), nbuf1 = one workgroup buffer (two barriers per
    K step). Returns (its name, its constants); the caller checks them against its shader's limits."""
    fields = spec.split(",")
    flags = {f for f in fields if not f.isdigit()}
    v = [int(f) for f in fields if f.isdigit()]
    if len(v) not in (5, 6) or flags - {"w", "nbuf1"}:
        raise ValueError(f"bad tile configuration {spec!r}: expected WG_X,WG_Y,TM,TN,BK[,KS][,w][,nbuf1]")
    c = dict(WG_X=v[0], WG_Y=v[1], TM=v[2], TN=v[3], BK=v[4], KS=v[5] if len(v) > 5 else 1,
             NBUF=1 if "nbuf1" in flags else 2)
    if "w" in flags:
        c.update(WARP_TILED=1, SWIZZLE=1)
    return f"{c['WG_Y'] * c['TM']}x{c['WG_X'] * c['TN']}:{spec}", c


def add_config(spec, max_workgroup_bytes=32768):
    """Register an experimental configuration (parse_config_spec's spec); returns its name. Up to 32 KiB of
    workgroup memory: the runtime asks for the adapter's maximum, which is that or more on desktop GPUs."""
    name, c = parse_config_spec(spec)
    check_config(c, max_workgroup_bytes)
    CONFIGS[name] = c
    return name


class MatmulPlan:
    """One dispatch (entry point, constants, params, workgroups) and, for split-K, the second one:
    `reduce` (a MatmulPlan of its own), with `splits` and the `scratch` floats the first one writes."""

    __slots__ = ("shader", "entry_point", "constants", "params", "workgroups", "config", "splits", "scratch",
                 "reduce")

    def __init__(self, shader, entry_point, constants, params, workgroups, config, splits=1, scratch=0,
                 reduce=None):
        self.shader = shader
        self.entry_point = entry_point
        self.constants = constants
        self.params = params
        self.workgroups = workgroups
        self.config = config
        self.splits = splits
        self.scratch = scratch
        self.reduce = reduce

    def __repr__(self):
        split = f", splits={self.splits}" if self.splits > 1 else ""
        return (f"MatmulPlan({self.entry_point}, {self.config}{split}, workgroups={self.workgroups}, "
                f"constants={self.constants})")


def _tiles(cfg, batch, M, N):
    bm, bn = config_shape(cfg)
    return -(-M // bm) * -(-N // bn) * batch


def _waste(cfg, M, N):
    """Computed area over useful area: how much of the edge tiles is padding."""
    bm, bn = config_shape(cfg)
    return (-(-M // bm) * bm) * (-(-N // bn) * bn) / (M * N)


def choose_config(batch, M, N, K, profile="gpu"):
    """A tile configuration for these sizes (K: the whole reduction, items included). GPU: the largest
    tile that still gives ~2 workgroups per SM of a big GPU (132 SMs on an H100) without padding much;
    thin tiles for thin outputs; when even 32x32 tiles are too few and K is long, split K inside the
    workgroup, and for a very long K across workgroups too (choose_splits), which lets 32x32 tiles be
    used. Thresholds from H100 sweeps (bench/kernels.py, .. profile): e.g. 128x128 @ 128x784 (an MNIST
    layer) 34.7 us as 32x32, 11.4 us as 16x16k8; a CNN's input gradient 128 x [16, 288] @ [288, 196]
    44.8 us as 32x32k4, 38.4 as 16x32k4; its weight gradient [32, 25088] @ [25088, 144] 61 us as
    16x16k8 split 30 ways, 47 as 32x32k4 split 64 ways."""
    if _FORCED:
        return _FORCED
    if profile == "cpu":
        return "128x128" if min(M, N) > 64 else "64x64" if min(M, N) > 32 else "32x32"

    def fits(cfg, min_tiles):
        return _tiles(cfg, batch, M, N) >= min_tiles and _waste(cfg, M, N) <= 1.2

    if N <= 16 and fits("64x16", 128):
        return "64x16"
    if M <= 16 and fits("16x64", 128):
        return "16x64"
    big = "64x128" if N >= M else "128x64"
    if fits(big, 256):
        return big
    # A small side with a long K (a wide layer at batch 128: 128x4096 @ 4096x4096): the big tile, its K
    # split across workgroups (choose_splits, BIG_TILE_WORKGROUPS), beats thinner unsplit tiles. H200,
    # bench kernels: NN 24.6 TFLOP/s as 64x128 split 4 ways, against 15.5 as 32x64 (NT: 23.0 as 128x64
    # split 4, 14.3 as 32x64).
    # With a very long K (a weight gradient summed over 128 images) a few big tiles suffice: ResNet-18's
    # [64, 576] over 128 x 1024, 5 tiles split 52 ways, 1090 -> 591 us (32x32k4 split 15 ways before).
    if K >= BIG_SPLIT_MIN_K and fits(big, BIG_SPLIT_MIN_TILES) or K >= LONG_K and fits(big, 4):
        # A side of at most 128 with the other in the thousands (a wide layer's forward and input
        # gradient at batch 128): 128x128 tiles split 8 ways (256 workgroups; each split's K is short
        # enough for vec4 stores). H200, bench kernels: 128x4096 @ 4096x4096 NN 29.4 TFLOP/s against
        # 24.5 as 64x128 split 4; NT 25.5 against 21.5.
        if min(M, N) <= SMALL_SIDE and max(M, N) >= SMALL_SIDE_WIDE and fits("128x128", BIG_SPLIT_MIN_TILES):
            return "128x128"
        return big
    for cfg, min_tiles in (("64x64", 200), ("64x32" if M >= N else "32x64", 128)):
        if fits(cfg, min_tiles):
            return cfg
    if K < 64:
        return "32x32"
    if M <= 16 < N and _tiles("16x32k4", batch, M, N) >= 128:
        return "16x32k4"
    if N <= 16 < M and _tiles("32x16k4", batch, M, N) >= 128:
        return "32x16k4"
    if _tiles("32x32", batch, M, N) >= 128 or (K >= LONG_K and min(M, N) > 16):
        return "32x32k4"
    return "16x16k8"


def choose_splits(cfg, batch, M, N, steps, profile="gpu"):
    """How many workgroups share each tile's `steps` K steps (1: no split-K). See TARGET_WORKGROUPS."""
    if _FORCED_SPLITS:
        return max(1, min(_FORCED_SPLITS, steps, MAX_WORKGROUPS_PER_DIM // batch))
    if profile == "cpu":  # a few cores: the tiles alone keep them busy
        return 1
    tiles = _tiles(cfg, batch, M, N)
    if tiles >= SPLIT_BELOW_TILES:
        return 1
    # 8x8 outputs per thread hold many registers: ~2 such workgroups per SM (4 splits of 64 tiles) ran
    # faster than 4 per SM (8 splits: 19.5 against 24.6 TFLOP/s for 128x4096 @ 4096x4096 NN, H200)
    target = BIG_TILE_WORKGROUPS if CONFIGS[cfg]["TM"] * CONFIGS[cfg]["TN"] >= 64 else TARGET_WORKGROUPS
    want = -(-target // tiles)
    most = min(steps // (CONFIGS[cfg]["KS"] * MIN_SPLIT_STEPS), MAX_WORKGROUPS_PER_DIM // batch,
               MAX_SCRATCH // (batch * M * N), MAX_SPLITS)
    return max(1, min(want, most))


def plan(batch, M, N, K, trans_a, trans_b, has_bias, relu,
         a_offset, b_offset, out_offset, bias_offset, a_batch_stride, b_batch_stride, config=None,
         items=1, bias_rows=False, gather=None, splits=None, profile="gpu", causal=0):
    """The dispatch(es) for one batched matmul (see the module docstring), for an adapter of `profile`
    (see PROFILES). `config` forces a tile configuration by name (a key of CONFIGS) and `splits` a K
    split; by default both are chosen from the sizes. `causal` (CAUSAL_PARTS' codes, a plain product only):
    the triangle matmul.wgsl's CAUSAL skips (the GPU profile; the CPU profile's kernels compute everything).
    Cached: the same arguments return the same (read-only) plan object."""
    if profile not in PROFILES:
        raise ValueError(f"unknown matmul profile {profile!r}: expected one of {PROFILES}")
    if causal and (items != 1 or gather is not None or has_bias or relu or profile == "cpu"):
        causal = 0
    return _plan(batch, M, N, K, bool(trans_a), bool(trans_b), bool(has_bias), bool(relu), a_offset, b_offset,
                 out_offset, bias_offset, a_batch_stride, b_batch_stride, config, profile, items,
                 bool(bias_rows), tuple(gather) if gather is not None else None, splits, causal)


# matmul.wgsl's CAUSAL codes: only the lower triangle of out wanted; op(a) lower-triangular; op(a) upper-triangular
CAUSAL_PARTS = {"out": 1, "a_lower": 2, "a_upper": 3}


# matmul.wgsl's Params: 16 u32; the gather's image size and stride (4 u32), dilation and padding (4 i32)
_PARAMS = struct.Struct("<20I4i")


@functools.lru_cache(maxsize=4096)
def _plan(batch, M, N, K, trans_a, trans_b, has_bias, relu, a_offset, b_offset, out_offset, bias_offset,
          a_batch_stride, b_batch_stride, config, profile, items, bias_rows, gather, splits, causal=0):
    if min(batch, M, N, items) < 1 or K < 0:
        raise ValueError(f"matmul: bad sizes batch={batch} M={M} N={N} K={K} items={items}")
    if gather is not None and len(gather) != 11:
        raise ValueError(f"matmul: gather needs 11 numbers (H, W, OW, kh, kw, sy, sx, dy, dx, py, px), got {gather}")
    if profile == "cpu" and gather is None and not config:
        return _cpu_plan(batch, M, N, K, trans_a, trans_b, has_bias, relu, a_offset, b_offset, out_offset,
                         bias_offset, a_batch_stride, b_batch_stride, items, bias_rows)
    cfg = config or choose_config(batch, M, N, K * items, profile)
    if not config and not _FORCED and gather is None:
        cfg = _big_twin(cfg, batch, M, N, K * items, trans_a, trans_b, items)
    c = CONFIGS[cfg]
    bm, bn = config_shape(cfg)
    bk = c["BK"]

    lda = M if trans_a else K  # length of a's contiguous (last stored) dimension
    ldb = K if trans_b else N
    # vec4 loads need every vec4 to start on a multiple of 4 and to lie wholly inside one row.
    # (lda > 0 also guarantees the buffer holds >= 16 bytes, the minimum for binding array<vec4>.)
    vec_a = lda % 4 == 0 and lda > 0 and a_offset % 4 == 0 and a_batch_stride % 4 == 0
    vec_b = gather is None and ldb % 4 == 0 and ldb > 0 and b_offset % 4 == 0 and b_batch_stride % 4 == 0

    ntiles = -(-K // bk)
    steps = items * ntiles
    if splits is None:
        splits = choose_splits(cfg, batch, M, N, steps, profile)
        if splits == 1 and cfg == MID_TWIN and not _FORCED_SPLITS:
            splits = _mid_splits(batch, M, N, K * items, steps)
        elif (splits == 1 and cfg == LONG_NN_TWIN and not config and not _FORCED and not _FORCED_SPLITS
              and gather is None and _long_nn(batch, M, N, K, trans_a, trans_b, items)):
            splits = _long_nn_splits(batch, M, N, steps)
        if cfg == MID_TWIN and trans_a and not trans_b and items == 1 and not config and not _FORCED_SPLITS:
            splits = max(splits, _weight_grad_splits(batch, M, N, K, steps))
        if causal:  # (matmul.wgsl's CAUSAL cuts a tile's own K range: no split-K)
            splits = 1
    splits = max(1, min(splits, steps))
    split_steps = -(-steps // splits) if steps else 0
    splits = -(-steps // split_steps) if steps else 1  # no empty split
    # Stores are vec4 when each thread's 4 columns are 16-byte aligned and in bounds together, and
    # the K a workgroup walks is short (the product is store-bound): measured on an H100, 25088x144 @
    # K = 32 went from 7.8 to 13.0 TFLOP/s with vec4 stores, but 4096^3 from 34.4 down to 29.9.
    vec_out = (N % 4 == 0 and (out_offset % 4 == 0 or splits > 1)
               and split_steps * bk <= (VEC_STORE_MAX_K_BIG if bm * bn >= BIG_TILE_AREA and splits == 1
                                        else VEC_STORE_MAX_K))
    entry = "matmul_" + ("v" if vec_a else "s") + ("v" if vec_b else "s") + ("4" if vec_out else "")

    workgroups = (-(-N // bn), -(-M // bm), batch * splits)
    if max(workgroups) > MAX_WORKGROUPS_PER_DIM and not config and cfg != "128x128":
        return _plan(batch, M, N, K, trans_a, trans_b, has_bias, relu, a_offset, b_offset, out_offset,
                     bias_offset, a_batch_stride, b_batch_stride, "128x128", profile, items, bias_rows, gather,
                     1, causal)
    if max(workgroups) > MAX_WORKGROUPS_PER_DIM:
        raise ValueError(f"matmul too large for one dispatch: workgroups {workgroups}")
    _check_u32(a_offset, b_offset, out_offset, bias_offset, a_batch_stride, b_batch_stride, splits * batch * M * N)

    # the gather's window and row width are override constants (G_KH, G_KW, G_OW), the rest Params
    H, W, OW, kh, kw, sy, sx, dy, dx, py, px = gather or (0,) * 11
    geometry = (H, W, sy, sx, dy, dx, py, px)
    split = splits > 1
    # With split-K the product writes raw partial tiles into the scratch buffer (offset 0); bias and
    # ReLU move to the reduction.
    params = _PARAMS.pack(
        M, N, K, ntiles,
        a_offset, b_offset, 0 if split else out_offset, bias_offset,
        a_batch_stride, b_batch_stride, lda, ldb if gather is None else 0,
        items, split_steps, splits, batch,
        *geometry,
    )
    constants = dict(c)
    constants.update(TRANS_A=int(trans_a), TRANS_B=int(trans_b), HAS_BIAS=int(has_bias and not split),
                     RELU=int(relu and not split), BIAS_ROWS=int(bias_rows), SPLIT_K=int(split or items > 1))
    if causal:
        constants["CAUSAL"] = causal
    if not vec_b:  # B_GATHER is read by the scalar-b entry points only (constants must be used)
        constants["B_GATHER"] = int(gather is not None)
    if gather is not None:
        constants.update(G_KH=kh, G_KW=kw, G_OW=OW)
    if not split:
        return MatmulPlan(SHADER, entry, constants, params, workgroups, cfg)

    reduce = _reduce_plan(batch, M, N, out_offset, bias_offset, has_bias, relu, bias_rows, splits)
    return MatmulPlan(SHADER, entry, constants, params, workgroups, cfg, splits, splits * batch * M * N, reduce)


def _reduce_plan(batch, M, N, out_offset, bias_offset, has_bias, relu, bias_rows, splits):
    """matmul.wgsl's matmul_reduce: out = relu?(sum of the `splits` partial products in scratch + bias?)."""
    total = batch * M * N
    reduce_vec = N % 4 == 0 and out_offset % 4 == 0
    few = reduce_vec and splits <= REDUCE_LANES
    entry = ("matmul_reduce_few4" if few else "matmul_reduce4") if reduce_vec else "matmul_reduce"
    per_group = REDUCE_FEW_THREADS if few else REDUCE_OUTPUTS
    groups = -(-(total // 4 if reduce_vec else total) // per_group)
    rgrid = (groups, 1, 1) if groups <= MAX_WORKGROUPS_PER_DIM else \
        (MAX_WORKGROUPS_PER_DIM, -(-groups // MAX_WORKGROUPS_PER_DIM), 1)
    rparams = _PARAMS.pack(M, N, 0, 0, 0, 0, out_offset, bias_offset, 0, 0, 0, 0, 1, 0, splits, batch, *(0,) * 8)
    return MatmulPlan(SHADER, entry,
                      dict(HAS_BIAS=int(has_bias), RELU=int(relu), BIAS_ROWS=int(bias_rows)), rparams, rgrid,
                      "reduce")


# matmul_cpu.wgsl: each invocation computes a CPU_BLOCK x CPU_BLOCK block of out in registers.
CPU_SHADERS = {True: "matmul_cpu_vec.wgsl", False: "matmul_cpu_scalar.wgsl"}
CPU_BLOCK = 16
CPU_MIN_WORKGROUPS = 16  # several per core of a software adapter, so that no core idles at the end


def _check_u32(*values):
    for v in values:
        if not 0 <= v < 2**32:
            raise ValueError("matmul: offsets, strides and sizes must fit in u32")


def _cpu_plan(batch, M, N, K, trans_a, trans_b, has_bias, relu, a_offset, b_offset, out_offset, bias_offset,
              a_batch_stride, b_batch_stride, items, bias_rows):
    """The plan for a software adapter: shaders/matmul_cpu.wgsl, one invocation per 16 x 16 block of
    out, with vec4 memory access when every operand allows it (see matmul_cpu_vec.wgsl)."""
    lda = M if trans_a else K
    ldb = K if trans_b else N
    aligned = all(v % 4 == 0 for v in (lda, ldb, N, a_offset, b_offset, out_offset, a_batch_stride, b_batch_stride))
    vec = aligned and min(lda, ldb) > 0
    blocks = -(-M // CPU_BLOCK) * -(-N // CPU_BLOCK)
    splits = 1
    if items > 1 and blocks * batch < 4 * CPU_MIN_WORKGROUPS:  # too few blocks for the cores: split the items
        per_split = -(-items // min(items, -(-4 * CPU_MIN_WORKGROUPS // (blocks * batch))))
        splits = -(-items // per_split)
    else:
        per_split = items
    wg = 16 if blocks * batch * splits >= 16 * CPU_MIN_WORKGROUPS else 4
    workgroups = (-(-blocks // wg), 1, batch * splits)
    if max(workgroups) > MAX_WORKGROUPS_PER_DIM:
        raise ValueError(f"matmul too large for one dispatch: workgroups {workgroups}")
    _check_u32(a_offset, b_offset, out_offset, bias_offset, a_batch_stride, b_batch_stride, splits * batch * M * N)
    split = splits > 1
    params = _PARAMS.pack(M, N, K, 0, a_offset, b_offset, 0 if split else out_offset, bias_offset, a_batch_stride,
                          b_batch_stride, lda, ldb, items, per_split, splits, batch, *(0,) * 8)
    constants = dict(TRANS_A=int(trans_a), TRANS_B=int(trans_b), HAS_BIAS=int(has_bias and not split),
                     RELU=int(relu and not split), BIAS_ROWS=int(bias_rows), WG=wg)
    if not split:
        return MatmulPlan(CPU_SHADERS[vec], "matmul_cpu", constants, params, workgroups, "cpu16x16")
    reduce = _reduce_plan(batch, M, N, out_offset, bias_offset, has_bias, relu, bias_rows, splits)
    return MatmulPlan(CPU_SHADERS[vec], "matmul_cpu", constants, params, workgroups, "cpu16x16", splits,
                      splits * batch * M * N, reduce)


def flops(batch, M, N, K):
    return 2.0 * batch * M * N * K
