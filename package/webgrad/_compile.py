"""torch.compile: accepted, and the model or function runs as written (eagerly).

webgrad has no graph compiler behind torch.compile; a training step recorded once and replayed as one GPU
submission is webgrad.replayable. webgrad.compile (_dynamo/eval_frame.py) wraps a module in an OptimizedModule as
PyTorch's does, so ``model.state_dict()`` keys carry PyTorch's ``_orig_mod.`` prefix; this module holds the
argument checks and the function form.
"""

_MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
_BACKENDS = ("inductor", "eager", "aot_eager", "cudagraphs", "onnxrt", "openxla", "tvm")


def _check(mode, options, backend):
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if mode is not None and mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(_MODES)}")
    if isinstance(backend, str) and backend not in _BACKENDS:
        raise RuntimeError(f"Invalid backend: {backend!r}, webgrad.compile knows {', '.join(_BACKENDS)} (every one "
                           "runs the model eagerly)")
    if not isinstance(backend, str) and not callable(backend):
        raise RuntimeError(f"Invalid backend: {backend!r}: a name or a callable is expected")


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
            disable=False):
    """The module or function itself, to run eagerly, with torch.compile's signature and argument checks; with
    model=None (``@torch.compile(mode=...)``) a decorator that does the same. webgrad compiles nothing here: see
    webgrad.replayable for a step recorded once and replayed as one GPU submission. (webgrad.compile, in
    _dynamo/eval_frame.py, wraps a module in an OptimizedModule as torch's does.)"""
    _check(mode, options, backend)
    if model is None:
        def decorate(fn):
            return compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options,
                           disable=disable)
        return decorate
    if not callable(model):
        raise AssertionError(f"A callable function is expected, but {type(model)} is provided.")
    return model
