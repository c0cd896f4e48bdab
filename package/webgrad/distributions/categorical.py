"""Categorical over K categories (the last dim of probs / logits), as torch.distributions.Categorical.

Everything is a composition of tensor ops, so log_prob and entropy are differentiable with respect to the
parameters, and sampling runs on the parameters' device (Gumbel-max over webgrad.rand: no host loop)."""

from .. import dtypes
from .._tensor import Size
from ..random import rand

# torch.finfo(dtype).eps and .min for the float dtypes (clamp_probs and entropy use them, as PyTorch)
_EPS = {"float32": 1.1920928955078125e-07, "float64": 2.220446049250313e-16}
_MIN = {"float32": -3.4028234663852886e+38, "float64": -1.7976931348623157e+308}


class Categorical:
    """probs (non-negative, normalised over the last dim here) or logits (log-probabilities up to a constant,
    normalised with logsumexp here): exactly one of the two."""

    has_rsample = False

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            eps = _EPS.get(self.probs.dtype.name, _EPS["float32"])
            self.logits = self.probs.clamp(min=eps, max=1 - eps).log()  # torch's probs_to_logits
        else:
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
            self.probs = self.logits.softmax(-1)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        self.batch_shape = Size(tuple(self._param.shape[:-1]))
        self.event_shape = Size(())

    @property
    def param_shape(self):
        return self._param.shape

    @property
    def mode(self):
        return self.probs.argmax(-1)

    def sample(self, sample_shape=()):
        """Indices of shape sample_shape + batch_shape, drawn as argmax(logits + Gumbel noise) on the device."""
        sample_shape = tuple(sample_shape) if not isinstance(sample_shape, int) else (sample_shape,)
        u = rand(*sample_shape, *self.logits.shape, device=self.logits.device, dtype=self.logits.dtype)
        gumbel = -(-u.log()).log()  # u in [0, 1): u == 0 gives -inf, never chosen
        # from probs, log(probs) keeps a zero-probability category at -inf (the clamped logits would let it win
        # with probability ~eps), so such a category is never drawn, as torch's multinomial
        base = self.probs.detach().log() if self._param is self.probs else self.logits.detach()
        return (base + gumbel).argmax(-1)

    def log_prob(self, value):
        shape = tuple(_broadcast_shapes(tuple(value.shape), tuple(self.batch_shape)))
        index = value.to(dtypes.int32).reshape(*value.shape, 1).expand(*shape, 1)
        return self.logits.expand(*shape, self._num_events).gather(-1, index).squeeze(-1)

    def entropy(self):
        low = _MIN.get(self.logits.dtype.name, _MIN["float32"])
        return -(self.logits.clamp(min=low) * self.probs).sum(-1)

    def __repr__(self):
        return f"Categorical({'probs' if self._param is self.probs else 'logits'}: {self._param.shape})"


def _broadcast_shapes(a, b):
    """The broadcast of two shapes (NumPy rules), with PyTorch's error for incompatible ones."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) at non-singleton "
                               f"dimension")
        out.append(max(x, y))
    return out
