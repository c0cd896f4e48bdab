"""torch.utils.data.StackDataset, default_convert (also dataloader.default_convert) and DataLoader(batch_size=None)
against PyTorch's: the same samples, structures and types, and the same exceptions for bad input."""

from collections import OrderedDict, namedtuple

import numpy as np
import pytest
import torch
import torch.utils.data as tdata

import webgrad as wg
import webgrad.utils.data as wdata

Point = namedtuple("Point", ["x", "y"])


def _plain(value):
    """A library-neutral picture of a nested sample: tensors as (dtype name, shape, values), containers by type."""
    if isinstance(value, (wg.Tensor, torch.Tensor)):
        array = np.asarray(value.detach().cpu().tolist()).reshape(tuple(value.shape))
        return ("tensor", str(value.dtype).split(".")[-1], tuple(value.shape), array.tolist())
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.tolist())
    if isinstance(value, dict):
        return (type(value).__name__, {k: _plain(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_plain(v) for v in value])
    return (type(value).__name__, value)


SAMPLES = [
    np.array([1, 2, 3]),
    np.array([[1.5, 2.5]], dtype=np.float32),
    np.float64(2.5),
    np.int32(7),
    np.bool_(True),
    np.array(["a", "b"]),
    np.array([object()], dtype=object)[:0],
    3,
    "text",
    b"bytes",
    None,
    (np.array([1]), 2),
    [np.array([1.0]), "x"],
    Point(np.array(0), np.array([1, 2])),
    {"a": np.array([1, 2]), "b": [np.int64(3), "s"]},
    OrderedDict(z=np.array([0.5]), a=1),
    range(3),
]


@pytest.mark.parametrize("sample", SAMPLES, ids=[type(s).__name__ + str(i) for i, s in enumerate(SAMPLES)])
def test_default_convert_matches_torch(sample):
    got = wdata.default_convert(sample)
    want = tdata.default_convert(sample)
    assert _plain(got) == _plain(want)
    assert wdata.dataloader.default_convert is wdata.default_convert is wg.data.default_convert


def test_default_convert_leaves_tensors_alone():
    t = wg.ones(2)
    assert wdata.default_convert(t) is t
    assert wdata.default_convert([t])[0] is t


def _datasets(lib, data):
    return (lib.utils.data.TensorDataset(lib.arange(5)), [10, 11, 12, 13, 14], data)


class _Batched(wdata.Dataset):
    """A dataset with __getitems__ (batched reads), in either library."""

    def __init__(self, offset):
        self.offset = offset

    def __len__(self):
        return 5

    def __getitem__(self, i):
        raise AssertionError("StackDataset.__getitems__ must use __getitems__ where a dataset has it")

    def __getitems__(self, indices):
        return [i + self.offset for i in indices]


@pytest.mark.parametrize("keyed", [False, True])
def test_stack_dataset_matches_torch(keyed):
    def build(lib):
        parts = _datasets(lib, "abcde")
        return lib.utils.data.StackDataset(**dict(zip("xyz", parts))) if keyed \
            else lib.utils.data.StackDataset(*parts)
    got, want = build(wg), build(torch)
    assert len(got) == len(want) == 5
    for i in (0, 3, -1):
        assert _plain(got[i]) == _plain(want[i])
    assert _plain(got.__getitems__([4, 0, 2])) == _plain(want.__getitems__([4, 0, 2]))
    batches_w = list(wdata.DataLoader(got, batch_size=2))
    batches_t = list(tdata.DataLoader(want, batch_size=2))
    assert _plain(batches_w) == _plain(batches_t)


def test_stack_dataset_uses_getitems_of_its_parts():
    stacked = wdata.StackDataset(_Batched(100), [0, 1, 2, 3, 4])
    assert stacked.__getitems__([3, 1]) == [(103, 3), (101, 1)]
    keyed = wdata.StackDataset(a=_Batched(100), b=[0, 1, 2, 3, 4])
    assert keyed.__getitems__([2]) == [{"a": 102, "b": 2}]


@pytest.mark.parametrize("args,kwargs", [((), {}), (([1, 2], [1, 2, 3]), {}), ((), {"a": [1], "b": [1, 2]}),
                                         (([1],), {"b": [1]})])
def test_stack_dataset_refuses_as_torch(args, kwargs):
    with pytest.raises(ValueError) as want:
        tdata.StackDataset(*args, **kwargs)
    with pytest.raises(ValueError) as got:
        wdata.StackDataset(*args, **kwargs)
    assert str(got.value) == str(want.value)


def test_dataloader_without_automatic_batching_matches_torch():
    data = [np.array([i, i + 1]) for i in range(4)]
    got, want = wdata.DataLoader(data, batch_size=None), tdata.DataLoader(data, batch_size=None)
    assert len(got) == len(want) == 4
    assert got.batch_sampler is None and want.batch_sampler is None
    assert _plain(list(got)) == _plain(list(want))
    stacked = [(np.float32(i), "s") for i in range(3)]
    assert _plain(list(wdata.DataLoader(stacked, batch_size=None))) == \
        _plain(list(tdata.DataLoader(stacked, batch_size=None)))
    assert list(wdata.DataLoader([1, 2, 3], batch_size=None, collate_fn=lambda s: s * 10)) == [10, 20, 30]
    wg.manual_seed(0)
    assert sorted(wdata.DataLoader(list(range(6)), batch_size=None, shuffle=True)) == list(range(6))
    with pytest.raises(ValueError) as want_error:
        tdata.DataLoader(data, batch_size=None, drop_last=True)
    with pytest.raises(ValueError) as got_error:
        wdata.DataLoader(data, batch_size=None, drop_last=True)
    assert str(got_error.value) == str(want_error.value)


def test_dataloader_without_automatic_batching_reads_an_iterable_dataset():
    class Stream(wdata.IterableDataset):
        def __iter__(self):
            return iter([np.arange(2), np.arange(3)])

        def __len__(self):
            return 2

    loader = wdata.DataLoader(Stream(), batch_size=None)
    assert len(loader) == 2
    assert _plain(list(loader)) == _plain([wg.arange(2), wg.arange(3)])


COLLATE_BATCHES = [
    [np.array([1, 2]), np.array([3, 4])],
    [np.array([[0.5]], dtype=np.float32), np.array([[1.5]], dtype=np.float32)],
    [np.float64(1.5), np.float64(2.5)],
    [np.float32(1), np.float32(2)],
    [np.int32(3), np.int32(4)],
    [np.bool_(True), np.bool_(False)],
    [np.str_("a"), np.str_("b")],
    [(np.array([1.0]), "x", 3), (np.array([2.0]), "y", 4)],
    [{"image": np.zeros((2, 2), dtype=np.uint8), "label": np.int64(1)},
     {"image": np.ones((2, 2), dtype=np.uint8), "label": np.int64(0)}],
]


@pytest.mark.parametrize("batch", COLLATE_BATCHES, ids=[f"batch{i}" for i in range(len(COLLATE_BATCHES))])
def test_default_collate_of_numpy_samples_matches_torch(batch):
    assert _plain(wdata.default_collate(batch)) == _plain(tdata.default_collate(batch))


def test_default_collate_refuses_numpy_strings_as_torch():
    batch = [np.array(["a"]), np.array(["b"])]
    with pytest.raises(TypeError) as want:
        tdata.default_collate(batch)
    with pytest.raises(TypeError) as got:
        wdata.default_collate(batch)
    assert str(got.value) == str(want.value)
