"""torch.nn.utils.weight_norm / remove_weight_norm: the hook-based weight normalization (Salimans and Kingma,
2016): weight = g * v / ||v||, the norm over every dim but `dim`. The parameter `weight` is replaced by
`weight_g` (the magnitudes) and `weight_v` (the directions), and a forward pre-hook recomputes module.weight
from them before each call. PyTorch deprecates it for parametrizations.weight_norm; scripts still use it."""

from ..._autograd import no_grad
from ..parameter import Parameter


def norm_except_dim(v, dim):
    """||v|| over every dim but `dim`, kept as size-1 dims (dim -1, PyTorch's code for None: over all of v)."""
    if dim == -1:
        return (v * v).sum().sqrt()
    dims = [d for d in range(v.ndim) if d != dim]
    if not dims:
        return v.abs()
    return (v * v).sum(dims, keepdim=True).sqrt()


def weight_norm_value(v, g, dim):
    """torch._weight_norm(v, g, dim): v * (g / ||v||)."""
    return v * (g / norm_except_dim(v, dim))


class WeightNorm:
    """The forward pre-hook weight_norm registers (torch.nn.utils.weight_norm.WeightNorm)."""

    def __init__(self, name, dim):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        return weight_norm_value(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"), self.dim)

    @staticmethod
    def apply(module, name, dim):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        weight = module._parameters.get(name) if name in module.__dict__.get("_parameters", {}) else None
        if weight is None:
            raise AttributeError(f"'{type(module).__name__}' object has no parameter '{name}'")
        fn = WeightNorm(name, dim)
        del module._parameters[name]
        with no_grad():
            g = norm_except_dim(weight, fn.dim)
        module.register_parameter(name + "_g", Parameter(g.detach().clone()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        object.__setattr__(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        with no_grad():
            weight = self.compute_weight(module)
        object.__delattr__(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        object.__setattr__(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Replace module.<name> by weight_g and weight_v (weight = g * v / ||v||, the norm over all dims but
    `dim`; dim=None: over the whole tensor, g a scalar). Returns the module."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    """Undo weight_norm: module.<name> a plain parameter again, with the current normalized value."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
