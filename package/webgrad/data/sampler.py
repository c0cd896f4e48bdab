"""Samplers (torch.utils.data.Sampler and friends): the order in which a DataLoader visits a dataset.

A sampler is an iterable of dataset indices (a batch sampler: of lists of indices). Random samplers draw
from a webgrad.Generator (the default one, seeded by webgrad.manual_seed, when none is given) on the
host; their orders are reproducible within webgrad but are not PyTorch's random streams.

Samplers are lazy, as PyTorch's: an index is drawn when it is asked for, so RandomSampler(data,
replacement=True, num_samples=10**10) (a "train forever" loader) starts at once. The generator is drawn
from when iteration starts, one draw per epoch.
"""

import itertools

from .. import random as _random

_CHUNK = 4096  # indices drawn at a time where drawing them together is cheaper


class Sampler:
    """Base class: subclasses define __iter__ (indices) and usually __len__."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A fresh permutation each epoch, or num_samples draws with replacement."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source, self.replacement, self.generator = data_source, replacement, generator
        self._num_samples = num_samples
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        rng = (self.generator or _random.default_generator).python_random()
        return self._draw(rng, len(self.data_source))

    def _draw(self, rng, n):
        if self.replacement:
            for _ in range(self.num_samples):
                yield rng.randrange(n)
            return
        remaining = self.num_samples
        while remaining > 0:  # num_samples may exceed n: whole permutations, then a part of one
            order = list(range(n))
            rng.shuffle(order)
            yield from order[:remaining]
            remaining -= n

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a fresh random order each epoch."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self):
        order = list(self.indices)
        (self.generator or _random.default_generator).python_random().shuffle(order)
        return iter(order)

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices drawn with probabilities proportional to `weights`."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        self.weights = [float(w) for w in (weights.tolist() if hasattr(weights, "tolist") else weights)]
        self.num_samples, self.replacement, self.generator = num_samples, replacement, generator
        if not replacement and num_samples > sum(1 for w in self.weights if w > 0):
            raise RuntimeError("WeightedRandomSampler: not enough non-zero weights to draw without replacement")

    def __iter__(self):
        rng = (self.generator or _random.default_generator).python_random()
        return self._draw(rng)

    def _draw(self, rng):
        population = range(len(self.weights))
        if self.replacement:  # drawn in chunks: the same stream as one rng.choices call of k=num_samples
            cumulative = list(itertools.accumulate(self.weights))
            for start in range(0, self.num_samples, _CHUNK):
                yield from rng.choices(population, cum_weights=cumulative, k=min(_CHUNK, self.num_samples - start))
            return
        weights = list(self.weights)
        for _ in range(self.num_samples):
            j = rng.choices(population, weights=weights)[0]
            weights[j] = 0.0
            yield j

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of batch_size."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
