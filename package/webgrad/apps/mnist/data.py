"""MNIST for the page: webgrad.datasets.MNIST reads the IDX files (the worker writes the downloaded ones
into Pyodide's file system) and keeps them on the GPU as uint8. DataLoader gathers every batch there,
one index_select, and turns it into floats in [0, 1] with one kernel: no pixel crosses from Python to
the GPU while training.
"""

from webgrad.data import DataLoader, Subset
from webgrad.datasets import MNIST

PIXELS = 28 * 28


class Data:
    def __init__(self, root, device):
        self.train = MNIST(root, train=True, device=device)
        self.test = MNIST(root, train=False, device=device)

    def train_loader(self, n, batch_size):
        """Shuffled batches of the first n training samples; the last partial batch is dropped (every
        step has the same shapes)."""
        return DataLoader(Subset(self.train, range(n)), batch_size, shuffle=True, drop_last=True)

    def test_loader(self, n, batch_size):
        """The first n test samples, in order."""
        return DataLoader(Subset(self.test, range(n)), batch_size)

    async def test_labels(self):
        """The test labels as a list of ints (read back once)."""
        return await self.test.targets.tolist_async()

    async def test_pixels(self, count):
        """The uint8 pixels of the first `count` test digits, as bytes (read back once, for the page)."""
        return bytes(await self.test.data[:count].reshape(-1).tolist_async())
