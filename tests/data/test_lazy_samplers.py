"""Samplers and the DataLoader read their indices lazily, as PyTorch's: a sampler of 10**10 indices (the
train-forever loader of minGPT and makemore) starts at once; the loader's sampler/batch_sampler attributes,
IterableDataset and ConcatDataset behave as torch's."""

import itertools

import pytest

import webgrad as wg
from webgrad.data import loader as loader_module
from webgrad.utils import data as wdata

HUGE = 10**10


class Squares(wdata.Dataset):  # a map-style dataset without batch gathering: the general path
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return wg.tensor(float(i * i))


def test_a_sampler_of_ten_billion_indices_starts_at_once():
    ds = wdata.TensorDataset(wg.arange(10))
    sampler = wdata.RandomSampler(ds, replacement=True, num_samples=HUGE)
    assert len(sampler) == HUGE and all(0 <= i < 10 for i in itertools.islice(sampler, 100))
    for dataset in (ds, Squares()):  # the batch-gathering path and the general one
        loader = wdata.DataLoader(dataset, batch_size=4, sampler=sampler)
        assert len(loader) == HUGE // 4
        batches = list(itertools.islice(iter(loader), 3))
        assert len(batches) == 3 and all(len(b[0] if isinstance(b, list) else b) == 4 for b in batches)
    weighted = wdata.WeightedRandomSampler([0.0, 1.0, 3.0], num_samples=HUGE)
    assert set(itertools.islice(weighted, 1000)) == {1, 2}
    without = wdata.RandomSampler(ds, num_samples=HUGE)  # whole permutations, one after another
    first = list(itertools.islice(without, 30))
    assert sorted(first[:10]) == list(range(10)) and sorted(first[10:20]) == list(range(10))


def test_weighted_draws_in_chunks_are_one_stream():
    wg.manual_seed(0)
    a = list(wdata.WeightedRandomSampler([0.1, 2.0, 3.0, 0.5], num_samples=10_000))
    wg.manual_seed(0)
    b = list(wdata.WeightedRandomSampler([0.1, 2.0, 3.0, 0.5], num_samples=10_000))
    assert a == b and len(a) == 10_000
    counts = [a.count(i) for i in range(4)]
    assert counts[2] > counts[1] > counts[3] > counts[0]


def test_loader_attributes_are_torchs():
    torch = pytest.importorskip("torch")
    from torch.utils import data as tdata
    ds, tds = wdata.TensorDataset(wg.arange(10)), tdata.TensorDataset(torch.arange(10))
    for kwargs in (dict(shuffle=True), dict(shuffle=False), dict(batch_size=3, drop_last=True)):
        ours, theirs = wdata.DataLoader(ds, **kwargs), tdata.DataLoader(tds, **kwargs)
        assert type(ours.sampler).__name__ == type(theirs.sampler).__name__
        assert type(ours.batch_sampler).__name__ == type(theirs.batch_sampler).__name__
        assert len(ours) == len(theirs) and ours.batch_sampler.batch_size == theirs.batch_sampler.batch_size


def test_shuffled_epochs_are_reproducible_and_differ():
    ds = wdata.TensorDataset(wg.arange(20))
    wg.manual_seed(1)
    loader = wdata.DataLoader(ds, batch_size=5, shuffle=True)
    first, second = [[b[0].tolist() for b in loader] for _ in range(2)]
    wg.manual_seed(1)
    assert [b[0].tolist() for b in loader] == first and first != second
    assert sorted(sum(first, [])) == list(range(20))


def test_indices_are_uploaded_in_chunks(monkeypatch):
    ds = wdata.TensorDataset(wg.arange(23), wg.arange(23) * 2)
    whole = [[t.tolist() for t in b] for b in wdata.DataLoader(ds, batch_size=4, sampler=list(range(22, -1, -1)))]
    monkeypatch.setattr(loader_module, "UPLOAD_INDICES", 5)  # two batches per upload
    chunked = [[t.tolist() for t in b] for b in wdata.DataLoader(ds, batch_size=4, sampler=list(range(22, -1, -1)))]
    assert chunked == whole and whole[0] == [[22, 21, 20, 19], [44, 42, 40, 38]] and whole[-1][0] == [2, 1, 0]


class Stream(wdata.IterableDataset):
    def __init__(self, n, lib):
        self.n, self.lib = n, lib

    def __iter__(self):
        return (self.lib.tensor([i, i + 1]) for i in range(self.n))

    def __len__(self):
        return self.n


def test_iterable_dataset_as_torch():
    torch = pytest.importorskip("torch")
    from torch.utils import data as tdata

    class TorchStream(tdata.IterableDataset):
        def __iter__(self):
            return (torch.tensor([i, i + 1]) for i in range(7))

        def __len__(self):
            return 7

    for drop_last in (False, True):
        ours = [b.tolist() for b in wdata.DataLoader(Stream(7, wg), batch_size=3, drop_last=drop_last)]
        theirs = [b.tolist() for b in tdata.DataLoader(TorchStream(), batch_size=3, drop_last=drop_last)]
        assert ours == theirs
        assert len(wdata.DataLoader(Stream(7, wg), batch_size=3, drop_last=drop_last)) == \
            len(tdata.DataLoader(TorchStream(), batch_size=3, drop_last=drop_last))
    for kwargs in (dict(shuffle=True), dict(sampler=[0, 1])):
        with pytest.raises(ValueError) as theirs:
            tdata.DataLoader(TorchStream(), **kwargs)
        with pytest.raises(theirs.type, match="IterableDataset"):
            wdata.DataLoader(Stream(7, wg), **kwargs)
    chained = [b.tolist() for b in wdata.DataLoader(Stream(2, wg) + Stream(1, wg), batch_size=2)]
    assert chained == [[[0, 1], [1, 2]], [[0, 1]]]
    assert wdata.get_worker_info() is None


def test_concat_dataset_as_torch():
    torch = pytest.importorskip("torch")
    from torch.utils import data as tdata
    ours = wdata.ConcatDataset([wdata.TensorDataset(wg.arange(3)), wdata.TensorDataset(wg.arange(10, 15))])
    theirs = tdata.ConcatDataset([tdata.TensorDataset(torch.arange(3)), tdata.TensorDataset(torch.arange(10, 15))])
    assert len(ours) == len(theirs) and ours.cumulative_sizes == theirs.cumulative_sizes
    for i in list(range(len(ours))) + [-1, -8]:
        assert ours[i][0].item() == theirs[i][0].item()
    both = wdata.TensorDataset(wg.arange(2)) + wdata.TensorDataset(wg.arange(5, 7))
    assert [b[0].tolist() for b in wdata.DataLoader(both, batch_size=3)] == [[0, 1, 5], [6]]
    with pytest.raises(AssertionError):
        wdata.ConcatDataset([Stream(2, wg)])
