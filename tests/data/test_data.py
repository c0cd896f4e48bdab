"""webgrad.data: datasets, random_split, DataLoader (batching, seeded shuffles, collation), checked against
torch.utils.data where the two should agree, and the TensorDataset fast path on every device."""

import collections

import pytest
import torch
import torch.utils.data as tud

import webgrad as wg
from webgrad.data import DataLoader, Dataset, Subset, TensorDataset, default_collate, random_split


def _rows(n, device):
    """x[i] = [i, 10 i, 100 i] (float32) and y[i] = i (int32): a batch's y says which rows x must hold."""
    y = wg.arange(n, dtype=wg.int32, device=device)
    x = wg.tensor([[i, 10 * i, 100 * i] for i in range(n)], dtype=wg.float32, device=device)
    return x, y


def _check_batch(xb, yb):
    ids = yb.tolist()
    assert xb.tolist() == [[float(i), 10.0 * i, 100.0 * i] for i in ids]
    return ids


# ----------------------------------------------------------------------------------------------- datasets
def test_tensor_dataset_requires_equal_first_dims():
    with pytest.raises(ValueError, match=r"same size in dimension 0.*tensor 0: \[3, 2\], tensor 1: \[4\]"):
        TensorDataset(wg.zeros(3, 2), wg.zeros(4))
    with pytest.raises(ValueError, match="0-d"):
        TensorDataset(wg.tensor(1.0))
    with pytest.raises(TypeError, match="not a Tensor"):
        TensorDataset([1, 2])


def test_tensor_dataset_indexing(device):
    x, y = _rows(5, device)
    ds = TensorDataset(x, y)
    assert len(ds) == 5 and ds.batch_device == device
    xi, yi = ds[3]
    assert xi.tolist() == [3.0, 30.0, 300.0] and yi.item() == 3


def test_random_split_lengths_match_torch():
    for lengths in ([3, 8], [0.3, 0.3, 0.4], [0.5, 0.5], [0.1] * 10):
        ours = [len(s) for s in random_split(list(range(11)), lengths)]
        theirs = [len(s) for s in tud.random_split(list(range(11)), lengths)]
        assert ours == theirs, lengths


def test_random_split_is_a_seeded_partition():
    parts = random_split(list(range(20)), [5, 15], generator=wg.Generator().manual_seed(3))
    again = random_split(list(range(20)), [5, 15], generator=wg.Generator().manual_seed(3))
    other = random_split(list(range(20)), [5, 15], generator=wg.Generator().manual_seed(4))
    assert [p.indices for p in parts] == [p.indices for p in again] != [p.indices for p in other]
    assert sorted(parts[0].indices + parts[1].indices) == list(range(20))
    assert [parts[1][i] for i in range(15)] == parts[1].indices  # a Subset of a list returns the list's items
    with pytest.raises(ValueError, match="summing to the dataset's length 20"):
        random_split(list(range(20)), [5, 5])


# ----------------------------------------------------------------------------------------------- batching
@pytest.mark.parametrize("n,batch_size,drop_last", [(10, 3, False), (10, 3, True), (9, 3, True), (2, 5, False),
                                                    (2, 5, True), (0, 4, False), (7, 1, False)])
def test_batch_count_and_sizes_match_torch(n, batch_size, drop_last):
    theirs = tud.DataLoader(tud.TensorDataset(torch.arange(n)), batch_size=batch_size, drop_last=drop_last)
    expected = [len(b[0]) for b in theirs]
    fast = DataLoader(TensorDataset(wg.arange(n, dtype=wg.int32) if n else wg.zeros(0, dtype=wg.int32)),
                      batch_size=batch_size, drop_last=drop_last)
    general = DataLoader(list(range(n)), batch_size=batch_size, drop_last=drop_last)
    assert len(fast) == len(general) == len(theirs)
    assert [b[0].shape[0] for b in fast] == expected
    assert [b.shape[0] for b in general] == expected


def test_batch_size_must_be_positive():
    with pytest.raises(ValueError, match="positive integer"):
        DataLoader([1, 2], batch_size=0)


def _epoch_ids(loader):
    return [i for _, yb in loader for i in yb.tolist()]


def test_seeded_shuffle_is_reproducible_and_fresh_each_epoch():
    ds = TensorDataset(*_rows(40, "cpu"))
    a = DataLoader(ds, batch_size=8, shuffle=True, generator=wg.Generator().manual_seed(1))
    b = DataLoader(ds, batch_size=8, shuffle=True, generator=wg.Generator().manual_seed(1))
    c = DataLoader(ds, batch_size=8, shuffle=True, generator=wg.Generator().manual_seed(2))
    a1, a2 = _epoch_ids(a), _epoch_ids(a)
    assert (a1, a2) == (_epoch_ids(b), _epoch_ids(b))  # same seed, same sequence of epochs
    assert a1 != a2 and a1 != _epoch_ids(c) and a1 != list(range(40))
    # without a generator, webgrad.manual_seed decides, as torch.manual_seed does for DataLoader
    wg.manual_seed(5)
    d1 = _epoch_ids(DataLoader(ds, batch_size=8, shuffle=True))
    wg.manual_seed(5)
    assert _epoch_ids(DataLoader(ds, batch_size=8, shuffle=True)) == d1
    assert _epoch_ids(DataLoader(ds, batch_size=8)) == list(range(40))  # no shuffle: dataset order


def test_every_sample_once_per_epoch_on_device(device):
    ds = TensorDataset(*_rows(50, device))
    loader = DataLoader(ds, batch_size=7, shuffle=True, generator=wg.Generator().manual_seed(0))
    for _ in range(2):
        ids = []
        for xb, yb in loader:
            assert xb.device == device and yb.device == device and xb.dtype is wg.float32 and yb.dtype is wg.int32
            ids += _check_batch(xb, yb)
        assert sorted(ids) == list(range(50))
    dropped = [i for xb, yb in DataLoader(ds, batch_size=7, shuffle=True, drop_last=True) for i in _check_batch(xb, yb)]
    assert len(dropped) == 49 and len(set(dropped)) == 49


def test_fast_path_one_upload_per_epoch_and_one_gather_per_tensor(device, monkeypatch):
    n, bs = 37, 8
    ds = TensorDataset(*_rows(n, device))
    backend = wg.device(device).backend
    uploads, gathers = [], []
    real_from_bytes, real_index_select = backend.from_bytes, wg.Tensor.index_select

    def from_bytes(data, dtype):
        uploads.append((len(data), dtype))
        return real_from_bytes(data, dtype)

    def index_select(self, dim, index):
        gathers.append(tuple(index.shape))
        return real_index_select(self, dim, index)

    def no_per_sample_access(self, index):
        raise AssertionError("the fast path must not index samples one by one")

    monkeypatch.setattr(backend, "from_bytes", from_bytes)
    monkeypatch.setattr(wg.Tensor, "index_select", index_select)
    monkeypatch.setattr(TensorDataset, "__getitem__", no_per_sample_access)
    batches = list(DataLoader(ds, batch_size=bs, shuffle=True))
    assert len(batches) == 5
    assert [u for u in uploads if u == (4 * n, wg.int32)] == [(4 * n, wg.int32)]  # the epoch's permutation, once
    assert gathers == [(bs,), (bs,)] * 4 + [(n % bs,), (n % bs,)]


def test_subset_takes_the_fast_path_and_keeps_its_order(device):
    ds = TensorDataset(*_rows(30, device))
    sub = Subset(ds, [29, 3, 17, 3, 0])
    assert sub.batch_device == device and sub[0][1].item() == 29
    ids = [i for xb, yb in DataLoader(sub, batch_size=2) for i in _check_batch(xb, yb)]
    assert ids == [29, 3, 17, 3, 0]
    train, val = random_split(ds, [0.8, 0.2], generator=wg.Generator().manual_seed(0))
    seen = [i for part in (train, val) for xb, yb in DataLoader(part, batch_size=4, shuffle=True)
            for i in _check_batch(xb, yb)]
    assert sorted(seen) == list(range(30))


# ----------------------------------------------------------------------------------------------- collation
class _Samples(Dataset):
    """A map-style dataset with no batch gathering: samples of mixed kinds, as user datasets have."""

    Point = collections.namedtuple("Point", "x y")

    def __init__(self, make):
        self.make = make

    def __len__(self):
        return 6

    def __getitem__(self, i):
        return self.make(i)


def _to_torch(sample):
    if isinstance(sample, wg.Tensor):
        return torch.tensor(sample.tolist())
    if isinstance(sample, dict):
        return {k: _to_torch(v) for k, v in sample.items()}
    if isinstance(sample, tuple) and hasattr(sample, "_fields"):
        return type(sample)(*(_to_torch(v) for v in sample))
    if isinstance(sample, (tuple, list)):
        return type(sample)(_to_torch(v) for v in sample)
    return sample


def _same(ours, theirs):
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, wg.Tensor) and ours.tolist() == theirs.tolist()
        # Python ints are int64, as torch's; Python floats float32 (torch's float64 is CPU-only in webgrad)
        kind = {torch.float32: wg.float32, torch.float64: wg.float32, torch.int64: wg.int64, torch.bool: wg.bool}
        assert ours.dtype is kind[theirs.dtype]
    elif isinstance(theirs, dict):
        assert list(ours) == list(theirs)
        for k in theirs:
            _same(ours[k], theirs[k])
    elif isinstance(theirs, (tuple, list)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _same(a, b)
    else:
        assert ours == theirs


@pytest.mark.parametrize("make", [
    lambda i: (wg.tensor([i, -i], dtype=wg.float32), i, i / 2, i % 2 == 0),
    lambda i: {"image": wg.full((2, 2), i, dtype=wg.float32), "label": i, "name": f"s{i}"},
    lambda i: _Samples.Point(wg.tensor([i]), [i, 2 * i]),
    lambda i: i * 0.5,
], ids=["tuple", "dict", "namedtuple", "number"])
def test_default_collate_matches_torch(make):
    ds = _Samples(make)
    assert ds.batch_device is None
    ours = list(DataLoader(ds, batch_size=4))
    theirs = list(tud.DataLoader([_to_torch(make(i)) for i in range(6)], batch_size=4))
    assert len(ours) == len(theirs) == 2
    for a, b in zip(ours, theirs):
        _same(a, b)


def test_collate_fn_replaces_the_fast_path():
    ds = TensorDataset(*_rows(5, "cpu"))
    batches = list(DataLoader(ds, batch_size=2, collate_fn=lambda samples: [y.item() for _, y in samples]))
    assert batches == [[0, 1], [2, 3], [4]]
    with pytest.raises(TypeError, match="got object"):
        default_collate([object()])


def test_torch_style_import_path():
    from webgrad.utils.data import DataLoader as D, TensorDataset as T, random_split as r
    assert (D, T, r) == (DataLoader, TensorDataset, random_split)
