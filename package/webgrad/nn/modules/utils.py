"""torch.nn.modules.utils: the small helpers model code imports from PyTorch's module path."""

import collections.abc
import copy


def _ntuple(n, name="parse"):
    """A parser that repeats a scalar n times and turns an iterable into a tuple (kernel_size=3 -> (3, 3))."""
    def parse(x):
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return (x,) * n
    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t, n):
    """Each element of t repeated n times, in reverse order: the padding F.pad wants from a conv's padding."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size, defaults):
    """An adaptive pooling output size with its None entries taken from the input's trailing sizes."""
    if isinstance(out_size, int):
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d for v, d in zip(out_size, defaults[-len(out_size):])]


def consume_prefix_in_state_dict_if_present(state_dict, prefix):
    """Strip `prefix` from the keys that have it, in place (the "module." a DataParallel/DDP wrapper adds)."""
    for key in list(state_dict):
        if key.startswith(prefix):
            state_dict[key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        for key in list(metadata):
            if key and (key == prefix.replace(".", "") or key.startswith(prefix)):
                metadata[key[len(prefix):]] = metadata.pop(key)


def _get_clones(module, n):
    """n deep copies of `module` in a ModuleList (torch.nn.modules.transformer's helper)."""
    from ..container import ModuleList
    return ModuleList([copy.deepcopy(module) for _ in range(n)])
