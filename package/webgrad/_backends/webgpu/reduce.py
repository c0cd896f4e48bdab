"""Reductions over the middle axis of [outer, size, inner] (shaders/reduce.wgsl)."""

import functools
import struct

from ...dtypes import float32, int32, int64, uint8
from ..kernels import REDUCE_OPS
from .. import kernels
from .elementwise import IDENTITY, UNARY_TO_U8, fill, launch
from .check import check_int64
from .dispatch import TICKET_COUNTERS, Kernel, Shader, dtype_code, grid, pow2_at_least
from .views import INDEX, check_view, contiguous_view

RED_CODES = {name: code for code, name in enumerate(REDUCE_OPS)}
# reduce_rows4's ticket counters, one per row (see reduce.wgsl): the runtime's ticket buffer's counter words.
ROWS4_TICKETS = TICKET_COUNTERS
SHADER = Shader("reduce.wgsl", dict({"RED_" + n.upper(): c for n, c in RED_CODES.items()},
                                    ROWS4_TICKETS=ROWS4_TICKETS))
REDUCE = Kernel(
    SHADER, "reduce",
    ((0, "write"), (1, "read"), (2, "read"), (3, "write"), (4, "uniform")),
    ("OP", "INT_MATH", "WIDE", "X_DTYPE", "OUT_DTYPE", "STAGE"),
)
# An int64 total outside the int32 range (reduce.wgsl's WIDE sums and products, checked by check.py).
TOTAL_RANGE_MESSAGE = ("{op}: the int64 result at element {{value}} (of {{size}}) is outside the int32 range "
                       "[-2147483648, 2147483647], the values WebGPU holds in an int64 tensor (WGSL has no 64-bit "
                       "integers); compute it on the CPU device")
# float32 rows read as vec4s (reduce.wgsl's reduce_rows4): rows of at least ROWS4_MIN floats; chunks of at
# least ROWS4_PER_THREAD vec4s per thread, as many as make ROWS4_GROUPS workgroups (one wave on an H200: 132
# SMs hold ~8 each). Swept on an H200 for a sum of 16.7M floats, GPU time alone (timestamps) / through the
# backend: 256 groups 3,219 / 1,852 GB/s, 512: 3,242 / 2,111, 1024: 3,090 / 2,091 (the raw WGSL reduction
# of bench kernels: 1,891).
ROWS4 = Kernel(SHADER, "reduce_rows4", REDUCE.bindings, ("OP", "STAGE"))
ROWS4_MIN = 4096
ROWS4_PER_THREAD = 16
ROWS4_GROUPS = 512
_PARAMS = struct.Struct("<9I")
# float32 columns read as vec4s (reduce.wgsl's reduce_cols4): inner a multiple of 4, at least COLS4_MIN_INNER
# (half a workgroup's columns) and at least COLS4_MIN_ROWS rows. Chunks of at least COLS4_CHUNK rows (8 per
# thread), as many as make about ROWS4_GROUPS workgroups.
COLS4 = Kernel(SHADER, "reduce_cols4", REDUCE.bindings, ("OP", "STAGE"))
COLS4_WIDTH = 16  # vec4 columns per workgroup (reduce.wgsl's COLS4)
COLS4_CHUNK = 128
COLS4_MIN_ROWS = 64
COLS4_MIN_INNER = 32

THREADS = 256
# Below this many workgroups, long rows are split into chunks (two passes). A memory-bound pass needs many
# loads in flight: with 128 workgroups of 256 threads (~1 per SM of an H200), sum over 16.7M floats ran at
# 451 GB/s against 1,890 for a raw WGSL reduction (bench kernels); 1024 fill every SM several times over.
MIN_GROUPS = 1024
PER_THREAD = 32  # elements each thread folds per chunk, at least


def split(outer, size, inner, software=False):
    """(lanes, chunks, chunk): outputs per workgroup, chunks per output row, elements per chunk.
    software: a CPU adapter, where every output gets one thread that folds its row in a plain loop (the
    tree's barriers cost a coroutine switch per 4 threads there: a CNN's bias gradient, 4096 rows of 196,
    took 950 ms as 256-thread trees on SwiftShader), and chunks only keep a few cores busy."""
    if software:
        min_groups, per_thread = 16, 1024
        lanes = THREADS
    else:
        min_groups, per_thread = MIN_GROUPS, PER_THREAD
        threads = min(pow2_at_least(size), THREADS)
        lanes = THREADS // threads
    threads = THREADS // lanes
    if inner > 1 and not software:
        # Neighbouring lanes read neighbouring inner positions: give coalescing at least 32 lanes.
        lanes = max(lanes, min(pow2_at_least(inner), 32))
        threads = THREADS // lanes
    groups = -(-outer * inner // lanes)
    chunks = 1
    if groups < min_groups and size > threads * per_thread:
        chunks = min(-(-size // (threads * per_thread)), -(-2 * min_groups // groups))
    chunk = -(-size // chunks)
    return lanes, -(-size // chunk), chunk


@kernels.reduce.implement("webgpu")
def reduce(rt, op, out, x):
    if op not in RED_CODES:
        raise ValueError(f"unknown reduction {op!r}; expected one of {REDUCE_OPS}")
    check_view(x, "x", contiguous=True, ndim=3)
    check_view(out, "out", contiguous=True, ndim=2)
    outer, size, inner = x.shape
    if out.shape != (outer, inner):
        raise ValueError(f"reduce: out has shape {out.shape}, expected {(outer, inner)} for x of shape {x.shape}")
    is_arg = op in ("argmax", "argmin")
    if is_arg and out.dtype not in INDEX:
        raise TypeError(f"{op} writes int64 or int32 indices, but out is {out.dtype}")
    if not is_arg and out.dtype is not x.dtype:
        raise TypeError(f"reduce {op!r} keeps x's dtype ({x.dtype}), but out is {out.dtype}")
    if outer * inner == 0:
        return
    if size == 0:
        if op in ("sum", "prod"):
            fill(rt, out, 0 if op == "sum" else 1)
            return
        raise ValueError(f"reduce {op!r} over an empty axis has no identity")
    if out.dtype is uint8:  # bytes are packed four to a word: reduce into int32, then pack
        tmp = contiguous_view(rt.storage(outer * inner, int32), out.shape, int32)
        _reduce(rt, op, tmp, x, x.dtype, int32)
        launch(rt, UNARY_TO_U8, IDENTITY, out, [tmp], int_math=True)
    else:
        _reduce(rt, op, out, x, x.dtype, out.dtype)


def rows4_split(outer, size):
    """(chunks, chunk) of reduce_rows4 for `outer` rows of `size` floats: chunk a multiple of 4."""
    size4 = size // 4
    per_group = THREADS * ROWS4_PER_THREAD
    chunks = max(1, min(-(-size4 // per_group), -(-ROWS4_GROUPS // outer)))
    if outer > ROWS4_TICKETS:  # more rows than ticket counters: one chunk (one workgroup) per row
        chunks = 1
    chunk4 = -(-size4 // chunks)
    return -(-size4 // chunk4), 4 * chunk4


def _reduce(rt, op, out, x, x_dtype, out_dtype):
    outer, size, inner = x.shape
    int_math = not x_dtype.is_floating
    wide = int_math and out_dtype is int64 and op in ("sum", "prod")
    hi = rt.storage(outer * inner, int32) if wide else None  # the second word of each total, checked after
    if (inner == 1 and x_dtype is float32 and out_dtype is float32 and op not in ("argmax", "argmin")
            and size >= ROWS4_MIN and size % 4 == 0 and x.offset % 4 == 0 and not rt.variant["reduce_one_thread"]):
        _reduce_vec4(rt, ROWS4, op, out, x)
        return
    if (inner % 4 == 0 and inner >= COLS4_MIN_INNER and x_dtype is float32 and out_dtype is float32
            and op not in ("argmax", "argmin") and size >= COLS4_MIN_ROWS and x.offset % 4 == 0 and not rt.variant["reduce_one_thread"]):
        _reduce_vec4(rt, COLS4, op, out, x)
        return
    lanes, chunks, chunk = split(outer, size, inner, rt.variant["reduce_one_thread"])
    values = {"OP": RED_CODES[op], "INT_MATH": int_math, "WIDE": wide, "OUT_DTYPE": dtype_code(out_dtype)}
    if chunks == 1:
        _dispatch(rt, values, 0, x.dtype, out.storage, x.storage, rt.dummy, hi if wide else rt.spare(0),
                  (outer, size, inner, lanes, chunk, 1, x.offset, out.offset))
        if wide:
            check_int64(rt, out, hi, TOTAL_RANGE_MESSAGE.format(op=op))
        return
    # Two passes: partial results per chunk ([outer, chunks, inner] values and indices), then those.
    partial_dtype = int32 if int_math else float32
    partials = rt.storage(outer * chunks * inner, partial_dtype)
    indices = rt.storage(outer * chunks * inner, int32)
    _dispatch(rt, values, 1, x.dtype, partials, x.storage, rt.dummy, indices,
              (outer, size, inner, lanes, chunk, chunks, x.offset, 0))
    lanes2, _, _ = split(outer, chunks, inner, rt.variant["reduce_one_thread"])
    _dispatch(rt, values, 2, partial_dtype, out.storage, partials, indices, hi if wide else rt.spare(0),
              (outer, chunks, inner, lanes2, chunks, 1, 0, out.offset))
    if wide:
        check_int64(rt, out, hi, TOTAL_RANGE_MESSAGE.format(op=op))


def _dispatch(rt, values, stage, x_dtype, out, x, idx_in, idx_out, shape):
    outer, size, inner, lanes, chunk, chunks, x_offset, out_offset = shape
    groups = -(-outer * inner // lanes) * chunks
    params = _PARAMS.pack(outer, size, inner, lanes, chunk, chunks, groups, x_offset, out_offset)
    constants = REDUCE.constants(dict(values, STAGE=stage, X_DTYPE=dtype_code(x_dtype)))
    rt.dispatch(REDUCE, constants, (out, x, idx_in, idx_out), params,
                grid(groups, rt.limits["max_compute_workgroups_per_dimension"]))


def _reduce_vec4(rt, kernel, op, out, x):
    """float32 rows (ROWS4, inner 1) or columns (COLS4, inner % 4 == 0) read as vec4s. Rows or column groups
    split into chunks are folded in the same dispatch (the last workgroup of a row or column group folds its
    partials, see reduce.wgsl) where the binding's shader compiler gives storageBarrier device scope, else by a
    second dispatch of the general kernel. The launches are cached per shape: a whole-tensor sum is a hot op (a
    loss, a benchmark), and its host cost adds to a ~40 us pass."""
    outer, size, inner = x.shape
    one_dispatch = getattr(rt.binding, "device_scope_storage_barrier", False)
    key = (kernel.entry, op, outer, size, inner, x.offset, out.offset, one_dispatch)
    hit = rt.memo.get(key)
    if hit is None:
        first, second, words = _vec4_plan(rt.limits["max_compute_workgroups_per_dimension"], kernel, op, outer, size,
                                          inner, x.offset, out.offset, one_dispatch)
        hit = rt.memo[key] = (rt.launch(kernel, *first), second and rt.launch(REDUCE, *second), words)
    first, second, words = hit
    if second:  # partials to a pool buffer, folded by the general kernel
        dest = rt.storage(words, float32)
        rt.run(first, (dest, x.storage, rt.dummy, rt.spare(0)))
        rt.run(second, (out.storage, dest, rt.dummy, rt.spare(0)))
    else:
        rt.run(first, (out.storage, x.storage, rt.dummy, rt.tickets(words) if words else rt.spare(0)))


def cols4_split(outer, size, inner):
    """(chunks, chunk) of reduce_cols4: chunk rows per workgroup, a multiple of COLS4_CHUNK unless one chunk."""
    column_groups = outer * -(-inner // (4 * COLS4_WIDTH))
    chunks = max(1, min(-(-size // COLS4_CHUNK), -(-ROWS4_GROUPS // column_groups)))
    if column_groups > ROWS4_TICKETS:  # more column groups than ticket counters: one chunk each
        chunks = 1
    chunk = -(-size // chunks)
    return -(-size // chunk), chunk


@functools.lru_cache(maxsize=256)
def _vec4_plan(max_per_dim, kernel, op, outer, size, inner, x_offset, out_offset, one_dispatch):
    """((constants, params, grid) of `kernel` (ROWS4 with inner 1, or COLS4), the same of the folding pass or
    None, and the words of scratch (one dispatch) or of partials (two) it needs: 0 when each row or column
    group is one chunk)."""
    if kernel is ROWS4:
        (chunks, chunk), column_groups = rows4_split(outer, size), 1
    else:
        (chunks, chunk), column_groups = cols4_split(outer, size, inner), -(-inner // (4 * COLS4_WIDTH))
    groups = outer * column_groups * chunks
    code = RED_CODES[op]
    if chunks == 1 or one_dispatch:
        stage = 0 if chunks == 1 else 3
        return ((kernel.constants({"OP": code, "STAGE": stage}),
                 _PARAMS.pack(outer, size, inner, 1, chunk, chunks, groups, x_offset, out_offset),
                 grid(groups, max_per_dim)), None, ROWS4_TICKETS + outer * chunks * inner if stage else 0)
    first = (kernel.constants({"OP": code, "STAGE": 1}),
             _PARAMS.pack(outer, size, inner, 1, chunk, chunks, groups, x_offset, 0), grid(groups, max_per_dim))
    lanes, _, _ = split(outer, chunks, inner)
    values = {"OP": code, "INT_MATH": False, "WIDE": False, "OUT_DTYPE": dtype_code(float32),
              "X_DTYPE": dtype_code(float32), "STAGE": 2}
    groups2 = -(-outer * inner // lanes)
    second = (REDUCE.constants(values),
              _PARAMS.pack(outer, chunks, inner, lanes, chunks, 1, groups2, 0, out_offset), grid(groups2, max_per_dim))
    return first, second, outer * chunks * inner
