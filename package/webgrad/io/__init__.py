"""webgrad.io: reading and writing checkpoints (PyTorch's zip format and safetensors; see checkpoint.py)."""

from .checkpoint import load, save  # noqa: F401
