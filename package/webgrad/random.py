"""Random numbers: a counter-based generator (seed + offset), so the same seed gives the same numbers on
every backend (the hash is specified in _backends/kernels.py) and no state lives on the device.
"""

import random as _pyrandom

from . import devices, dtypes, replay
from ._tensor import Tensor, _shape_args, tensor
from ._backends import kernels

DEFAULT_SEED = 67280421310721  # PyTorch's initial seed of a new Generator()


class Generator:
    """Like torch.Generator: `Generator().manual_seed(0)`; pass as `generator=` to random functions."""

    def __init__(self, device="cpu"):
        self.device = devices.get(device)
        self._seed = DEFAULT_SEED
        self.offset = 0

    def manual_seed(self, seed):
        self._seed = int(seed)
        self.offset = 0
        return self

    def seed(self):
        self.manual_seed(_pyrandom.SystemRandom().getrandbits(63))
        return self._seed

    def initial_seed(self):
        return self._seed

    def get_state(self):
        return (self._seed, self.offset)

    def set_state(self, state):
        self._seed, self.offset = state

    def take(self, n):
        """Reserve n counters; returns (seed32, first counter)."""
        start = self.offset
        self.offset = (self.offset + n) & 0xFFFFFFFF
        # fold the 64-bit seed into the 32 bits the kernel hashes
        s = self._seed & 0xFFFFFFFFFFFFFFFF
        return (s ^ (s >> 32)) & 0xFFFFFFFF, start

    def python_random(self):
        """A Python random.Random drawn from this generator, for host-side shuffles (DataLoader)."""
        seed, start = self.take(1)
        return _pyrandom.Random((seed << 32) | start)


# As PyTorch, the default generator starts from a seed drawn per process: two runs differ unless the
# script calls manual_seed (a fresh Generator() still starts from DEFAULT_SEED, as torch.Generator()).
default_generator = Generator()
default_generator.seed()


def manual_seed(seed):
    return default_generator.manual_seed(seed)


def seed():
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(state):
    default_generator.set_state(state)


def fill_random(t, dist, a, b, generator=None):
    """Fill tensor t in place (through a contiguous temporary if t is a strided view)."""
    gen = generator or default_generator
    seed32, offset = gen.take(t.numel())
    target = t if t.is_contiguous() else Tensor._empty(t.shape, t.dtype, t.device)
    backend = t.device.backend
    if replay.capturing() and backend.supports_capture:
        # a recorded step must draw new numbers on every replay: the kernel reads seed and offset from
        # device scalars, and the hook advances the generator as an eager call would
        seed32, offset = backend.scalar(seed32, "u32"), backend.scalar(offset, "u32")
        replay.on_replay(lambda n=t.numel(), s=seed32, o=offset: _advance(gen, n, s, o))
    kernels.random(backend, target._view, dist, seed32, offset, float(a), float(b))
    if target is not t:
        kernels.copy(t.device.backend, t._view, target._view)
    return t


def _advance(gen, n, seed_scalar, offset_scalar):
    seed32, offset = gen.take(n)
    seed_scalar.set(seed32)
    offset_scalar.set(offset)


def _make(shape, dist, a, b, dtype, device, requires_grad, generator):
    t = Tensor._empty(_shape_args(shape), dtype, devices.get(device))
    fill_random(t, dist, a, b, generator)
    return t.requires_grad_(True) if requires_grad else t


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    return _make(size, "uniform", 0.0, 1.0, dtypes.to_dtype(dtype, dtypes.float32), device, requires_grad, generator)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    return _make(size, "normal", 0.0, 1.0, dtypes.to_dtype(dtype, dtypes.float32), device, requires_grad, generator)


def randint(low, high=None, size=None, generator=None, dtype=None, device=None):
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint() missing required argument 'size'")
    if high <= low:
        raise ValueError(f"randint(): random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    return _make((tuple(size),), "randint", low, high, dtypes.to_dtype(dtype, dtypes.int32), device, False, generator)


def rand_like(x, dtype=None, device=None):
    return rand(*x.shape, dtype=dtype or x.dtype, device=device or x.device)


def randn_like(x, dtype=None, device=None):
    return randn(*x.shape, dtype=dtype or x.dtype, device=device or x.device)


def randperm(n, generator=None, dtype=None, device=None):
    """A random permutation of 0..n-1 (shuffled on the host, uploaded once)."""
    order = list(range(n))
    (generator or default_generator).python_random().shuffle(order)
    return tensor(order, dtype=dtypes.to_dtype(dtype, dtypes.int32), device=device) if n else \
        tensor([], dtype=dtypes.int32, device=device)
