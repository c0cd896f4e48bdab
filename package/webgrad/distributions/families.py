"""What families of distributions share, written once, as torch.distributions writes it in each class:

- LocScale (Normal, Laplace, Cauchy): loc and scale broadcast together; expand views both.
- BinaryParams (Bernoulli, Geometric, Binomial, NegativeBinomial, LogitRelaxedBernoulli): probs or logits,
  exactly one given (torch's ValueError otherwise), the other derived on first use; COUNTED ones also hold
  total_count, broadcast with it and in its dtype.

expand names the family member (Normal for a user's subclass of Normal) in Distribution._get_checked_instance,
so a subclass with its own __init__ must define its own expand, as in torch."""

from numbers import Number

from .._tensor import Size
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits


def _member(self, family):
    """The class in self's MRO that derives from `family` directly."""
    for cls in type(self).__mro__:
        if family in cls.__bases__:
            return cls
    return type(self)


def _finish_expand(self, new, batch_shape):
    Distribution.__init__(new, batch_shape, validate_args=False)
    new._validate_args = self._validate_args
    return new


class LocScale(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        batch_shape = Size() if isinstance(loc, Number) and isinstance(scale, Number) else self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(_member(self, LocScale), _instance)
        batch_shape = Size(batch_shape)
        new.loc, new.scale = self.loc.expand(batch_shape), self.scale.expand(batch_shape)
        return _finish_expand(self, new, batch_shape)


class BinaryParams(Distribution):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    COUNTED = False  # holds total_count

    def _set_params(self, probs, logits, total_count=None):
        """Keep probs or logits (and total_count where COUNTED); the batch shape they give."""
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        given = probs if probs is not None else logits
        if self.COUNTED:
            count, param = broadcast_all(total_count, given)
            self.total_count = count.to(param.dtype)
        else:
            (param,) = broadcast_all(given)
        setattr(self, "probs" if probs is not None else "logits", param)
        self._param = param
        return Size() if isinstance(given, Number) else param.size()

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(_member(self, BinaryParams), _instance)
        batch_shape = Size(batch_shape)
        if self.COUNTED:
            new.total_count = self.total_count.expand(batch_shape)
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(batch_shape))
                new._param = getattr(new, name)
        self._expand_more(new)
        return _finish_expand(self, new, batch_shape)

    def _expand_more(self, new):
        """What else a member's expand carries over (LogitRelaxedBernoulli's temperature)."""

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.size()
