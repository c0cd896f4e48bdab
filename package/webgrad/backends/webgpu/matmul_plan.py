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

# Tile configurations: workgroup WG_X x WG_Y threads, each computing TM x TN outputs, so a tile of
# (WG_Y*TM) x (WG_X*TN); BK is the K step staged in workgroup memory (double-buffered).
CONFIGS = {
    "128x128": dict(WG_X=16, WG_Y=16, TM=8, TN=8, BK=8),   # 256 threads, 16 KiB
    "128x64": dict(WG_X=8, WG_Y=16, TM=8, TN=8, BK=8),     # 128 threads, 12 KiB
    "64x128": dict(WG_X=16, WG_Y=8, TM=8, TN=8, BK=8),     # 128 threads, 12 KiB
    "64x64": dict(WG_X=16, WG_Y=16, TM=4, TN=4, BK=16),    # 256 threads, 16 KiB
    "64x64k8": dict(WG_X=8, WG_Y=8, TM=8, TN=8, BK=8),     # 64 threads, 8 KiB
    "32x32": dict(WG_X=8, WG_Y=8, TM=4, TN=4, BK=16),      # 64 threads, 8 KiB
}

MAX_WORKGROUPS_PER_DIM = 65535

# WEBGRAD_MATMUL_CONFIG=<name> forces one configuration (for benchmarking and tests).
_FORCED = os.environ.get("WEBGRAD_MATMUL_CONFIG") or None


def config_shape(cfg):
    c = CONFIGS[cfg]
    return c["WG_Y"] * c["TM"], c["WG_X"] * c["TN"]


def check_config(c, max_workgroup_bytes=16384):
    """Raise ValueError unless the configuration satisfies the shader's limits."""
    nt = c["WG_X"] * c["WG_Y"]
    bm, bn = c["WG_Y"] * c["TM"], c["WG_X"] * c["TN"]
    if c["TM"] not in (4, 8) or c["TN"] not in (4, 8) or c["BK"] % 4 or nt > 256:
        raise ValueError(f"bad matmul config {c}")
    for rows in (bm, bn):
        vec4s = c["BK"] * rows // 4
        if vec4s % nt or not 1 <= vec4s // nt <= 4:
            raise ValueError(f"bad matmul config {c}: tile loads do not split evenly over threads")
    if 2 * c["BK"] * (bm + bn) * 4 > max_workgroup_bytes:
        raise ValueError(f"bad matmul config {c}: over {max_workgroup_bytes} bytes of workgroup memory")


for _c in CONFIGS.values():
    check_config(_c)


def add_config(spec, max_workgroup_bytes=32768):
    """Register an experimental configuration "WG_X,WG_Y,TM,TN,BK" (benchmark sweeps); returns its name."""
    wx, wy, tm, tn, bk = (int(v) for v in spec.split(","))
    c = dict(WG_X=wx, WG_Y=wy, TM=tm, TN=tn, BK=bk)
    check_config(c, max_workgroup_bytes)
    name = f"{wy * tm}x{wx * tn}:{spec}"
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


def choose_config(batch, M, N, K):
    """Largest tile that still gives the GPU enough workgroups to fill it."""
    if _FORCED:
        return _FORCED
    if _tiles("128x128", batch, M, N) >= 256:
        return "128x128"
    if _tiles("128x64", batch, M, N) >= 256:
        return "128x64" if M >= N else "64x128"
    if _tiles("64x64", batch, M, N) >= 64:
        return "64x64"
    return "32x32"


@functools.lru_cache(maxsize=4096)
def plan(batch, M, N, K, trans_a, trans_b, has_bias, relu,
         a_offset, b_offset, out_offset, bias_offset, a_batch_stride, b_batch_stride, config=None):
    """The dispatch for one batched matmul (see the module docstring). `config` forces a tile
    configuration by name (a key of CONFIGS); by default it is chosen from the sizes."""
    trans_a, trans_b, has_bias, relu = bool(trans_a), bool(trans_b), bool(has_bias), bool(relu)
    if min(batch, M, N) < 1 or K < 0:
        raise ValueError(f"matmul: bad sizes batch={batch} M={M} N={N} K={K}")
    cfg = config or choose_config(batch, M, N, K)
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
