"""Autocast's op policy: which ops run in the lower precision (float16; bfloat16 on the CPU) and which in float32
inside ``webgrad.autocast`` (amp/).

An op function takes part by a decorator at its definition: ``@lower_precision("linear")`` casts its
floating tensor arguments to the autocast dtype, ``@full_precision("softmax")`` casts float16 and bfloat16 ones to
float32. Both are no-ops (one list lookup) outside an autocast region. The lists follow PyTorch's
(torch/csrc/autocast_mode.cpp): "webgpu" takes CUDA's lists, "cpu" the CPU's, restricted to the ops
webgrad has; ops on neither list run in the dtype of their inputs, and binary ops between float16 and
float32 promote to float32 as usual.

Casts of leaf tensors that require grad (parameters) are cached for the autocast region, as PyTorch does:
a weight used by several ops is cast once per step, and its gradient still flows back to the float32
parameter through the cast's backward. The cache holds a parameter's first cast weakly: most weights are used by
one op a step, and PyTorch's cache keeps every such copy alive to the region's end, which is where a GPT's peak
is (its last layers' weights in half: 24 MiB at 6 layers of width 384). A parameter that has to be cast a second
time in the region (its first cast gone) is held from then on, so a weight used at every step of an RNN's loop is
cast at most twice.

What an op's backward keeps of such a cast (kept): the parameter, which is alive anyway, and the cast is made
again from it when the backward runs, if the cast itself is gone by then. PyTorch's ops save the cast weight
for their backward, so every layer's float16 copy lives from the forward to that layer's backward, beside the
float32 parameter; here it dies once the forward is done with it (or with the region's cache). The values are
the same (a cast of the same parameter, which the version counter says nothing wrote in between), and a
replayed step's peak loses those copies (ResNet-18's and a GPT's weights in half: 21 to 24 MiB).
"""

import functools
import threading
import weakref

from .. import dtypes
from .._tensor import Tensor, cast

# Ops whose float32 forms autocast keeps on each device type (PyTorch's fp32 lists, restricted to ours).
# Convolutions, matmul and linear are float16 on both (PyTorch's lower_precision_fp lists).
# batch_norm is on neither of CUDA's lists: on "webgpu" it takes a half input with float32 weights and
# statistics and returns half, as cuDNN does, so a ResNet block's BatchNorm, ReLU and residual add stay
# in float16 (their kernels read and write half: no casts). CPU autocast keeps it in float32.
FP32_OPS = {
    "webgpu": frozenset((
        "softmax", "log_softmax", "sum", "prod", "logsumexp", "layer_norm", "group_norm", "cross_entropy",
        "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits",
    )),
    "cpu": frozenset((
        "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "prod",
        "binary_cross_entropy", "binary_cross_entropy_with_logits", "batch_norm",
    )),
}


# The dtype an autocast region lowers to where none is given (PyTorch's: bfloat16 on the CPU, float16 on the GPU),
# and the ones each device type takes (both, as PyTorch's CPU and CUDA).
DEFAULT_DTYPES = {"cpu": dtypes.bfloat16, "webgpu": dtypes.float16}
LOWER_DTYPES = {"cpu": (dtypes.bfloat16, dtypes.float16), "webgpu": (dtypes.float16, dtypes.bfloat16)}
_LOWER = (dtypes.float16, dtypes.bfloat16)


class _State(threading.local):
    def __init__(self):
        self.enabled = {"cpu": False, "webgpu": False}
        self.dtype = dict(DEFAULT_DTYPES)
        self.cache = {}  # id(leaf) -> _CacheEntry; cleared when the outermost region exits
        self.cache_enabled = True
        self.depth = 0


STATE = _State()


def autocast_enabled(device_type):
    """Whether autocast is on for tensors of this device type ("cpu" or "webgpu") in this thread."""
    return STATE.enabled.get(device_type, False)


def _active(args, kwargs):
    """The device type whose autocast is on for these arguments' tensors, or None."""
    enabled = STATE.enabled
    if not (enabled["webgpu"] or enabled["cpu"]):
        return None
    for v in (*args, *kwargs.values()):
        if isinstance(v, Tensor):
            kind = v.device.type
            return kind if enabled[kind] else None
    return None


def _cast(v, dtype):
    if not isinstance(v, Tensor) or not v.dtype.is_floating or v.dtype is dtype or v.dtype is dtypes.float64:
        return v
    if v.requires_grad and v.grad_fn is None and STATE.cache_enabled:  # a parameter: cast once per region
        entry = STATE.cache.get(id(v))
        if entry is not None and entry.source is v:
            hit = entry.cast()
            # a cast whose graph node a backward already consumed cannot carry another gradient: cast anew
            if hit is not None and hit.dtype is dtype and \
                    (hit.grad_fn is None or hit.grad_fn.backward_fn is not None):
                return hit
        out = cast(v, dtype)
        # held weakly at first (module doc); a parameter cast again within the region is held from then on
        STATE.cache[id(v)] = _CacheEntry(v, out, strong=entry is not None and entry.source is v)
        _recasts[id(out)] = _Recast(out, v)
        return out
    return cast(v, dtype)


class _CacheEntry:
    """The autocast cache's record of a parameter's cast: weak while the parameter has been cast once in the
    region, strong once it has had to be cast again (used by several ops, as an RNN's weights are every step)."""

    __slots__ = ("source", "_weak", "_strong")

    def __init__(self, source, out, strong):
        self.source = source
        self._strong = out if strong else None
        self._weak = None if strong else weakref.ref(out)

    def cast(self):
        """The cast, or None where it was held weakly and is gone."""
        return self._strong if self._weak is None else self._weak()


class _Recast:
    """kept()'s function for autocast's cast of a parameter: the cast while it lives, else a new cast of the
    parameter (module doc)."""

    __slots__ = ("ref", "source", "dtype", "version", "__weakref__")

    def __init__(self, out, source):
        key = id(out)
        self.ref = weakref.ref(out, lambda _: _recasts.pop(key, None))
        self.source, self.dtype, self.version = source, out.dtype, source._version

    def __call__(self):
        t = self.ref()
        if t is not None:
            return t
        if self.source._version != self.version:
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been modified by an inplace operation: "
                f"a parameter of shape {list(self.source.shape)} that autocast cast to {self.dtype.name} for the "
                f"forward pass was written in place (version {self.source._version}; expected {self.version}) "
                "before the backward pass, which needs the values it had")
        return cast(self.source, self.dtype)


_recasts = {}  # id(autocast's cast of a parameter) -> its _Recast, while the cast lives


def kept(t):
    """What an op's backward holds of its tensor argument `t`, as a function that returns t's values when the
    backward runs: for autocast's cast of a parameter, the parameter (cast again if the cast is gone: module
    doc); for any other tensor, t itself."""
    recast = _recasts.get(id(t))
    if recast is not None and recast.ref() is t:
        return recast
    return lambda: t


def _holds_half(args, kwargs):
    return any(isinstance(v, Tensor) and v.dtype is dtypes.float16 for v in (*args, *kwargs.values()))


def lower_precision(name):
    """Decorator: inside autocast, the op's floating tensor arguments are cast to the autocast dtype."""
    def wrap(fn):
        @functools.wraps(fn)
        def op(*args, **kwargs):
            kind = _active(args, kwargs)
            if kind is not None:
                dtype = STATE.dtype[kind]
                args = tuple(_cast(v, dtype) for v in args)
                kwargs = {k: _cast(v, dtype) for k, v in kwargs.items()}
            return fn(*args, **kwargs)
        op.__autocast__ = ("lower_precision", name)
        return op
    return wrap


def full_precision(name, reads_half=None):
    """Decorator: inside autocast (where `name` is on the device's fp32 list), float16 and bfloat16 tensor
    arguments are cast to float32, so the op computes and returns float32.

    reads_half: the op's form for float16 arguments, called with them instead of their casts. It reads them
    into float32 itself and returns what the op on the casts would (a half is exact in float32), so what it
    keeps for its backward is the float16 tensor, not a float32 copy twice its size (a language model's
    logits, for the fused cross-entropy)."""
    def wrap(fn):
        @functools.wraps(fn)
        def op(*args, **kwargs):
            kind = _active(args, kwargs)
            if kind is not None and name in FP32_OPS[kind]:
                if reads_half is not None and _holds_half(args, kwargs):
                    return reads_half(*args, **kwargs)
                args = tuple(_cast(v, dtypes.float32) if isinstance(v, Tensor) and v.dtype in _LOWER else v
                             for v in args)
                kwargs = {k: _cast(v, dtypes.float32) if isinstance(v, Tensor) and v.dtype in _LOWER else v
                          for k, v in kwargs.items()}
            return fn(*args, **kwargs)
        op.__autocast__ = ("fp32", name)
        return op
    return wrap
