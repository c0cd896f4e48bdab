"""webgrad.nn.utils.parametrizations, as torch.nn.utils.parametrizations: weight_norm and spectral_norm as
parametrizations (nn.utils.parametrize): module.weight is computed from
module.parametrizations.weight.original0 / original1 (weight_norm's g and v) or .original (spectral_norm's
weight, its power-iteration vectors the buffers parametrizations.weight.0._u and _v), with PyTorch's
state_dict keys, so checkpoints move between the two libraries either way."""

from ..._autograd import no_grad
from ..._tensor import Tensor
from ..module import Module
from . import parametrize
from .spectral_norm import _normalize
from .weight_norm import norm_except_dim, weight_norm_value


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_norm_value(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """module.<name> = g * v / ||v|| (the norm over every dim but `dim`; dim=None: over all), with g and v the
    parameters parametrizations.<name>.original0 and original1. A state_dict of the hook-based
    nn.utils.weight_norm (<name>_g, <name>_v) loads into it too. Returns the module."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def load_compat(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)
    module._register_load_state_dict_pre_hook(load_compat)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError("Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            from ... import random
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            with no_grad():
                u = random.randn(h, dtype=weight.dtype, device=weight.device)
                v = random.randn(w, dtype=weight.dtype, device=weight.device)
                self.register_buffer("_u", _normalize(u, self.eps))
                self.register_buffer("_v", _normalize(v, self.eps))
            self._power_method(weight_mat, 15)  # a good estimate from the start, as PyTorch's

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.dim()) if d != self.dim])
        return weight.reshape(weight.size(0), -1)

    def _power_method(self, weight_mat, n_power_iterations):
        with no_grad():
            w = weight_mat.detach()
            for _ in range(n_power_iterations):
                self._u.copy_(_normalize(w @ self._v, self.eps))  # in place: the buffers carry the estimate on
                self._v.copy_(_normalize(w.T @ self._u, self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return _normalize(weight, self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = (u * (weight_mat @ v)).sum()
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """module.<name> = original / sigma, sigma its largest singular value (dim `dim` as rows; default 0, 1 for
    transposed convolutions) by power iteration: n_power_iterations steps per forward in training mode, the
    stored vectors in eval mode. Returns the module."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        from ..conv import ConvTranspose2d, ConvTranspose3d
        from ..layers_more import ConvTranspose1d
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
