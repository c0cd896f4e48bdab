"""webgrad.nn.utils, as torch.nn.utils."""

from .clip_grad import clip_grad_norm_, clip_grad_value_  # noqa: F401
