"""PyTorch models on webgrad's devices: ``torch.compile(model, backend="webgrad")``.

    import torch
    model = torch.compile(model, backend="webgrad")                               # WebGPU (wgpu-py)
    model = torch.compile(model, backend="webgrad", options={"device": "cpu"})    # webgrad's NumPy backend
    model = webgrad.torch_backend.compile(model, device="cpu", fallback="error")  # the same, with options

Dynamo traces the model; AOTAutograd splits each traced graph into a forward and a backward graph in
ATen IR after PyTorch's core decompositions; :class:`executor.GraphExecutor` runs each on webgrad's
device ops through the one table ``aten_table.ATEN``. Registration needs no webgrad import: the package's
``torch_dynamo_backends`` entry point (pyproject.toml) names :func:`webgrad_backend`.

torch is optional for webgrad: only this subpackage imports it.
"""

import os
import warnings

_MIN_TORCH = (2, 2)


def _require_torch():
    try:
        import torch
    except ImportError:
        raise ImportError("webgrad.torch_backend needs PyTorch: pip install 'torch>=2.2'") from None
    version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if version < _MIN_TORCH:
        raise ImportError(f"webgrad.torch_backend needs torch >= {'.'.join(map(str, _MIN_TORCH))} "
                          f"(torch.compile with AOTAutograd and core ATen decompositions), found {torch.__version__}")
    return torch


_require_torch()

import webgrad as wg  # noqa: E402

from .executor import GraphExecutor, Resident, SavedOnDevice  # noqa: E402,F401

OPTIONS = ("device", "fallback", "stats", "replay", "saved")


def _device(name):
    name = name or os.environ.get("WEBGRAD_TORCH_DEVICE") or "webgpu"
    dev = wg.device(name)
    if dev.type == "webgpu":
        try:
            import wgpu  # noqa: F401
        except ImportError:
            raise RuntimeError("the webgrad torch backend on device 'webgpu' needs wgpu-py (pip install "
                               "'webgrad[native]'); or run on webgrad's CPU backend: options={'device': 'cpu'}") \
                from None
    return dev


def _decompositions():
    """PyTorch's core ATen decompositions, less the one of CPU flash attention (in torch 2.13 its decomposed
    forward does not match the fused backward that AOTAutograd still pairs with it: gradients of a
    TransformerEncoderLayer come out wrong even with every node run in eager PyTorch) and those of the ops
    the table maps to one kernel each (aten_table.KEEP_WHOLE)."""
    from torch._decomp import core_aten_decompositions
    import torch
    from .aten_table import KEEP_WHOLE
    table = dict(core_aten_decompositions())
    table.pop(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default, None)
    for op in KEEP_WHOLE:  # mapped to dedicated kernels: a decomposition would make several of one
        table.pop(op, None)
    return table


def _user_outputs():
    """How many outputs of the forward graph being compiled the user sees (outputs, mutated inputs,
    intermediate bases); the rest AOTAutograd saves for the backward. None where torch does not say."""
    from torch._guards import TracingContext
    context = TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None) if context is not None else None
    return getattr(meta, "num_forward_returns", None)


# webgrad's own Python, which Dynamo must not trace: the kernels of the webgpu device run from eager code
# between a compiled function's graphs (the backward, an optimizer's loop), where Dynamo would otherwise take
# each kernel for a new frame to compile. The models (webgrad.models and the parity suite, built with torch.nn)
# stay traceable.
_OPAQUE = ("webgrad.torch_device", "webgrad.torch_backend.executor", "webgrad.torch_backend.aten_table",
           "webgrad._backends", "webgrad.ops", "webgrad.nn",
           "webgrad._tensor", "webgrad._view", "webgrad._autograd", "webgrad.random", "webgrad.replay",
           "webgrad.dtypes", "webgrad.devices", "webgrad.amp", "webgrad._bounds")


def opaque_to_dynamo():
    """Tell Dynamo to skip webgrad's internals (once per process)."""
    if _OPAQUE_DONE:
        return
    from torch._dynamo import trace_rules
    for name in _OPAQUE:
        trace_rules.add(name)
    _OPAQUE_DONE.append(True)


_OPAQUE_DONE = []


def webgrad_backend(gm, example_inputs, options=None, mode=None, **kwargs):
    """The Dynamo backend (what ``backend="webgrad"`` resolves to). options: see :func:`compile`."""
    import torch
    opaque_to_dynamo()
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    options = dict(options or {}, **kwargs)
    unknown = set(options) - set(OPTIONS)
    if unknown:
        raise ValueError(f"webgrad backend: unknown option(s) {sorted(unknown)}; known: {list(OPTIONS)}")
    if any(isinstance(t, torch.Tensor) and t.device.type == "webgpu" for t in example_inputs):
        # webgpu tensors (webgrad.torch_device): the graphs run where their data lies, on the device's webgrad
        # backend, taking webgpu tensors and handing them out, with nothing copied to or from the host
        from webgrad.torch_device import storage
        device = storage.webgrad_device()
    else:
        device = _device(options.get("device"))
    fallback = options.get("fallback", "eager")
    saved = options.get("saved", "device")
    if saved not in ("device", "torch"):
        raise ValueError(f"webgrad backend: saved must be 'device' or 'torch', got {saved!r}")
    replay = options.get("replay")
    if replay is None:  # default: wherever the device can record its work
        replay = device.backend.supports_capture
    elif replay and not device.backend.supports_capture:
        warnings.warn(f"webgrad torch backend: replay=True, but the {device.type} backend cannot record work "
                      "for replay; graphs run node by node", stacklevel=2)
    stats = options.get("stats")
    if stats is None:
        stats = {}
    stats.setdefault("fallback", {})
    resident = Resident(device, stats)  # shared by all graphs: parameters stay on the device between them

    def compiler(user_outputs):
        def compile_graph(graph, inputs):
            return make_boxed_func(GraphExecutor(graph, device, resident, fallback, stats, replay,
                                                 user_outputs() if saved == "device" else None))
        return compile_graph

    # a training forward graph returns the user's outputs, then what the backward needs (which stays on
    # the device); an inference or backward graph returns only what the caller sees
    backend = aot_autograd(fw_compiler=compiler(_user_outputs), bw_compiler=compiler(lambda: None),
                           inference_compiler=compiler(lambda: None), decompositions=_decompositions())
    return backend(gm, example_inputs)


def compile(model, device="webgpu", fallback="eager", stats=None, replay=None, saved="device", dynamic=None,
            whole_step=False, **torch_compile_kwargs):
    """``torch.compile(model, backend="webgrad")`` with webgrad's options spelled out.

    device: "webgpu" (wgpu-py natively) or "cpu" (webgrad's NumPy backend).
    fallback: "eager" (an unmapped ATen op runs in eager PyTorch, one warning per op) or "error"
    (raise NotImplementedError naming the op: for checking that a model runs wholly on webgrad).
    stats: a dict the backend fills: "fallback" {op: nodes run in eager}; with a "time" key present,
    also {op: host seconds}; "uploads" and "hits" count torch tensors copied to the device and found there,
    "replays" the graph calls replayed, "reads" the read-backs of outputs and gradients, "preserved" the
    saved activations copied aside because a forward replayed again before their backward ran.
    replay: record each graph's device work at its second call and replay it from the third on (webgrad's
    capture/replay: no Python per node); graphs with a fallback node always run node by node. Default: on
    where the device records work (WebGPU), off where it cannot (cpu).
    saved: "device" (the activations the forward saves for the backward stay on the device, handed to
    AOTAutograd as data-less SavedOnDevice handles) or "torch" (read back into torch tensors, e.g. for a
    saved-tensor hook that needs them).
    whole_step: `model` is a training step on webgpu tensors (webgrad.torch_device), forward, backward and
    optimizer step in one function: the compiled step is recorded whole at its second call and replayed as one
    from the third (webgrad.torch_device.replayable, with its rules: no read-back inside, zero_grad inside,
    Adam with capturable=True).
    dynamic and the other keywords go to torch.compile.
    """
    torch = _require_torch()
    _device(device)  # the errors for a missing wgpu come now, not at the first call
    opaque_to_dynamo()
    compiled = torch.compile(model, backend=webgrad_backend, dynamic=dynamic,
                             options={"device": device, "fallback": fallback, "stats": stats, "replay": replay,
                                      "saved": saved},
                             **torch_compile_kwargs)
    if whole_step:
        from webgrad.torch_device import replayable
        return replayable(compiled)
    return compiled
