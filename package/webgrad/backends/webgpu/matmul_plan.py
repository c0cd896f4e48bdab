"""How to dispatch shaders/matmul.wgsl for one batched matrix product: entry point, tile
configuration (WGSL override constants), uniform parameters and workgroup count.

Pure Python, no GPU calls: the native and browser runtimes share it.

    p = plan(batch, M, N, K, trans_a, trans_b, has_bias, relu,
             a_offset, b_offset, out_offset, bias_offset, a_batch_stride, b_batch_stride)
    pipeline: module from p.shader, entry point p.entry_point, override constants p.constants
    bindings (group 0): 0 a, 1 b, 2 out, 3 bias (a's buffer when there is none), 4 uniform p.params
    dispatch: p.workgroups

Semantics: out[z] = op(a[z]) @ op(b[z]) (+ bias[N]) (then relu), out contiguous [batch, M, N];
a stored [M, K] row-major, or [K, M] when trans_a; b stored [K, N], or [N, K] when trans_b.
Offsets and batch strides are in float32 elements; a batch stride of 0 reuses one matrix.
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
}

MAX_WORKGROUPS_PER_DIM = 65535

# WEBGRAD_MATMUL_CONFIG=<name> forces one configuration (for benchmarking and tests).
_FORCED = os.environ.get("WEBGRAD_MATMUL_CONFIG") or None

# "gpu": many cores, favour enough workgroups to fill them. "cpu": a software adapter (lavapipe,
# SwiftShader) with a few cores, where big tiles (more work per invocation) win: the runtime should
# call set_profile("cpu") when the adapter is one (the benchmark does).
_PROFILE = "gpu"


def set_profile(profile):
    global _PROFILE
    if profile not in ("gpu", "cpu"):
        raise ValueError(f"unknown matmul profile {profile!r}")
    _PROFILE = profile


def config_shape(cfg):
    c = CONFIGS[cfg]
    return c["WG_Y"] * c["TM"], c["WG_X"] * c["TN"]


def check_config(c, max_workgroup_bytes=16384):
    """Raise ValueError unless the configuration satisfies the shader's limits."""
    c.setdefault("KS", 1)
    nt = c["WG_X"] * c["WG_Y"]
    bm, bn = c["WG_Y"] * c["TM"], c["WG_X"] * c["TN"]
    if c["TM"] not in (4, 8) or c["TN"] not in (4, 8) or c["BK"] % 4 or nt * c["KS"] > 256:
        raise ValueError(f"bad matmul config {c}")
    for rows in (bm, bn):
        vec4s = c["BK"] * rows // 4
        if vec4s % nt or not 1 <= vec4s // nt <= 4:
            raise ValueError(f"bad matmul config {c}: tile loads do not split evenly over threads")
    if c["KS"] > 1 and c["KS"] * 2 * c["BK"] * bm < bm * bn:
        raise ValueError(f"bad matmul config {c}: As cannot hold a slice's partial sums")
    if c["KS"] * 2 * c["BK"] * (bm + bn) * 4 > max_workgroup_bytes:
        raise ValueError(f"bad matmul config {c}: over {max_workgroup_bytes} bytes of workgroup memory")


for _c in CONFIGS.values():
    check_config(_c)


def add_config(spec, max_workgroup_bytes=32768):
    """Register an experimental configuration "WG_X,WG_Y,TM,TN,BK[,KS]" (benchmark sweeps); returns its name."""
    v = [int(x) for x in spec.split(",")]
    c = dict(WG_X=v[0], WG_Y=v[1], TM=v[2], TN=v[3], BK=v[4], KS=v[5] if len(v) > 5 else 1)
    check_config(c, max_workgroup_bytes)
    name = f"{c['WG_Y'] * c['TM']}x{c['WG_X'] * c['TN']}:{spec}"
    CONFIGS[name] = c
    return name


class MatmulPlan:
    __slots__ = ("shader", "entry_point", "constants", "params", "workgroups", "config")

    def __init__(self, shader, entry_point, constants, params, workgroups, config):
        self.shader = shader
        self.entry_point = entry_point
        self.constants = constants
        self.params = params
        self.workgroups = workgroups
        self.config = config

    def __repr__(self):
        return (f"MatmulPlan({self.entry_point}, {self.config}, workgroups={self.workgroups}, "
                f"constants={self.constants})")


def _tiles(cfg, batch, M, N):
    bm, bn = config_shape(cfg)
    return -(-M // bm) * -(-N // bn) * batch


def _waste(cfg, M, N):
    """Computed area over useful area: how much of the edge tiles is padding."""
    bm, bn = config_shape(cfg)
    return (-(-M // bm) * bm) * (-(-N // bn) * bn) / (M * N)


def choose_config(batch, M, N, K, profile="gpu"):
    """A tile configuration for these sizes. GPU: the largest tile that still gives ~2 workgroups per
    SM of a big GPU (132 SMs on an H100) without padding much; thin tiles for thin outputs; when even
    32x32 tiles are too few and K is long, split K inside the workgroup. Thresholds from H100 sweeps
    (bench/kernels.py): e.g. 128x128 @ 128x784 (an MNIST layer) 34.7 us as 32x32, 11.4 us as 16x16k8."""
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
    for cfg, min_tiles in (("64x128" if N >= M else "128x64", 256), ("64x64", 200),
                           ("64x32" if M >= N else "32x64", 128)):
        if fits(cfg, min_tiles):
            return cfg
    if K < 64:
        return "32x32"
    if _tiles("32x32", batch, M, N) >= 128:
        return "32x32k4"
    return "16x16k8"


def plan(batch, M, N, K, trans_a, trans_b, has_bias, relu,
         a_offset, b_offset, out_offset, bias_offset, a_batch_stride, b_batch_stride, config=None):
    """The dispatch for one batched matmul (see the module docstring). `config` forces a tile
    configuration by name (a key of CONFIGS); by default it is chosen from the sizes. Cached: the
    same arguments return the same (read-only) plan object."""
    return _plan(batch, M, N, K, bool(trans_a), bool(trans_b), bool(has_bias), bool(relu), a_offset, b_offset,
                 out_offset, bias_offset, a_batch_stride, b_batch_stride, config, _PROFILE)


@functools.lru_cache(maxsize=4096)
def _plan(batch, M, N, K, trans_a, trans_b, has_bias, relu,
          a_offset, b_offset, out_offset, bias_offset, a_batch_stride, b_batch_stride, config, profile):
    if min(batch, M, N) < 1 or K < 0:
        raise ValueError(f"matmul: bad sizes batch={batch} M={M} N={N} K={K}")
    cfg = config or choose_config(batch, M, N, K, profile)
    c = CONFIGS[cfg]
    bm, bn = config_shape(cfg)
    bk = c["BK"]

    lda = M if trans_a else K  # length of a's contiguous (last stored) dimension
    ldb = K if trans_b else N
    # vec4 loads need every vec4 to start on a multiple of 4 and to lie wholly inside one row.
    # (lda > 0 also guarantees the buffer holds >= 16 bytes, the minimum for binding array<vec4>.)
    vec_a = lda % 4 == 0 and lda > 0 and a_offset % 4 == 0 and a_batch_stride % 4 == 0
    vec_b = ldb % 4 == 0 and ldb > 0 and b_offset % 4 == 0 and b_batch_stride % 4 == 0
    entry = "matmul_" + ("v" if vec_a else "s") + ("v" if vec_b else "s")

    workgroups = (-(-N // bn), -(-M // bm), batch)
    if max(workgroups) > MAX_WORKGROUPS_PER_DIM and not config and cfg != "128x128":
        return _plan(batch, M, N, K, trans_a, trans_b, has_bias, relu, a_offset, b_offset, out_offset,
                     bias_offset, a_batch_stride, b_batch_stride, "128x128", profile)
    if max(workgroups) > MAX_WORKGROUPS_PER_DIM:
        raise ValueError(f"matmul too large for one dispatch: workgroups {workgroups}")
    for v in (a_offset, b_offset, out_offset, bias_offset, a_batch_stride, b_batch_stride):
        if not 0 <= v < 2**32:
            raise ValueError("matmul: offsets and strides must fit in u32")

    constants = dict(c)
    constants.update(TRANS_A=int(trans_a), TRANS_B=int(trans_b), HAS_BIAS=int(has_bias), RELU=int(relu))
    params = struct.pack(
        "<12I", M, N, K, -(-K // bk),
        a_offset, b_offset, out_offset, bias_offset,
        a_batch_stride, b_batch_stride, lda, ldb,
    )
    return MatmulPlan(SHADER, entry, constants, params, workgroups, cfg)


def flops(batch, M, N, K):
    return 2.0 * batch * M * N * K
