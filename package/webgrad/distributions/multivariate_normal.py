"""MultivariateNormal(loc, covariance_matrix | precision_matrix | scale_tril), as
torch.distributions.MultivariateNormal: everything goes through the lower Cholesky factor L (cov = L L^T), with
log_prob's Mahalanobis term as one triangular solve."""

import math

from .._tensor import Size
from . import constraints
from .distribution import Distribution
from .utils import LOG_2PI, _standard_normal, lazy_property


def _broadcast_shape(*shapes):
    from .. import broadcast_shapes
    return tuple(broadcast_shapes(*shapes))


def _batch_mv(bmat, bvec):
    return (bmat @ bvec.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(bL, bx):
    """x^T (L L^T)^-1 x = |L^-1 x|^2 for x of shape (*outer, *inner, n) and L of shape (*Lbatch, n, n): the outer
    dims of x (those L has no dims for, sample dims for instance) become columns of one triangular solve, so L is
    never copied per sample."""
    from .. import linalg
    n = bx.shape[-1]
    x_batch = tuple(bx.shape[:-1])
    l_batch = tuple(bL.shape[:-2])
    if len(l_batch) > len(x_batch):
        x_batch = _broadcast_shape(x_batch, l_batch)
        bx = bx.expand(*x_batch, n)
    outer = x_batch[:len(x_batch) - len(l_batch)]
    inner = _broadcast_shape(x_batch[len(outer):], l_batch)
    cols = math.prod(outer)
    x = bx.expand(*outer, *inner, n).reshape(cols, *inner, n)
    x = x.permute(*range(1, len(inner) + 1), len(inner) + 1, 0)  # (*inner, n, cols)
    L = bL.expand(*inner, n, n)
    m = linalg.solve_triangular(L, x, upper=False).pow(2).sum(-2)  # (*inner, cols)
    m = m.permute(len(inner), *range(len(inner)))  # (cols, *inner)
    return m.reshape(*outer, *inner)


def _precision_to_scale_tril(P):
    """The lower Cholesky factor of P^-1 without forming the inverse: from the Cholesky factor of P flipped."""
    from .. import eye, linalg
    Lf = linalg.cholesky(P.flip((-2, -1)))
    L_inv = Lf.flip((-2, -1)).transpose(-2, -1)
    Id = eye(P.shape[-1], dtype=P.dtype, device=P.device)
    return linalg.solve_triangular(L_inv, Id, upper=False)


class MultivariateNormal(Distribution):
    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        from .. import linalg
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        if scale_tril is not None:
            if scale_tril.ndim < 2:
                raise ValueError("scale_tril matrix must be at least two-dimensional, with optional leading batch "
                                 "dimensions")
            batch_shape = _broadcast_shape(tuple(scale_tril.shape[:-2]), tuple(loc.shape[:-1]))
            self.scale_tril = scale_tril.expand(*batch_shape, -1, -1)
        elif covariance_matrix is not None:
            if covariance_matrix.ndim < 2:
                raise ValueError("covariance_matrix must be at least two-dimensional, with optional leading batch "
                                 "dimensions")
            batch_shape = _broadcast_shape(tuple(covariance_matrix.shape[:-2]), tuple(loc.shape[:-1]))
            self.covariance_matrix = covariance_matrix.expand(*batch_shape, -1, -1)
        else:
            if precision_matrix.ndim < 2:
                raise ValueError("precision_matrix must be at least two-dimensional, with optional leading batch "
                                 "dimensions")
            batch_shape = _broadcast_shape(tuple(precision_matrix.shape[:-2]), tuple(loc.shape[:-1]))
            self.precision_matrix = precision_matrix.expand(*batch_shape, -1, -1)
        self.loc = loc.expand(*batch_shape, -1)
        super().__init__(Size(batch_shape), Size(tuple(self.loc.shape[-1:])), validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = tuple(Size(batch_shape))
        n = self.event_shape[0]
        new.loc = self.loc.expand(*batch_shape, n)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(*batch_shape, n, n))
        super(MultivariateNormal, new).__init__(Size(batch_shape), self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return (*self._batch_shape, *self._event_shape, *self._event_shape)

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(*self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(*self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        from .. import cholesky_inverse
        return cholesky_inverse(self._unbroadcasted_scale_tril).expand(*self._matrix_shape())

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(*self._batch_shape, *self._event_shape)

    def rsample(self, sample_shape=Size()):
        """loc + L eps with eps ~ N(0, I): differentiable in loc and the matrix parameter."""
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        return -0.5 * (self._event_shape[0] * LOG_2PI + M) - self._half_log_det()

    def entropy(self):
        H = 0.5 * self._event_shape[0] * (1.0 + LOG_2PI) + self._half_log_det()
        return H if len(self._batch_shape) == 0 else H.expand(*self._batch_shape)
