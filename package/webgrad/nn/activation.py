"""Activation layers: thin Modules over nn.functional, with PyTorch's constructor arguments and reprs."""

from ..ops import table
from . import functional as F
from .module import Module


def _table_module(op):
    """The nn Module of op-table record `op`: PyTorch's constructor arguments (the record's params, then
    `inplace` where the functional form has it), forward through nn.functional, PyTorch's repr."""
    name = op.name
    names = [n for n, _ in op.params]
    with_inplace = "inplace_arg" in op.expose

    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        allowed = names + (["inplace"] if with_inplace else [])
        if len(args) > len(allowed):
            raise TypeError(f"{op.module}() takes at most {len(allowed)} arguments ({len(args)} given)")
        values = dict(zip(allowed, args))
        for k, v in kwargs.items():
            if k not in allowed or k in values:
                raise TypeError(f"{op.module}() got an unexpected or repeated argument {k!r}")
            values[k] = v
        for n, default in op.params:
            setattr(self, n, values.get(n, default))
        if with_inplace:
            self.inplace = bool(values.get("inplace", False))

    def forward(self, input):
        args = [getattr(self, n) for n in names]
        fn = getattr(F, name)  # looked up per call, as torch's modules call F.relu: a profiler sees it
        return fn(input, *args, inplace=self.inplace) if with_inplace else fn(input, *args)

    def extra_repr(self):
        parts = [f"{n}={getattr(self, n)}" for n in names]
        if with_inplace and self.inplace and op.module_repr_inplace:
            parts.append("inplace=True")
        return ", ".join(parts)

    cls = type(op.module, (Module,), {"__init__": __init__, "forward": forward, "extra_repr": extra_repr,
                                      "__doc__": f"nn.{op.module}: {op.doc}", "__module__": __name__})
    return cls


# One Module per op-table record that names one (ReLU, ELU, Hardswish, ...): webgrad/ops/table.py.
TABLE_MODULES = {op.module: _table_module(op) for op in table.UNARY.values() if op.module}
globals().update(TABLE_MODULES)


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class _SoftmaxBase(Module):
    _fn, _legacy_name = None, ""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim if self.dim is not None else F._softmax_legacy_dim(input.ndim, self._legacy_name)
        return type(self)._fn(input, dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax(_SoftmaxBase):
    _fn, _legacy_name = staticmethod(F.softmax), "softmax"


class LogSoftmax(_SoftmaxBase):
    _fn, _legacy_name = staticmethod(F.log_softmax), "log_softmax"


class Softmax2d(Module):
    """Softmax over the channels at every spatial location: input (N, C, H, W) or (C, H, W), softmax on dim -3."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead")
        return F.softmax(input, -3)
