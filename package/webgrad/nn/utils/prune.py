"""torch.nn.utils.prune: magnitude and random pruning of a module's tensors, by reparametrization.

Pruning `module.weight` moves the parameter to `module.weight_orig`, stores a 0/1 mask as the buffer
`module.weight_mask`, and registers the pruning method as a forward pre-hook that recomputes the plain attribute
`module.weight = weight_orig * weight_mask` before every call, so the optimizer keeps training `weight_orig` and
the pruned entries stay zero. A state dict then holds `weight_orig` and `weight_mask`, as PyTorch's does.
Pruning the same tensor again combines the masks through a PruningContainer: each new method only sees the
entries (or, for structured methods, the channels) the earlier ones kept. `remove` makes the pruning permanent.

Every mask is computed with tensor ops (topk, kthvalue, norm, index_fill, index_copy), so pruning runs on the
tensor's own device, WebGPU included.
"""

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

from ... import random as _random
from ..._norm import norm
from ..._tensor import ones_like, zeros_like
from ...memory_format import contiguous_format
from ...ops.selection import nonzero
from .convert_parameters import parameters_to_vector


class BasePruningMethod(ABC):
    """A pruning method: compute_mask(t, default_mask) says which entries of t survive. Applied to a module
    (apply), an instance is the forward pre-hook that recomputes the pruned tensor."""

    _tensor_name = None  # the name of the pruned tensor, set by apply()

    def __call__(self, module, inputs):
        """The forward pre-hook: module.<name> = <name>_orig * <name>_mask."""
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The mask (t's shape) of what survives, given t (the importance scores) and the mask already
        applied (default_mask), which the new mask must not undo."""

    def apply_mask(self, module):
        """The pruned tensor: <name>_orig times <name>_mask."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned")
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune module.<name> with cls(*args, **kwargs), on top of any pruning already applied to it.
        importance_scores (the tensor's shape) rank the entries instead of the tensor itself. Returns the
        method now registered as the hook (a PruningContainer when the tensor was pruned before)."""
        method = _combined_method(cls, module, name, args, kwargs)
        orig = getattr(module, name)
        if importance_scores is None:
            importance_scores = orig
        elif importance_scores.shape != orig.shape:
            raise AssertionError(f"importance_scores should have the same shape as parameter {name} of {module}, "
                                 f"got {importance_scores.shape} vs {orig.shape}")
        first_time = not isinstance(method, PruningContainer)
        if first_time:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone(memory_format=contiguous_format)
        try:
            mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            if first_time:  # put the parameter back as it was
                orig = getattr(module, name + "_orig")
                module.register_parameter(name, orig)
                del module._parameters[name + "_orig"]
            raise
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """t with this method's mask applied (no module involved)."""
        if importance_scores is None:
            importance_scores = t
        elif importance_scores.shape != t.shape:
            raise AssertionError(f"importance_scores should have the same shape as tensor t, "
                                 f"got {importance_scores.shape} vs {t.shape}")
        default_mask = default_mask if default_mask is not None else ones_like(t)
        return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module):
        """Make the pruning permanent: module.<name> becomes the parameter <name>_orig holding the pruned values;
        <name>_orig and <name>_mask go away. (The caller removes the hook: see remove(module, name).)"""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned before pruning can be removed")
        weight = self.apply_mask(module)
        if hasattr(module, self._tensor_name):
            delattr(module, self._tensor_name)
        orig = module._parameters[self._tensor_name + "_orig"]
        orig.data = weight.data
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        setattr(module, self._tensor_name, orig)


def _combined_method(cls, module, name, args, kwargs):
    """The new method cls(*args, **kwargs) for module.<name>, joined with the pruning hook already on that
    tensor (whose hook is unregistered here; apply registers the result)."""
    keys = [k for k, hook in module._forward_pre_hooks.items()
            if isinstance(hook, BasePruningMethod) and hook._tensor_name == name]
    if len(keys) > 1:
        raise AssertionError(f"Avoid adding multiple pruning hooks to the same tensor {name} of module {module}. "
                             "Use a PruningContainer.")
    old = module._forward_pre_hooks[keys[0]] if keys else None
    for k in keys:
        del module._forward_pre_hooks[k]
    method = cls(*args, **kwargs)
    method._tensor_name = name
    if old is None:
        return method
    container = old if isinstance(old, PruningContainer) else PruningContainer(old)
    container.add_pruning_method(method)
    return container


class PruningContainer(BasePruningMethod):
    """The pruning methods applied to one tensor, in order. Its mask is the last method's, computed on what
    the earlier masks kept."""

    def __init__(self, *args):
        self._pruning_methods = ()
        if len(args) == 1:
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        else:
            for method in args:
                self.add_pruning_method(method)

    def add_pruning_method(self, method):
        """Append a method acting on this container's tensor."""
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named '{self._tensor_name}' "
                             f"to PruningContainer {self}. Found '{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        """default_mask with the last method's mask written over the part of t it still keeps: the entries
        where default_mask is 1 (unstructured), the channels along the method's dim not yet all zero
        (structured), or the whole tensor (global)."""
        method = self._pruning_methods[-1]
        mask = default_mask.to(dtype=t.dtype)
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            kept = nonzero(default_mask.reshape(-1) == 1).squeeze(1)
            partial = method.compute_mask(t.reshape(-1).index_select(0, kept),
                                          default_mask=default_mask.reshape(-1).index_select(0, kept))
            return mask.reshape(-1).index_copy(0, kept, partial.to(dtype=mask.dtype)).view_as(t)
        if kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError('Pruning methods of PRUNING_TYPE "structured" need to have the attribute '
                                     "`dim` defined.")
            dim = method.dim + t.dim() if method.dim < 0 else method.dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor with dimensions {t.dim()}")
            others = [d for d in range(t.dim()) if d != dim]
            kept = nonzero(default_mask.sum(dim=others) != 0).squeeze(1)
            partial = method.compute_mask(t.index_select(dim, kept),
                                          default_mask=default_mask.index_select(dim, kept))
            return mask.index_copy(dim, kept, partial.to(dtype=mask.dtype))
        if kind == "global":
            return method.compute_mask(t, default_mask=default_mask).to(dtype=mask.dtype)
        raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")


class Identity(BasePruningMethod):
    """Prunes nothing: the reparametrization (name_orig, name_mask of ones) without a change."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


class _Unstructured(BasePruningMethod):
    """Prunes `amount` entries (an int) or that fraction of them (a float in [0, 1]): the ones _pruned picks."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        n_prune = _checked_count(self.amount, t.numel())
        mask = default_mask.clone(memory_format=contiguous_format)
        if n_prune == 0:
            return mask
        return mask.reshape(-1).index_fill(0, self._pruned(t, n_prune), 0).view_as(mask)


class RandomUnstructured(_Unstructured):
    """Prunes `amount` entries (an int) or that fraction of them (a float in [0, 1]), chosen at random."""

    @staticmethod
    def _pruned(t, n_prune):
        return _random.rand_like(t).reshape(-1).topk(n_prune).indices

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(_Unstructured):
    """Prunes the `amount` entries (an int, or that fraction: a float in [0, 1]) of smallest absolute value."""

    @staticmethod
    def _pruned(t, n_prune):
        return t.abs().reshape(-1).topk(n_prune, largest=False).indices

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class _Structured(BasePruningMethod):
    """Prunes `amount` whole channels along `dim` (an int, or that fraction: a float in [0, 1]): the ones _kept
    leaves out (a [channels] vector of ones for the channels kept, in t's dtype)."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        channels = t.shape[self.dim]
        n_prune = _checked_count(self.amount, channels)
        if n_prune == 0:
            return default_mask
        mask = _channel_mask(t, self.dim, self._kept(t, channels, n_prune))
        return mask * default_mask.to(dtype=mask.dtype)


class RandomStructured(_Structured):
    """Prunes `amount` whole channels along `dim` (an int, or that fraction: a float in [0, 1]), chosen at
    random."""

    def _kept(self, t, channels, n_prune):
        prob = _random.rand(channels, device=t.device)
        return (prob > prob.kthvalue(n_prune).values).to(dtype=t.dtype)

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(_Structured):
    """Prunes the `amount` channels along `dim` (an int, or that fraction: a float in [0, 1]) of smallest L`n`
    norm (n as torch.norm's p: an int, float, inf, -inf or 'fro')."""

    def __init__(self, amount, n, dim=-1):
        super().__init__(amount, dim)
        self.n = n

    def _kept(self, t, channels, n_prune):
        norms = _channel_norms(t, self.n, self.dim)
        largest = norms.topk(channels - n_prune, largest=True).indices
        return zeros_like(norms).index_fill(0, largest, 1).to(dtype=t.dtype)

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes where a given mask (the tensor's shape) is 0."""

    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if default_mask.shape != self.mask.shape:
            raise AssertionError(f"default_mask shape {default_mask.shape} must match "
                                 f"self.mask shape {self.mask.shape}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


def identity(module, name):
    """Reparametrize module.<name> as <name>_orig * <name>_mask with a mask of ones. Returns the module."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    """Prune `amount` (int) or that fraction (float) of module.<name>'s entries at random. Returns the module."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    """Prune the `amount` (int) or that fraction (float) of module.<name>'s entries of smallest absolute value
    (of importance_scores where given). Returns the module."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    """Prune `amount` (int) or that fraction (float) of module.<name>'s channels along dim at random. Returns
    the module."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Prune the `amount` (int) or that fraction (float) of module.<name>'s channels along dim of smallest L`n`
    norm (of importance_scores where given). Returns the module."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune the (module, name) tensors together: pruning_method(**kwargs), an unstructured method, ranks all
    their entries as one vector (importance_scores: a dict from (module, name) to a tensor of its shape), and
    each tensor gets its part of the mask. Returns None."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)  # read twice below: a generator would be empty the second time
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    scores = parameters_to_vector([importance_scores.get((module, name), getattr(module, name))
                                   for module, name in parameters])
    default_mask = parameters_to_vector([getattr(module, name + "_mask", ones_like(getattr(module, name)))
                                         for module, name in parameters])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError('Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. '
                        f"Found method {pruning_method} of type {method.PRUNING_TYPE}")
    container.add_pruning_method(method)
    final_mask = container.compute_mask(scores, default_mask)
    pointer = 0
    for module, name in parameters:
        param = getattr(module, name)
        custom_from_mask(module, name, mask=final_mask[pointer:pointer + param.numel()].view_as(param))
        pointer += param.numel()


def custom_from_mask(module, name, mask):
    """Prune module.<name> where `mask` is 0. Returns the module."""
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module, name):
    """Make the pruning of module.<name> permanent: the parameter <name> holds the pruned values again, and
    <name>_orig, <name>_mask and the hook are gone. Returns the module."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")


def is_pruned(module):
    """Whether the module or any of its submodules has a pruning hook."""
    return any(isinstance(hook, BasePruningMethod)
               for _, sub in module.named_modules() for hook in sub._forward_pre_hooks.values())


def _validate_pruning_amount_init(amount):
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral) and not 0.0 <= float(amount) <= 1.0):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _checked_count(amount, size):
    """How many of `size` units to prune: amount itself (an int, at most size) or round(amount * size)."""
    if isinstance(amount, numbers.Integral):
        if amount > size:
            raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={size}")
        return int(amount)
    return round(amount * size)


def _validate_structured_pruning(t):
    if len(t.shape) <= 1:
        raise ValueError("Structured pruning can only be applied to multidimensional tensors. Found tensor of "
                         f"shape {t.shape} with {len(t.shape)} dims")


def _validate_pruning_dim(t, dim):
    if not -t.dim() <= dim < t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")


def _channel_norms(t, n, dim):
    """The L`n` norm of each slice of t along dim (over all the other dims)."""
    dim = dim % t.dim()
    return norm(t, p=n, dim=[d for d in range(t.dim()) if d != dim])


def _channel_mask(t, dim, keep):
    """A mask of t's shape that is keep[i] across the whole i-th slice along dim."""
    shape = [1] * t.dim()
    shape[dim] = -1
    return zeros_like(t) + keep.reshape(shape)


__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
           "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured", "l1_unstructured",
           "random_structured", "ln_structured", "global_unstructured", "custom_from_mask", "remove", "is_pruned"]
