"""Datasets, as torch.utils.data: a map-style dataset is anything with __len__ and __getitem__(i).

Batch gathering. Looking samples up one by one costs a Python call (and, on WebGPU, a kernel) per
sample. A dataset whose samples live in tensors on one device can instead hand out a whole batch:

    dataset.batch_device      the device its tensors live on (None: no batch gathering)
    dataset.get_batch(index)  the batch for an int32 index tensor [B] on that device

DataLoader uses this when it can (see loader.py): it uploads one permutation per epoch and each batch
is one index_select per tensor. TensorDataset, Subset (of such a dataset) and datasets.MNIST support it.
"""

import array
import bisect
import itertools

from .. import _bounds, dtypes
from .. import random as _random
from .._tensor import Tensor, tensor


class Dataset:
    """Base class of map-style datasets: subclasses implement __getitem__ and __len__."""

    batch_device = None  # no batch gathering unless a subclass provides get_batch

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """Base class of iterable datasets (streams): subclasses implement __iter__; a DataLoader reads them in
    order, batch_size items at a time."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __add__(self, other):
        return ChainDataset([self, other])


class ConcatDataset(Dataset):
    """The samples of several map-style datasets, one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        if index < 0:
            if -index > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            index += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]


class ChainDataset(IterableDataset):
    """Several iterable datasets read one after another."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


class TensorDataset(Dataset):
    """Samples are the rows of tensors that share their first dimension: dataset[i] = (t[i] for t in tensors)."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset: argument {i} is a {type(t).__name__}, not a Tensor")
            if t.ndim == 0:
                raise ValueError(f"TensorDataset: tensor {i} is 0-d; every tensor needs a first (sample) dimension")
        sizes = [t.shape[0] for t in tensors]
        if len(set(sizes)) > 1:
            shapes = ", ".join(f"tensor {i}: {list(t.shape)}" for i, t in enumerate(tensors))
            raise ValueError(f"TensorDataset: all tensors must have the same size in dimension 0, got {shapes}")
        self.tensors = tensors

    def __len__(self):
        return self.tensors[0].shape[0]

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    @property
    def batch_device(self):
        return self.tensors[0].device

    def get_batch(self, index):
        # .to() is a no-op when a tensor is on the index's device; mixed devices pay one copy per batch
        return [t.index_select(0, index.to(t.device)) for t in self.tensors]


class StackDataset(Dataset):
    """Several datasets of one length read side by side: StackDataset(a, b)[i] = (a[i], b[i]);
    StackDataset(image=a, text=b)[i] = {"image": a[i], "text": b[i]}."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like "
                             "input/output, but both types are given.")
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        parts = args or tuple(kwargs.values())
        self._length = len(parts[0])
        if any(len(dataset) != self._length for dataset in parts):
            raise ValueError("Size mismatch between datasets")
        self.datasets = args or kwargs

    def __len__(self):
        return self._length

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {key: dataset[index] for key, dataset in self.datasets.items()}
        return tuple(dataset[index] for dataset in self.datasets)

    def __getitems__(self, indices):
        """The samples at `indices`, each part read with its dataset's own __getitems__ where it has one."""
        named = self.datasets.items() if isinstance(self.datasets, dict) else enumerate(self.datasets)
        columns = {}
        for key, dataset in named:
            if callable(getattr(dataset, "__getitems__", None)):
                items = dataset.__getitems__(indices)
                if len(items) != len(indices):
                    raise ValueError(f"Nested dataset's output size mismatch. Expected {len(indices)}, "
                                     f"got {len(items)}")
            else:
                items = [dataset[i] for i in indices]
            columns[key] = items
        if isinstance(self.datasets, dict):
            return [{key: columns[key][row] for key in columns} for row in range(len(indices))]
        return [tuple(column[row] for column in columns.values()) for row in range(len(indices))]


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order.

    An index past the dataset's end raises IndexError when it is used (as in PyTorch, where the dataset
    raises): here the Subset checks it on the host, before any gather on the device could read past the
    end (get_batch checks all its indices once, before their upload)."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = [int(i) for i in indices]
        self._index_tensors = {}  # device -> the indices uploaded once, for get_batch

    def __len__(self):
        return len(self.indices)

    def _message(self):
        return (f"Subset: index {{value}} is out of range for a {type(self.dataset).__name__} of {{size}} "
                "samples")

    def __getitem__(self, index):
        i = self.indices[index]
        if hasattr(self.dataset, "__len__"):
            n = len(self.dataset)
            if -n <= i < 0:  # a negative index counts from the end, as the dataset's own indexing would
                i += n
            _bounds.check_host((i,), n, self._message())
        return self.dataset[i]

    @property
    def batch_device(self):
        return getattr(self.dataset, "batch_device", None)

    def get_batch(self, index):
        """Valid when self.batch_device is not None: translate the index on the device, then gather."""
        device = index.device
        mapping = self._index_tensors.get(device)
        if mapping is None:
            n = len(self.dataset)
            indices = [i + n if -n <= i < 0 else i for i in self.indices]
            _bounds.check_host(indices, n, self._message())
            mapping = self._index_tensors[device] = tensor(array.array("i", indices), dtype=dtypes.int32,
                                                           device=device)
        return self.dataset.get_batch(mapping.index_select(0, index))


def random_split(dataset, lengths, generator=None):
    """Split `dataset` into non-overlapping random Subsets of the given lengths (or fractions summing to 1)."""
    n = len(dataset)
    lengths = list(lengths)
    if lengths and all(isinstance(x, float) and 0 <= x <= 1 for x in lengths) and abs(sum(lengths) - 1) < 1e-6:
        # fractions, as PyTorch: floor each, then hand the remainder out one by one from the first split
        counts = [int(x * n) for x in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if any(not isinstance(x, int) or x < 0 for x in lengths) or sum(lengths) != n:
        raise ValueError(f"random_split: lengths {lengths} must be non-negative ints summing to the dataset's "
                         f"length {n}, or fractions summing to 1")
    order = list(range(n))
    (generator or _random.default_generator).python_random().shuffle(order)
    subsets, start = [], 0
    for length in lengths:
        subsets.append(Subset(dataset, order[start:start + length]))
        start += length
    return subsets
