"""torch._dynamo.eval_frame.OptimizedModule: what torch.compile(module) returns (webgrad.compile is here).
webgrad compiles nothing, so the wrapper calls the module eagerly; it keeps PyTorch's shape of things scripts
rely on: the module is `_orig_mod` (a child, so state_dict keys start with "_orig_mod."), and other attributes
are read through to it."""

from .. import _compile
from ..nn.module import Module


class OptimizedModule(Module):
    """A compiled module: calls `_orig_mod` (hooks and all) eagerly; attributes not its own are the module's."""

    def __init__(self, mod, dynamo_ctx=None):
        super().__init__()
        self._orig_mod = mod
        self.dynamo_ctx = dynamo_ctx
        self.training = mod.training

    def forward(self, *args, **kwargs):
        return self._orig_mod(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            inner = self.__dict__.get("_modules", {}).get("_orig_mod")
            if inner is None:
                raise
            return getattr(inner, name)


def compile(model=None, **kwargs):
    """torch.compile: _compile.compile's checks and eager run, with a module (unless disable=True) wrapped in an
    OptimizedModule, as torch's returns one."""
    compiled = _compile.compile(model, **kwargs)
    if model is None:  # @torch.compile(mode=...): the decorator, applied here so that a module is wrapped too
        return lambda fn: compile(fn, **kwargs)
    if isinstance(model, Module) and not kwargs.get("disable", False):
        return OptimizedModule(model)
    return compiled
