"""PyTorch's operator database (OpInfo) run through webgrad: forward values and gradients against torch.

    python -m webgrad.testing.opinfo --device cpu|webgpu [--only NAME ...] [--write-table PATH]
                                     [--max-samples N] [--time-box S] [--verbose]

Every float32 OpInfo entry of ``torch.testing._internal.common_methods_invocations.op_db`` (needs torch and
the ``expecttest`` package) is looked up in webgrad the way a user reaches it: ``torch.X`` as ``webgrad.X``,
``nn.functional.X`` as ``webgrad.nn.functional.X`` (likewise ``linalg.``, ``special.``, ``fft.``), a
method-only op as ``Tensor.X``. Where the OpInfo wraps its op in a lambda (argument reordering, ``x.T``,
a clone before an in-place method), the lambda itself runs with ``torch`` bound to webgrad. Each sample
input is converted (tensors of any dtype, dtypes, devices, sizes, memory formats, nested containers), run
through both libraries, and compared:

- forward: shape, dtype and values; floats within a tolerance, integers and bools exactly. Integer
  results are compared by value: an integer result of another integer dtype than torch's (int32 where
  torch gives int64, while webgrad's int64 is being made real) does not fail; such entries are counted
  apart and named in the table ("int32 for torch's int64"). Any other dtype difference fails.
- gradients, where the OpInfo supports autograd: a fixed random cotangent is backpropagated through both,
  and every input's gradient is compared, with PyTorch's convention for absent ones (None for an input
  the output does not depend on, zeros for one it depends on through a non-differentiable op such as
  ``round``).
- random ops (dropout, bernoulli, ``empty``...): shapes and dtypes only, since the values cannot match.
- where PyTorch's own gradient test of an op is an expected failure (as_strided_scatter's gradient is known to be
  wrong), a gradient that differs from torch's is noted rather than failed.

A torch module passed as an argument (triplet_margin_with_distance_loss's distance_function) becomes webgrad's
module of that class with the same attributes, where it has no parameters.

Each entry gets one status, the worst over its samples:

- ``wrong``: a value, shape or dtype differs from torch's, forward or gradient (silently wrong training);
- ``error``: webgrad raised on a sample torch accepts;
- ``forward-only``: every forward matches, but a gradient torch gives is missing or raised;
- ``pass``: forward and gradient of every sample match;
- ``missing``: webgrad has no such name.

Samples torch itself refuses are skipped. Each entry is time-boxed; a time box reached after some
samples ran keeps the verdict of those samples.
"""

import argparse
import dataclasses
import functools
import importlib
import itertools
import math
import re
import signal
import sys
import time
import types
import warnings
from dataclasses import dataclass, field

STATUSES = ("pass", "forward-only", "wrong", "error", "missing")
WORST_FIRST = ("wrong", "error", "forward-only", "pass")

# (rtol, atol) for float results; integer and bool results are compared exactly
FORWARD_TOL = {"cpu": (1e-4, 1e-5), "webgpu": (1e-3, 1e-4)}
GRAD_TOL = {"cpu": (1e-3, 1e-4), "webgpu": (5e-3, 5e-4)}
FLOAT16_TOL = (1e-3, 1e-3)
BFLOAT16_TOL = (1.6e-2, 1e-2)  # a bfloat16 has 8 significant bits: one rounding apart is 2**-8 relative

# values are undefined (uninitialised memory): only shapes and dtypes are compared
UNDEFINED_VALUES = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
                    "resize_", "resize_as_"}


class Missing(AttributeError):
    """webgrad has no such name (an AttributeError, so that hasattr() in torch's lambdas answers False)."""


class Unconvertible(Exception):
    """A sample holds something webgrad has no equivalent of (a dtype, a layout...)."""


class _TimeBox(BaseException):
    """Raised by the alarm when an entry runs past its time box (BaseException: ops may catch Exception)."""


@dataclass
class Result:
    name: str
    variant: str
    status: str
    reason: str = ""
    samples: int = 0  # samples run (torch accepted them)
    int_dtype: str = ""  # "int32 for torch's int64": an integer result of another integer dtype
    seconds: float = 0.0
    notes: list = field(default_factory=list)
    failures: list = field(default_factory=list)  # (status, reason) of every failing sample
    grads: int = 0  # samples whose gradients were compared

    @property
    def full_name(self):
        return f"{self.name}:{self.variant}" if self.variant else self.name


# ------------------------------------------------------------------------------------------ resolution
def _wg():
    import webgrad
    return webgrad


def _webgrad_path(path):
    """webgrad's object at a torch-relative dotted path ("nn.functional.relu"), or raise Missing."""
    obj = _wg()
    for part in path.split("."):
        nxt = getattr(obj, part, None)
        if nxt is None and isinstance(obj, types.ModuleType):
            try:
                nxt = importlib.import_module(f"{obj.__name__}.{part}")
            except ImportError:
                nxt = None
        if nxt is None:
            raise Missing(f"webgrad has no torch.{path}")
        obj = nxt
    return obj


class _TorchAsWebgrad:
    """The `torch` an OpInfo lambda sees when it runs on webgrad: torch.X is webgrad.X, or Missing."""

    def __init__(self, path=""):
        self._path = path

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        path = f"{self._path}.{name}" if self._path else name
        obj = _webgrad_path(path)
        return _TorchAsWebgrad(path) if isinstance(obj, types.ModuleType) else obj


def _code_names(code):
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _passthrough_seed(op, *args, **kwargs):
    return op(*args, **kwargs)


def _webgrad_seed(op, *args, **kwargs):
    _wg().manual_seed(42)
    return op(*args, **kwargs)


def _rebind(fn, torch_module, seed_wrapper):
    """fn (a function defined in torch's test code) with its global `torch` and seeding replaced."""
    if isinstance(fn, functools.partial):
        return functools.partial(_rebind(fn.func, torch_module, seed_wrapper), *fn.args, **fn.keywords)
    if not isinstance(fn, types.FunctionType) or not fn.__module__.startswith("torch.testing"):
        return fn
    env = dict(fn.__globals__)
    env["torch"] = torch_module
    env["wrapper_set_seed"] = seed_wrapper
    out = types.FunctionType(fn.__code__, env, fn.__name__, fn.__defaults__, fn.__closure__)
    out.__kwdefaults__ = fn.__kwdefaults__
    return out


def _is_aten_op(fn, name):
    """Whether fn is the ATen operator (packet or overload) that the public torch function `name` calls."""
    import torch
    packet = fn.overloadpacket if isinstance(fn, torch._ops.OpOverload) else fn
    return isinstance(packet, torch._ops.OpOverloadPacket) and packet.__name__ == name


def _is_test_function(fn):
    inner = fn.func if isinstance(fn, functools.partial) else fn
    return isinstance(inner, types.FunctionType) and inner.__module__.startswith("torch.testing")


def _torch_path(torch, path):
    obj = torch
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def resolve(op):
    """webgrad's callable for an OpInfo entry, taking the sample's (input, *args, **kwargs); or raise Missing."""
    import torch
    name, fn = op.name, op.op
    if _is_aten_op(fn, name) and _torch_path(torch, name) is None:  # an ATen operator only: torch.ops.aten.NAME
        overload = getattr(_wg_aten(name), getattr(fn, "_overloadname", "default"))
        return lambda *args, **kwargs: overload(*args, **kwargs)
    _name_exists(name)
    if fn is not None and fn is _torch_path(torch, name):
        return _webgrad_path(name.removeprefix("torch."))  # torch.ops.aten.X.default names itself from torch
    if "." not in name and fn is getattr(torch.Tensor, name, None):
        wg = _wg()
        if not hasattr(wg.Tensor, name):
            raise Missing(f"webgrad has no Tensor.{name}")
        return lambda inp, *args, **kwargs: getattr(inp, name)(*args, **kwargs)
    if _is_test_function(fn):  # the lambda says how torch's test calls the op
        return _rebind(fn, _TorchAsWebgrad(), _webgrad_seed)
    if _is_aten_op(fn, name) and _torch_path(torch, name) is not None:  # aten._softmax_backward_data is torch's
        return _webgrad_path(name)
    raise Missing(f"{name} has no public torch name webgrad could mirror ({type(fn).__name__})")


def _wg_aten(name):
    """webgrad's torch.ops.aten.NAME, or Missing."""
    try:
        return getattr(_wg().ops.aten, name)
    except AttributeError:
        raise Missing(f"webgrad has no torch.ops.aten.{name} (an internal ATen op)") from None


def _name_exists(name):
    wg = _wg()
    try:
        if "." in name:  # nn.functional.X, linalg.X, special.X, fft.X, masked.X, ...
            _webgrad_path(name.removeprefix("torch."))
            return
        for candidate in (name, name + "_"):  # an in-place-only op (cauchy -> Tensor.cauchy_)
            if hasattr(wg, candidate) or hasattr(wg.Tensor, candidate):
                return
        if hasattr(wg.ops.aten, name):  # an ATen operator only, that torch's test reaches as torch.ops.aten.NAME
            return
        raise Missing(f"webgrad has no torch.{name} or Tensor.{name}")
    except Missing as exc:
        if ((name.startswith("_") and not name.startswith("__")) or name.endswith("_backward")
                or name.startswith(("native_", "jiterator_", "torch.ops."))):
            raise Missing(f"{exc} (an internal ATen op)") from None
        raise


def _torch_gradient_known_wrong(op):
    """Whether PyTorch's own gradient test of the entry is an expected failure for float32 (its gradient is known to
    be wrong: as_strided_scatter's gives the input the gradient of the part src replaced): a webgrad gradient that
    differs from it is noted, not held against webgrad."""
    import torch
    for info in tuple(op.decorators) + tuple(getattr(op, "skips", ())):
        if getattr(info, "cls_name", None) != "TestBwdGradients" or getattr(info, "test_name", None) != "test_fn_grad":
            continue
        if info.dtypes is not None and torch.float32 not in info.dtypes:
            continue
        if any(getattr(d, "__name__", "") == "expectedFailure" for d in info.decorators):
            return True
    return False


def _random_candidate(op):
    fn = op.op.func if isinstance(op.op, functools.partial) else op.op
    return isinstance(fn, types.FunctionType) and "wrapper_set_seed" in _code_names(fn.__code__)


# ------------------------------------------------------------------------------------------ conversion
_DTYPE_NAMES = {"int64": ("int64", "long"), "float64": ("float64", "double"), "float16": ("float16", "half"),
                "int32": ("int32", "int"), "bool": ("bool",), "float32": ("float32", "float")}


def webgrad_dtype(torch_dtype):
    """webgrad's dtype for a torch dtype, by name (torch.long -> webgrad.long while that is int32)."""
    wg = _wg()
    name = str(torch_dtype).replace("torch.", "")
    for candidate in _DTYPE_NAMES.get(name, (name,)):
        d = getattr(wg, candidate, None)
        if isinstance(d, wg.dtype):
            return d
    raise Unconvertible(f"webgrad has no dtype torch.{name}")


def _is_int(torch_dtype):
    return not torch_dtype.is_floating_point and not torch_dtype.is_complex and str(torch_dtype) != "torch.bool"


class Converter:
    """torch objects of one sample -> webgrad objects on `device`; the same torch tensor gives the same one."""

    def __init__(self, device):
        self.device = device
        self.tensors = {}  # id(torch tensor) -> (torch tensor, webgrad tensor)

    def __call__(self, obj):
        import torch
        wg = _wg()
        if isinstance(obj, torch.Tensor):
            hit = self.tensors.get(id(obj))
            if hit is not None:
                return hit[1]
            if obj.layout != torch.strided:
                raise Unconvertible(f"webgrad has no {obj.layout} tensors")
            dtype = webgrad_dtype(obj.dtype)
            data = obj.detach().cpu().resolve_conj().resolve_neg()
            try:
                array = data.numpy() if data.dtype != torch.bfloat16 else data.float().numpy()  # (exact)
            except TypeError:  # dtypes without a NumPy twin
                raise Unconvertible(f"webgrad has no dtype {obj.dtype}") from None
            # a view into a larger storage (a sample made by slicing a base) keeps its place in that storage:
            # ops that read the storage itself (as_strided's storage_offset) see what torch's sees
            t = self._storage_view(data, dtype) if data.storage_offset() else \
                wg.tensor(array, dtype=dtype, device=self.device)
            if obj.requires_grad:
                t.requires_grad_(True)
            self.tensors[id(obj)] = (obj, t)
            return t
        if isinstance(obj, torch.Size):
            return wg.Size(obj)
        if isinstance(obj, torch.dtype):
            return webgrad_dtype(obj)
        if isinstance(obj, torch.device):
            return wg.device(self.device)
        if isinstance(obj, torch.memory_format):
            name = str(obj).replace("torch.", "")
            fmt = getattr(wg, name, None)
            if fmt is None:
                raise Unconvertible(f"webgrad has no torch.{name}")
            return fmt
        if isinstance(obj, torch.layout):
            name = str(obj).replace("torch.", "")
            if not hasattr(wg, name):
                raise Unconvertible(f"webgrad has no torch.{name}")
            return getattr(wg, name)
        if isinstance(obj, torch.nn.Module):
            return self._module(obj)
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return self._options(obj)
        if isinstance(obj, torch.Generator):
            return wg.Generator().manual_seed(obj.initial_seed())
        if isinstance(obj, list):
            return [self(o) for o in obj]
        if isinstance(obj, tuple):
            items = [self(o) for o in obj]
            return type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)
        if isinstance(obj, dict):
            return {k: (self.device if k == "device" and isinstance(v, str) else self(v)) for k, v in obj.items()}
        if obj is None or isinstance(obj, (bool, int, float, complex, str, slice, type(Ellipsis), range)):
            return obj
        if type(obj).__module__ == "numpy":
            return obj
        raise Unconvertible(f"the harness cannot convert a {type(obj).__name__}")


    def _module(self, obj):
        """webgrad's module of the same class for a torch module without parameters or buffers (a distance
        function passed as an argument), with the same attributes."""
        wg = _wg()
        cls = getattr(wg.nn, type(obj).__name__, None)
        if cls is None or any(True for _ in obj.parameters()) or any(True for _ in obj.buffers()):
            raise Unconvertible(f"the harness cannot convert a {type(obj).__name__}")
        module = cls.__new__(cls)
        wg.nn.Module.__init__(module)
        for name, value in vars(obj).items():
            if not name.startswith("_"):
                setattr(module, name, self(value))
        return module

    def _options(self, obj):
        """webgrad.nn's dataclass of the same name for a torch.nn options dataclass (LinearCrossEntropyOptions),
        with the same fields."""
        cls = getattr(_wg().nn, type(obj).__name__, None)
        if cls is None or not dataclasses.is_dataclass(cls):
            raise Unconvertible(f"the harness cannot convert a {type(obj).__name__}")
        return cls(**{f.name: self(getattr(obj, f.name)) for f in dataclasses.fields(obj)})

    def _storage_view(self, data, dtype):
        """A webgrad view with data's sizes, strides and offset onto a copy of data's whole storage."""
        import torch
        from webgrad._view import View
        wg = _wg()
        whole = torch.empty(0, dtype=data.dtype).set_(data.untyped_storage())
        base = wg.tensor((whole.float() if whole.dtype == torch.bfloat16 else whole).numpy(), dtype=dtype,
                         device=self.device)
        return wg.Tensor._make(View(base._view.storage, tuple(data.shape), tuple(data.stride()), data.storage_offset(),
                                    dtype), base.device)


def _flatten(obj):
    """Leaves of nested tuples/lists/dicts, in order."""
    if isinstance(obj, (list, tuple)) and not _is_size(obj):
        return [leaf for o in obj for leaf in _flatten(o)]
    if isinstance(obj, dict):
        return [leaf for v in obj.values() for leaf in _flatten(v)]
    return [obj]


def _is_size(obj):
    import torch
    return isinstance(obj, (torch.Size, _wg().Size))


def _to_numpy(t):
    """A webgrad or torch tensor's values as a NumPy array (float16 kept, bfloat16 as float32: NumPy has none;
    everything on the host)."""
    import torch
    if str(t.dtype).endswith("bfloat16"):
        t = t.float()
    if isinstance(t, torch.Tensor):
        return t.detach().cpu().resolve_conj().resolve_neg().numpy(force=True)  # (force: a ZeroTensor gradient, sgn's)
    return t.detach().to("cpu").numpy()


# ------------------------------------------------------------------------------------------ comparison
class Mismatch(Exception):
    """A value, shape or dtype differs from torch's."""


def _shape_str(t):
    return "[" + ", ".join(str(s) for s in t.shape) + "]"


def compare(ref, got, tol, where="output", random=False, notes=None):
    """Raise Mismatch naming the first difference between torch's `ref` and webgrad's `got`."""
    import numpy as np
    import torch
    wg = _wg()
    if isinstance(ref, torch.Tensor):
        if not isinstance(got, wg.Tensor):
            raise Mismatch(f"{where}: torch gives a Tensor, webgrad a {type(got).__name__}")
        if tuple(ref.shape) != tuple(got.shape):
            raise Mismatch(f"{where}: shape {_shape_str(got)}, torch {_shape_str(ref)}")
        ref_dtype = str(ref.dtype).replace("torch.", "")
        if got.dtype.name == ref_dtype:
            pass
        elif _is_int(ref.dtype) and not got.dtype.is_floating and got.dtype.name != "bool":
            if notes is not None:
                notes.add(f"{got.dtype.name} for torch's {ref_dtype}")
        else:
            raise Mismatch(f"{where}: dtype {got.dtype.name}, torch {ref_dtype}")
        if random:
            return
        a, b = _to_numpy(got), _to_numpy(ref)
        if a.dtype.kind in "biu" or b.dtype.kind in "biu":
            if not np.array_equal(a.astype(np.int64), b.astype(np.int64)):
                bad = np.argwhere(a.astype(np.int64) != b.astype(np.int64))[0]
                raise Mismatch(f"{where}: at {tuple(int(i) for i in bad)} webgrad {a[tuple(bad)]}, "
                               f"torch {b[tuple(bad)]}")
            return
        if np.iscomplexobj(a) or np.iscomplexobj(b):  # complex64: compared as (real, imag) pairs
            if not (np.iscomplexobj(a) and np.iscomplexobj(b)):
                raise Mismatch(f"{where}: torch gives {'complex' if np.iscomplexobj(b) else 'real'} values")
            a, b = np.stack([a.real, a.imag], -1), np.stack([b.real, b.imag], -1)
        rtol, atol = FLOAT16_TOL if "float16" in (str(a.dtype), str(b.dtype)) else \
            BFLOAT16_TOL if "bfloat16" in (ref_dtype, got.dtype.name) else tol
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        close = np.isclose(a64, b64, rtol=rtol, atol=atol, equal_nan=True)
        if not close.all():
            bad = tuple(int(i) for i in np.argwhere(~close)[0])
            n = int((~close).sum())
            raise Mismatch(f"{where}: {n} of {close.size} values differ; at {bad} webgrad {a64[bad]:.6g}, "
                           f"torch {b64[bad]:.6g} (rtol {rtol:g}, atol {atol:g})")
        return
    if _is_size(ref):
        if not isinstance(got, (tuple, list)) or tuple(got) != tuple(ref):
            raise Mismatch(f"{where}: {got!r}, torch {tuple(ref)!r}")
        return
    if isinstance(ref, (tuple, list)):
        if not isinstance(got, (tuple, list)):
            raise Mismatch(f"{where}: torch gives a {type(ref).__name__}, webgrad a {type(got).__name__}")
        if len(got) != len(ref):
            raise Mismatch(f"{where}: {len(got)} items, torch {len(ref)}")
        for i, (r, g) in enumerate(zip(ref, got)):
            compare(r, g, tol, f"{where}[{i}]", random, notes)
        return
    if isinstance(ref, torch.dtype):
        if got is not webgrad_dtype_or_none(ref):
            raise Mismatch(f"{where}: {got!r}, torch {ref}")
        return
    if isinstance(ref, bool) or ref is None or isinstance(ref, str):
        if got != ref or type(got) is not type(ref):
            raise Mismatch(f"{where}: {got!r}, torch {ref!r}")
        return
    if isinstance(ref, (int, float)):
        if isinstance(got, wg.Tensor) or not isinstance(got, (int, float)):
            raise Mismatch(f"{where}: torch gives a {type(ref).__name__}, webgrad a {type(got).__name__}")
        if random:
            return
        rtol, atol = tol
        if not (math.isclose(got, ref, rel_tol=rtol, abs_tol=atol) or (math.isnan(got) and math.isnan(ref))):
            raise Mismatch(f"{where}: webgrad {got!r}, torch {ref!r}")
        return
    if got != ref:
        raise Mismatch(f"{where}: webgrad {got!r}, torch {ref!r}")


def webgrad_dtype_or_none(torch_dtype):
    try:
        return webgrad_dtype(torch_dtype)
    except Unconvertible:
        return None


def _snapshot(obj):
    import torch
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, (tuple, list)):
        return [_snapshot(o) for o in obj]
    return obj


def _same(a, b):
    """Exact equality of two torch outputs (to tell a random op from a deterministic one)."""
    import torch
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a.detach(), b.detach())
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


# ------------------------------------------------------------------------------------------ one entry
def describe(sample):
    """A short deterministic description of a sample: shapes and dtypes of tensors, other values as written."""
    import torch

    def d(obj):
        if isinstance(obj, torch.Tensor):
            return f"{str(obj.dtype).replace('torch.', '')}{list(obj.shape)}"
        if isinstance(obj, torch.Size):
            return repr(tuple(obj))
        if isinstance(obj, (list, tuple)):
            inner = ", ".join(d(o) for o in obj)
            return f"[{inner}]" if isinstance(obj, list) else f"({inner}{',' if len(obj) == 1 else ''})"
        if isinstance(obj, dict):
            return "{" + ", ".join(f"{k}={d(v)}" for k, v in obj.items()) + "}"
        if callable(obj) and not isinstance(obj, type):
            return getattr(obj, "__name__", type(obj).__name__)
        text = repr(obj)
        return re.sub(r" at 0x[0-9a-f]+", "", text)

    parts = [d(sample.input)] + [d(a) for a in sample.args] + [f"{k}={d(v)}" for k, v in sample.kwargs.items()]
    return "(" + ", ".join(parts) + ")"


def _first_line(exc):
    text = str(exc).strip().splitlines()
    line = text[0] if text else ""
    line = re.sub(r" at 0x[0-9a-f]+", "", line)
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


def _missing_attribute(exc):
    """A Missing raised by the name lookup, or an AttributeError at the call site in torch's own lambda."""
    if isinstance(exc, Missing):
        return str(exc)
    if isinstance(exc, AttributeError):
        tb = exc.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        if "torch/testing" in tb.tb_frame.f_code.co_filename.replace("\\", "/"):
            m = re.search(r"has no attribute '(\w+)'", str(exc))
            wg = _wg()
            if m and not hasattr(wg.Tensor, m.group(1)):
                return f"webgrad has no Tensor.{m.group(1)}"
    return None


class _Verdict:
    def __init__(self):
        self.status, self.reason = "pass", ""
        self.failures = []  # every failing sample's (status, reason), in order
        # torch's own gradient test of the op is an expected failure: a gradient that differs from torch's is noted
        self.torch_grad_unreliable = False

    def fail(self, status, reason):
        self.failures.append((status, reason))
        if WORST_FIRST.index(status) < WORST_FIRST.index(self.status):
            self.status, self.reason = status, reason


def _sample_tensors(sample):
    import torch
    seen, out = set(), []
    for leaf in _flatten([sample.input, list(sample.args), sample.kwargs]):
        if isinstance(leaf, torch.Tensor) and id(leaf) not in seen:
            seen.add(id(leaf))
            out.append(leaf)
    return out


def run_entry(op, device="cpu", max_samples=64, time_box=20.0, impl=None):
    """Run one OpInfo entry's samples through webgrad and torch; return its Result.

    impl: a webgrad callable to test instead of the one the entry's name resolves to (the harness's own
    tests use it to check that a wrong op is caught).
    """
    import torch
    wg = _wg()
    result = Result(op.name, op.variant_test_name, "pass")
    try:
        fn = impl if impl is not None else resolve(op)
    except Missing as exc:
        result.status, result.reason = "missing", str(exc)
        return result

    undefined = op.name in UNDEFINED_VALUES
    random_candidate = _random_candidate(op)
    verdict, notes = _Verdict(), set()
    torch_op = _rebind(op.op, torch, _passthrough_seed) if random_candidate else op.op
    grad = bool(op.supports_autograd)
    verdict.torch_grad_unreliable = grad and _torch_gradient_known_wrong(op)
    fwd_tol, grad_tol = FORWARD_TOL.get(device, FORWARD_TOL["webgpu"]), GRAD_TOL.get(device, GRAD_TOL["webgpu"])
    started = time.monotonic()
    previous_device = wg.get_default_device()
    wg.set_default_device(device)
    try:
        sample_loop(op, grad, max_samples, time_box, verdict, notes, result, ("missing", "wrong"),
                    lambda sample: _run_sample(op, sample, fn, torch_op, device, grad, undefined, random_candidate,
                                               fwd_tol, grad_tol, verdict, notes, result))
    finally:
        wg.set_default_device(previous_device)
    result.status, result.reason, result.failures = verdict.status, verdict.reason, verdict.failures
    if result.status == "pass" and result.samples == 0:
        result.status, result.reason = "error", "torch refused every sample"
    result.int_dtype = next((n for n in sorted(notes) if " for torch's " in n), "")
    result.notes = sorted(notes)
    result.seconds = time.monotonic() - started
    return result


def sample_loop(op, grad, max_samples, time_box, verdict, notes, result, stop, run_one):
    """run_one(sample) over op's float32 sample inputs (at most max_samples) until the verdict's status is in
    `stop` (nothing worse can follow), within a time box of time_box seconds (SIGALRM, in the main thread): the
    sample the box interrupts does not count, and a box reached before any sample finished is an error. A
    sample generator that fails ends the loop with a note; an exception of run_one is a bug of the harness,
    shown as an error, never taken for a pass."""
    import torch

    def on_alarm(signum, frame):
        raise _TimeBox()

    use_alarm = time_box and hasattr(signal, "setitimer") and _main_thread()
    if use_alarm:
        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, time_box)
    finished = 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.manual_seed(0)
            samples = itertools.islice(op.sample_inputs("cpu", torch.float32, requires_grad=grad), max_samples)
            while verdict.status not in stop:
                try:
                    sample = next(samples)
                except StopIteration:
                    break
                except Exception as exc:  # torch's sample generator failed: nothing to hold against the tested side
                    notes.add(f"torch's sample generator raised {_first_line(exc)}")
                    break
                try:
                    run_one(sample)
                except Exception as exc:
                    verdict.fail("error", f"harness: {_first_line(exc)} on sample {describe(sample)}")
                finished = result.samples
    except _TimeBox:
        result.samples = finished
        if result.samples == 0 and verdict.status == "pass":
            verdict.fail("error", f"time box of {time_box:g} s reached before a sample finished")
        notes.add(f"time box reached after {result.samples} samples")
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


def _reference_grads(pairs, inputs):
    """(cotangents, torch's gradients of `inputs`) for the (torch output, tested output) `pairs`: fixed random
    cotangents, one per output, backpropagated through torch; gradients None where torch cannot."""
    import torch
    gen = torch.Generator().manual_seed(1234)
    cotangents = [torch.randn(r.shape, generator=gen, dtype=r.dtype) for r, _ in pairs]
    try:
        return cotangents, torch.autograd.grad([r for r, _ in pairs], inputs, cotangents, allow_unused=True)
    except Exception:
        return cotangents, None


def _random_values(torch_op, sample, ref, undefined, random_candidate):
    """Whether torch's result `ref` of `sample` is random (or undefined): a run under another seed differs. Then
    only shapes and dtypes are compared. Several seeds: one draw of a 0-d bernoulli agrees across two seeds
    more often than not."""
    import torch
    if undefined or not random_candidate:
        return undefined
    first = _snapshot(ref)  # an in-place op returns its input, which the next run overwrites
    try:
        for seed in range(1, 17):
            torch.manual_seed(seed)
            if not _same(first, torch_op(sample.input, *sample.args, **sample.kwargs)):
                return True
        return False
    except Exception:
        return True


def _main_thread():
    import threading
    return threading.current_thread() is threading.main_thread()


def _run_sample(op, sample, fn, torch_op, device, grad, undefined, random_candidate, fwd_tol, grad_tol,
                verdict, notes, result):
    import torch
    what = describe(sample)
    conv = Converter(device)
    try:
        wg_input, wg_args, wg_kwargs = conv(sample.input), conv(tuple(sample.args)), conv(dict(sample.kwargs))
        converted = None
    except _TimeBox:
        raise
    except Unconvertible as exc:
        converted = str(exc)
    except Exception as exc:  # webgrad refused the sample's data (float64 on WebGPU, say)
        converted = f"converting the sample: {_first_line(exc)}"
    # torch first (on its own copy of in-place targets: conversion above already read the values)
    try:
        if random_candidate:
            torch.manual_seed(0)
        ref = torch_op(sample.input, *sample.args, **sample.kwargs)
    except Exception:
        return  # torch refuses the sample
    random = _random_values(torch_op, sample, ref, undefined, random_candidate)
    result.samples += 1
    if random:
        notes.add("random values: shapes and dtypes compared")
    if converted is not None:
        verdict.fail("error", f"{converted} on sample {what}")
        return
    try:
        got = fn(wg_input, *wg_args, **wg_kwargs)
    except _TimeBox:
        raise
    except Exception as exc:
        missing = _missing_attribute(exc)
        if missing is not None and result.samples == 1:
            verdict.status, verdict.reason = "missing", missing
            return
        verdict.fail("error", f"{missing or _first_line(exc)} on sample {what}")
        return
    try:
        compare(ref, got, fwd_tol, "output", random, notes)
    except Mismatch as exc:
        settled = _settle_mismatch(sample, torch_op, ref, got, fwd_tol, notes)
        if settled is not None:
            verdict.fail("error" if settled == "error" else "wrong", f"{exc} on sample {what}")
            return
    except Exception as exc:  # reading the result back failed
        verdict.fail("error", f"reading the output: {_first_line(exc)} on sample {what}")
        return
    if grad:
        _check_grad(sample, ref, got, conv, grad_tol, random, verdict, notes, what, result)


def _settle_mismatch(sample, torch_op, ref, got, tol, notes):
    """A forward mismatch that is not wrong by the sample's own standard: None if it is settled, else
    "wrong" (or "error": the output cannot be processed). Two standards, both torch's:
    - outputs that are unique only up to a choice (the signs of singular vectors and eigenvectors) are
      compared through the sample's output_process_fn_grad, which OpInfo writes to be invariant to it;
    - a float32 result may differ from torch's float32 one by more than the tolerance where torch's own
      float32 error is that large: then it must match torch's float64 result (matrix_exp's series)."""
    import torch
    process = sample.output_process_fn_grad
    if not getattr(process, "__qualname__", "").startswith("SampleInput.__init__"):  # not OpInfo's identity
        try:
            compare(process(ref), _rebind(process, _TorchAsWebgrad(), _webgrad_seed)(got), tol, "output", False,
                    notes)
            notes.add("compared through the sample's output_process_fn_grad (outputs unique up to signs)")
            return None
        except Mismatch:
            pass
        except Exception:
            return "error"
    tensors = [t for t in _flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
               if isinstance(t, torch.Tensor)]
    if not tensors or any(t.dtype is not torch.float32 for t in tensors if t.is_floating_point()):
        return "wrong"
    widen = lambda v: v.double() if isinstance(v, torch.Tensor) and v.dtype is torch.float32 else v  # noqa: E731
    try:
        exact = torch_op(widen(sample.input), *[widen(a) for a in sample.args],
                         **{k: widen(v) for k, v in sample.kwargs.items()})
        exact = _map_tensors(exact, lambda t: t.float() if t.dtype is torch.float64 else t)
        compare(exact, got, tol, "output", False, notes)
    except Exception:
        return "wrong"
    notes.add("matches torch's float64 result, where torch's float32 one is off by more than the tolerance")
    return None


def _map_tensors(obj, fn):
    import torch
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_map_tensors(v, fn) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_tensors(v, fn) for v in obj)
    return obj


def _check_grad(sample, ref, got, conv, tol, random, verdict, notes, what, result):
    import torch
    wg = _wg()
    process = sample.output_process_fn_grad
    try:
        ref_p = process(ref)
    except Exception:
        return
    try:
        got_p = _rebind(process, _TorchAsWebgrad(), _webgrad_seed)(got)
    except _TimeBox:
        raise
    except Exception as exc:
        verdict.fail("error", f"processing the output for the gradient: {_first_line(exc)} on sample {what}")
        return
    ref_leaves, got_leaves = _flatten(ref_p), _flatten(got_p)
    if len(ref_leaves) != len(got_leaves):
        verdict.fail("wrong", f"output: {len(got_leaves)} tensors, torch {len(ref_leaves)} on sample {what}")
        return
    pairs = [(r, g) for r, g in zip(ref_leaves, got_leaves) if isinstance(r, torch.Tensor) and r.requires_grad]
    inputs = [t for t in _sample_tensors(sample) if t.requires_grad]
    if not pairs or not inputs:
        return
    cotangents, ref_grads = _reference_grads(pairs, inputs)
    if ref_grads is None:
        return  # torch cannot differentiate this sample
    for k, (r, g) in enumerate(pairs):
        if not isinstance(g, wg.Tensor) or not g.requires_grad:
            verdict.fail("forward-only", f"output {k} does not require grad (torch's does) on sample {what}")
            return
    try:
        for k, ((r, g), c) in enumerate(zip(pairs, cotangents)):
            g.backward(conv(c.detach()), retain_graph=k < len(pairs) - 1)
    except _TimeBox:
        raise
    except Exception as exc:
        verdict.fail("forward-only", f"backward raised {_first_line(exc)} on sample {what}")
        return
    result.grads += 1
    for i, (t, rg) in enumerate(zip(inputs, ref_grads)):
        mine = conv.tensors[id(t)][1].grad
        where = f"gradient of input {i}"
        if rg is None:
            if mine is not None:
                verdict.fail("forward-only", f"{where}: torch gives None (not connected), webgrad a tensor "
                                             f"on sample {what}")
                return
            continue
        if mine is None:
            verdict.fail("forward-only", f"{where}: missing (torch gives {'zeros' if not rg.any() else 'values'}) "
                                         f"on sample {what}")
            return
        try:
            compare(rg, mine, tol, where, random, notes)
        except Mismatch as exc:
            if verdict.torch_grad_unreliable:
                notes.add(f"{where} differs from torch's, whose own gradient test is an expected failure")
                continue
            verdict.fail("wrong", f"{exc} on sample {what}")
            return


# ------------------------------------------------------------------------------------------ the database
def entries(only=None):
    """The float32 OpInfo entries (on cpu), optionally those named in `only` ("max" or "max:binary")."""
    import torch
    frozen = torch.backends.flags_frozen()
    from torch.testing._internal.common_methods_invocations import op_db
    if not frozen:  # importing PyTorch's test utilities froze torch.backends' flags for the whole process; code
        # run after (a benchmark's TF32 switch, a later test) may set them, as before the import
        torch.backends.flags_frozen.__globals__["__allow_nonbracketed_mutation_flag"] = True
    out = [op for op in op_db if torch.float32 in op.supported_dtypes("cpu")]
    if only:
        wanted = set(only)
        out = [op for op in out if op.name in wanted or f"{op.name}:{op.variant_test_name}" in wanted]
    return out


def run(device="cpu", only=None, max_samples=64, time_box=20.0, verbose=False):
    results = []
    for op in entries(only):
        r = run_entry(op, device, max_samples, time_box)
        results.append(r)
        if verbose:
            print(f"{r.full_name:45s} {r.status:12s} {r.seconds:6.2f}s {r.samples:3d} samples {r.grads:3d} grads "
                  f"{r.reason[:150]}", flush=True)
    return results


def counts(results, statuses=STATUSES):
    c = {s: 0 for s in statuses}
    for r in results:
        c[r.status] += 1
    return c


def summary(results, device):
    c = counts(results)
    return (f"opinfo {device}: pass {c['pass']}, forward-only {c['forward-only']}, wrong {c['wrong']}, "
            f"error {c['error']}, missing {c['missing']} of {len(results)}")


def table(results, device, max_samples):
    import torch
    lines = [summary(results, device), "",
             f"torch {torch.__version__.split('+')[0]}, float32 entries, up to {max_samples} samples each. "
             f"{sum(bool(r.int_dtype) for r in results)} entries give an integer result of another integer dtype "
             "than torch's (compared by value; named below).", "",
             "| OpInfo entry | status | first failure |", "|---|---|---|"]
    for r in sorted(results, key=lambda r: (r.name, r.variant)):
        lines.append(table_row(r, r.reason))
    return "\n".join(lines) + "\n"


def table_row(result, reason):
    """A result's row of a --write-table table (read back by read_table): its reason, else its notes."""
    reason = (reason or "; ".join(result.notes)).replace("|", "\\|").replace("\n", " ")
    if len(reason) > 240:
        reason = reason[:237] + "..."
    return f"| `{result.full_name}` | {result.status} | {reason} |"


_ROW = re.compile(r"^\| `(?P<name>[^`]+)` \| (?P<status>[a-z-]+) \| (?P<reason>.*) \|$")


def read_table(text):
    """(summary line, {entry: (status, reason)}) of a table written by --write-table."""
    rows = {}
    for line in text.splitlines():
        m = _ROW.match(line)
        if m:
            rows[m["name"]] = (m["status"], m["reason"])
    return text.splitlines()[0], rows


def features_section(tables):
    """FEATURES.md's OpInfo section from the tables --write-table wrote: [(device, command, text)]."""
    if not tables:
        return []
    read = [(device, command, *read_table(text)) for device, command, text in tables]
    lines = ["## PyTorch's OpInfo operator tests", "",
             "Every float32 entry of PyTorch's operator database (`op_db`, the samples PyTorch tests its own "
             "backends with), run through webgrad and torch by `webgrad.testing.opinfo`, forward values and "
             "gradients compared. pass: forward and gradient of every sample match; forward-only: the forward "
             "matches but a gradient torch gives is missing or raised; wrong: a value, shape or dtype differs, "
             "forward or gradient; error: webgrad raised on a sample torch accepts; missing: no such name in "
             "webgrad.", ""]
    for device, command, head, _ in read:
        lines += [f"- `{head}` (`{command}`)"]
    names = sorted({n for *_, rows in read for n in rows})
    lines += ["", "| OpInfo entry | " + " | ".join(d for d, *_ in read) + " | first failure |",
              "|---|" + "---|" * len(read) + "---|"]
    for name in names:
        cells = [rows.get(name, ("not run", ""))[0] for *_, rows in read]
        reason = next((f"{d}: {rows[name][1]}" if i else rows[name][1]
                       for i, (d, _, _, rows) in enumerate(read) if name in rows and rows[name][1]), "")
        lines.append(f"| `{name}` | " + " | ".join(cells) + f" | {reason} |")
    return lines + [""]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "webgpu"])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="entries to run: NAME or NAME:VARIANT")
    parser.add_argument("--write-table", metavar="PATH", help="write the per-entry markdown table there")
    parser.add_argument("--max-samples", type=int, default=64, help="samples per entry (default 64)")
    parser.add_argument("--time-box", type=float, default=20.0, help="seconds per entry (default 20)")
    parser.add_argument("--verbose", "-v", action="store_true", help="one line per entry as it finishes")
    args = parser.parse_args(argv)
    results = run(args.device, args.only, args.max_samples, args.time_box, args.verbose)
    wrong = [r for r in results if r.status == "wrong"]
    for r in wrong:
        print(f"WRONG {r.full_name}: {r.reason}", file=sys.stderr)
    if args.write_table:
        with open(args.write_table, "w", encoding="utf-8") as f:
            f.write(table(results, args.device, args.max_samples))
    print(summary(results, args.device))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
