"""Layer normalisation, forward and backward (shaders/layer_norm.wgsl), and RMS normalisation by the same kernels
(rms: no mean).

The forward is one dispatch (mean, variance and the affine output per row; each row's (mean, rstd) saved for the
backward). The backward is one dispatch for grad_input, whose workgroups also leave partial sums of grad * xhat
and grad per chunk of rows, and one more that sums the partials into grad_weight and grad_bias (two stages: no
atomics, a deterministic order). Software adapters take a thread per row and per column instead (the
layer_norm_rows variant of runtime.KERNEL_VARIANTS).
"""

import os
import struct

from ...dtypes import float32
from .. import kernels
from .dispatch import Kernel, Shader, grid, pow2_at_least
from .elementwise import fill, materialize
from .views import check_view

SHADER = Shader("layer_norm.wgsl", {})
_OUT, _X, _W, _B, _SAVE_W, _SAVE_R, _G, _PART, _OUT2, _U = ((0, "write"), (1, "read"), (2, "read"), (3, "read"),
                                                            (4, "write"), (4, "read"), (5, "read"), (6, "write"),
                                                            (7, "write"), (8, "uniform"))
FORWARD = Kernel(SHADER, "layer_norm", (_OUT, _X, _W, _B, _SAVE_W, _U),
                 ("TPR", "VEC", "HAS_W", "HAS_B", "SAVE", "RMS"))
FORWARD_ROWS = Kernel(SHADER, "layer_norm_rows", (_OUT, _X, _W, _B, _SAVE_W, _U),
                      ("VEC", "HAS_W", "HAS_B", "SAVE", "RMS"))
BACKWARD = Kernel(SHADER, "layer_norm_backward", (_OUT, _X, _W, _SAVE_R, _G, _PART, _U),
                  ("TPR", "VEC", "HAS_W", "WANT_DX", "PARAMS", "RMS"))
BACKWARD_ROWS = Kernel(SHADER, "layer_norm_backward_rows", (_OUT, _X, _W, _SAVE_R, _G, _U), ("VEC", "HAS_W", "RMS"))
PARAM_SUMS = Kernel(SHADER, "layer_norm_param_sums", (_OUT, _PART, _OUT2, _U), ("HAS_W", "HAS_B"))
PARAM_ROWS = Kernel(SHADER, "layer_norm_param_rows", (_OUT, _X, _SAVE_R, _G, _OUT2, _U), ("HAS_W", "HAS_B"))

# rows, cols, x, out, w, b, save, g offsets, chunk, chunks, out2 offset | eps
_PARAMS = struct.Struct("<11If")
UNITS_MAX = 8  # layer_norm.wgsl's: vec4 units a thread of the tree backward keeps sums of
ROWS_WG = 64  # layer_norm.wgsl's ROWS_WG
# Rows of a workgroup of the tree backward: each workgroup walks its rows one after another and leaves one partial
# row per parameter (stage 2 sums them). Few rows a workgroup keep the GPU busy: a GPT's 4,096 rows of d = 384
# made 256 workgroups of 16 rows before, 40 us a call on an H200.
CHUNK_ROWS = 4
PARAM_SUM_UNITS = 4  # layer_norm.wgsl's PS_UNITS: vec4 columns per workgroup of stage 2


# WEBGRAD_LAYER_NORM_TPR=<n> forces the threads per row of the tree kernels (a power of two in [32, 256]; a
# measurement switch for benchmark sweeps, where they still hold a row in UNITS_MAX vec4 units a thread).
_FORCED_TPR = int(os.environ.get("WEBGRAD_LAYER_NORM_TPR") or 0) or None


def _threads(cols):
    """Threads per row of the tree kernels: one per vec4 unit, a power of two in [32, 256]."""
    units = -(-cols // 4)
    if _FORCED_TPR and -(-units // _FORCED_TPR) <= UNITS_MAX:
        return _FORCED_TPR
    return min(256, max(32, pow2_at_least(units)))


def _tree(rt, cols):
    """Whether the workgroup-per-row kernels serve rows of `cols` on this adapter."""
    units = -(-cols // 4)
    return not rt.variant["layer_norm_rows"] and -(-units // _threads(cols)) <= UNITS_MAX


def _rows(view, name):
    check_view(view, name, dtype=float32, contiguous=True, ndim=2)
    return view.shape


def _vector(view, name, cols):
    if view is not None:
        check_view(view, name, dtype=float32, contiguous=True, ndim=1)
        if view.shape != (cols,):
            raise ValueError(f"layer_norm: {name} has shape {view.shape}, expected ({cols},)")
    return view


def _save(view, rows):
    if view is not None:
        check_view(view, "save", dtype=float32, contiguous=True, ndim=2)
        if view.shape != (rows, 2):
            raise ValueError(f"layer_norm: save has shape {view.shape}, expected ({rows}, 2)")
    return view


def _aligned(cols, *views):
    return cols % 4 == 0 and all(v.offset % 4 == 0 for v in views if v is not None)


@kernels.layer_norm.implement("webgpu")
def layer_norm(rt, out, save, x, weight, bias, eps, rms=False):
    rows, cols = _rows(x, "x")
    if _rows(out, "out") != (rows, cols):
        raise ValueError(f"layer_norm: out {out.shape} != x {x.shape}")
    weight, bias = _vector(weight, "weight", cols), _vector(bias, "bias", cols)
    save = _save(save, rows)
    if rows == 0 or cols == 0:
        return
    x, weight, bias = (materialize(rt, v) if v is not None and v.storage is out.storage else v
                       for v in (x, weight, bias))
    flags = {"VEC": _aligned(cols, x, out), "HAS_W": weight is not None, "HAS_B": bias is not None,
             "SAVE": save is not None, "RMS": bool(rms)}
    params = _PARAMS.pack(rows, cols, x.offset, out.offset, weight.offset if weight is not None else 0,
                          bias.offset if bias is not None else 0, save.offset if save is not None else 0, 0, 0, 0, 0,
                          float(eps))
    storages = (out.storage, x.storage, weight.storage if weight is not None else rt.dummy,
                bias.storage if bias is not None else rt.dummy, save.storage if save is not None else rt.spare(0))
    limit = rt.limits["max_compute_workgroups_per_dimension"]
    if _tree(rt, cols):
        flags["TPR"] = _threads(cols)
        rt.dispatch(FORWARD, FORWARD.constants(flags), storages, params, grid(rows, limit))
    else:
        rt.dispatch(FORWARD_ROWS, FORWARD_ROWS.constants(flags), storages, params, grid(-(-rows // ROWS_WG), limit))


@kernels.layer_norm_backward.implement("webgpu")
def layer_norm_backward(rt, grad_input, grad_weight, grad_bias, grad, x, save, weight, rms=False):
    rows, cols = _rows(x, "x")
    if _rows(grad, "grad") != (rows, cols) or (grad_input is not None
                                                and _rows(grad_input, "grad_input") != (rows, cols)):
        raise ValueError(f"layer_norm_backward: grad {grad.shape} and grad_input must match x {x.shape}")
    weight = _vector(weight, "weight", cols)
    grad_weight, grad_bias = _vector(grad_weight, "grad_weight", cols), _vector(grad_bias, "grad_bias", cols)
    save = _save(save, rows)
    if save is None:
        raise ValueError("layer_norm_backward needs the forward's save (mean, rstd)")
    params_wanted = grad_weight is not None or grad_bias is not None
    if cols == 0 or (grad_input is None and not params_wanted):
        return
    if rows == 0:  # no rows: the parameter gradients are sums of nothing
        for v in (grad_weight, grad_bias):
            if v is not None:
                fill(rt, v, 0.0)
        return
    outs = [v for v in (grad_input, grad_weight, grad_bias) if v is not None]
    x, grad, save, weight = (materialize(rt, v) if v is not None and any(v.storage is o.storage for o in outs) else v
                             for v in (x, grad, save, weight))
    limit = rt.limits["max_compute_workgroups_per_dimension"]
    w_storage = weight.storage if weight is not None else rt.dummy
    vec = _aligned(cols, x, grad, grad_input)
    gw_storage = grad_weight.storage if grad_weight is not None else rt.spare(1)
    gb_storage = grad_bias.storage if grad_bias is not None else rt.spare(2)
    pw = (grad_weight.offset if grad_weight is not None else 0, grad_bias.offset if grad_bias is not None else 0)
    if not _tree(rt, cols):
        base = (rows, cols, x.offset, 0, weight.offset if weight is not None else 0, 0, save.offset, grad.offset)
        if grad_input is not None:
            params = _PARAMS.pack(*base[:3], grad_input.offset, *base[4:], 0, 0, 0, 0.0)
            flags = {"VEC": vec, "HAS_W": weight is not None, "RMS": bool(rms)}
            rt.dispatch(BACKWARD_ROWS, BACKWARD_ROWS.constants(flags),
                        (grad_input.storage, x.storage, w_storage, save.storage, grad.storage), params,
                        grid(-(-rows // ROWS_WG), limit))
        if params_wanted:
            params = _PARAMS.pack(*base[:3], pw[0], *base[4:], 0, 0, pw[1], 0.0)
            flags = {"HAS_W": grad_weight is not None, "HAS_B": grad_bias is not None}
            storages = (gw_storage, x.storage, save.storage, grad.storage, gb_storage)
            rt.dispatch(PARAM_ROWS, PARAM_ROWS.constants(flags), storages, params, grid(-(-cols // ROWS_WG), limit))
        return
    units = -(-cols // 4)
    chunk = CHUNK_ROWS
    chunks = -(-rows // chunk)
    partial = rt.storage(2 * chunks * units * 4, float32) if params_wanted else rt.spare(3)
    flags = {"TPR": _threads(cols), "VEC": vec, "HAS_W": weight is not None, "WANT_DX": grad_input is not None,
             "PARAMS": params_wanted, "RMS": bool(rms)}
    params = _PARAMS.pack(rows, cols, x.offset, grad_input.offset if grad_input is not None else 0,
                          weight.offset if weight is not None else 0, 0, save.offset, grad.offset, chunk, chunks, 0,
                          0.0)
    rt.dispatch(BACKWARD, BACKWARD.constants(flags),
                (grad_input.storage if grad_input is not None else rt.spare(0), x.storage, w_storage, save.storage,
                 grad.storage, partial), params, grid(chunks, limit))
    if params_wanted:
        params = _PARAMS.pack(rows, cols, 0, pw[0], 0, 0, 0, 0, chunk, chunks, pw[1], 0.0)
        flags = {"HAS_W": grad_weight is not None, "HAS_B": grad_bias is not None}
        rt.dispatch(PARAM_SUMS, PARAM_SUMS.constants(flags), (gw_storage, partial, gb_storage), params,
                    grid(-(-units // PARAM_SUM_UNITS), limit))

