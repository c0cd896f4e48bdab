"""Wishart(df, covariance_matrix | precision_matrix | scale_tril), as torch.distributions.Wishart: the law of
X = sum_i v_i v_i^T over df draws v_i ~ N(0, Sigma) (df real, above dim - 1). Everything is computed from the
Cholesky factor of Sigma; samples are Bartlett's decomposition (chi-distributed diagonal, standard normal below
it), differentiable in df through the gamma sampler and in Sigma through the factor."""

import math
import warnings
from numbers import Number

from .._tensor import Size
from . import constraints
from .chi2 import Chi2
from .distribution import _all_true
from .exp_family import ExponentialFamily
from .multivariate_normal import _precision_to_scale_tril
from .utils import _finfo, _standard_normal, lazy_property

__all__ = ["Wishart"]

_LOG_2 = math.log(2)


def _mvdigamma(x, p):
    """The multivariate digamma function: sum_{i < p} digamma(x - i / 2)."""
    from .. import arange
    if not _all_true(x > (p - 1) / 2):
        raise ValueError("Wrong domain for multivariate digamma function.")
    return (x.unsqueeze(-1) - arange(p, dtype=x.dtype, device=x.device) / 2).digamma().sum(-1)


class Wishart(ExponentialFamily):
    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self):
        return {"covariance_matrix": constraints.positive_definite,
                "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky,
                "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        from .. import broadcast_shapes, linalg, tensor
        given = [p for p in (covariance_matrix, precision_matrix, scale_tril) if p is not None]
        if len(given) != 1:
            raise AssertionError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                                 "specified.")
        param = given[0]
        if param.ndim < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        if isinstance(df, Number):
            batch_shape = Size(tuple(param.shape[:-2]))
            self.df = tensor(float(df), dtype=param.dtype, device=param.device)
        else:
            batch_shape = Size(tuple(broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape))))
            self.df = df.expand(*batch_shape)
        event_shape = Size(tuple(param.shape[-2:]))
        p = event_shape[-1]
        if not _all_true(self.df > p - 1):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        matrix_shape = (*batch_shape, p, p)
        if scale_tril is not None:
            self.scale_tril = param.expand(*matrix_shape)
        elif covariance_matrix is not None:
            self.covariance_matrix = param.expand(*matrix_shape)
        else:
            self.precision_matrix = param.expand(*matrix_shape)
        if not _all_true(self.df >= p):
            warnings.warn("Low df values detected. Singular samples are highly likely to occur for ndim - 1 < df "
                          "< ndim.", stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self._dist_chi2 = self._chi2(batch_shape)

    def _chi2(self, batch_shape):
        """The Bartlett diagonal's squares: chi^2 with df - i degrees of freedom in row i."""
        from .. import arange
        L = self._unbroadcasted_scale_tril
        offsets = arange(self._event_shape[-1], dtype=L.dtype, device=L.device)
        return Chi2(df=self.df.unsqueeze(-1) - offsets.expand(*batch_shape, -1))

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = Size(batch_shape)
        matrix_shape = (*batch_shape, *self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(*matrix_shape)
        new.df = self.df.expand(*batch_shape)
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(*matrix_shape))
        super(Wishart, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._dist_chi2 = new._chi2(batch_shape)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(*self._batch_shape, *self._event_shape)

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(*self._batch_shape, *self._event_shape)

    @lazy_property
    def precision_matrix(self):
        from .. import cholesky_solve, eye
        L = self._unbroadcasted_scale_tril
        identity = eye(self._event_shape[-1], dtype=L.dtype, device=L.device)
        return cholesky_solve(identity, L).expand(*self._batch_shape, *self._event_shape)

    def _df_matrix(self):
        return self.df.reshape(*self._batch_shape, 1, 1)

    @property
    def mean(self):
        return self._df_matrix() * self.covariance_matrix

    @property
    def mode(self):
        """(df - p - 1) Sigma, NaN where df <= p + 1."""
        from .. import where
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = where(factor <= 0, math.nan, factor)
        return factor.reshape(*self._batch_shape, 1, 1) * self.covariance_matrix

    @property
    def variance(self):
        V = self.covariance_matrix
        diag_V = V.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix() * (V.pow(2) + diag_V.unsqueeze(-1) * diag_V.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape=Size()):
        p = self._event_shape[-1]
        diagonal = self._dist_chi2.rsample(sample_shape).sqrt().clamp(min=_finfo(self.df.dtype).eps)
        below = _standard_normal((*sample_shape, *self._batch_shape, p, p), diagonal.dtype, diagonal.device)
        chol = self._unbroadcasted_scale_tril @ (below.tril(-1) + diagonal.diag_embed())
        return chol @ chol.mT

    def rsample(self, sample_shape=Size(), max_try_correction=None):
        """Bartlett samples; a sample that is not positive definite (possible for df close to dim - 1) is drawn
        again, up to max_try_correction (10) times, with PyTorch's warning; one left singular scores -inf."""
        from .. import where
        if max_try_correction is None:
            max_try_correction = 10
        sample_shape = Size(tuple(sample_shape))
        sample = self._bartlett_sampling(sample_shape)
        singular = ~self.support.check(sample.detach())
        if _all_true(~singular):
            return sample
        warnings.warn("Singular sample detected.", stacklevel=2)
        for _ in range(max_try_correction):
            sample = where(singular.unsqueeze(-1).unsqueeze(-1), self._bartlett_sampling(sample_shape), sample)
            singular = ~self.support.check(sample.detach())
            if _all_true(~singular):
                break
        return sample

    def log_prob(self, value):
        from .. import cholesky_solve, linalg, mvlgamma
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        log_det_half = L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        trace = cholesky_solve(value, L).diagonal(dim1=-2, dim2=-1).sum(-1)
        return (-nu * (p * _LOG_2 / 2 + log_det_half) - mvlgamma(nu / 2, p)
                + (nu - p - 1) / 2 * linalg.slogdet(value).logabsdet - trace / 2)

    def entropy(self):
        from .. import mvlgamma
        nu = self.df
        p = self._event_shape[-1]
        log_det_half = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return ((p + 1) * (p * _LOG_2 / 2 + log_det_half) + mvlgamma(nu / 2, p)
                - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p) + nu * p / 2)

    @property
    def _natural_params(self):
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (self.df - p - 1) / 2

    def _log_normalizer(self, x, y):
        from .. import linalg, mvlgamma
        p = self._event_shape[-1]
        return (y + (p + 1) / 2) * (-linalg.slogdet(-2 * x).logabsdet + _LOG_2 * p) + mvlgamma(y + (p + 1) / 2, p)
