"""Batch normalisation's fused kernels (shaders/batch_norm.wgsl): the forward pass in 1 to 3 dispatches
(statistics, their merge when a channel is split into chunks, normalise + affine; eval: normalise alone)
and the backward pass in 1 to 3 (per-channel gradient sums, their merge, grad_input). Nothing is read
back, so a recorded training step replays them, running statistics included.

x, out, grad and grad_input are float32, or float16 where the adapter has shader-f16 (autocast: cuDNN's
half batch norm): read into f32, statistics and sums in f32, each result rounded once into float16. The
parameters, running statistics and save stay float32 (batch_norm.wgsl's element type XT)."""

import struct

from ...dtypes import float16, float32
from .. import kernels
from . import typed
from .elementwise import materialize
from .dispatch import TICKET_COUNTERS, Kernel, grid
from .views import INDEX, check_view, contiguous_view

# Binding numbers as in batch_norm.wgsl: 0 x, 1 y (out / grad_input), 2 g, 3 w, 4 b, 5 rm, 6 rv, 7 cnt,
# 8 save, 9 part, 10 gw, 11 gb, 12 params, 13 r, 14 tickets. Each entry point's layout holds only what it uses
# (WebGPU guarantees 8 storage buffers per stage).
_UNIFORM = (12, "uniform")
# (the software adapters' *_rows entries never fold, but take the tickets' binding too: one layout, one call)
_STATS = ((0, "read"), (5, "write"), (6, "write"), (7, "write"), (8, "write"), (9, "write"), (14, "write"), _UNIFORM)
_SUMS = ((0, "read"), (2, "read"), (8, "write"), (9, "write"), (10, "write"), (11, "write"), (14, "write"), _UNIFORM)
_LAYOUTS = {
    "stats": _STATS, "stats4": _STATS, "stats_rows": _STATS,
    "finish": ((5, "write"), (6, "write"), (7, "write"), (8, "write"), (9, "write"), _UNIFORM),
    "normalize": ((0, "read"), (1, "write"), (3, "read"), (4, "read"), (5, "write"), (6, "write"), (7, "write"),
                  (8, "write"), _UNIFORM),
    "normalize4": ((0, "read"), (1, "write"), (3, "read"), (4, "read"), (5, "write"), (6, "write"), (7, "write"),
                   (8, "write"), _UNIFORM),
    "grad_sums": _SUMS, "grad_sums4": _SUMS, "grad_sums_rows": _SUMS,
    "grad_finish": ((9, "write"), (10, "write"), (11, "write"), _UNIFORM),
    "grad_input": ((0, "read"), (1, "write"), (2, "read"), (3, "read"), (8, "write"), (9, "write"), _UNIFORM),
    "grad_input4": ((0, "read"), (1, "write"), (2, "read"), (3, "read"), (8, "write"), (9, "write"), _UNIFORM),
    # a captured step's normalize4 + residual add + ReLU (fusion.py): normalize4's bindings in training, and r
    "normalize4_act": ((0, "read"), (1, "write"), (3, "read"), (4, "read"), (7, "write"), (8, "write"), (13, "read"),
                       _UNIFORM),
}
_KERNELS = {}


def kernel(entry, dtype=float32):
    """Entry point `entry` of batch_norm.wgsl for activations (x, out, grad, grad_input) of `dtype`."""
    k = _KERNELS.get((entry, dtype))
    if k is None:
        xt = {float32: "f32", float16: "f16"}[dtype]
        shader = typed.typed_shader("batch_norm.wgsl", (("XT", xt),),
                                    constants=(("TICKET_COUNTERS", TICKET_COUNTERS),))
        k = _KERNELS[entry, dtype] = Kernel(shader, entry, _LAYOUTS[entry])
    return k


(HAS_W, HAS_B, TRAINING, RUNNING, COUNT, GRAD_W, GRAD_B, SAVE, INCREMENT, RESIDUAL, RELU,
 RESIDUAL_IN_Y, FOLD) = (1 << k for k in range(13))
_PARAMS = struct.Struct("<24I2f")
_FLAGS, _UNUSED, _Y_OFF = 10, 11, 13  # fields of _PARAMS
WORKGROUP = 256  # batch_norm.wgsl's WORKGROUP
ROW_WORKGROUP = 64
# GPU: a workgroup per (chunk, channel) with at least PER_THREAD values per thread, and channels split
# into chunks until about MIN_GROUPS workgroups fill the GPU (ResNet-18's first stage at batch 128 has
# only 64 channels of 131,072 values: 16 chunks each). The chunks are merged by the last workgroup of each
# channel where the binding gives storageBarrier device scope (natively: FOLD in batch_norm.wgsl), else by a
# second, tiny dispatch (finish, grad_finish).
MIN_GROUPS = 1024
PER_THREAD = 16
# Software adapter: a thread per (chunk, channel) folds its chunk of at most ROW_CHUNK values in a plain loop
# (no barriers), and the merge dispatch folds the chunks. Longer loops went wrong on lavapipe: one thread
# per channel over 65,536 values or more gave means off by 1e-3 and gradient sums off by up to 76%, while
# 40,960 were right to 1e-6.
ROW_THREADS = 64
ROW_CHUNK = 4096
# Consecutive values each thread of the elementwise passes handles (normalize, grad_input): four on a GPU,
# sixteen on a software adapter, where a thread's loop is cheaper than another SIMD group.
ELEMENTWISE_PER_THREAD = (4, 16)


def _plan(rt, c, m, vec4=False):
    """(chunks, chunk): how each channel's m values are split for the statistics and gradient sums (vec4:
    chunks of whole vec4s)."""
    if rt.variant["batch_norm_rows"]:
        chunks = max(1, -(-m // ROW_CHUNK))
    else:
        chunks = max(1, min(-(-m // (WORKGROUP * PER_THREAD)), -(-MIN_GROUPS // c)))
    chunk = -(-m // chunks)
    if vec4:
        chunk = -(-chunk // 4) * 4
    return -(-m // chunk), chunk


def _folds(rt, c, chunks):
    """Whether a channel's chunks are merged in the dispatch that computes them (FOLD: by each channel's last
    workgroup, where the binding vouches for device-scope storageBarrier), rather than by a second one."""
    return (chunks > 1 and c <= TICKET_COUNTERS and not rt.variant["batch_norm_rows"]
            and getattr(rt.binding, "device_scope_storage_barrier", False))


def _sums_pass(rt, name, vec4, storages, params, chunks, c, fold, words, finish, finish_storages, dt):
    """The statistics (or gradient sums) pass `name` ("stats", "grad_sums") in the adapter's variant, then, with
    several chunks and no fold, their merge: a dispatch of `finish` on `finish_storages`. `storages` are the
    pass's bindings before the tickets (FOLD: a counter per channel and `words` words of partial per chunk in
    the runtime's ticket buffer); params were packed with FOLD where `fold`."""
    tickets = rt.tickets(TICKET_COUNTERS + words * c * chunks) if fold else rt.spare(4)
    if rt.variant["batch_norm_rows"]:
        entry, groups = name + "_rows", (-(-c * chunks // ROW_THREADS), 1, 1)
    else:
        entry, groups = name + ("4" if vec4 else ""), (chunks, c, 1)
    rt.dispatch(kernel(entry, dt), (), storages + (tickets,), params, groups)
    if chunks > 1 and not fold:
        rt.dispatch(kernel(finish, dt), (), finish_storages, params, (-(-c // ROW_WORKGROUP), 1, 1))


def _vec4(rt, views):
    """Whether a GPU's vec4 entries take views [N, C, S]: S and every offset multiples of 4 (a vec4 then stays
    in one channel)."""
    return (not rt.variant["batch_norm_rows"] and views[0].shape[2] % 4 == 0
            and all(v is None or v.offset % 4 == 0 for v in views))


def _check(view, name, shape, dtype=float32):
    check_view(view, name, dtype=dtype, contiguous=True)
    if view.shape != shape:
        raise ValueError(f"batch_norm: {name} has shape {view.shape}, expected {shape}")


def _off(view):
    return 0 if view is None else view.offset


def _params(x, c, chunks, chunk, flags, per_thread=1, y=None, g=None, w=None, b=None, rm=None, rv=None, cnt=None,
            save=None, gw=None, gb=None, momentum=0.0, eps=0.0, vec4=False):
    n, _, s = x.shape
    dn, ds = divmod(WORKGROUP, s // 4 if vec4 else s)  # a workgroup's stride through a channel's (n, s)
    return _PARAMS.pack(n, c, s, n * s, chunks, chunk, dn, ds, x.numel, per_thread, flags, 0,
                        x.offset, _off(y), _off(g), _off(w), _off(b), _off(rm), _off(rv), _off(cnt), _off(save), 0,
                        _off(gw), _off(gb), float(momentum), float(eps))


def _storage(view, fallback):
    return fallback if view is None else view.storage


def _elementwise(rt, entry, views):
    """The elementwise pass `entry` (normalize, grad_input) over views [N, C, S]: (kernel name, values per
    thread, workgroups). A GPU takes the vec4 twin where _vec4 holds (H200, ResNet-18 at batch 128, bench replay
    --each: normalize's 20 dispatches took 505 us with 4 scalars a thread, 241 as normalize4; grad_input 544
    and 290)."""
    total = views[0].numel
    vec4 = _vec4(rt, views)
    per_thread = 4 if vec4 else ELEMENTWISE_PER_THREAD[rt.variant["batch_norm_rows"]]
    threads = -(-total // per_thread)
    groups = grid(-(-threads // WORKGROUP), rt.limits["max_compute_workgroups_per_dimension"])
    return entry + "4" if vec4 else entry, per_thread, groups


def _writable_alone(rt, view, bound):
    """`view`, or a contiguous copy when its storage is also bound elsewhere in the dispatch (WebGPU
    forbids binding a buffer writable and bound again)."""
    if view is not None and any(v is not None and v is not view and v.storage is view.storage for v in bound):
        return materialize(rt, view)
    return view


def _activation_dtype(x):
    if x.dtype not in (float32, float16):
        raise TypeError(f"batch_norm: x must be float32 or float16, not {x.dtype}")
    return x.dtype


@kernels.batch_norm.implement("webgpu")
def batch_norm(rt, out, save, x, weight, bias, running_mean, running_var, training, momentum, eps, count=None):
    dt = _activation_dtype(x)
    check_view(x, "x", dtype=dt, contiguous=True, ndim=3)
    shape = x.shape
    n, c, s = shape
    _check(out, "out", shape, dt)
    for name, v in (("weight", weight), ("bias", bias), ("running_mean", running_mean), ("running_var", running_var)):
        if v is not None:
            _check(v, name, (c,))
    if save is not None:
        _check(save, "save", (2, c))
    if (running_mean is None) != (running_var is None):
        raise ValueError("batch_norm: running_mean and running_var go together")
    if not training and running_mean is None:
        raise ValueError("batch_norm: eval mode needs running_mean and running_var")
    if count is not None:
        check_view(count, "count", dtype=INDEX, contiguous=True)
        if count.numel != 1:
            raise ValueError(f"batch_norm: count must hold one element, got shape {count.shape}")
    if training and running_mean is not None and momentum is None and count is None:
        raise ValueError("batch_norm: momentum None (a cumulative average) needs the count")
    if x.numel == 0:
        return
    if save is None:  # the statistics have to live somewhere between the passes
        save = contiguous_view(rt.storage(2 * c, float32), (2, c), float32)
    bound = (x, out, weight, bias, running_mean, running_var, count, save)
    for name, v in (("out", out), ("save", save)):
        if any(u is not v and u is not None and u.storage is v.storage for u in bound):
            raise ValueError(f"batch_norm: {name} needs a storage of its own (WebGPU cannot bind one buffer "
                             "writable and bound again)")
    rm, rv, cnt = (_writable_alone(rt, v, bound) for v in (running_mean, running_var, count if training else None))
    flags = (HAS_W if weight is not None else 0) | (HAS_B if bias is not None else 0)
    if training:
        flags |= TRAINING
        flags |= INCREMENT if cnt is not None else 0
        if rm is not None:
            flags |= RUNNING | (COUNT if momentum is None else 0)
        vec4 = _vec4(rt, (x,))
        chunks, chunk = _plan(rt, c, n * s, vec4)
        fold = _folds(rt, c, chunks)
        part = rt.storage(4 * c * chunks, float32) if chunks > 1 and not fold else rt.spare(2)
        stats_storages = (x.storage, _storage(rm, rt.spare(0)), _storage(rv, rt.spare(1)),
                          _storage(cnt, rt.spare(3)), save.storage, part)
        params = _params(x, c, chunks, chunk, flags | (FOLD if fold else 0), rm=rm, rv=rv, cnt=cnt, save=save,
                         momentum=momentum or 0.0, eps=eps, vec4=vec4)
        _sums_pass(rt, "stats", vec4, stats_storages, params, chunks, c, fold, 3, "finish", stats_storages[1:], dt)
    else:
        flags |= SAVE
    entry, per_thread, groups = _elementwise(rt, "normalize", (x, out))
    params = _params(x, c, 1, 1, flags, per_thread, y=out, w=weight, b=bias, rm=rm, rv=rv, cnt=cnt, save=save,
                     eps=eps)
    storages = (x.storage, out.storage, _storage(weight, rt.dummy), _storage(bias, rt.dummy),
                _storage(None if training else rm, rt.spare(0)), _storage(None if training else rv, rt.spare(1)),
                _storage(cnt, rt.spare(3)), save.storage)
    rt.dispatch(kernel(entry, dt), (), storages, params, groups)
    for v, own in ((running_mean, rm), (running_var, rv), (count, cnt)):
        if own is not None and own is not v:  # updated in a copy: write it back
            rt.copy(own.storage, 4 * own.offset, v.storage, 4 * v.offset, 4 * v.numel)


@kernels.batch_norm_backward.implement("webgpu")
def batch_norm_backward(rt, grad_input, grad_weight, grad_bias, grad, x, save, weight, training):
    dt = _activation_dtype(x)
    check_view(x, "x", dtype=dt, contiguous=True, ndim=3)
    shape = x.shape
    n, c, s = shape
    _check(grad, "grad", shape, dt)
    _check(save, "save", (2, c))
    if grad_input is not None:
        _check(grad_input, "grad_input", shape, dt)
    for name, v in (("weight", weight), ("grad_weight", grad_weight), ("grad_bias", grad_bias)):
        if v is not None:
            _check(v, name, (c,))
    if x.numel == 0:
        return
    writable = [v for v in (grad_input, grad_weight, grad_bias) if v is not None]
    for v in writable:
        if any(u is not v and u is not None and u.storage is v.storage
               for u in (grad_input, grad_weight, grad_bias, grad, x, save, weight)):
            raise ValueError("batch_norm_backward: grad_input, grad_weight and grad_bias each need a storage of "
                             "their own (WebGPU cannot bind one buffer writable and bound again)")
    need_sums = grad_weight is not None or grad_bias is not None or (training and grad_input is not None)
    flags = ((HAS_W if weight is not None else 0) | (TRAINING if training else 0)
             | (GRAD_W if grad_weight is not None else 0) | (GRAD_B if grad_bias is not None else 0))
    vec4 = _vec4(rt, (x, grad))
    chunks, chunk = _plan(rt, c, n * s, vec4)
    part = rt.storage(2 * c * chunks + 2 * c, float32) if need_sums else rt.spare(2)
    if need_sums:
        fold = _folds(rt, c, chunks)
        params = _params(x, c, chunks, chunk, flags | (FOLD if fold else 0), g=grad, w=weight, save=save,
                         gw=grad_weight, gb=grad_bias, vec4=vec4)
        storages = (x.storage, grad.storage, save.storage, part, _storage(grad_weight, rt.spare(0)),
                    _storage(grad_bias, rt.spare(1)))
        _sums_pass(rt, "grad_sums", vec4, storages, params, chunks, c, fold, 2, "grad_finish", storages[3:], dt)
    if grad_input is not None:
        entry, per_thread, groups = _elementwise(rt, "grad_input", (x, grad, grad_input))
        params = _params(x, c, chunks, chunk, flags, per_thread, y=grad_input, g=grad, w=weight, save=save)
        storages = (x.storage, grad_input.storage, grad.storage, _storage(weight, rt.dummy), save.storage, part)
        rt.dispatch(kernel(entry, dt), (), storages, params, groups)


def fused_normalize(rt, launch, out_offset, residual_offset=None, relu=True, residual_in_out=False):
    """The Launch of normalize4_act for a recorded float32 training normalize4 `launch`: its values written at
    out_offset, plus the residual at residual_offset (None: none), then ReLU if `relu` (fusion.py); None where
    `launch` is not such a normalize4. The dispatch binds normalize4's x, weight, bias, count and save, the
    output, and the residual (binding 13). residual_in_out: the residual is read from the output's buffer at
    the very place each result goes (residual_offset == out_offset: WebGPU binds no buffer both writable and
    read-only, and each value is read before it is overwritten)."""
    if launch.kernel is not kernel("normalize4") or launch.params is None:
        return None
    fields = list(_PARAMS.unpack(launch.params))
    if not fields[_FLAGS] & TRAINING:
        return None
    if residual_in_out and residual_offset != out_offset:
        raise ValueError("fused_normalize: a residual in the output's buffer must sit where the output goes")
    fields[_FLAGS] |= ((RELU if relu else 0) | (RESIDUAL if residual_offset is not None else 0)
                       | (RESIDUAL_IN_Y if residual_in_out else 0))
    fields[_UNUSED] = residual_offset or 0
    fields[_Y_OFF] = out_offset
    return rt.launch(kernel("normalize4_act"), (), _PARAMS.pack(*fields), launch.groups, launch.slots)
