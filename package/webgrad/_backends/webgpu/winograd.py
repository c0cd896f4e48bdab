"""Winograd convolutions on GPUs (shaders/winograd.wgsl): conv2d with a 3x3 window at stride 1, its input
gradient and its weight gradient, where both channel counts are at least MIN_CHANNELS. conv.py and f16.py route
them here before conv_gemm.py. F(4x4, 3x3) (output planes from F4_MIN_PLANE on both sides) costs 36
multiplications per channel pair for a 4x4 block of outputs, F(2x2, 3x3) 16 for a 2x2 block, against 144 and
36 directly; those run as one batched product of matmul.wgsl (xi = 36 or 16 matrices [O, C] @ [C, tiles]; for
the weight gradient [O, tiles] @ [tiles, C], split along the tiles by matmul_plan), between memory-bound
transforms (see the shader's header; winograd_transforms.py writes them out).

The transformed image V [xi, C, T] and the products M [xi, O, T] are 2.25 (F(4x4)) or 4 (F(2x2)) times the size
of the image and of the output. They live in the runtime's kept scratches (Runtime.kept_scratch; while a step
is recorded, storages of its graph's that the graph's memory plan places, memory_plan.py), shared by
every Winograd convolution: "winograd-u" holds U [xi, O, C] (the weight gradient: its chunks' dU),
"winograd-in" V, "winograd-out" M (the weight gradient: D). A batch whose V or M would pass WORKSPACE bytes
runs in chunks of images, one after another through the same buffers. Pooled storages per convolution, freed
after it, went back to a captured step's pool, where kept activations took them, so each convolution drew new
ones: ResNet-18 at batch 128 (bench scale, H200) peaked at 1263.8 MiB that way, against 892.8 without
Winograd. A planned recording (memory_plan.py) places such per-convolution storages among the activations
instead, which is why replay.py's recordings use them. WORKSPACE bounds the scratches of one convolution
(see there).

Numerics: F(2x2)'s transforms add and halve (exactly, in binary), so its results differ from the direct sum
only by the order of float32 additions, as conv_gemm's own K order does. F(4x4)'s round (sixths, twenty-fourths)
and scale by up to 8 before the sums; its results stay within the same tolerances of the CPU backend and
torch in tests/backends/webgpu/test_winograd.py (both tiles), and ResNet-18's one training step within test_resnet18_parity's.

Plans are pure Python and cached; a plan's Launches are kept in the runtime's memo.
"""

import functools
import math
import os
import struct
from typing import NamedTuple

from ...dtypes import float16, float32
from . import matmul_plan, typed, winograd_transforms
from .matmul import profile, run_plan
from .dispatch import Kernel, PlannedDispatch, grid

_LAYOUT = ((0, "read"), (1, "read"), (2, "write"), (4, "uniform"))
# wino_output's: binding 3 holds MASK's y (see masked_output; else any readable buffer, unread)
_OUTPUT_LAYOUT = ((0, "read"), (1, "read"), (2, "write"), (3, "read"), (4, "uniform"))
_OVERRIDES = {"wino_input": ("TW", "TP"), "wino_weight": ("FLIP",),
              "wino_output": ("TW", "TP", "HAS_BIAS", "RELU", "MASK"), "wino_grad_output": ("TW", "TP"),
              "wino_grad_weight": ()}
_KERNELS = {}
_KEYS = {}  # kernel -> its _KERNELS key


def _kernel(entry, src="f32", dst="f32", tile=2, rows=False):
    """Entry point `entry` of winograd.wgsl for F(tile x tile, 3x3), reading src and writing dst elements
    ("f32" or "f16"; the bias is dst's type); rows: F(4x4)'s row variant of the transforms (see rows)."""
    key = (entry, src, dst, tile, rows)
    k = _KERNELS.get(key)
    if k is None:
        shader = typed.typed_shader("winograd.wgsl", (("ST", src), ("DT", dst), ("BT", dst)),
                                    winograd_transforms.splices(tile, rows))
        k = _KERNELS[key] = Kernel(shader, entry, _OUTPUT_LAYOUT if entry == "wino_output" else _LAYOUT,
                                   _OVERRIDES[entry])
        _KEYS[k] = key
    return k


def masked_output(rt, launch, out_offset, y_offset):
    """The Launch of a recorded float32 wino_output `launch` (no bias, no ReLU) writing at out_offset instead,
    each value where y (the buffer bound at binding 3, y_offset at the launch's first value) is > 0, else 0:
    ReLU's backward folded into an input gradient (fusion.py). None where `launch` is no such wino_output, or
    where the row variant's vec4 stores would leave their alignment."""
    key = _KEYS.get(launch.kernel)
    if key is None or key[:3] != ("wino_output", "f32", "f32") or launch.params is None:
        return None
    c = dict(launch.constants)
    if c["HAS_BIAS"] or c["RELU"] or c["MASK"] or key[4] and (out_offset % 4 or y_offset % 4):
        return None
    fields = list(_PARAMS.unpack(launch.params))
    fields[10], fields[11] = out_offset, y_offset  # out_off, bias_off
    return rt.launch(launch.kernel, launch.kernel.constants(dict(c, MASK=True)), _PARAMS.pack(*fields),
                     launch.groups, launch.slots)


def input_region(launch):
    """(first element, elements) a wino_input Launch reads: its chunk's images."""
    C, H, W, T, py, px, x_off = _PARAMS.unpack(launch.params)[:7]
    return x_off, T // dict(launch.constants)["TP"] * C * H * W


def output_region(launch):
    """(first element, elements) a wino_output Launch writes: its chunk's images of the output."""
    C, H, W, T, py, px, x_off, O, OH, OW, out_off = _PARAMS.unpack(launch.params)[:11]
    TP = dict(launch.constants)["TP"]
    return out_off, T // TP * O * OH * OW


_PARAMS = struct.Struct("<4I2i14I")
THREADS = 256
TILES = (2, 4)


def points(tile):
    """Points of a transformed patch, (tile + 2)^2: the batch of the products."""
    return (tile + 2) ** 2


# Both channel counts at least this, the weight gradient's too. With F(4x4) on ResNet-18's first stage (64
# channels, 32x32 maps, batch 128) its weight gradients here rather than on conv_gemm took a replayed step's
# GPU span from 13,602 to 13,162 us (bench replay, H200); with F(2x2) only from
# 128 channels paid (14,720 us against 14,829 and 14,853 from 64).
MIN_CHANNELS = 64
# Bytes of V (and of M) per chunk of images: the "winograd-in" and "winograd-out" scratches' size. H200, ResNet-18
# at batch 128 with F(4x4) where the plane is 8x8 or more: a replayed step's GPU span 13,160 us at
# 16 MiB, 12,832 at 20, 12,609 at 24 (bench replay); bench scale (all three models, as in the
# README) 9,482 samples/s and a peak of 932.8 MiB at 20 (1.29x PyTorch's 722.6), 9,622 and 940.8 (1.30x) at 24.
WORKSPACE = int(os.environ.get("WEBGRAD_WINOGRAD_MIB") or 20) << 20
# WEBGRAD_WINOGRAD=0 turns these kernels off (conv.py then takes conv_gemm.py, as before them).
FORCED = {"off": os.environ.get("WEBGRAD_WINOGRAD") == "0"}
# The tile of a convolution whose output plane is at least F4_MIN_PLANE on both sides: F(4x4, 3x3) (fewer
# products and smaller V and M; its transforms round); smaller planes take F(2x2, 3x3). WEBGRAD_WINOGRAD_TILE=2
# or 4 forces one tile for every plane (TILE["size"]). H200, ResNet-18 at batch 128, a replayed step's GPU span
# (bench replay): F(2x2) everywhere 14,724 us (the hand-written F(2x2)
# kernels before it 14,760), F(4x4) everywhere 13,615. On the 4x4 planes of the last stage F(4x4)'s products
# ([512, 512] @ [512, 128 tiles], 36 of them) ran no faster than F(2x2)'s (16 of [512, 512] @ [512, 512]: 897
# against 887 us) and its U is 2.25 times F(2x2)'s (37.7 MB for 512 channels), hence F4_MIN_PLANE was 8 at
# first. Then the products' tiles below (BIG_PRODUCT_MIN_FILL) made them faster, and a recorded step's
# memory plan (memory_plan.py) took the larger scratches without raising its peak. H200, ResNet-18 at batch 128:
# with 128x128w16 tiles, bench scale 12,647 samples/s against 12,484 at 8, peak 845.4 MiB either way (964.9
# and 940.9 before the plan); with BIG_PRODUCT_MIN_FILL, a replayed step's GPU span 9,662 us
# against 10,006 (bench replay) and bench scale 12,900 samples/s against 12,495.
F4_MIN_PLANE = int(os.environ.get("WEBGRAD_WINOGRAD_F4_PLANE") or 4)
TILE = {"size": int(os.environ.get("WEBGRAD_WINOGRAD_TILE") or 0) or None}


def tile_for(OH, OW):
    """The tile size of a convolution with an OH x OW output plane."""
    return TILE["size"] or (4 if min(OH, OW) >= F4_MIN_PLANE else 2)


def suits(in_channels, out_channels, window, geom):
    """Whether a convolution (and its gradients) with this window and geometry ((sh, sw), (ph, pw), (dh, dw))
    runs here: 3x3, stride 1, no dilation, padding at most 2 (its input gradient pads by 2 - p), both channel
    counts at least MIN_CHANNELS."""
    (sh, sw), (ph, pw), (dh, dw) = geom
    return (not FORCED["off"] and tuple(window) == (3, 3) and (sh, sw, dh, dw) == (1, 1, 1, 1)
            and max(ph, pw) <= 2
            and min(in_channels, out_channels) >= MIN_CHANNELS)


def rows(tile, width, offset, px=1):
    """Whether F(tile x tile)'s transform of an image (or of dY, or into the output) with rows `width` wide at
    element `offset` takes the row variant: a row's 4 pixels in one load or store. F(4x4) where the rows and
    the offset are multiples of 4 and the padding on the left is 1 (the input patch's middle columns aligned).
    ResNet-18 at batch 128 (H200, bench replay --each), us per kernel, as
    written before -> rows: wino_output on 32x32 maps 657 -> 366, on 16x16 282 -> 156; wino_input 776 -> 744 and
    314 -> 293; wino_grad_output 208 -> 202. A replayed step's GPU span 12,159 -> 11,493 us."""
    return tile == 4 and width % 4 == 0 and offset % 4 == 0 and px == 1


def _step(entry, types, tile, constants, count, C=0, H=0, W=0, T=0, py=0, px=0, x_off=0, O=0, OH=0, OW=0, out_off=0,
          bias_off=0, R=0, S=0, w_off=0, chunks=0, by_rows=False, per_group=THREADS):
    """One dispatch of winograd.wgsl's `entry` (element types `types`: src, dst; F(tile x tile, 3x3); by_rows:
    the row variant) over `count` threads, or `count` items of which each workgroup takes per_group."""
    values = (C, H, W, T, x_off, O, OH, OW, out_off, bias_off, R, S, w_off, count, chunks)
    if not all(0 <= v < 2**32 for v in values) or count * points(tile) * max(chunks, 1) >= 2**32:
        raise ValueError("conv2d: offsets and sizes must fit in u32")
    params = _PARAMS.pack(C, H, W, T, py, px, x_off, O, OH, OW, out_off, bias_off, R, S, w_off, count, chunks,
                          0, 0, 0)
    return PlannedDispatch(_kernel(entry, *types, tile, by_rows), constants, params, grid(-(-count // per_group)))


class WinogradPlan(NamedTuple):
    """A convolution's dispatches: the weight transform, then per chunk of images the input transform, the
    batched product (a matmul_plan plan) and the output transform (the weight gradient: per chunk the two
    input transforms and the product, then the weight dispatch); the floats it needs of the "winograd-u",
    "winograd-in" and "winograd-out" scratches. split_k: a weight gradient whose dU slabs sit in the split-K
    scratch (Runtime.split_k_scratch) instead of "winograd-u" (see plan_wgrad)."""

    weight: PlannedDispatch
    chunks: tuple
    u_size: int
    in_size: int
    out_size: int
    split_k: bool = False

    def __repr__(self):
        return f"WinogradPlan({len(self.chunks)} chunks, U {self.u_size}, in {self.in_size}, out {self.out_size})"


def images_per_chunk(N, C, O, tiles_per_image, xi, product=None):
    """Images per chunk: at most as many as keep V and M ([xi, C or O, tiles]) each within WORKSPACE. With
    `product` (tiles -> the chunk's MatmulPlan; GPU adapters), the count whose chunks' products take the fewest
    waves (product_waves), then the fewest chunks, then the most images (counts whose chunks all have 8x8
    register tiles); else the most images. (Chunks as even
    as they go, regardless of waves, ran slower: ResNet-18's 256-channel products at 2 x 64 images took 921 us
    against 691 + 188 for 113 + 15; bench replay --each.)"""
    most = max(1, min(N, WORKSPACE // (xi * max(C, O) * tiles_per_image * 4)))
    if product is None or product_waves(product(most * tiles_per_image)) is None:
        return most

    def cost(nc):  # None where a chunk's product has smaller register tiles (no wave count for them)
        sizes = [nc] * (N // nc) + ([N % nc] if N % nc else [])
        waves = [product_waves(product(n * tiles_per_image)) for n in sizes]
        return None if None in waves else (sum(waves), len(sizes), -nc)

    return min((c, nc) for nc in range(1, most + 1) if (c := cost(nc)) is not None)[1]


# A product's workgroups run in waves of as many as the GPU holds at once, and a chunk one workgroup past a wave
# takes about two waves' time. RESIDENT_THREADS: threads of 8x8-register-tile workgroups an H100 or H200 holds
# at once (132 SMs, 512 such threads each: registers bound them), 528 workgroups of 64x128 tiles, 264 of
# 128x128w16. WebGPU tells no SM count; on other GPUs the chunks stay within WORKSPACE, only less well sized.
# H200, bench kernels, us per product and per image of it: ResNet-18's first stage
# (F(4x4), 64 channels, 32x32 maps: 64 tiles an image, 64x128 tiles) 23.8 us for 28 images (504 workgroups,
# 0.85 us an image), 30.9 for 29 (540 workgroups, 1.07), 35.4 for 35 (1.01); its second (128 channels, 16x16,
# 128x128w16 tiles) 37.7 us for 56 images (252 workgroups, 0.67 us an image), 55.1 for 57 (288, 0.97), 58.0
# for 71 (0.82). A replayed step's GPU span (bench replay): 11,620 us with chunks
# of the most images, 11,493 and 11,529 in waves (ResNet-18's first stage in chunks of 28 images, not 35, its
# second of 56, not 71).
RESIDENT_THREADS = 132 * 512


def product_fill(p):
    """Waves of resident workgroups, a fraction, that MatmulPlan p's first dispatch fills; None where its tiles
    are not 8x8 per thread (RESIDENT_THREADS counts those)."""
    c = matmul_plan.CONFIGS[p.config]
    if c["TM"] * c["TN"] < 64:
        return None
    threads = c["WG_X"] * c["WG_Y"] * c["KS"]
    x, y, z = p.workgroups
    return x * y * z / (RESIDENT_THREADS // threads)


def product_waves(p):
    """Waves of resident workgroups that MatmulPlan p's first dispatch takes (product_fill rounded up), or None."""
    fill = product_fill(p)
    return None if fill is None else math.ceil(fill)


@functools.lru_cache(maxsize=512)
def plan(N, C, H, W, O, OH, OW, pad, x_off, w_off, out_off, has_bias=False, bias_off=0, relu=False, flip=False,
         matmul_profile="gpu", dtype="f32", tile=2):
    """out [N, O, OH, OW] = the 3x3 stride-1 convolution of x [N, C, H, W] padded by pad = (py, px), with
    weight [O, C, 3, 3] (flip: weight [C, O, 3, 3], reversed and transposed: an input gradient) + bias
    (then ReLU). U, V and M sit at offset 0 of "winograd-u", "winograd-in" and "winograd-out". dtype: the
    image's, the weight's, the bias's and out's element type, "f32" or "f16" (U, V and M are f32 either way).
    tile: F(2x2, 3x3) or F(4x4, 3x3)."""
    py, px = pad
    TH, TW = -(-OH // tile), -(-OW // tile)
    TP = TH * TW
    xi = points(tile)
    waves = matmul_profile == "gpu"  # software adapters have no waves to fill
    nc = images_per_chunk(N, C, O, TP, xi, (lambda T: _product(O, C, T, xi, matmul_profile)) if waves else None)
    weight = _step("wino_weight", (dtype, "f32"), tile, dict(FLIP=flip), O * C, R=O, S=C, w_off=w_off)
    chunks = []
    for n0 in range(0, N, nc):
        T = min(nc, N - n0) * TP
        inp = _step("wino_input", (dtype, "f32"), tile, dict(TW=TW, TP=TP), C * T, C=C, H=H, W=W, T=T, py=py,
                    px=px, x_off=x_off + n0 * C * H * W, by_rows=rows(tile, W, x_off, px))
        out = _step("wino_output", ("f32", dtype), tile, dict(TW=TW, TP=TP, HAS_BIAS=has_bias, RELU=relu, MASK=False),
                    O * T, T=T, O=O, OH=OH, OW=OW, out_off=out_off + n0 * O * OH * OW, bias_off=bias_off,
                    by_rows=rows(tile, OW, out_off))
        chunks.append((inp, _product(O, C, T, xi, matmul_profile), out))
    T = min(nc, N) * TP
    return WinogradPlan(weight, tuple(chunks), xi * O * C, xi * C * T, xi * O * T)


# The products M[xi] = U[xi] [O, C] @ V[xi] [C, T] of at least BIG_PRODUCT on every side take 128x128w16 tiles.
# H200, bench kernels, us against matmul_plan's choice: 16x128x4096 @ K = 128
# 76.2 (85.0 as 64x128), 16x256x2048 @ 256 142.8 (160.6 as 64x128), 16x512x512 @ 512 143.8 (157.0 as 128x128);
# 16x64x8192 @ 64 keeps 64x128 (47.9; 75.6 as 128x128w16).
# Where those tiles take more than one wave (product_waves), 64x128w16 tiles ran faster: H200, bench kernels
# (bench kernels), us per product as 128x128w16 / 64x128w16: 36x256x512 @ K = 256 (the third stage,
# 288 workgroups of 128x128) 110.3 / 97.3; in one wave 36x128x896 @ 128 37.6 / 48.9, 16x512x512 @ 512 143.2 / 167.8.
# And where they fill less than BIG_PRODUCT_MIN_FILL of one wave: the last stage's F(4x4) products on 4x4 planes,
# 36x512x128 @ K = 512 (144 workgroups of 128x128, 0.55 of a wave), ran at 16.7 TFLOP/s as 128x128w16 and 21.4
# as 64x128w16 (bench kernels --shapes 36,512,128,512).
BIG_PRODUCT = 128
BIG_PRODUCT_CONFIG = "128x128w16"
BIG_PRODUCT_PAST_A_WAVE = "64x128w16"
BIG_PRODUCT_MIN_FILL = 0.75


def _product(O, C, T, xi, matmul_profile):
    def product(config=None):
        return matmul_plan.plan(xi, O, T, C, False, False, False, False, 0, 0, 0, 0, O * C, C * T, config=config,
                                profile=matmul_profile)

    if matmul_profile != "gpu" or min(O, C, T) < BIG_PRODUCT:
        return product()
    p = product(BIG_PRODUCT_CONFIG)
    fill = product_fill(p)
    return product(BIG_PRODUCT_PAST_A_WAVE) if fill > 1 or fill < BIG_PRODUCT_MIN_FILL else p


# The weight gradient's products dU[xi] = D[xi] [O, T] @ V[xi]ᵀ have a small output and a long K: tiles by the
# narrower channel count, their K split to about WGRAD_WORKGROUPS[config] workgroups. H200, bench kernels
# (bench kernels), us per product against matmul_plan's own choice: 16x64x64 @ K = 8192 67.5 as
# 64x32k2 split 16 ways (104.9 as 32x32k4 split 9); 16x256x256 @ 2048 157.0 as 128x128w16 split 4 (280.8 as
# 64x128 unsplit); 16x128x128 @ 4096 88.1 as 64x128 split 8 (the same).
# With F(4x4) (36 points) the 64x128 tiles take 128 and 256 channels, split into pieces of WGRAD_SPLIT_K tiles of
# K: bench kernels, us per product, 36x128x128 @ K = 1136 69.5 split 3 ways (the
# former rule), 59.4 split 7; 36x256x256 @ 512 148.7 as 128x128w16 unsplit (the former rule), 113.2 as 64x128
# split 3 (and 5); 16x512x512 @ 512 keeps 128x128w16 unsplit (150.1; 184.1 as 64x128); 36x64x64 @ 2240 43.8 as
# 64x32k2 split 7 (40.8 as 64x64 split 10: not taken).
WGRAD_CONFIGS = ((128, "64x32k2"), (512, "64x128"), (None, "128x128w16"))  # (narrower side below, config)
WGRAD_WORKGROUPS = {"64x32k2": 512, "128x128w16": 256}
WGRAD_SPLIT_K = {"64x128": 160}
# {"on": False}: split weight-gradient products reduce each chunk's partials into "winograd-u" (the path before the slabs)
SPLIT_SLABS = {"on": os.environ.get("WEBGRAD_WINOGRAD_SLABS") != "0"}


def _wgrad_product(O, C, T, xi, out_off, matmul_profile):
    cfg = splits = None
    if matmul_profile == "gpu":
        cfg = next(c for below, c in WGRAD_CONFIGS if below is None or min(O, C) < below)
        bm, bn = matmul_plan.config_shape(cfg)
        if cfg in WGRAD_SPLIT_K:
            splits = max(1, T // WGRAD_SPLIT_K[cfg])
        else:
            splits = max(1, WGRAD_WORKGROUPS[cfg] // (xi * -(-O // bm) * -(-C // bn)))
    return matmul_plan.plan(xi, O, C, T, False, True, False, False, 0, 0, out_off, 0, O * T, C * T, config=cfg,
                            splits=splits, profile=matmul_profile)


def _partials(p, offset):
    """Split-K MatmulPlan p's first dispatch alone, its partial tiles [splits][xi][O][C] written at `offset` of
    whatever it is run on, with no reduction after it."""
    fields = list(matmul_plan._PARAMS.unpack(p.params))
    fields[6] = offset  # the output's offset (0 in the split-K scratch as plan() makes it)
    return matmul_plan.MatmulPlan(p.shader, p.entry_point, p.constants, matmul_plan._PARAMS.pack(*fields),
                                  p.workgroups, p.config, p.splits)


@functools.lru_cache(maxsize=512)
def plan_wgrad(N, C, H, W, O, OH, OW, pad, x_off, grad_off, out_off, matmul_profile="gpu", dtype="f32", tile=2):
    """dW [O, C, 3, 3] = the weight gradient of the 3x3 stride-1 convolution of x [N, C, H, W] padded by pad,
    with output gradient dY [N, O, OH, OW] at grad_off: per chunk of images V (at 0 of "winograd-in"), D
    (at 0 of "winograd-out") and the chunk's dU (at chunk * xi*O*C of "winograd-u"); then their sum through
    G^T . G. A WinogradPlan whose weight dispatch is that last one, run after the chunks. dtype: x's, dY's and
    dW's element type; tile as plan's.
    Where a chunk's product splits its K across workgroups, no reduction runs: every chunk's product writes
    its slabs ([splits][xi][O][C], unsplit: one) one after another into the split-K scratch, and the weight
    dispatch sums them all. H200, ResNet-18 at batch 128 (bench replay): 25
    dispatches fewer (611 -> 586), a replayed step's GPU span 10,601 -> 10,576 and 10,581 us; bench scale's peak
    the same (948.8 MiB): the slabs fit in the split-K scratch the conv_gemm products had grown already."""
    py, px = pad
    TH, TW = -(-OH // tile), -(-OW // tile)
    TP = TH * TW
    xi = points(tile)
    nc = images_per_chunk(N, C, O, TP, xi)
    T = min(nc, N) * TP
    tiles = [min(nc, N - n0) * TP for n0 in range(0, N, nc)]
    products = [_wgrad_product(O, C, t, xi, k * xi * O * C, matmul_profile) for k, t in enumerate(tiles)]
    split_k = SPLIT_SLABS["on"] and any(product.reduce is not None for product in products)
    slabs = len(products)
    if split_k:  # each chunk's slabs after the last chunk's, in the split-K scratch
        slabs, slab, placed = 0, xi * O * C, []
        for t, product in zip(tiles, products):
            placed.append(_partials(product, slabs * slab) if product.reduce is not None else
                          _wgrad_product(O, C, t, xi, slabs * slab, matmul_profile))
            slabs += placed[-1].splits
        products = placed
    chunks = []
    for n0, t, product in zip(range(0, N, nc), tiles, products):
        inp = _step("wino_input", (dtype, "f32"), tile, dict(TW=TW, TP=TP), C * t, C=C, H=H, W=W, T=t, py=py,
                    px=px, x_off=x_off + n0 * C * H * W, by_rows=rows(tile, W, x_off, px))
        dy = _step("wino_grad_output", (dtype, "f32"), tile, dict(TW=TW, TP=TP), O * t, C=O, H=OH, W=OW, T=t,
                   x_off=grad_off + n0 * O * OH * OW, by_rows=rows(tile, OW, grad_off))
        chunks.append((inp, dy, product))
    weight = _step("wino_grad_weight", ("f32", dtype), tile, {}, O * C, R=O, S=C, w_off=out_off, chunks=slabs,
                   per_group=THREADS // (tile + 2))
    return WinogradPlan(weight, tuple(chunks), slabs * xi * O * C, xi * C * T, xi * O * T, split_k)


def run(rt, p, x, weight, out, bias=None):
    """Record plan p on storages x (the image), weight, out and bias (None: none)."""
    u, v, m = _scratches(rt, p)
    rt.record(p.weight, (weight, weight, u))  # binding 1 (the bias) is unused but for the output transform
    for inp, product, outp in p.chunks:
        rt.record(inp, (x, x, v))
        run_plan(rt, product, u, v, m)
        rt.record(outp, (m, m if bias is None else bias, out, m))


def _scratches(rt, p):
    return (rt.kept_scratch("winograd-u", p.u_size), rt.kept_scratch("winograd-in", p.in_size),
            rt.kept_scratch("winograd-out", p.out_size))


# ------------------------------------------------------------------ the three convolution products
def _type(dtype):
    """The shader element type of float32 or float16 operands (f16.py's autocast convolutions: all alike)."""
    if dtype is float32:
        return "f32"
    if dtype is float16:
        return "f16"
    raise TypeError(f"winograd: float32 or float16 operands, got {dtype.name}")


def forward(rt, out, x, weight, bias, geom, relu=False):
    """out [N, O, OH, OW] = conv2d(x, weight) + bias (then ReLU); suits() holds."""
    N, C, H, W = x.shape
    O = weight.shape[0]
    OH, OW = out.shape[2:]
    p = plan(N, C, H, W, O, OH, OW, geom[1], x.offset, weight.offset, out.offset, bias is not None,
             bias.offset if bias is not None else 0, relu, matmul_profile=profile(rt), dtype=_type(out.dtype),
             tile=tile_for(OH, OW))
    run(rt, p, x.storage, weight.storage, out.storage, bias.storage if bias is not None else None)


def backward_input(rt, out, grad, weight, geom):
    """out [N, C, H, W] = the input gradient of a stride-1 3x3 convolution: dY convolved with the filter
    reversed and transposed, padding 2 - p."""
    N, C, H, W = out.shape
    O = weight.shape[0]
    OH, OW = grad.shape[2:]
    (ph, pw) = geom[1]
    p = plan(N, O, OH, OW, C, H, W, (2 - ph, 2 - pw), grad.offset, weight.offset, out.offset, flip=True,
             matmul_profile=profile(rt), dtype=_type(out.dtype), tile=tile_for(H, W))
    run(rt, p, grad.storage, weight.storage, out.storage)


def backward_weight(rt, out, grad, x, geom):
    """out [O, C, 3, 3] = the weight gradient of a stride-1 3x3 convolution (see plan_wgrad)."""
    N, C, H, W = x.shape
    O = out.shape[0]
    OH, OW = grad.shape[2:]
    p = plan_wgrad(N, C, H, W, O, OH, OW, geom[1], x.offset, grad.offset, out.offset, matmul_profile=profile(rt),
                   dtype=_type(out.dtype), tile=tile_for(OH, OW))
    if p.split_k:
        du = rt.split_k_scratch(p.u_size)
        v, d = rt.kept_scratch("winograd-in", p.in_size), rt.kept_scratch("winograd-out", p.out_size)
    else:
        du, v, d = _scratches(rt, p)
    for inp, dy, product in p.chunks:
        rt.record(inp, (x.storage, x.storage, v))
        rt.record(dy, (grad.storage, grad.storage, d))
        run_plan(rt, product, d, v, du)
    rt.record(p.weight, (du, du, out.storage))
