"""Random numbers: a counter-based generator (seed + offset), so the same seed gives the same numbers on
every backend (the hash is specified in _backends/kernels.py) and no state lives on the device.
"""

import contextlib
import operator
import random as _pyrandom

from . import devices, dtypes, replay
from ._tensor import Tensor, _check_layout, _size_arg, tensor
from ._backends import kernels

DEFAULT_SEED = 67280421310721  # PyTorch's initial seed of a new Generator()

# Called with the generator before each of its draws, innermost last: torch.func.vmap's randomness modes
# ("error" refuses a draw, "same" replays the generator's state for every slice) watch draws through it.
draw_observers = []


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
        for observe in draw_observers:
            observe(self)
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
    t = Tensor._empty(shape, dtype, devices.get(device))
    fill_random(t, dist, a, b, generator)
    return t.requires_grad_(True) if requires_grad else t


def rand(*sizes, size=None, generator=None, dtype=None, device=None, requires_grad=False, layout=None,
         pin_memory=False):
    """rand(*size) / rand(size=...): uniform on [0, 1), as torch.rand."""
    _check_layout("rand", layout, pin_memory)
    return _make(_size_arg("rand", sizes, size), "uniform", 0.0, 1.0, dtypes.to_dtype(dtype, dtypes.default_float()),
                 device,
                 requires_grad, generator)


def randn(*sizes, size=None, generator=None, dtype=None, device=None, requires_grad=False, layout=None,
          pin_memory=False):
    """randn(*size) / randn(size=...): standard normal, as torch.randn."""
    _check_layout("randn", layout, pin_memory)
    return _make(_size_arg("randn", sizes, size), "normal", 0.0, 1.0, dtypes.to_dtype(dtype, dtypes.default_float()),
                 device,
                 requires_grad, generator)


def _int_arg(name, value, position):
    if isinstance(value, (float, bool)) or not hasattr(value, "__index__"):
        raise TypeError(f"randint(): argument '{name}' (position {position}) must be int, not {type(value).__name__}")
    return operator.index(value)


def randint(*args, low=None, high=None, size=None, generator=None, dtype=None, device=None, requires_grad=False,
            layout=None, pin_memory=False):
    """Integers drawn uniformly from [low, high), in torch.randint's forms: randint(high, size),
    randint(low, high, size), and any of low/high/size by keyword (low defaults to 0)."""
    _check_layout("randint", layout, pin_memory)
    given = {"low": low, "high": high, "size": size}
    # positional arguments fill torch's overloads: (high, size) or (low, high, size), minus the keywords given
    if len(args) > 3:
        raise TypeError(f"randint() takes at most 3 positional arguments ({len(args)} given)")
    names = ("low", "high", "size") if len(args) == 3 or (len(args) == 2 and size is not None) else ("high", "size")
    if len(args) == 1 and size is not None:
        names = ("low",) if high is not None else ("high",)
    for name, value in zip(names, args):
        if given[name] is not None:
            raise TypeError(f"randint() got multiple values for argument '{name}'")
        given[name] = value
    if given["high"] is None or given["size"] is None:
        missing = "high" if given["high"] is None else "size"
        raise TypeError(f"randint() missing required argument '{missing}': use randint(high, size) or "
                        "randint(low, high, size)")
    low = 0 if given["low"] is None else _int_arg("low", given["low"], 1)
    high = _int_arg("high", given["high"], 2 if given["low"] is not None else 1)
    if isinstance(given["size"], int) or not isinstance(given["size"], (tuple, list)):
        raise TypeError(f"randint(): argument 'size' must be tuple of ints, not {type(given['size']).__name__}")
    shape = _size_arg("randint", (), given["size"])
    if high <= low:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    return _make(shape, "randint", low, high, dtypes.to_dtype(dtype, dtypes.int64), device, requires_grad, generator)


def rand_like(x, dtype=None, device=None):
    return rand(size=tuple(x.shape), dtype=dtype or x.dtype, device=device or x.device)


def randn_like(x, dtype=None, device=None):
    return randn(size=tuple(x.shape), dtype=dtype or x.dtype, device=device or x.device)


def randperm(n, generator=None, dtype=None, device=None):
    """A random permutation of 0..n-1 (shuffled on the host, uploaded once)."""
    order = list(range(n))
    (generator or default_generator).python_random().shuffle(order)
    return tensor(order, dtype=dtypes.to_dtype(dtype, dtypes.int64), device=device) if n else \
        tensor([], dtype=dtypes.to_dtype(dtype, dtypes.int64), device=device)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices", device_type=None):
    """Save the global generator's state (the one generator both devices draw from), run the block, restore it,
    as torch.random.fork_rng. enabled=False runs the block without saving. devices and device_type are accepted
    as torch's (webgrad has no per-device generators to fork)."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
