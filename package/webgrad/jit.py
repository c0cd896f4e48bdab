"""torch.jit: TorchScript's decorators and entry points, for scripts that use them; webgrad runs eagerly.

script() and trace() return what they are given, with a warning: the module or function then runs as
ordinary Python, with the same results (TorchScript changes speed and deployability, not values).
ignore, unused, export, interface and script_method are decorators that leave their function as it is,
is_scripting() and is_tracing() are False, annotate(T, v) is v. save() and load() of TorchScript archives
are refused: save a state_dict with torch.save instead.
"""

import typing
import warnings

from .nn.module import Module

Final = typing.Final


def _warn(name):
    warnings.warn(f"torch.jit.{name}: webgrad has no TorchScript compiler; the module or function is returned "
                  "unchanged and runs eagerly (same results)", UserWarning, stacklevel=3)


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    _warn("script")
    return obj


def trace(func, example_inputs=None, optimize=None, check_trace=True, check_inputs=None, check_tolerance=1e-5,
          strict=True, _force_outplace=False, _module_class=None, _compilation_unit=None, example_kwarg_inputs=None,
          _store_inputs=True):
    _warn("trace")
    return func


def trace_module(mod, inputs, optimize=None, check_trace=True, check_inputs=None, check_tolerance=1e-5,
                 strict=True, _force_outplace=False, _module_class=None, _compilation_unit=None,
                 example_inputs_is_kwarg=False, _store_inputs=True):
    _warn("trace_module")
    return mod


def script_if_tracing(fn):
    return fn


def ignore(drop=False, **kwargs):
    """@torch.jit.ignore or @torch.jit.ignore(drop=True): the function, unchanged."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn):
    return fn


def export(fn):
    return fn


def interface(obj):
    return obj


def script_method(fn):
    return fn


def is_scripting():
    return False


def is_tracing():
    return False


def annotate(the_type, the_value):
    return the_value


class ScriptModule(Module):
    """Old TorchScript code subclasses torch.jit.ScriptModule; here it is an ordinary Module."""


class Future:
    """What fork() returns: the call has already run (webgrad has no TorchScript thread pool)."""

    def __init__(self, value):
        self._value = value

    def wait(self):
        return self._value

    def value(self):
        return self._value

    def done(self):
        return True


def fork(func, *args, **kwargs):
    return Future(func(*args, **kwargs))


def wait(future):
    return future.wait()


def save(m, f, _extra_files=None):
    raise RuntimeError("torch.jit.save: webgrad has no TorchScript archives; save the weights with "
                       "torch.save(model.state_dict(), path)")


def load(f, map_location=None, _extra_files=None, _restore_shapes=False, **kwargs):
    raise RuntimeError("torch.jit.load: webgrad cannot run TorchScript archives; load a state_dict saved with "
                       "torch.save into the model's class instead")
