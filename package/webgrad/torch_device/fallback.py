"""What runs an ATen op that has no webgpu kernel: PyTorch's CPU kernel on copies, with one warning per op.

The inputs are read back from the GPU, the op runs on the CPU, and the results are uploaded again; arguments
the op writes (in-place and out= ops) get the CPU result copied back into their GPU memory. Correct, slow,
and said once per op (``UserWarning`` naming it), so that a model's missing kernels show. With
``set_fallback("error")`` (or ``with strict():``) the op raises NotImplementedError naming it instead: for
checking that a model runs wholly on the GPU. ``fallback_counts()`` tells which ops fell back how often.
"""

import contextlib
import numbers
import warnings

import torch
from torch.autograd.function import once_differentiable

from . import storage as st
from .storage import DEVICE

_mode = ["cpu"]
_warned = set()
COUNTS = {}

# ops that take CPU index tensors beside device tensors in PyTorch (advanced indexing)
_CPU_INDICES_OK = ("aten.index.", "aten.index_put", "aten._index_put_impl_")


def set_fallback(mode):
    """"cpu" (default): an op without a webgpu kernel runs on the CPU, one warning per op; "error": it raises
    NotImplementedError naming the op."""
    if mode not in ("cpu", "error"):
        raise ValueError(f"set_fallback: mode must be 'cpu' or 'error', got {mode!r}")
    _mode[0] = mode


def get_fallback():
    return _mode[0]


@contextlib.contextmanager
def strict(on=True):
    """Within the block an op without a webgpu kernel raises NotImplementedError instead of running on the CPU
    (with on=False: runs on the CPU, whatever the mode outside)."""
    before = _mode[0]
    _mode[0] = "error" if on else "cpu"
    try:
        yield
    finally:
        _mode[0] = before


def fallback_counts():
    """{op name: calls that ran on the CPU} since the process started (or reset_fallback_counts())."""
    return dict(COUNTS)


def reset_fallback_counts():
    COUNTS.clear()


def _check_devices(name, args, kwargs):
    devices = set()

    def visit(a):
        if isinstance(a, torch.Tensor):
            if a.dim() or a.device.type != "cpu":
                devices.add(a.device.type)
        elif isinstance(a, (list, tuple)):
            for x in a:
                visit(x)
    visit(args)
    visit(list(kwargs.values()))
    if len(devices) > 1 and not name.startswith(_CPU_INDICES_OK):
        other = next(d for d in devices if d != DEVICE.type)
        raise st.device_mismatch(torch.device(other))


def note_fallback(name, why=None):
    """Before op `name` runs on the CPU: raise in strict mode, else warn once per op and count the call."""
    if _mode[0] == "error":
        raise NotImplementedError(f"webgpu: {name} has no webgrad kernel{f' ({why})' if why else ''}, and the "
                                  "CPU fallback is off (webgrad.torch_device.set_fallback('error'))")
    if name not in _warned:
        _warned.add(name)
        warnings.warn(f"webgpu: {name} has no webgrad kernel{f' ({why})' if why else ''}; it runs on the CPU "
                      "(inputs read back from the GPU, results uploaded again). One warning per op; "
                      "webgrad.torch_device.fallback_counts() lists them", stacklevel=4)
    COUNTS[name] = COUNTS.get(name, 0) + 1


def run_on_cpu(op, args, kwargs, why=None):
    """Run ATen `op` on CPU copies of its webgpu arguments; results back on webgpu (see the module doc)."""
    name = str(op)
    if _mode[0] != "error":
        _check_devices(name, args, kwargs)
    note_fallback(name, why)
    on_device = [False]

    def to_cpu(a):
        if isinstance(a, torch.Tensor) and a.device.type == DEVICE.type:
            on_device[0] = True
            return st.to_cpu(a)
        if isinstance(a, (list, tuple)):
            return type(a)(to_cpu(x) for x in a)
        return a

    cpu_args = to_cpu(list(args))
    cpu_kwargs = {k: to_cpu(v) for k, v in kwargs.items()}
    _numbers_as_tensors(op._schema, cpu_args, cpu_kwargs)
    device = cpu_kwargs.get("device")
    if device is not None and torch.device(device).type == DEVICE.type:
        cpu_kwargs["device"] = torch.device("cpu")
        on_device[0] = True
    out = op(*cpu_args, **cpu_kwargs)

    # write back what the op mutated, and hand back the mutated arguments themselves where it returns them
    schema = op._schema
    written = {}
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        if arg.kwarg_only or i >= len(args):
            original, result = kwargs.get(arg.name), cpu_kwargs.get(arg.name)
        else:
            original, result = args[i], cpu_args[i]
        for o, r in zip(original if isinstance(original, (list, tuple)) else [original],
                        result if isinstance(result, (list, tuple)) else [result]):
            if isinstance(o, torch.Tensor) and o.device.type == DEVICE.type:
                if tuple(o.shape) != tuple(r.shape):
                    o.resize_(r.shape)
                with torch.no_grad():
                    o.copy_(r)  # an upload, through the device's own copy_ kernel
        written[tuple(sorted(arg.alias_info.before_set))] = original

    def back(value, ret):
        if ret is not None and ret.alias_info is not None:
            key = tuple(sorted(ret.alias_info.before_set))
            if key in written:
                return written[key]
        if isinstance(value, torch.Tensor) and on_device[0]:
            return st.from_cpu(value)
        if isinstance(value, (list, tuple)):
            return type(value)(back(v, None) for v in value)
        return value

    if len(schema.returns) == 1:
        return back(out, schema.returns[0])
    if not schema.returns:
        return None
    return tuple(back(v, r) for v, r in zip(out, schema.returns))


def _numbers_as_tensors(schema, args, kwargs):
    """Python numbers given for Tensor arguments as 0-dim CPU tensors. PyTorch hands a boxed fallback the wrapped
    number of ``torch.special.zeta(x, 2.0, out=o)`` as the Python number, which the overload then refuses. The
    tensor's dtype is the one a wrapped number promotes as next to tensors: the default float dtype for a float,
    int64 for an int, complex64 for a complex."""
    tensor = torch._C.TensorType.get()
    for i, arg in enumerate(schema.arguments):
        at_args = not arg.kwarg_only and i < len(args)
        value = args[i] if at_args else kwargs.get(arg.name)
        if not isinstance(value, numbers.Number) or not arg.type.isSubtypeOf(torch._C.OptionalType(tensor)):
            continue
        if isinstance(value, bool):
            dtype = torch.bool
        elif isinstance(value, numbers.Integral):
            dtype = torch.int64
        elif isinstance(value, numbers.Real):
            dtype = torch.get_default_dtype()
        else:
            dtype = torch.complex64 if torch.get_default_dtype() is not torch.float64 else torch.complex128
        value = torch.tensor(value, dtype=dtype)
        if at_args:
            args[i] = value
        else:
            kwargs[arg.name] = value


def _boxed(op, *args, **kwargs):
    return run_on_cpu(op, args, kwargs)


_LIB = torch.library.Library("_", "IMPL")
_LIB.fallback(_boxed, "PrivateUse1")


# ------------------------------------------------------------------ composite ops that run whole on the CPU
# Composite ops whose decomposition makes complex tensors between a real input and a real result (the inverse real
# FFTs, the Hermitian FFTs, stft with return_complex=False): the device holds no complex dtype, so the pieces
# cannot run there. Registered at AutogradPrivateUse1 (consulted before the decomposition for webgpu tensors), a
# real float32 input runs the whole op on the device as webgrad's real products (ops/fft_real.py, the `first`
# kernels below); anything else runs whole on CPU copies, with one warning as any fallback, and its gradient is
# PyTorch's CPU autograd of the same call. A complex result still raises the device's TypeError naming the dtype
# when it is uploaded.
_WHOLE = torch.library.Library("aten", "IMPL")


class _OnCpu(torch.autograd.Function):
    """forward(call, *tensors): call(CPU copies of the tensors), recorded by CPU autograd where they require grad,
    the results uploaded; backward: CPU autograd.grad of that record, the gradients uploaded."""

    @staticmethod
    def forward(ctx, call, *tensors):
        cpu = [st.to_cpu(t).requires_grad_(t.requires_grad) for t in tensors]
        with torch.enable_grad():
            out = call(cpu)
        ctx.record = (out, cpu)
        return tuple(st.from_cpu(o.detach()) for o in out) if isinstance(out, tuple) else st.from_cpu(out.detach())

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads):
        out, cpu = ctx.record
        ctx.record = None
        outs = out if isinstance(out, tuple) else (out,)
        pairs = [(o, st.to_cpu(g)) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
        wanted = [i for i, c in enumerate(cpu) if c.requires_grad]
        got = torch.autograd.grad([o for o, _ in pairs], [cpu[i] for i in wanted], [g for _, g in pairs],
                                  allow_unused=True) if pairs and wanted else [None] * len(wanted)
        result = [None] * (1 + len(cpu))
        for i, g in zip(wanted, got):
            result[1 + i] = st.from_cpu(g) if g is not None else None
        return tuple(result)


def run_whole_on_cpu(op, why, first=None):
    """Register composite ATen op `op` (an OpOverload) to run whole on the CPU for webgpu tensors, autograd
    included (see above); `first`, where given, is tried before and returns NotImplemented to decline."""
    name = str(op)

    def kernel(*args, **kwargs):
        if first is not None:
            out = first(*args, **kwargs)
            if out is not NotImplemented:
                return out
        tensors = []

        def take(a):  # a webgpu tensor's place among `tensors`
            if isinstance(a, torch.Tensor) and a.device.type == DEVICE.type:
                tensors.append(a)
                return _Slot(len(tensors) - 1)
            return a
        held_args = [take(a) for a in args]
        held_kwargs = {k: take(v) for k, v in kwargs.items()}

        def call(cpu):
            put = lambda a: cpu[a.index] if isinstance(a, _Slot) else a  # noqa: E731
            return op(*[put(a) for a in held_args], **{k: put(v) for k, v in held_kwargs.items()})

        note_fallback(name, why)
        if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            return _OnCpu.apply(call, *tensors)
        out = call([st.to_cpu(t) for t in tensors])
        return tuple(st.from_cpu(o) for o in out) if isinstance(out, tuple) else st.from_cpu(out)
    _WHOLE.impl(op._schema.name.split("::")[1] + ("." + op._overloadname if op._overloadname != "default" else ""),
                kernel, "AutogradPrivateUse1")


class _Slot:
    def __init__(self, index):
        self.index = index


def _real_fft(name, dims):
    """The inverse real and Hermitian FFTs of a real float32 webgpu tensor run on the device, as webgrad's products
    (ops/fft_real.py), their gradient by webgrad's autograd of them (fused_autograd._apply). dims: the op's
    default dim (-1 for the one-dim ones, whose n and dim are single)."""
    def first(self, s=None, dim=dims, norm=None):
        from .fused_autograd import _apply, _plain
        from webgrad.ops import fft_real
        if not (_plain(self) and self.dtype == torch.float32):
            return NotImplemented
        if isinstance(dim, int):
            s, dim = (None if s is None else (s,)), (dim,)
        return _apply(lambda x: getattr(fft_real, name)(x, s, dim, norm), self)
    return first


def _stft(center_overload):
    """stft(..., return_complex=False) of a real float32 webgpu signal on the device (ops/fft_real.py)."""
    def first(self, n_fft, hop_length=None, win_length=None, window=None, *rest, **kwargs):
        from .fused_autograd import _apply, _plain
        from webgrad.ops import fft_real
        names = ("center", "pad_mode") if center_overload else ()
        options = dict(zip(names + ("normalized", "onesided", "return_complex", "align_to_window"), rest), **kwargs)
        center, pad_mode = options.get("center", center_overload), options.get("pad_mode", "reflect")
        if not (_plain(self, window) and self.dtype == torch.float32 and options.get("return_complex") is False
                and options.get("align_to_window") is None and (window is None or window.dtype == torch.float32)):
            return NotImplemented
        onesided = options.get("onesided")
        return _apply(lambda x, w: fft_real.stft(x, n_fft, hop_length, win_length, w, center, pad_mode, options.get(
            "normalized", False), True if onesided is None else onesided), self, window)
    return first


_aten = torch.ops.aten
_COMPLEX_INSIDE = "its decomposition makes complex tensors, which the device does not hold"
for _op, _first in ((_aten.fft_irfft.default, _real_fft("irfftn", -1)), (_aten.fft_irfft2.default, _real_fft(
        "irfftn", (-2, -1))), (_aten.fft_irfftn.default, _real_fft("irfftn", None)), (_aten.fft_hfft.default, _real_fft(
        "hfftn", -1)), (_aten.fft_hfft2.default, _real_fft("hfftn", (-2, -1))), (_aten.fft_hfftn.default, _real_fft(
        "hfftn", None)), (_aten.stft.default, _stft(False)), (_aten.stft.center, _stft(True))):
    run_whole_on_cpu(_op, _COMPLEX_INSIDE, _first)


def _eigvalsh(self, UPLO="L"):
    """linalg.eigvalsh on the device, its gradient (V diag(g) V^T, whatever the eigenvectors' signs) by webgrad's
    autograd: ATen's decomposition asks _linalg_eigh for eigenvectors when a gradient is wanted, and those stay on
    the CPU (the device's signs differ from LAPACK's). Other tensors take the decomposition."""
    from .fused_autograd import _apply, _plain
    if not (_plain(self) and self.dtype == torch.float32):
        return _aten.linalg_eigvalsh.default.decompose(self, UPLO)
    import webgrad as wg
    return _apply(lambda a: wg.linalg.eigvalsh(a, UPLO), self)


_WHOLE.impl("linalg_eigvalsh", _eigvalsh, "AutogradPrivateUse1")
