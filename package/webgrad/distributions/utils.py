"""Helpers shared by the distributions, as torch.distributions.utils."""

import math
from numbers import Number

from .._tensor import Tensor


def _finfo(dtype):
    from .. import finfo
    return finfo(dtype)


def broadcast_all(*values):
    """Tensors and Python numbers broadcast to one shape; numbers become tensors of the first tensor's dtype and
    device (the default dtype when there is none)."""
    from .. import broadcast_tensors, get_default_dtype, tensor
    if not all(isinstance(v, (Tensor, Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, torch.Tensor or objects "
                         "implementing __torch_function__.")
    if not all(isinstance(v, Tensor) for v in values):
        like = next((v for v in values if isinstance(v, Tensor)), None)
        dtype = like.dtype if like is not None else get_default_dtype()
        device = like.device if like is not None else None
        values = [v if isinstance(v, Tensor) else tensor(float(v), dtype=dtype, device=device) for v in values]
    return broadcast_tensors(*values)


def _standard_normal(shape, dtype, device):
    from ..random import randn
    return randn(*shape, dtype=dtype, device=device)


def _uniform(shape, dtype, device):
    from ..random import rand
    return rand(*shape, dtype=dtype, device=device)


def _sum_rightmost(value, dim):
    """value summed over its `dim` rightmost dims."""
    if dim == 0:
        return value
    return value.reshape(*value.shape[:-dim], -1).sum(-1)


def clamp_probs(probs):
    eps = _finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary=False):
    return logits.sigmoid() if is_binary else logits.softmax(-1)


def probs_to_logits(probs, is_binary=False):
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return ps_clamped.log() - (-ps_clamped).log1p()
    return ps_clamped.log()


class lazy_property:
    """A property computed on first access (with gradients recorded) and then kept in the instance's __dict__."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        from .. import enable_grad
        with enable_grad():
            value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value


LOG_2PI = math.log(2 * math.pi)


def _tril_positions(n, diag):
    """Flat (row-major) indices into an n x n matrix of the entries with col - row <= diag, in row order (index
    arithmetic on the shape, no tensor read)."""
    return [row * n + col for row in range(n) for col in range(n) if col - row <= diag]


def tril_matrix_to_vec(mat, diag=0):
    """The entries of mat's lower triangle (col - row <= diag) in row order, as a vector per matrix."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    from .. import tensor
    flat = mat.reshape(*mat.shape[:-2], n * n)
    return flat.index_select(-1, tensor(_tril_positions(n, diag), device=mat.device))


def vec_to_tril_matrix(vec, diag=0):
    """The D x D lower-triangular matrices (col - row <= diag) whose entries, in row order, are vec's: a gather
    from vec with one zero appended (every position above the band reads the zero)."""
    from .. import cat, tensor
    length = vec.shape[-1]
    # the positive root of D^2 + (1 + 2 diag) D - |diag| (diag + 1) - 2 length = 0
    root = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * length + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    n = round(root)
    if abs(n - root) > 1e-6:
        raise ValueError(f"The size of last dimension is {length} which cannot be expressed as the lower "
                         f"triangular part of a square D x D matrix.")
    source = [length] * (n * n)
    for k, position in enumerate(_tril_positions(n, diag)):
        source[position] = k
    padded = cat([vec, vec.new_zeros((*vec.shape[:-1], 1))], -1)
    return padded.index_select(-1, tensor(source, device=vec.device)).reshape(*vec.shape[:-1], n, n)
