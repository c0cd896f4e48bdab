"""DataLoader: iterate over a dataset in (shuffled) batches, as torch.utils.data.DataLoader.

Two ways to build a batch:
- the batch-gathering path (see dataset.py), taken for TensorDataset, MNIST and Subsets of them when no
  collate_fn is given: the epoch's order is uploaded to the dataset's device once, as an int32 tensor,
  and every batch is a slice of it handed to dataset.get_batch (one index_select per tensor). No Python
  work per sample, and on WebGPU no data crosses to the GPU after that one upload.
- the general path for any map-style dataset: dataset[i] for each index, then collate_fn (by default
  default_collate, which stacks).

Shuffling happens on the host with a random.Random drawn from `generator` (webgrad.Generator; the
default generator, seeded by webgrad.manual_seed, when none is given): the same seed gives the same
order, and every epoch draws a fresh order.
"""

import array

from .. import dtypes
from .. import random as _random
from .._tensor import tensor
from .collate import default_collate


class DataLoader:
    def __init__(self, dataset, batch_size=1, shuffle=False, *, collate_fn=None, drop_last=False, generator=None,
                 num_workers=0, pin_memory=False):
        # num_workers and pin_memory are accepted so that PyTorch scripts run unchanged; loading always
        # happens in the calling thread (a browser has no worker processes) and there is no pinned memory.
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"batch_size should be a positive integer, but got batch_size={batch_size!r}")
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.collate_fn = collate_fn
        self.drop_last = bool(drop_last)
        self.generator = generator
        self.num_workers = num_workers
        self.pin_memory = pin_memory

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _epoch_order(self):
        order = list(range(len(self.dataset)))
        if self.shuffle:
            (self.generator or _random.default_generator).python_random().shuffle(order)
        return order

    def __iter__(self):
        order = self._epoch_order()
        bs = self.batch_size
        stop = len(order) - len(order) % bs if self.drop_last else len(order)
        if stop == 0:
            return
        device = getattr(self.dataset, "batch_device", None) if self.collate_fn is None else None
        if device is not None:
            perm = tensor(array.array("i", order), dtype=dtypes.int32, device=device)  # the epoch's one upload
            for start in range(0, stop, bs):
                yield self.dataset.get_batch(perm[start:start + bs])
        else:
            collate = self.collate_fn or default_collate
            for start in range(0, stop, bs):
                yield collate([self.dataset[i] for i in order[start:start + bs]])
