"""F.gumbel_softmax, F.alpha_dropout and F.feature_alpha_dropout, as PyTorch's (the modules: alpha_dropout.py).

Alpha dropout keeps SELU's self-normalizing statistics: a dropped element takes SELU's negative saturation value
-alpha' instead of 0, and an affine map (a, b) brings mean and variance back, with PyTorch's constants and
formula (ATen's Dropout.cpp), so only the random draws differ.
"""

import warnings

from .. import random as _random
from .._tensor import Tensor, empty_like, zeros_like
from ..ops import elementwise as _elementwise

_ALPHA = 1.7580993408473766  # -SELU's scale * alpha: its value at -infinity, negated


def _alpha_dropout(input, p, training, inplace, feature):
    if not isinstance(input, Tensor):
        raise TypeError(f"alpha_dropout(): argument 'input' must be Tensor, not {type(input).__name__}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:  # (before the dims check, as torch's)
        return input
    if feature and input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if p == 1.0:
        out = input * 0.0
    else:
        shape = (*input.shape[:2], *([1] * (input.ndim - 2))) if feature else input.shape
        keep = (_random.rand(*shape, device=input.device) >= p).to(input.dtype)  # P(keep) = 1 - p
        a = 1.0 / ((_ALPHA * _ALPHA * p + 1.0) * (1.0 - p)) ** 0.5
        out = input * (keep * a) + ((keep - 1.0) * (_ALPHA * a) + _ALPHA * a * p)
    return _elementwise._maybe_inplace(input, out, inplace)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout (for SELU networks), as torch.nn.functional.alpha_dropout: the identity unless training."""
    return _alpha_dropout(input, p, training, inplace, feature=False)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout of whole channels (one draw per (sample, channel)), as torch's feature_alpha_dropout."""
    return _alpha_dropout(input, p, training, inplace, feature=True)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """Samples of the Gumbel-softmax (concrete) distribution over dim, as torch's: softmax((logits + g) / tau)
    with g Gumbel noise; hard=True gives one-hot samples whose gradient is the soft sample's (straight-through)."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    gumbels = -empty_like(logits).exponential_().log()
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft
