"""default_collate: a list of samples -> one batch, as torch.utils.data.default_collate; default_convert: one
sample's NumPy arrays and scalars -> tensors, as torch.utils.data.default_convert.

Tensors, NumPy arrays and NumPy scalars are stacked along a new first dimension (NumPy's dtype kept); Python
numbers become a 1-D tensor (bool -> bool, int -> int64, float -> float32) on the default device; tuples/lists and
dicts are collated field by field; strings stay as they come (a tuple per field of a batch of tuples, as PyTorch's).
"""

import copy
from collections.abc import Mapping, MutableMapping, MutableSequence, Sequence

from .. import dtypes
from ..ops.shape import stack
from .._tensor import Tensor, as_tensor, tensor


def _is_numpy(value):
    """A NumPy array or NumPy scalar, not a NumPy string (np.str_ is a str, and collates as one)."""
    kind = type(value)
    return kind.__module__ == "numpy" and kind.__name__ not in ("str_", "bytes_", "string_")


def default_collate(batch):
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(batch, 0)
    if _is_numpy(elem):  # before float: np.float64 is a float, and keeps its dtype here, as in PyTorch
        if getattr(elem, "ndim", 0) and elem.dtype.kind in "SaUO":
            raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                            f"found {elem.dtype}")
        return stack([as_tensor(sample) for sample in batch], 0)
    if isinstance(elem, bool):  # before int: bool is a subclass of int
        return tensor(batch, dtype=dtypes.bool_)
    if isinstance(elem, int):
        return tensor(batch, dtype=dtypes.int64)
    if isinstance(elem, float):
        return tensor(batch, dtype=dtypes.float32)
    if isinstance(elem, (str, bytes)):
        return batch  # as given: a tuple for a field of a batch of tuples, as PyTorch's
    if isinstance(elem, Mapping):
        return {key: default_collate([sample[key] for sample in batch]) for key in elem}
    if isinstance(elem, Sequence):
        if any(len(sample) != len(elem) for sample in batch):
            raise RuntimeError("default_collate: each sample in a batch must have the same number of fields")
        fields = [default_collate(column) for column in zip(*batch)]
        return type(elem)(*fields) if hasattr(elem, "_fields") else fields  # namedtuples keep their type
    raise TypeError(f"default_collate: samples must be tensors, numbers, strings, dicts or sequences of those; "
                    f"got {type(elem).__name__}")


def default_convert(data):
    """NumPy arrays and NumPy scalars become tensors (arrays of strings or objects stay as they are), inside
    mappings, namedtuples and sequences too (a plain tuple becomes a list, as in PyTorch); anything else is
    returned unchanged. The DataLoader's collate_fn when batching is off, in PyTorch."""
    kind = type(data)
    if isinstance(data, Tensor):
        return data
    if _is_numpy(data):
        if kind.__name__ == "ndarray" and data.dtype.kind in "SaUO":
            return data
        return as_tensor(data)
    if isinstance(data, Mapping):
        converted = {key: default_convert(data[key]) for key in data}
        try:
            if isinstance(data, MutableMapping):  # a copy keeps a mapping subclass's other attributes
                clone = copy.copy(data)
                clone.update(converted)
                return clone
            return kind(converted)
        except TypeError:  # a mapping type without copy()/update() or a constructor from a dict
            return converted
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return kind(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        converted = [default_convert(d) for d in data]
        try:
            if isinstance(data, MutableSequence):
                clone = copy.copy(data)
                for i, d in enumerate(converted):
                    clone[i] = d
                return clone
            return kind(converted)
        except TypeError:  # range, and other sequences that cannot be rebuilt from a list
            return converted
    return data
