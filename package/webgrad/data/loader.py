"""DataLoader: iterate over a dataset in (shuffled) batches, as torch.utils.data.DataLoader.

Two ways to build a batch:
- the batch-gathering path (see dataset.py), taken for TensorDataset, MNIST and Subsets of them when no
  collate_fn is given: the epoch's order is uploaded to the dataset's device once, as an int32 tensor,
  and every batch is a slice of it handed to dataset.get_batch (one index_select per tensor). No Python
  work per sample, and on WebGPU no data crosses to the GPU after that one upload.
- the general path for any map-style dataset: dataset[i] for each index, then collate_fn (by default
  default_collate, which stacks).
With batch_size=None (no automatic batching) each sample comes alone, through collate_fn (by default
default_convert, which turns NumPy arrays into tensors and stacks nothing).

Shuffling happens on the host with a random.Random drawn from `generator` (webgrad.Generator; the
default generator, seeded by webgrad.manual_seed, when none is given): the same seed gives the same
order, and every epoch draws a fresh order.

As in PyTorch, the loader's order comes from `self.sampler` (RandomSampler when shuffling, else
SequentialSampler, unless one is given) grouped by `self.batch_sampler` (a BatchSampler unless one is
given), and both are read lazily: a batch's indices are drawn when the batch is made (on the
batch-gathering path, up to UPLOAD_INDICES of them are uploaded at a time), so a sampler of 10**10 indices
starts at once.

An IterableDataset is read in order: batch_size items at a time from iter(dataset), then collated.
"""

import array

from .. import dtypes
from .._tensor import tensor
from .collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler

UPLOAD_INDICES = 1 << 16  # indices uploaded at a time on the batch-gathering path: one upload per epoch up to this


def get_worker_info():
    """None: batches are always made in the calling process (as PyTorch's answer there)."""
    return None


class DataLoader:
    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        # Worker processes do not exist in a browser: loading always happens in the calling thread, as
        # PyTorch's num_workers=0. num_workers, prefetch_factor, persistent_workers, timeout and
        # multiprocessing_context are checked as PyTorch checks them and otherwise have no effect;
        # worker_init_fn is never called (PyTorch calls it only in worker processes). There is no pinned memory.
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            for name, value in (("shuffle", shuffle), ("sampler", sampler), ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified {name} option, but got "
                                     f"{name}={value}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size = None
        elif batch_size is None:  # no automatic batching: one sample at a time, through default_convert
            if drop_last:
                raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                                 "drop_last")
        elif not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"batch_size should be a positive integer, but got batch_size={batch_size!r}")
        if sampler is None and not iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_sampler is None and not iterable and batch_size is not None:
            batch_sampler = BatchSampler(sampler, batch_size, bool(drop_last))
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.collate_fn = collate_fn
        self.drop_last = bool(drop_last)
        self.generator = generator
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.multiprocessing_context = multiprocessing_context

    def __len__(self):
        if self.batch_size is None and self.batch_sampler is None:  # no automatic batching: one item per sample
            return len(self.dataset) if isinstance(self.dataset, IterableDataset) else len(self.sampler)
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)  # TypeError where the dataset has no length, as in PyTorch
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler)

    def __iter__(self):
        if self.batch_size is None and self.batch_sampler is None:
            convert = self.collate_fn or default_convert
            samples = self.dataset if isinstance(self.dataset, IterableDataset) else \
                (self.dataset[i] for i in self.sampler)
            for sample in samples:
                yield convert(sample)
            return
        collate = self.collate_fn or default_collate
        if isinstance(self.dataset, IterableDataset):
            batch = []
            for item in self.dataset:
                batch.append(item)
                if len(batch) == self.batch_size:
                    yield collate(batch)
                    batch = []
            if batch and not self.drop_last:
                yield collate(batch)
            return
        batches = iter(self.batch_sampler)
        device = getattr(self.dataset, "batch_device", None) if self.collate_fn is None else None
        if device is None:
            for b in batches:
                yield collate([self.dataset[i] for i in b])
            return
        while True:  # the indices of up to UPLOAD_INDICES samples go to the device in one upload
            chunk, count = [], 0
            for b in batches:
                chunk.append(list(b))
                count += len(chunk[-1])
                if count >= UPLOAD_INDICES:
                    break
            if not chunk:
                return
            perm = tensor(array.array("i", [i for b in chunk for i in b]), dtype=dtypes.int32, device=device)
            start = 0
            for b in chunk:
                yield self.dataset.get_batch(perm[start:start + len(b)])
                start += len(b)
