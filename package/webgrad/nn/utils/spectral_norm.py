"""torch.nn.utils.spectral_norm / remove_spectral_norm: the hook-based spectral normalization (Miyato et al.,
2018) GAN discriminators use: weight = weight_orig / sigma, sigma the largest singular value of weight_orig seen
as a matrix (dim `dim` first, the rest flattened), estimated by power iteration. The vectors u and v are
buffers (weight_u, weight_v) updated in place by n_power_iterations steps before each forward in training mode;
eval mode uses them as stored."""

from ..._autograd import no_grad
from ..parameter import Parameter


def _normalize(x, eps):
    from ..functional_layers import normalize
    return normalize(x, dim=0, eps=eps)


class SpectralNorm:
    """The forward pre-hook spectral_norm registers (torch.nn.utils.spectral_norm.SpectralNorm)."""

    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim, self.n_power_iterations, self.eps = name, dim, n_power_iterations, eps

    def reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.dim()) if d != self.dim])
        return weight.reshape(weight.size(0), -1)

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                w = weight_mat.detach()
                for _ in range(self.n_power_iterations):
                    v.copy_(_normalize(w.T @ u, self.eps))  # in place: the buffers carry the estimate on
                    u.copy_(_normalize(w @ v, self.eps))
            u, v = u.clone(), v.clone()  # the backward must see these values, not later iterations'
        sigma = (u * (weight_mat @ v)).sum()
        return weight / sigma

    def remove(self, module):
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        object.__delattr__(module, self.name)
        del module._buffers[self.name + "_u"]
        del module._buffers[self.name + "_v"]
        del module._parameters[self.name + "_orig"]
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        object.__setattr__(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps):
        from ... import random
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters.get(name)
        if weight is None:
            raise AttributeError(f"'{type(module).__name__}' object has no parameter '{name}'")
        with no_grad():
            weight_mat = fn.reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = _normalize(random.randn(h, dtype=weight.dtype, device=weight.device), fn.eps)
            v = _normalize(random.randn(w, dtype=weight.dtype, device=weight.device), fn.eps)
        del module._parameters[name]
        module.register_parameter(name + "_orig", weight)
        object.__setattr__(module, name, weight.detach())
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Replace module.<name> by weight_orig / sigma (sigma: its spectral norm by power iteration; buffers
    weight_u, weight_v). dim: the output dim (default 0; 1 for transposed convolutions). Returns the module."""
    if dim is None:
        from ..conv import ConvTranspose2d, ConvTranspose3d
        from ..layers_more import ConvTranspose1d
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name="weight"):
    """Undo spectral_norm: module.<name> a plain parameter again, weight_orig / sigma with the stored u, v."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
