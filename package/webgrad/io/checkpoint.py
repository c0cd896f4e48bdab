"""webgrad.save / webgrad.load: one entry point, two formats, chosen by file name and by content.

- save: names ending in .safetensors get the safetensors format (a flat dict of tensors, loads in any
  safetensors reader); everything else (.pt, .pth, .ckpt, file objects holding more than a flat dict of
  tensors ...) gets PyTorch's zip format (torch_format.py), so `torch.load(path, weights_only=True)`
  reads it, nested dicts (model + optimizer state + epoch) included. A file object with a flat dict of
  tensors keeps the safetensors format it always had.
- load: the content decides (a zip archive is PyTorch's format, anything else is tried as safetensors),
  and an error names the format detected and why it was refused.

A whole module (`save(model, f)`) is written as torch.save writes one: a pickle of the objects themselves, here
webgrad's classes and the script's own, with the tensors in the zip's records (torch_format.py). It loads back
with `load(f, weights_only=False)`, which runs the code the file names (only for files you trust), or with the
default weights_only=True once its classes are allowlisted (webgrad.serialization.safe_globals([...])); a
weights-only load of it otherwise fails with PyTorch's UnpicklingError and message.
"""

import os
import warnings
from collections.abc import Mapping

from .._tensor import Tensor
from . import safetensors, serialization, torch_format


def _is_flat_tensor_dict(obj):
    return isinstance(obj, Mapping) and all(isinstance(k, str) and isinstance(v, Tensor) for k, v in obj.items())


def save(obj, f, metadata=None, **kwargs):
    """Save `obj` to `f` (a path or a binary file object); see the module doc for the format chosen.
    Keyword arguments of torch.save (pickle_module, pickle_protocol, _use_new_zipfile_serialization) are
    accepted; the zip format is always written."""
    name = os.fspath(f) if isinstance(f, (str, os.PathLike)) else getattr(f, "name", None)
    safetensors_name = isinstance(name, str) and name.endswith(".safetensors")
    if safetensors_name or (name is None and _is_flat_tensor_dict(obj)) or \
            metadata is not None:
        return safetensors.save(obj, f, metadata=metadata)
    archive = "archive"
    if isinstance(name, str):  # torch names the archive's folder after the file
        archive = os.path.splitext(os.path.basename(name))[0] or "archive"
    return torch_format.save(obj, f, archive_name=archive)


def load(f, map_location=None, pickle_module=None, *, weights_only=None, device=None, mmap=None, **kwargs):
    """Load a checkpoint written by webgrad.save or torch.save (zip format) or a safetensors file.

    map_location / device: where the tensors go ("cpu", "webgpu", a webgrad.device; None = the default
    device, or for a whole-object file where each tensor was saved, "webgpu" or else the default device).
    weights_only (default True, as PyTorch's since 2.6): tensors, OrderedDicts and plain containers, plus the
    globals allowlisted with webgrad.serialization.add_safe_globals / safe_globals; any other global is refused
    unrun, with PyTorch's UnpicklingError and message. weights_only=False: the whole-object path
    (torch_format.load_trusted), which imports and runs what the file names: only for files you trust."""
    if device is None and map_location is not None and not callable(map_location) and \
            not isinstance(map_location, dict):
        device = map_location  # a device name or webgrad.device (a dict or function mapping: the default device)
    weights_only = _weights_only_from_environment(weights_only)
    if hasattr(f, "read"):
        raw = f.read()
    else:
        with open(os.fspath(f), "rb") as src:
            raw = src.read()
    if torch_format.is_torch_zip(raw):
        if weights_only is False:
            return torch_format.load_trusted(raw, device=device)
        return torch_format.load(raw, device=device, allowed=serialization.allowed_globals())
    if torch_format.is_legacy_torch(raw):
        raise ValueError("this is a PyTorch checkpoint in the legacy format (torch.save before 1.6, or "
                         "_use_new_zipfile_serialization=False); webgrad reads the zip format: load it in PyTorch "
                         "and torch.save it again")
    try:
        return safetensors.load(_BytesFile(raw), device=device)
    except ValueError as e:
        raise ValueError(f"{e}. (The file is not a zip archive, so it is not a PyTorch checkpoint in torch.save's "
                         "format; it was read as safetensors.)") from None


def _weights_only_from_environment(weights_only):
    """PyTorch's overrides of torch.load's default: TORCH_FORCE_WEIGHTS_ONLY_LOAD=1 makes every load weights-only;
    TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 makes a load that did not pass weights_only trust the file (with PyTorch's
    warning), as scripts written before PyTorch 2.6 expect. None stays None (the weights-only default)."""
    true_values = ("1", "y", "yes", "true")
    force = os.getenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "0").lower() in true_values
    force_no = os.getenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0").lower() in true_values
    if force and force_no:
        raise RuntimeError("Only one of `TORCH_FORCE_WEIGHTS_ONLY_LOAD` or `TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD` "
                           "should be set, but both were set.")
    if force:
        return True
    if force_no and weights_only is None:
        warnings.warn("Environment variable TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD detected, since the`weights_only` "
                      "argument was not explicitly passed to `torch.load`, forcing weights_only=False.", UserWarning,
                      stacklevel=3)
        return False
    return weights_only


class _BytesFile:
    """The bytes already read, handed to safetensors.load as the file object it accepts."""

    def __init__(self, raw):
        self.raw = raw

    def read(self):
        return self.raw
