"""default_collate: a list of samples -> one batch, as torch.utils.data.default_collate.

Tensors are stacked along a new first dimension; Python numbers become a 1-D tensor (bool -> bool,
int -> int64, float -> float32) on the default device; tuples/lists and dicts are collated field by
field; strings stay a list.
"""

from collections.abc import Mapping, Sequence

from .. import dtypes
from ..ops.shape import stack
from .._tensor import Tensor, tensor


def default_collate(batch):
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(batch, 0)
    if isinstance(elem, bool):  # before int: bool is a subclass of int
        return tensor(batch, dtype=dtypes.bool_)
    if isinstance(elem, int):
        return tensor(batch, dtype=dtypes.int64)
    if isinstance(elem, float):
        return tensor(batch, dtype=dtypes.float32)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, Mapping):
        return {key: default_collate([sample[key] for sample in batch]) for key in elem}
    if isinstance(elem, Sequence):
        if any(len(sample) != len(elem) for sample in batch):
            raise RuntimeError("default_collate: each sample in a batch must have the same number of fields")
        fields = [default_collate(list(column)) for column in zip(*batch)]
        return type(elem)(*fields) if hasattr(elem, "_fields") else fields  # namedtuples keep their type
    raise TypeError(f"default_collate: samples must be tensors, numbers, strings, dicts or sequences of those; "
                    f"got {type(elem).__name__}")
