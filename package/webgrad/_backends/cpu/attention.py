"""The CPU reference of fused attention (kernels.attention, kernels.attention_backward), in float64."""

from .. import kernels
from .arrays import array, f64, np, write
from .masked import keep_mask


def _scores(q, k, mask, scale, causal):
    """(scaled and masked scores, where attended) of [B, H, L, S]."""
    s = f64(q) @ np.swapaxes(f64(k), -1, -2) * scale
    allowed = np.ones(s.shape, bool)
    L, S = s.shape[-2:]
    if causal:
        allowed &= np.tril(np.ones((L, S), bool))
    if mask is not None:
        m = array(mask)
        if m.dtype == np.bool_:
            allowed &= m
        else:
            with np.errstate(invalid="ignore"):
                s = s + m.astype(np.float64)
            allowed &= ~np.isneginf(m)
    return np.where(allowed, s, -np.inf), allowed


def _keep(shape, dropout_p, seed, offset):
    """The kept weights of a [B, H, L, S] draw, times 1 / (1 - p) (1 without dropout)."""
    if dropout_p <= 0:
        return 1.0
    n = int(np.prod(shape))
    return keep_mask(seed, offset, n, dropout_p).reshape(shape) * (1.0 / (1.0 - dropout_p))


@kernels.attention.implement("cpu")
def attention(out, lse, q, k, v, mask, scale, causal=False, dropout_p=0.0, seed=0, offset=0):
    s, allowed = _scores(q, k, mask, scale, causal)
    any_key = allowed.any(axis=-1, keepdims=True)
    m = np.where(any_key, np.where(allowed, s, -np.inf).max(axis=-1, keepdims=True), 0.0)
    e = np.where(allowed, np.exp(np.where(allowed, s - m, 0.0)), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        weights = np.where(any_key, e / total, np.nan)
        if lse is not None:
            write(lse, np.where(any_key, m + np.log(total), -np.inf)[..., 0])
    write(out, (weights * _keep(s.shape, dropout_p, seed, offset)) @ f64(v))


@kernels.attention_backward.implement("cpu")
def attention_backward(grad_q, grad_k, grad_v, grad, q, k, v, out, lse, mask, scale, causal=False, dropout_p=0.0,
                       seed=0, offset=0):
    s, allowed = _scores(q, k, mask, scale, causal)
    with np.errstate(invalid="ignore", over="ignore"):
        weights = np.where(allowed, np.exp(np.where(allowed, s, 0.0) - array(lse).astype(np.float64)[..., None]), 0.0)
    keep = _keep(s.shape, dropout_p, seed, offset)
    g = f64(grad)
    if grad_v is not None:
        write(grad_v, np.swapaxes(weights * keep, -1, -2) @ g)
    dp = (g @ np.swapaxes(f64(v), -1, -2)) * keep
    d = (g * f64(out)).sum(axis=-1, keepdims=True)
    ds = weights * (dp - d)
    if grad_q is not None:
        write(grad_q, ds @ f64(k) * scale)
    if grad_k is not None:
        write(grad_k, np.swapaxes(ds, -1, -2) @ f64(q) * scale)
