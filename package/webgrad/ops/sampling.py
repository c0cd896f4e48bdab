"""multinomial: draws from categorical distributions on the device (kernels.multinomial), from the counter-based
stream of webgrad.random, so the same generator state draws the same categories on every backend.
"""

from .. import dtypes, random, replay
from .._tensor import Tensor
from .core import cast, new
from .._backends import kernels

MAX_CATEGORIES = 1 << 24  # torch's limit


def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """num_samples indices drawn from the categories of each row of `input` (non-negative weights, 1-D or 2-D,
    not necessarily summing to 1), with or without replacement: int64 [num_samples] or [rows, num_samples], as
    torch.multinomial. Bad weights (negative, inf, NaN, a row of zeros) raise RuntimeError, on WebGPU at the next
    read-back."""
    if not isinstance(input, Tensor):
        raise TypeError(f"multinomial(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if out is not None:
        raise TypeError("multinomial(): out= is not supported by webgrad; assign the result instead")
    if isinstance(num_samples, bool) or not hasattr(num_samples, "__index__"):
        raise TypeError(f"multinomial(): argument 'num_samples' (position 2) must be int, not "
                        f"{type(num_samples).__name__}")
    s = num_samples.__index__()
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not input.dtype.is_floating:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{_torch_name(input.dtype)}")
    n = input.shape[-1]
    if s <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and s > n:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if n > MAX_CATEGORIES:
        raise RuntimeError(f"number of categories cannot exceed 2^24, got {n}")
    probs = input.detach()
    if probs.dtype is not dtypes.float32:
        probs = cast(probs, dtypes.float32)
    probs = probs.contiguous().reshape(-1, n)
    rows = probs.shape[0]
    result = new((rows, s), dtypes.int64, input.device)
    if rows:
        seed, offset = draw(rows * s, input.device, generator)
        kernels.multinomial(input.device.backend, result._view, probs._view, seed, offset, bool(replacement))
    return result if input.ndim == 2 else result.reshape(s)


def draw(n, device, generator=None):
    """(seed, offset) of n counters of the generator's stream, for a kernel that draws inside: while a step is
    recorded, dynamic scalars that a replay hook advances as an eager call would (as random.fill_random)."""
    gen = generator or random.default_generator
    seed, offset = gen.take(n)
    backend = device.backend
    if replay.capturing() and backend.supports_capture:
        seed, offset = backend.scalar(seed, "u32"), backend.scalar(offset, "u32")
        replay.on_replay(lambda: random._advance(gen, n, seed, offset))
    return seed, offset


def _torch_name(dtype):
    return {"int64": "Long", "int32": "Int", "uint8": "Byte", "bool": "Bool"}.get(dtype.name, dtype.name)
