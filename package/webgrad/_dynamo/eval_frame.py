"""torch._dynamo.eval_frame.OptimizedModule: what torch.compile(module) returns. webgrad compiles nothing, so the
wrapper calls the module eagerly; it keeps PyTorch's shape of things scripts rely on: the module is `_orig_mod`
(a child, so state_dict keys start with "_orig_mod."), and other attributes are read through to it."""

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
