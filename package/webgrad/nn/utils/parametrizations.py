"""webgrad.nn.utils.parametrizations, as torch.nn.utils.parametrizations: weight_norm and spectral_norm as
parametrizations (nn.utils.parametrize): module.weight is computed from
module.parametrizations.weight.original0 / original1 (weight_norm's g and v) or .original (spectral_norm's
weight, its power-iteration vectors the buffers parametrizations.weight.0._u and _v), with PyTorch's
state_dict keys, so checkpoints move between the two libraries either way. orthogonal keeps module.<name>
orthogonal (orthonormal columns, or rows for a wide matrix) through the matrix exponential, the Cayley map or a
product of Householder reflectors of the original, as PyTorch's."""

from ... import linalg, random
from ..._autograd import no_grad
from ..._tensor import Tensor, eye, ones, zeros_like
from ..._typeinfo import finfo
from ...ops.shape import cat
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


_ORTHOGONAL_MAPS = ("matrix_exp", "cayley", "householder")


def _is_orthogonal(Q):
    n, k = Q.size(-2), Q.size(-1)
    return bool((Q.mT @ Q).allclose(eye(k, dtype=Q.dtype, device=Q.device), atol=10.0 * n * finfo(Q.dtype).eps))


def _make_orthogonal(A):
    """The Q of A = QR (A tall) with R's diagonal non-negative."""
    Q, R = linalg.qr(A)
    return Q * R.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


def _with_diagonal(A, diagonal):
    """A with its main diagonal replaced by `diagonal` (no in-place write into a diagonal view)."""
    n, k = A.size(-2), A.size(-1)
    on_diagonal = eye(n, k, dtype=A.dtype, device=A.device)
    return A * (1 - on_diagonal) + on_diagonal * diagonal.unsqueeze(-2 if n >= k else -1)


def _geqrf(A):
    """LAPACK geqrf of a tall (batch of) matrix A, as torch.geqrf: R on and above the diagonal, the Householder
    vectors (their leading 1 implied) below it, and tau, so that A = H_1 ... H_k R with H_i = I - tau_i v_i v_i^T.
    One step per column, each a few batched tensor ops."""
    taus = []
    for i in range(A.size(-1)):
        x = A[..., i:, i]
        alpha, rest = x[..., 0], x[..., 1:]
        rest_norm = rest.norm(dim=-1)
        reflect = rest_norm > 0  # else H_i = I, tau_i = 0, as LAPACK's dlarfg
        norm = alpha.hypot(rest_norm)
        beta = (-norm).where(alpha >= 0, norm)
        tau = ((beta - alpha) / beta.where(reflect, 1.0)).where(reflect, 0.0)
        v_rest = rest / (alpha - beta).where(reflect, 1.0).unsqueeze(-1)
        v = cat([ones(*v_rest.shape[:-1], 1, dtype=A.dtype, device=A.device), v_rest], -1)
        trailing = A[..., i:, i + 1:]
        v_column = v.unsqueeze(-1)
        trailing = trailing - tau[..., None, None] * v_column * (v_column * trailing).sum(-2, keepdim=True)
        column = cat([beta.where(reflect, alpha).unsqueeze(-1), v_rest], -1).unsqueeze(-1)
        A = cat([A[..., :i, :], cat([A[..., i:, :i], column, trailing], -1)], -2)
        taus.append(tau)
    return A, (cat([t.unsqueeze(-1) for t in taus], -1) if taus else A.new_zeros(*A.shape[:-2], 0))


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.size(-2), X.size(-1)
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = X.tril()
            if n != k:
                X = cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mT  # skew-symmetric
            if self.orthogonal_map == "matrix_exp":
                Q = A.matrix_exp()
            else:
                Id = eye(n, dtype=A.dtype, device=A.device)
                Q = linalg.solve(Id - 0.5 * A, Id + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = linalg.householder_product(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if hasattr(self, "base"):
            Q = self.base @ Q
        return Q.mT if transposed else Q

    def right_inverse(self, Q):
        """The original that gives Q: with the trivialization, Q (made orthogonal first if it is not) becomes the
        base and the original the point that maps to the identity; without it, Householder reflectors of Q."""
        if Q.shape != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {Q.shape}.")
        with no_grad():
            Q_init = Q
            n, k = Q.size(-2), Q.size(-1)
            transpose = n < k
            if transpose:
                Q = Q.mT
                n, k = k, n
            if not hasattr(self, "base"):
                if self.orthogonal_map in ("matrix_exp", "cayley"):
                    raise NotImplementedError("It is not possible to assign to the matrix exponential or the Cayley "
                                              "parametrizations when use_trivialization=False.")
                A, tau = _geqrf(Q)
                signs = A.diagonal(dim1=-2, dim2=-1).sign()
                A = _with_diagonal(A, signs.where(tau != 0.0, -signs))
                return A.mT if transpose else A
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:
                N = random.randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype, device=Q.device)
                Q = _make_orthogonal(cat([Q, N], dim=-1))
            self.base = Q
            return _with_diagonal(zeros_like(Q_init), -Q_init.new_ones(min(n, k)))


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """module.<name> (a matrix or a batch of matrices) kept orthogonal: orthonormal columns (rows when wide),
    computed from module.parametrizations.<name>.original by orthogonal_map: "matrix_exp" or "cayley" of its
    skew-symmetric part, or "householder" (a product of reflectors). Default: "matrix_exp" for a square matrix,
    "householder" otherwise. use_trivialization=True keeps a base matrix in parametrizations.<name>[0].base, so
    the weight starts as the tensor's own value made orthogonal (by QR) and can be assigned any orthogonal
    matrix. Returns the module."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if weight.is_complex():
        raise NotImplementedError("orthogonal: webgrad's parametrization is real; complex (unitary) weights are not "
                                  "supported")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.size(-2) == weight.size(-1) else "householder"
    if orthogonal_map not in _ORTHOGONAL_MAPS:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
