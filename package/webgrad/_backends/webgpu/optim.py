"""Fused optimizer updates (shaders/optim.wgsl): SGD, Adam/AdamW, RMSprop, in place.

The kernels read every hyperparameter from the dynamic-scalar buffer. Each parameter gets its own
block of slots (kept while the parameter's storage lives); a call writes a slot only when its value
changed, so a steady training loop writes one word per parameter per step (the step count) and
creates no GPU objects. A hyperparameter given as a DynamicScalar (kind "f32": `lr` or `step`) is
read from that scalar's slot instead: this is how a replayed graph gets a new step or learning rate
without any Python op code running (set the scalars, then replay).

hyper["skip_if"] (a one-element float32 view, optional) guards an update on the device: where it holds a value
above 0 the kernel returns at once (SKIP_IF), which is how GradScaler skips a replayed step whose gradients held
inf or NaN without a read-back, and how a step that follows a failed index or value check changes nothing
(Optimizer._skip_flags: the runtime's error word as a flag, value_checks.py's device_error_flag). Adam's and RMSprop's hyper["skipped_steps"] (a one-element float32 view, with
skip_if) counts the parameter's skipped steps: a skipped update adds one; Adam's bias corrections take step
minus it.

Each optimizer has a vec4 entry point (`adam4`, ...), used when every offset (parameter, gradient,
states) is a multiple of 4, and an f32 one for any other views: see the comment atop optim.wgsl.

A captured step's consecutive sgd4 updates become one dispatch at its seal (fusion.py's sgd_group, through
group_launch here: shaders/optim_group.wgsl). Adam's and AdamW's updates are grouped as they are issued: their
step() hands every parameter to the adam_steps kernel, which runs runs of alike adam4 updates as adam4_group
dispatches (shaders/optim_group_adam.wgsl), eagerly and so in a recorded step; updates with a skip flag group too
(one flag, and their skipped-step counts in one buffer: Optimizer._skipped_steps makes them so).
"""

import functools
import math
import struct
import weakref

from ..._view import _dense
from ...dtypes import float32
from .. import kernels
from .dispatch import DynamicScalar, Kernel, Shader
from .views import check_view, f32

SHADER = Shader("optim.wgsl", {})
_LAYOUT = ((0, "write"), (1, "read"), (2, "write"), (3, "write"), (4, "write"), (5, "read"), (6, "uniform"),
           (7, "read"))
_COMMON_FLAGS = ("WORKGROUP", "MAXIMIZE", "WEIGHT_DECAY", "DECOUPLED", "SKIP_IF")
_SGD_FLAGS = _COMMON_FLAGS + ("MOMENTUM", "NESTEROV")
_ADAM_FLAGS = _COMMON_FLAGS + ("COUNT_SKIPS", "AMSGRAD")
_RMSPROP_FLAGS = _COMMON_FLAGS + ("COUNT_SKIPS", "MOMENTUM", "CENTERED")
# (f32 entry point, vec4 entry point) of each optimizer
SGD = (Kernel(SHADER, "sgd", _LAYOUT, _SGD_FLAGS), Kernel(SHADER, "sgd4", _LAYOUT, _SGD_FLAGS))
_COUNTING = _LAYOUT + ((8, "write"),)  # the skipped-step count of optimizers that keep a step count
ADAM = (Kernel(SHADER, "adam", _COUNTING, _ADAM_FLAGS), Kernel(SHADER, "adam4", _COUNTING, _ADAM_FLAGS))
RMSPROP = (Kernel(SHADER, "rmsprop", _COUNTING, _RMSPROP_FLAGS),
           Kernel(SHADER, "rmsprop4", _COUNTING, _RMSPROP_FLAGS))

# n, param_offset, grad_offset, skip_offset | state offsets x3, skipped_offset | 12 hyperparameter slots
_PARAMS = struct.Struct("<20I")
WORKGROUP = 256
SMALL_WORKGROUP = 64  # for parameters that 64 threads cover
# vec4s each thread of a vec4 entry point updates, on a software adapter (Runtime.software: lavapipe,
# SwiftShader) and on a GPU; 0 would mean the f32 entry points, one element per thread, always.
# SwiftShader runs a thread's prologue (~10 hyperparameter reads, each a storage load) and at least
# one loop step, masked or not, for every group of 4 invocations of every workgroup dispatched, while
# a further loop step costs little; so there a thread does 16 vec4s, and a small parameter gets a
# workgroup of 64. Adam over 100k elements on SwiftShader, 2 cores: 5.2 ms with 1 vec4 per thread,
# 3.4 ms with 2, 2.6 ms with 4, 1.4 ms with 8, 1.1 ms with 16, 1.6 ms with 32 (4 workgroups: too few
# to share out), against 6.8 ms before (f32 kernel, an element per thread); the f32 kernel at 64
# elements per thread takes ~1.6x the vec4 one.
# On an H100 one vec4 per thread is best (2 and 4: 3-9% slower at 10M elements).
# (runtime.KERNEL_VARIANTS["optim_vec4_per_thread"] holds these two choices.)

class _Block:
    """What a parameter's updates keep (in _blocks, while its storage lives): per hyperparameter slot
    [its DynamicScalar, the value last given for it] (the value as the optimizer passed it: comparing
    that skips the float32 rounding of an unchanged learning rate every step), and the last update's
    values, slots, launch key and Launch, so that a steady training loop's next update, with the same
    values and layout, goes straight to rt.run."""

    __slots__ = ("scalars", "values", "slots", "key", "launch")

    def __init__(self, count):
        self.scalars = [None] * count
        self.values = self.slots = self.key = self.launch = None


_blocks = weakref.WeakKeyDictionary()  # param Storage -> its _Block


def _ln(beta):
    return math.log(beta) if beta > 0 else -math.inf


def _slots(rt, block, values):
    """The scalar slots holding `values` (numbers, or DynamicScalars used as they are) for the block's
    parameter; a value that changed since the last update is written to its slot."""
    if values == block.values:  # the same numbers and the same DynamicScalars: nothing to write
        return block.slots
    slots = []
    for i, value in enumerate(values):
        if isinstance(value, DynamicScalar):
            slots.append(value.slot)
            continue
        entry = block.scalars[i]
        if entry is None:
            entry = block.scalars[i] = [rt.scalar(f32(value)), value]
        elif entry[1] != value:  # changed since the last step (a scheduler): write it if its float32 did
            rounded = f32(value)
            if entry[0].value != rounded:
                entry[0].set(rounded)
            entry[1] = value
        slots.append(entry[0].slot)
    block.values, block.slots = values, tuple(slots)
    return block.slots


def _checked(param, grad, states, skip, skipped):
    """param's element count, once param, grad and every state are contiguous float32 views of WebGPU
    storages of param's size, and skip and skipped (or None) one-element float32 views, skipped only with
    skip (check_view names the operand at fault)."""
    n = _dense(check_view(param, "param", dtype=float32, contiguous=True).shape)[1]
    for name, v in (("grad", grad), *states):
        if v is not None and _dense(check_view(v, name, dtype=float32, contiguous=True).shape)[1] != n:
            raise ValueError(f"{name} has {v.numel} elements for a parameter of {n}")
    for name, v in (("skip_if", skip), ("skipped_steps", skipped)):
        if v is not None and check_view(v, name, dtype=float32).numel != 1:
            raise ValueError(f"{name} must have one element, not {v.numel}")
    if skipped is not None and skip is None:
        raise ValueError("skipped_steps counts the steps skip_if skips: it needs skip_if")
    return n  # (empty views: every check passes and nothing is run)


def _run(rt, kernels, flags, param, grad, states, values, skip, skipped=None, prepare=False, launch_only=False):
    """One update; skip (hyper["skip_if"]): None, or a one-element float32 view that, above 0 on the device,
    makes the update change nothing (the kernels' SKIP_IF); skipped (hyper["skipped_steps"], Adam and RMSprop): None, or
    a one-element float32 view counting the skipped updates. prepare (hyper["prepare"]: a recorded update about
    to be replayed): write the values into the slots its launch reads, and launch nothing (what picks the kernel
    cannot change in a replay: Optimizer.prepare_replay checks that first). launch_only: return (its Launch, its
    storages) instead of recording it (None for an empty parameter), for a multi-tensor dispatch to take."""
    n = _checked(param, grad, states, skip, skipped)
    if n == 0:
        return None
    block = _blocks.get(param.storage)
    if block is None or len(block.scalars) != len(values):
        block = _blocks[param.storage] = _Block(len(values))
    slots = _slots(rt, block, values)
    if prepare:
        return
    offsets = tuple(s.offset if s is not None else 0 for _, s in states) + (0,) * (3 - len(states))
    # (the kernel variant too: a runtime switched between software and GPU kernels keeps its storages)
    skip_offsets = (skip.offset if skip is not None else 0, skipped.offset if skipped is not None else 0)
    key = (kernels, flags, n, param.offset, grad.offset, skip_offsets, offsets, slots,
           rt.variant["optim_vec4_per_thread"])
    if key == block.key:
        prepared = block.launch
    else:
        prepared = _launch(rt, kernels, flags, n, param.offset, grad.offset, skip_offsets, offsets, slots)
        block.key, block.launch = key, prepared
    # Unused state bindings get distinct spare buffers: WebGPU rejects one buffer bound writable twice.
    storages = [s.storage if s is not None else rt.spare(k) for k, (_, s) in enumerate(states)]
    storages += [rt.spare(k) for k in range(len(states), 3)]
    storages = (param.storage, grad.storage, *storages, rt.scalars, skip.storage if skip is not None else rt.spare(3))
    if kernels in (ADAM, RMSPROP):  # (their layout, _COUNTING)
        storages += (skipped.storage if skipped is not None else rt.spare(4),)
    if launch_only:
        return prepared, storages
    rt.run(prepared, storages)


def _launch(rt, kernels, flags, n, param_offset, grad_offset, skip_offsets, offsets, slots):
    """The Launch of one update (rt.memo keeps it for every parameter laid out alike)."""
    per_thread = rt.variant["optim_vec4_per_thread"]
    aligned = param_offset % 4 == 0 and grad_offset % 4 == 0 and all(o % 4 == 0 for o in offsets)
    vec4 = per_thread > 0 and aligned
    kernel = kernels[vec4]
    per_thread = 4 * per_thread if vec4 else 1  # elements
    workgroup = SMALL_WORKGROUP if n <= SMALL_WORKGROUP * per_thread else WORKGROUP
    constants = kernel.constants(dict(flags, WORKGROUP=workgroup))
    key = (kernel, constants, n, param_offset, grad_offset, skip_offsets, offsets, slots, per_thread)
    prepared = rt.memo.get(key)
    if prepared is None:
        skip_offset, skipped_offset = skip_offsets
        params = _PARAMS.pack(n, param_offset, grad_offset, skip_offset, *offsets, skipped_offset, *slots,
                              *[0] * (12 - len(slots)))
        groups = min(-(-n // (workgroup * per_thread)), rt.limits["max_compute_workgroups_per_dimension"])
        prepared = rt.memo[key] = rt.launch(kernel, constants, params, (groups, 1, 1), slots)
    return prepared


def _flags(hyper, **more):
    """The kernel's flags as a hashable, comparable tuple of (name, bool) (a launch key's part)."""
    return (("MAXIMIZE", bool(hyper["maximize"])), ("WEIGHT_DECAY", hyper["weight_decay"] != 0),
            ("DECOUPLED", bool(hyper.get("decoupled", False))),
            ("SKIP_IF", hyper.get("skip_if") is not None)) + tuple(more.items())


@kernels.sgd_step.implement("webgpu")
def sgd_step(rt, param, grad, momentum_buffer, hyper):
    flags = _flags(hyper, MOMENTUM=momentum_buffer is not None, NESTEROV=bool(hyper["nesterov"]))
    values = (hyper["lr"], hyper["momentum"], 1.0 - hyper["dampening"], hyper["weight_decay"],
              1.0 if hyper.get("first") else 0.0)
    _run(rt, SGD, flags, param, grad, (("momentum_buffer", momentum_buffer),), values, hyper.get("skip_if"),
         prepare=bool(hyper.get("prepare")))


@kernels.adam_step.implement("webgpu")
def adam_step(rt, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, hyper):
    _adam(rt, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, hyper)


def _adam(rt, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, hyper, launch_only=False):
    b1, b2 = hyper["beta1"], hyper["beta2"]
    flags = _flags(hyper, COUNT_SKIPS=hyper.get("skipped_steps") is not None, AMSGRAD=max_exp_avg_sq is not None)
    values = (hyper["lr"], hyper["step"], b1, 1.0 - b1, b2, 1.0 - b2, _ln(b1), _ln(b2), hyper["eps"],
              hyper["weight_decay"])
    states = (("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq), ("max_exp_avg_sq", max_exp_avg_sq))
    return _run(rt, ADAM, flags, param, grad, states, values, hyper.get("skip_if"), hyper.get("skipped_steps"),
                bool(hyper.get("prepare")), launch_only)


@kernels.rmsprop_step.implement("webgpu")
def rmsprop_step(rt, param, grad, square_avg, momentum_buffer, grad_avg, hyper):
    alpha = hyper["alpha"]
    flags = _flags(hyper, COUNT_SKIPS=hyper.get("skipped_steps") is not None, MOMENTUM=momentum_buffer is not None,
                   CENTERED=grad_avg is not None)
    values = (hyper["lr"], alpha, 1.0 - alpha, hyper["eps"], hyper["weight_decay"], hyper["momentum"])
    states = (("square_avg", square_avg), ("momentum_buffer", momentum_buffer), ("grad_avg", grad_avg))
    _run(rt, RMSPROP, flags, param, grad, states, values, hyper.get("skip_if"), hyper.get("skipped_steps"),
         bool(hyper.get("prepare")))


# ------------------------------------------------------------------ several SGD updates in one dispatch

GROUP_MAX = 16  # members of one sgd4_group dispatch at most (its uniform table has room for this many)
_GROUP_HEAD = struct.Struct("<4I")
_MEMBER = struct.Struct("<12I")


def member_bindings(momentum):
    """Storage buffers one sgd4_group member binds: its parameter, gradient and (with momentum) momentum buffer."""
    return 3 if momentum else 2


def group_size(rt, momentum):
    """How many sgd4 updates one sgd4_group dispatch may take on this device: each member's bindings, 2 more for
    the group, and the uniform may take one where it lives in storage."""
    return max(0, min(GROUP_MAX, (rt.limits["max_storage_buffers_per_shader_stage"] - 3) // member_bindings(momentum)))


def group_key(launch):
    """What sgd4 launches must share to run in one sgd4_group: their flags (but the workgroup size, which
    sgd4_group picks) and the skip flag's offset; None for a launch of another kernel."""
    if launch is None or launch.kernel is not SGD[1]:
        return None
    flags = tuple((name, v) for name, v in launch.constants if name != "WORKGROUP")
    return flags, _PARAMS.unpack(launch.params)[3]


@functools.lru_cache(maxsize=None)
def group_kernel(members, momentum):
    """The sgd4_group Kernel of `members` parameters (its bindings and switch cases spliced for that count)."""
    per = member_bindings(momentum)
    lines, cases = [], []
    for k in range(members):
        lines.append(f"@group(0) @binding({per * k}) var<storage, read_write> gp{k}: array<vec4<f32>>;")
        lines.append(f"@group(0) @binding({per * k + 1}) var<storage, read> gg{k}: array<vec4<f32>>;")
        buf = "vec4<f32>()"
        if momentum:
            lines.append(f"@group(0) @binding({per * k + 2}) var<storage, read_write> gm{k}: array<vec4<f32>>;")
            buf = f"gm{k}[m.at.w + j]"
        update = (f"            let w = gp{k}[m.at.y + j];\n"
                  f"            let buf0 = {buf};\n"
                  f"            let r = sgd_update(h, gg{k}[m.at.z + j], w, buf0);\n")
        if momentum:
            update += f"            gm{k}[m.at.w + j] = select(buf0, r.buf, own);\n"
        cases.append(f"        case {k}u: {{\n{update}            gp{k}[m.at.y + j] = select(w, r.w, own);\n        }}")
    first = per * members
    lines.append(f"@group(0) @binding({first}) var<storage, read> group_scalars: array<f32>;")
    lines.append(f"@group(0) @binding({first + 1}) var<storage, read> group_skip: array<f32>;")
    lines.append(f"@group(0) @binding({first + 2}) var<uniform> group_table: Group;")
    splices = {"GROUP_BINDINGS": "\n".join(lines), "GROUP_CASES": "\n".join(cases)}
    shader = Shader("optim_group.wgsl", lambda: ({"GROUP_MAX": GROUP_MAX}, splices))
    layout = [(k, mode) for m in range(members) for k, mode in
              zip(range(per * m, per * m + per), ("write", "read", "write"))]
    layout += [(first, "read"), (first + 1, "read"), (first + 2, "uniform")]
    return Kernel(shader, "sgd4_group", layout, _SGD_FLAGS)


def group_launch(rt, launches):
    """The Launch of one sgd4_group dispatch doing what the sgd4 `launches` (one per parameter, of one group_key)
    do, or None where it would take more workgroups than a dispatch may. Its storages: each member's
    member_bindings, then the scalars and the skip flag."""
    flags = dict(launches[0].constants)
    momentum = bool(flags["MOMENTUM"])
    kernel = group_kernel(len(launches), momentum)
    flags["WORKGROUP"] = WORKGROUP
    rows, first, slots, skip_offset = [], 0, set(), None
    for launch in launches:
        f = _PARAMS.unpack(launch.params)
        n, param_offset, grad_offset, skip_offset, state_offset = f[:5]
        rows.append(_MEMBER.pack(n, param_offset // 4, grad_offset // 4, state_offset // 4, *f[8:12], f[12], first,
                                 0, 0))
        first += -(-n // (4 * WORKGROUP))
        slots.update(launch.slots)
    if first > rt.limits["max_compute_workgroups_per_dimension"]:
        return None
    params = _GROUP_HEAD.pack(skip_offset, len(launches), 0, 0) + b"".join(rows) + \
        bytes(_MEMBER.size * (GROUP_MAX - len(launches)))
    return rt.launch(kernel, kernel.constants(flags), params, (first, 1, 1), tuple(sorted(slots)))


# ------------------------------------------------------------------ several Adam updates in one dispatch

_ADAM_MEMBER = struct.Struct("<20I")


def adam_member_bindings(amsgrad):
    """Storage buffers one adam4_group member binds: parameter, gradient, exp_avg, exp_avg_sq (, max_exp_avg_sq)."""
    return 5 if amsgrad else 4


def adam_group_size(rt, amsgrad, skip=False):
    """How many adam4 updates one adam4_group dispatch may take on this device (its members' bindings and the
    group's scalars, and with `skip` its skip flag and skipped-step counts, within the storage buffers a stage may
    bind)."""
    buffers = rt.limits["max_storage_buffers_per_shader_stage"] - (2 if skip else 0)
    return max(0, min(GROUP_MAX, (buffers - 2) // adam_member_bindings(amsgrad)))


def adam_group_key(launch):
    """What adam4 launches must share to run in one adam4_group: their flags (but the workgroup size) and the skip
    flag's offset; None for a launch of another kernel. (Their skip flag and skipped-step counts must also be one
    buffer each: adam_steps checks.)"""
    if launch is None or launch.kernel is not ADAM[1]:
        return None
    flags = tuple((name, v) for name, v in launch.constants if name != "WORKGROUP")
    return flags, _PARAMS.unpack(launch.params)[3]


# The skip flag in adam4_group, spliced: with SKIP_IF, its binding and the skipped-step counts (one buffer for every
# member, each at its own offset: Optimizer._skipped_steps makes them so); without, functions that skip nothing.
_ADAM_GROUP_SKIP = """fn group_skipped() -> bool {{ return SKIP_IF && group_skip[group_table.skip_offset] > 0.0; }}
fn count_skip(at: u32) {{ if (COUNT_SKIPS) {{ group_skipped_steps[at] += 1.0; }} }}
fn skipped_count(at: u32) -> f32 {{ return select(0.0, group_skipped_steps[at], COUNT_SKIPS); }}
@group(0) @binding({0}) var<storage, read> group_skip: array<f32>;
@group(0) @binding({1}) var<storage, read_write> group_skipped_steps: array<f32>;"""
_ADAM_GROUP_NO_SKIP = """fn group_skipped() -> bool { return false; }
fn count_skip(at: u32) {}
fn skipped_count(at: u32) -> f32 { return 0.0; }"""


@functools.lru_cache(maxsize=None)
def adam_group_kernel(members, amsgrad, skip=False):
    """The adam4_group Kernel of `members` parameters (its bindings and switch cases spliced for that count); with
    `skip`, it reads a skip flag (SKIP_IF) and counts skipped steps (COUNT_SKIPS)."""
    per = adam_member_bindings(amsgrad)
    lines, cases = [], []
    names = ("gp", "gg", "gm", "gv", "gx")
    for k in range(members):
        for b, (name, mode) in enumerate(zip(names[:per], ("read_write", "read", "read_write", "read_write",
                                                            "read_write"))):
            lines.append(f"@group(0) @binding({per * k + b}) var<storage, {mode}> {name}{k}: array<vec4<f32>>;")
        vmax = f"gx{k}[m.st.z + j]" if amsgrad else "vec4<f32>()"
        body = (f"            let w = gp{k}[m.at.y + j];\n"
                f"            let mm = gm{k}[m.st.x + j];\n"
                f"            let vv = gv{k}[m.st.y + j];\n"
                f"            let vmax = {vmax};\n"
                f"            let r = adam_update(h, gg{k}[m.at.z + j], w, mm, vv, vmax);\n"
                f"            gm{k}[m.st.x + j] = select(mm, r.m, own);\n"
                f"            gv{k}[m.st.y + j] = select(vv, r.v, own);\n")
        if amsgrad:
            body += f"            gx{k}[m.st.z + j] = select(vmax, r.vmax, own);\n"
        body += f"            gp{k}[m.at.y + j] = select(w, r.w, own);\n"
        cases.append(f"        case {k}u: {{\n{body}        }}")
    first = per * members
    lines.append(f"@group(0) @binding({first}) var<storage, read> group_scalars: array<f32>;")
    table = first + (3 if skip else 1)
    lines.append(f"@group(0) @binding({table}) var<uniform> group_table: AdamGroup;")
    lines.append(_ADAM_GROUP_SKIP.format(first + 1, first + 2) if skip else _ADAM_GROUP_NO_SKIP)
    splices = {"GROUP_BINDINGS": "\n".join(lines), "GROUP_CASES": "\n".join(cases)}
    shader = Shader("optim_group_adam.wgsl", lambda: ({"GROUP_MAX": GROUP_MAX}, splices))
    layout = [(per * m + b, mode) for m in range(members) for b, mode in
              enumerate(("write", "read", "write", "write", "write")[:per])]
    layout += [(first, "read")] + ([(first + 1, "read"), (first + 2, "write")] if skip else []) + [(table, "uniform")]
    flags = ("WORKGROUP", "MAXIMIZE", "WEIGHT_DECAY", "DECOUPLED", "AMSGRAD") + (("SKIP_IF", "COUNT_SKIPS") if skip else ())
    return Kernel(shader, "adam4_group", layout, flags)


def adam_group_launch(rt, launches):
    """The Launch of one adam4_group dispatch doing what the adam4 `launches` (one per parameter, of one
    adam_group_key) do, or None where it would take more workgroups than a dispatch may. Its storages: each
    member's adam_member_bindings, then the scalars, and with SKIP_IF the skip flag and the skipped-step counts."""
    flags = dict(launches[0].constants)
    amsgrad = bool(flags["AMSGRAD"])
    kernel = adam_group_kernel(len(launches), amsgrad, bool(flags["SKIP_IF"]))
    flags["WORKGROUP"] = WORKGROUP
    rows, first, slots = [], 0, set()
    for launch in launches:
        f = _PARAMS.unpack(launch.params)
        n, param_offset, grad_offset = f[:3]
        states = f[4:7]
        rows.append(_ADAM_MEMBER.pack(n, param_offset // 4, grad_offset // 4, first, *(o // 4 for o in states), f[7],
                                      *f[8:20]))
        first += -(-n // (4 * WORKGROUP))
        slots.update(launch.slots)
    if first > rt.limits["max_compute_workgroups_per_dimension"]:
        return None
    params = struct.pack("<4I", len(launches), f[3], 0, 0) + b"".join(rows) + \
        bytes(_ADAM_MEMBER.size * (GROUP_MAX - len(launches)))
    return rt.launch(kernel, kernel.constants(flags), params, (first, 1, 1), tuple(sorted(slots)))


@kernels.adam_steps.implement("webgpu")
def adam_steps(rt, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, hypers):
    """Each parameter's adam4 Launch, then runs of them alike (adam_group_key, every buffer distinct) as adam4_group
    dispatches where the GPU variant runs adam4 (a vec4 a thread); the rest one by one."""
    members = []
    for args in zip(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, hypers):
        member = _adam(rt, *args, launch_only=True)
        if member is not None:
            members.append(member)
    grouping = rt.variant["optim_vec4_per_thread"] == 1
    i = 0
    while i < len(members):
        launch, storages = members[i]
        key = adam_group_key(launch) if grouping else None
        run = [members[i]]
        if key is not None:
            flags = dict(key[0])
            amsgrad, skip = bool(flags["AMSGRAD"]), bool(flags["SKIP_IF"])
            per, size = adam_member_bindings(amsgrad), adam_group_size(rt, amsgrad, skip)
            shared = [s.buffer for s in storages[6:8]]  # the skip flag's and the skipped-step counts' buffers
            seen = set(s.buffer for s in storages[:per]).union(shared)
            for other in members[i + 1:i + size]:
                own = [s.buffer for s in other[1][:per]]
                if (adam_group_key(other[0]) != key or seen.intersection(own) or len(set(own)) != per
                        or [s.buffer for s in other[1][6:8]] != shared):
                    break  # (WebGPU: no buffer bound writable twice in a dispatch)
                seen.update(own)
                run.append(other)
        group = adam_group_launch(rt, [m[0] for m in run]) if len(run) > 1 else None
        if group is None:
            rt.run(launch, storages)
            i += 1
            continue
        per = adam_member_bindings(bool(dict(key[0])["AMSGRAD"]))
        rt.run(group, [s for m in run for s in m[1][:per]] + [rt.scalars] + (list(storages[6:8]) if skip else []))
        i += len(run)
