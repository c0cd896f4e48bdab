"""torch.compiler (and torch._dynamo's names scripts touch): the switches around torch.compile.

webgrad's torch.compile runs the model eagerly (webgrad/_compile.py), so nothing is ever being compiled:
``is_compiling()`` is False, ``disable`` and ``allow_in_graph`` return their function, ``reset`` and
``cudagraph_mark_step_begin`` have nothing to clear, and ``config`` remembers the settings a script makes
(none of them changes what runs). A training step recorded once and replayed as one GPU submission is
webgrad.replayable.
"""

import functools

from ._compile import _BACKENDS


class _Config:
    """torch._dynamo.config / torch.compiler.config: the settings scripts make (suppress_errors,
    cache_size_limit ...), kept as given; webgrad compiles nothing, so they change nothing."""

    def __init__(self, **defaults):
        self.__dict__.update(defaults)

    def patch(self, changes=None, **kwargs):
        """A context manager and decorator that sets the settings and restores them afterwards."""
        return _Patch(self, dict(changes or {}, **kwargs))


class _Patch:
    def __init__(self, config, changes):
        self.config, self.changes, self.saved = config, changes, None

    def __enter__(self):
        self.saved = {k: getattr(self.config, k, None) for k in self.changes}
        self.config.__dict__.update(self.changes)

    def __exit__(self, *exc):
        self.config.__dict__.update(self.saved)

    def __call__(self, fn):
        @functools.wraps(fn)
        def patched(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return patched


config = _Config(suppress_errors=False, cache_size_limit=8, accumulated_cache_size_limit=256, recompile_limit=8,
                 verbose=False, optimize_ddp=True, capture_scalar_outputs=False,
                 capture_dynamic_output_shape_ops=False, automatic_dynamic_shapes=True, assume_static_by_default=True,
                 inline_inbuilt_nn_modules=True, guard_nn_modules=False, compiled_autograd=False)


def is_compiling():
    return False


is_dynamo_compiling = is_compiling


def is_exporting():
    return False


def disable(fn=None, recursive=True, *, reason=None):
    """The function itself (a decorator without fn): it already runs eagerly."""
    return (lambda f: f) if fn is None else fn


def allow_in_graph(fn):
    return fn


def assume_constant_result(fn):
    return fn


def reset():
    """Nothing to clear: no compiled code is cached."""


def cudagraph_mark_step_begin():
    """Nothing to mark: no CUDA graphs (replayed steps are webgrad.replayable)."""


def list_backends(exclude_tags=("debug", "experimental")):
    return sorted(b for b in _BACKENDS if b not in ("eager", "aot_eager") or not exclude_tags)


def set_stance(stance="default", *, skip_guard_eval_unsafe=False, force_backend=None):
    if stance not in ("default", "force_eager", "eager_on_recompile", "fail_on_recompile"):
        raise RuntimeError(f"invalid torch.compiler stance {stance!r}")
    return _Patch(config, {})
