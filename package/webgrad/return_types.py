"""torch.return_types: the named tuples that ops such as ``torch.max(x, dim)``, ``torch.sort``, ``torch.topk`` and
``torch.linalg.svd`` return, under PyTorch's names and printed as PyTorch prints them (under ``as_torch()``;
``webgrad.return_types.max(...)`` otherwise, as dtypes print ``webgrad.float32``)::

    torch.return_types.max(
    values=tensor([2.]),
    indices=tensor([1]))

Each is a ``collections.namedtuple`` subclass (fields by name or position, unpacking, ``_fields``), made once by
``structseq(name, fields)`` and kept here as ``return_types.<name>``, so that pickle finds it and ``isinstance(r,
torch.return_types.max)`` works under ``as_torch()``."""

from collections import namedtuple

__all__ = ["structseq"]


def _repr(self):
    from .dtypes import namespace  # "torch" under as_torch(), as dtypes and sizes print
    fields = ",\n".join(f"{name}={value!r}" for name, value in zip(self._fields, self))
    return f"{namespace()}.return_types.{type(self).__name__}(\n{fields})"


def structseq(name, fields):
    """The return type `name` with `fields` (made on the first call, the same class after)."""
    existing = globals().get(name)
    if isinstance(existing, type) and issubclass(existing, tuple):
        if list(existing._fields) != list(fields):
            raise ValueError(f"return type {name!r} has fields {existing._fields}, not {tuple(fields)}")
        return existing
    cls = type(name, (namedtuple(name, fields),), {"__slots__": (), "__repr__": _repr, "__module__": __name__})
    globals()[name] = cls
    return cls
