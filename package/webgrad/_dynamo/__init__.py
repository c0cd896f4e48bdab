"""torch._dynamo: the names of PyTorch's graph capturer that training scripts touch (config.suppress_errors,
reset, disable, mark_dynamic ...). webgrad's torch.compile runs eagerly, so these are webgrad.compiler's answers:
nothing is captured, guarded or cached."""

import importlib.machinery
import sys

from ..compiler import (allow_in_graph, assume_constant_result, config, disable, is_compiling, list_backends,
                        reset)

# `import torch._dynamo.config` finds the settings object itself (PyTorch's config is a module object too)
config.__spec__ = importlib.machinery.ModuleSpec(__name__ + ".config", None)
sys.modules[__name__ + ".config"] = config

__all__ = ["allow_in_graph", "assume_constant_result", "config", "disable", "is_compiling", "list_backends",
           "mark_dynamic", "mark_static", "maybe_mark_dynamic", "reset"]


def mark_dynamic(t, index, *, min=None, max=None, specialize_on=None):
    """Nothing to mark: shapes are never specialised."""


def maybe_mark_dynamic(t, index):
    """Nothing to mark: shapes are never specialised."""


def mark_static(t, index=None):
    """Nothing to mark: shapes are never specialised."""
