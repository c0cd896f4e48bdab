"""Probability distributions (webgrad.distributions), as torch.distributions."""

from .categorical import Categorical  # noqa: F401
