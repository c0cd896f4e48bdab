"""LKJCholesky(dim, concentration), as torch.distributions.LKJCholesky: Cholesky factors L of dim x dim correlation
matrices M = L L^T with density proportional to det(M)^(concentration - 1) (Lewandowski, Kurowicka and Joe, 2009).
Sampling is their onion method: row i is sqrt(y_i) times a uniform direction in its first i coordinates, y_i ~
Beta(i / 2, concentration + (dim - 2) / 2 - (i - 1) / 2), and the diagonal takes what keeps the row of unit length.
PyTorch draws y_i ~ Beta(i - 1/2, ...) instead, which matches the paper for row 1 only: from row 2 on its
correlations are too spread (dim 3, concentration 1/2: variance 0.375 where the LKJ marginal has 1/3). Here every
off-diagonal correlation has the LKJ marginal Beta(concentration - 1 + dim / 2, same) on (-1, 1); log_prob is
PyTorch's."""

import math

from .._tensor import Size
from . import constraints
from .beta import Beta
from .distribution import Distribution
from .utils import _finfo, _standard_normal, broadcast_all

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        from .. import arange, cat
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        marginal_conc = self.concentration + 0.5 * (dim - 2)
        offset = arange(dim - 1, dtype=self.concentration.dtype, device=self.concentration.device)
        offset = cat([offset.new_zeros((1,)), offset])  # i - 1 for row i >= 1; row 0 (no draw used) as row 1
        self._beta = Beta(0.5 * offset + 0.5, marginal_conc.unsqueeze(-1) - 0.5 * offset)
        super().__init__(self.concentration.size(), Size((dim, dim)), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = Size(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(Size(tuple(batch_shape) + (self.dim,)))
        super(LKJCholesky, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=Size()):
        from .. import no_grad
        with no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            u_normal = _standard_normal(self._extended_shape(sample_shape), y.dtype, y.device).tril(-1)
            # row 0 is all zeros: the clamp keeps it zero instead of 0 / 0
            tiny = _finfo(y.dtype).tiny
            u_hypersphere = u_normal / u_normal.norm(dim=-1, keepdim=True).clamp(min=tiny)
            w = y.sqrt() * u_hypersphere
            diag_elems = (1 - w.pow(2).sum(-1)).clamp(min=tiny).sqrt()
            return w + diag_elems.diag_embed()

    def log_prob(self, value):
        from .. import arange, mvlgamma
        if self._validate_args:
            self._validate_sample(value)
        diag_elems = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = arange(2, self.dim + 1, dtype=self.concentration.dtype, device=self.concentration.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized_log_pdf = (order * diag_elems.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        normalize_term = 0.5 * dm1 * math.log(math.pi) + mvlgamma(alpha - 0.5, dm1) - alpha.lgamma() * dm1
        return unnormalized_log_pdf - normalize_term
