"""Containers: Sequential (a pipeline), ModuleList and ModuleDict (registered collections).

Children are stored in the Module's ``_modules`` registry under their index ("0", "1", ...) or key, so
parameters(), state_dict() and to() see them, and state_dict keys read ``0.weight`` as in PyTorch.
"""

import operator
from collections import OrderedDict
from collections.abc import Mapping

from .activation import ReLU
from .conv import Conv2d
from .linear import Linear
from .module import Module, _addindent
from .normalization import BatchNorm2d
from .pooling import MaxPool2d


def _abs_index(idx, n, kind):
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for a {kind} of length {n}")
    return idx % n


class Sequential(Module):
    """Sequential(m0, m1, ...) or Sequential(OrderedDict(name=module)): forward feeds each output to the next."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def _renumber(self):
        object.__setattr__(self, "_modules", {str(i): m for i, m in enumerate(self._modules.values())})

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_abs_index(idx, len(self), "Sequential")]

    def __setitem__(self, idx, module):
        key = list(self._modules)[_abs_index(idx, len(self), "Sequential")]
        setattr(self, key, module)

    def __delitem__(self, idx):
        keys = list(self._modules)
        for key in (keys[idx] if isinstance(idx, slice) else [keys[_abs_index(idx, len(self), "Sequential")]]):
            del self._modules[key]
        self._renumber()

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for module in modules:
            self.append(module)
        return self

    def insert(self, index, module):
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: Module, got {type(module).__name__}")
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        modules = list(self._modules.values())
        modules.insert(index, module)
        object.__setattr__(self, "_modules", {str(i): m for i, m in enumerate(modules)})
        return self

    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def forward(self, input):
        modules = list(self._modules.values())
        i, n = 0, len(modules)
        while i < n:
            module = modules[i]
            # (the exact-type test first: it settles every other layer without a call, in every forward)
            if type(module) is ReLU and i + 1 < n and \
                    _pool_first(module, modules[i + 1], modules[i - 1] if i else None):
                input = module(modules[i + 1](input))  # the pool, then the ReLU: see _pool_first
                i += 2
            else:
                input = module(input)
                i += 1
        return input


# Layers whose output is a new tensor that nothing else holds (nor the layer: no instance forward): an
# in-place ReLU after one changes nothing anyone else could see.
_FRESH_OUTPUT = (Conv2d, Linear, BatchNorm2d)


def _plain(module, kinds):
    return type(module) in kinds and "forward" not in module.__dict__


def _pool_first(relu, pool, before):
    """Whether ReLU then MaxPool2d may run as MaxPool2d then ReLU (the same values and gradients).

    Max pooling commutes with ReLU, which never reorders two numbers: relu(max(window)) is
    max(relu(window)), NaN included (both propagate it). The gradient is the same too: the window's max
    gets the pooled gradient when it is positive, and nothing does otherwise (the ReLU's mask). So the
    ReLU runs on the pooled map, a quarter of the pixels for MaxPool2d(2), and the full-size ReLU pass and
    its backward pass are gone: the MNIST CNN's step at batch 1024 on an H200 (bench replay --each, one
    call) went from 1,067.5 to 988.4 us of GPU time (its ReLU backward from 65.8 to 21.1 us), and its peak
    memory from 219 to 163 MiB (no full-size ReLU output kept for the backward). The only value that can
    differ is the sign of a zero (a window of negatives with a -0.0).

    Only the built-in layers (exact types, no instance forward), without return_indices (the pool then
    returns a pair). An in-place ReLU changes its input for whoever else holds it; a reordered one does
    not, so it is reordered only after a layer whose fresh output nobody else holds."""
    if not (_plain(relu, (ReLU,)) and _plain(pool, (MaxPool2d,))) or pool.return_indices:
        return False
    return not relu.inplace or (before is not None and _plain(before, _FRESH_OUTPUT))


class ModuleList(Module):
    """A list of modules, registered as children (a plain Python list would hide their parameters)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_abs_index(idx, len(self), "ModuleList"))]

    def __setitem__(self, idx, module):
        setattr(self, str(_abs_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                del self._modules[str(k)]
        else:
            del self._modules[str(_abs_index(idx, len(self), "ModuleList"))]
        object.__setattr__(self, "_modules", {str(i): m for i, m in enumerate(self._modules.values())})

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return ModuleList(list(self) + list(other))

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        if not hasattr(modules, "__iter__"):
            raise TypeError(f"ModuleList.extend should be called with an iterable, but got {type(modules).__name__}")
        for module in modules:
            self.append(module)
        return self

    def insert(self, index, module):
        modules = list(self._modules.values())
        modules.insert(index, module)
        object.__setattr__(self, "_modules", {})
        for m in modules:
            self.append(m)

    def pop(self, key=-1):
        module = self[key]
        del self[key]
        return module

    def __repr__(self):
        """PyTorch's compressed form: a run of identical children prints once as "(0-2): 3 x Linear(...)"."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        runs = []  # [start, end, repr]
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = [_addindent(f"({s}): {r}" if s == e else f"({s}-{e}): {e - s + 1} x {r}", 2) for s, e, r in runs]
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """An ordered dict of modules, registered as children."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        pairs = modules.items() if isinstance(modules, (Mapping, ModuleDict)) else modules
        for j, pair in enumerate(pairs):
            if len(pair) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} has length {len(pair)}; 2 is required")
            self[pair[0]] = pair[1]
