"""webgrad.io: reading and writing tensors (checkpoints in the safetensors format)."""

from .safetensors import load, save  # noqa: F401
