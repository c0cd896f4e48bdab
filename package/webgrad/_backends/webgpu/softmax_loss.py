"""Row-wise softmax / log-softmax and fused softmax cross-entropy (shaders/softmax_loss.wgsl)."""

import struct

from ... import _bounds
from ..._view import View
from ...dtypes import float16, float32
from .. import kernels
from . import typed
from .elementwise import binary, copy, materialize
from .reduce import reduce
from .dispatch import Kernel, Shader, grid, pow2_at_least
from .views import INDEX, check_view, contiguous_view

SHADER = Shader("softmax_loss.wgsl", {})
_OVERRIDES = ("LOG",)


def _pair(entry, bindings, overrides=()):
    """(tree-reduction kernel, thread-per-row kernel) of one entry point (see _thread_per_row)."""
    return Kernel(SHADER, entry, bindings, overrides), Kernel(SHADER, entry + "_rows", bindings, overrides)


# Bindings: 0 out, 1 x (logits / grad), 2 y, 3 target, 4 per-row grad, 5 params, 6 the error word.
SOFTMAX = _pair("softmax", ((0, "write"), (1, "read"), (5, "uniform")), _OVERRIDES)
SOFTMAX_BACKWARD = _pair("softmax_backward", ((0, "write"), (1, "read"), (2, "read"), (5, "uniform")), _OVERRIDES)
# One workgroup, one dispatch (see cross_entropy_mean); binding 7: each row's log-sum-exp (LSE)
CROSS_ENTROPY_MEAN = Kernel(SHADER, "cross_entropy_mean", ((0, "write"), (1, "read"), (3, "read"), (5, "uniform"),
                                                           (6, "write"), (7, "write")), ("MEAN_THREADS", "LSE"))
# cross_entropy.wgsl: the per-row forward in one pass over a row (a tree per row / a thread per row), and the
# backward from the forward's log-sum-exp; one module per (logits, out) element type (float16 logits: autocast)
_ONLINE = ((0, "write"), (1, "read"), (2, "read"), (3, "write"), (5, "uniform"), (6, "write"))
_BACKWARD_LSE = ((0, "write"), (1, "read"), (2, "read"), (4, "read"), (5, "uniform"), (7, "read"))
_WGSL_TYPES = {float32: "f32", float16: "f16"}
_ONLINE_KERNELS = {}


def _online(entry, logits, out):
    """cross_entropy.wgsl's `entry` for logits and out of those dtypes."""
    key = (entry, logits, out)
    kernel = _ONLINE_KERNELS.get(key)
    if kernel is None:
        shader = typed.typed_shader("cross_entropy.wgsl", (("XT", _WGSL_TYPES[logits]), ("OT", _WGSL_TYPES[out])))
        bindings, overrides = (_BACKWARD_LSE, ()) if entry == "cross_entropy_backward_lse" else (_ONLINE, ("LSE",))
        kernel = _ONLINE_KERNELS[key] = Kernel(shader, entry, bindings, overrides)
    return kernel


_ONLINE_PARAMS = struct.Struct("<9IifII")  # rows, cols, x, out, target, target stride, lse, grad, grad stride |
                                           # ignore | smoothing | error code, out stride
CROSS_ENTROPY_BACKWARD = _pair(
    "cross_entropy_backward", ((0, "write"), (1, "read"), (3, "read"), (4, "read"), (5, "uniform")),
)

ROW_WORKGROUP = 64  # softmax_loss.wgsl's ROW_WORKGROUP
# On a software adapter, rows longer than this get a thread each only when there are at least 4 of them
# (SwiftShader's SIMD width: fewer rows leave lanes idle through a long loop).
LONG_ROW = 1024

# rows, cols, lanes, groups, x_off, y_off, out_off, target_off, target_stride, grad_off, grad_stride | ignore | ls
# | error_code, out_stride, lse_off
_PARAMS = struct.Struct("<11IifIII")


def _lanes(cols):
    """Rows per workgroup: enough threads per row to cover it (up to all 256)."""
    threads = min(pow2_at_least(cols), 256)
    return 256 // threads


def _thread_per_row(rt, rows, cols):
    """Whether the *_rows kernels (a thread per row) serve [rows, cols] (see softmax_loss.wgsl).

    Measured, cross-entropy forward + backward, SwiftShader on 2 cores: [128, 10] 4.6 ms with the
    tree kernels, 0.1 ms with a thread per row; [128, 1000] 78 ms vs 3.1 ms; [16, 1000] 10 ms vs
    0.74 ms; [4, 30000] 5.7 ms either way. On an H100 (Vulkan) the tree kernels are ahead or level
    ([128, 10] 14.2 us vs 15.2 us with a thread per row, [4096, 10] 14.0 vs 15.7 us, [4096, 32]
    16 vs 32 us) except for very many short rows ([65536, 10] 38 vs 24 us): GPUs keep the tree.
    """
    if not rt.variant["softmax_rows"]:  # runtime.KERNEL_VARIANTS
        return False
    return cols <= LONG_ROW or rows >= 4


def _run(rt, kernel, rows, cols, storages, constants=(), x_offset=0, y_offset=0, out_offset=0,
         target=None, grad=None, ignore_index=-100, smoothing=0.0, error_code=0, out_stride=1):
    if rows == 0:
        return
    tree, per_row = kernel
    if _thread_per_row(rt, rows, cols):
        kernel, lanes, groups = per_row, 0, -(-rows // ROW_WORKGROUP)
    else:
        lanes = _lanes(cols)
        kernel, groups = tree, -(-rows // lanes)
    t_off, t_stride = (target.offset, target.strides[0]) if target is not None else (0, 0)
    g_off, g_stride = (grad.offset, grad.strides[0]) if grad is not None else (0, 0)
    params = _PARAMS.pack(rows, cols, lanes, groups, x_offset, y_offset, out_offset, t_off, t_stride,
                          g_off, g_stride, int(ignore_index), float(smoothing), error_code, out_stride, 0)
    rt.dispatch(kernel, constants, storages, params, grid(groups, rt.limits["max_compute_workgroups_per_dimension"]))


def _rows(view, name, dtype=float32):
    check_view(view, name, dtype=dtype, contiguous=True, ndim=2)
    return view.shape


def _distinct(rt, out, *views):
    """Inputs sharing out's buffer are copied first (a buffer cannot be bound for reading and writing)."""
    return [materialize(rt, v) if v is not None and v.storage is out.storage else v for v in views]


def _vector(view, name, dtype, rows):
    check_view(view, name, dtype=dtype, ndim=1)
    if view.shape[0] != rows:
        raise ValueError(f"{name} has {view.shape[0]} entries for {rows} rows")
    if view.strides[0] < 0:
        raise ValueError(f"{name} must not have a negative stride")


@kernels.softmax.implement("webgpu")
def softmax(rt, out, x, log=False):
    rows, cols = _rows(x, "x")
    if _rows(out, "out") != (rows, cols):
        raise ValueError(f"softmax: out {out.shape} != x {x.shape}")
    (x,) = _distinct(rt, out, x)
    _run(rt, SOFTMAX, rows, cols, (out.storage, x.storage), (("LOG", int(bool(log))),),
         x_offset=x.offset, out_offset=out.offset)


@kernels.softmax_backward.implement("webgpu")
def softmax_backward(rt, out, grad, y, log=False):
    rows, cols = _rows(y, "y")
    if _rows(grad, "grad") != (rows, cols) or _rows(out, "out") != (rows, cols):
        raise ValueError(f"softmax_backward: shapes differ: out {out.shape}, grad {grad.shape}, y {y.shape}")
    grad, y = _distinct(rt, out, grad, y)
    _run(rt, SOFTMAX_BACKWARD, rows, cols, (out.storage, grad.storage, y.storage), (("LOG", int(bool(log))),),
         x_offset=grad.offset, y_offset=y.offset, out_offset=out.offset)


@kernels.cross_entropy.implement("webgpu")
def cross_entropy(rt, out, logits, target, ignore_index=-100, label_smoothing=0.0, lse=None):
    """cross_entropy.wgsl's one pass over each row: a workgroup tree per row, or a thread per row (_thread_per_row).
    Float16 logits (the half launcher) are read as they are."""
    rows, cols = _rows(logits, "logits", logits.dtype if logits.dtype is float16 else float32)
    _vector(target, "target", INDEX, rows)
    check_view(out, "out", dtype=float32, contiguous=True)
    if out.shape not in ((rows,), (rows, 2)):
        raise ValueError(f"cross_entropy: out has shape {out.shape}, expected ({rows},) or ({rows}, 2)")
    if lse is not None:
        check_view(lse, "lse", dtype=float32, contiguous=True, ndim=1)
        if lse.shape != (rows,):
            raise ValueError(f"cross_entropy: lse has shape {lse.shape}, expected ({rows},)")
    if rows == 0:
        return
    logits, target = _distinct(rt, out, logits, target)
    if lse is not None:
        logits, target = _distinct(rt, lse, logits, target)
    code = rt.error_code(_bounds.template(_bounds.CROSS_ENTROPY))
    params = _ONLINE_PARAMS.pack(rows, cols, logits.offset, out.offset, target.offset, target.strides[0],
                                 lse.offset if lse is not None else 0, 0, 0, int(ignore_index), float(label_smoothing),
                                 code, len(out.shape))
    limit = rt.limits["max_compute_workgroups_per_dimension"]
    per_row = _thread_per_row(rt, rows, cols)
    kernel = _online("cross_entropy_online_rows" if per_row else "cross_entropy_online", logits.dtype, float32)
    groups = grid(-(-rows // ROW_WORKGROUP), limit) if per_row else grid(rows, limit)
    rt.dispatch(kernel, kernel.constants({"LSE": lse is not None}),
                (out.storage, logits.storage, target.storage, lse.storage if lse is not None else rt.spare(0),
                 rt.errors), params, groups)


# cross_entropy_mean's one-workgroup kernel takes problems up to this many logits: each of its 256 threads
# then walks at most 256 of them. Larger ones (long rows: a vocabulary) keep the kernels that spread the rows
# over the GPU, then the column sums and a division.
MEAN_MAX_ELEMENTS = 65536
# On a CPU adapter the one workgroup runs on one core: up to this many rows only. SwiftShader, 2 cores,
# cross-entropy forward + backward of [rows, 10] (one workgroup of 64 threads / the three dispatches):
# 128 rows 0.33 / 0.40 ms, 256 rows 0.41 / 0.49, 512 rows 0.58 / 0.58, 1024 rows 0.95 / 0.90.
SOFTWARE_MEAN_MAX_ROWS = 512


def _split_mean(rt, rows, cols):
    """Whether cross_entropy_mean takes per-row losses and their sums rather than its one-workgroup kernel."""
    return rows * cols > MEAN_MAX_ELEMENTS or rows == 0 or (rt.variant["softmax_rows"] and rows > SOFTWARE_MEAN_MAX_ROWS)


@kernels.cross_entropy_mean.implement("webgpu")
def cross_entropy_mean(rt, out, logits, target, ignore_index=-100, label_smoothing=0.0, lse=None):
    """out [2] = (the mean of the per-row losses over the rows whose target is not ignore_index, that
    count). One dispatch for a small problem (MEAN_MAX_ELEMENTS, SOFTWARE_MEAN_MAX_ROWS); else per-row
    (loss, counted) pairs, their column sums, a division and the count's copy."""
    half = logits.dtype is float16  # the half launcher's call (the split route only)
    rows, cols = _rows(logits, "logits", logits.dtype if half else float32)
    _vector(target, "target", INDEX, rows)
    check_view(out, "out", dtype=float32, contiguous=True, ndim=1)
    if out.shape != (2,):
        raise ValueError(f"cross_entropy_mean: out has shape {out.shape}, expected (2,)")
    software = rt.variant["softmax_rows"]
    if half or _split_mean(rt, rows, cols):
        pairs = contiguous_view(rt.storage(2 * rows, float32), (rows, 2), float32)
        cross_entropy(rt, pairs, logits, target, ignore_index, label_smoothing, lse)
        sums = contiguous_view(rt.storage(2, float32), (1, 2), float32)
        reduce(rt, "sum", sums, pairs.reshaped((1, rows, 2)))
        total, count = (View(sums.storage, (), (), sums.offset + i, float32) for i in (0, 1))
        binary(rt, "div", View(out.storage, (), (), out.offset, float32), total, count)
        copy(rt, View(out.storage, (), (), out.offset + 1, float32), count)
        return
    logits, target = _distinct(rt, out, logits, target)
    if lse is not None:
        check_view(lse, "lse", dtype=float32, contiguous=True, ndim=1)
        if lse.shape != (rows,):
            raise ValueError(f"cross_entropy_mean: lse has shape {lse.shape}, expected ({rows},)")
        logits, target = _distinct(rt, lse, logits, target)
    code = rt.error_code(_bounds.template(_bounds.CROSS_ENTROPY))
    params = _PARAMS.pack(rows, cols, 0, 1, logits.offset, 0, out.offset, target.offset, target.strides[0], 0, 0,
                          int(ignore_index), float(label_smoothing), code, 1, lse.offset if lse is not None else 0)
    threads = ROW_WORKGROUP if software else 256  # see MEAN_THREADS in softmax_loss.wgsl
    rt.dispatch(CROSS_ENTROPY_MEAN, (("MEAN_THREADS", threads), ("LSE", int(lse is not None))),
                (out.storage, logits.storage, target.storage, rt.errors,
                 lse.storage if lse is not None else rt.spare(0)), params, (1, 1, 1))


@kernels.cross_entropy_backward.implement("webgpu")
def cross_entropy_backward(rt, out, logits, target, grad, ignore_index=-100, label_smoothing=0.0, lse=None):
    half = logits.dtype is float16  # the half launcher's call: float16 logits and gradient, with the forward's lse
    rows, cols = _rows(logits, "logits", logits.dtype if half else float32)
    if _rows(out, "out", logits.dtype) != (rows, cols):
        raise ValueError(f"cross_entropy_backward: out {out.shape} != logits {logits.shape}")
    _vector(target, "target", INDEX, rows)
    _vector(grad, "grad", float32, rows)
    logits, target, grad = _distinct(rt, out, logits, target, grad)
    if lse is not None:  # softmax = exp(logits - lse): one read of the logits and one write, no row reduction
        check_view(lse, "lse", dtype=float32, contiguous=True, ndim=1)
        if lse.shape != (rows,):
            raise ValueError(f"cross_entropy_backward: lse has shape {lse.shape}, expected ({rows},)")
        (lse,) = _distinct(rt, out, lse)
        if rows * cols == 0:
            return
        params = _ONLINE_PARAMS.pack(rows, cols, logits.offset, out.offset, target.offset, target.strides[0],
                                     lse.offset, grad.offset, grad.strides[0], int(ignore_index),
                                     float(label_smoothing), 0, 1)
        limit = rt.limits["max_compute_workgroups_per_dimension"]
        rt.dispatch(_online("cross_entropy_backward_lse", logits.dtype, out.dtype), (), (out.storage, logits.storage, target.storage, grad.storage,
                                                     lse.storage), params,
                    (min(-(-cols // (4 * 256)), limit), min(rows, limit), 1))
        return
    _run(rt, CROSS_ENTROPY_BACKWARD, rows, cols, (out.storage, logits.storage, target.storage, grad.storage),
         x_offset=logits.offset, out_offset=out.offset, target=target, grad=grad,
         ignore_index=ignore_index, smoothing=label_smoothing)


# Float16 logits (autocast's cross-entropy, ops/loss.py): the one-pass forward and the backward from its lse read
# them as they are, so the loss keeps the half logits for its backward, not a float32 copy twice their size (a
# batch of GPT-2's 50,257-way rows), and the gradient is written in half once. Other forms go through float32
# copies (f16.py's CAST).
def _half_logits(logits, out=None):
    return logits.dtype is float16 and logits.is_contiguous() and (out is None or out.dtype is float16)


@kernels.cross_entropy.implement("webgpu", half=True)
def cross_entropy_half(rt, out, logits, target, ignore_index=-100, label_smoothing=0.0, lse=None):
    if not _half_logits(logits) or out.dtype is not float32:
        return NotImplemented
    return cross_entropy(rt, out, logits, target, ignore_index, label_smoothing, lse)


@kernels.cross_entropy_mean.implement("webgpu", half=True)
def cross_entropy_mean_half(rt, out, logits, target, ignore_index=-100, label_smoothing=0.0, lse=None):
    if not _half_logits(logits) or out.dtype is not float32 or len(logits.shape) != 2 or \
            not _split_mean(rt, *logits.shape):
        return NotImplemented  # the one-workgroup kernel reads float32
    return cross_entropy_mean(rt, out, logits, target, ignore_index, label_smoothing, lse)


@kernels.cross_entropy_backward.implement("webgpu", half=True)
def cross_entropy_backward_half(rt, out, logits, target, grad, ignore_index=-100, label_smoothing=0.0, lse=None):
    if not _half_logits(logits, out) or lse is None or grad.dtype is not float32:
        return NotImplemented
    return cross_entropy_backward(rt, out, logits, target, grad, ignore_index, label_smoothing, lse)
