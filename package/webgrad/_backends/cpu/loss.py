"""The CPU reference of the fused softmax cross-entropy, in float64."""

from ... import _bounds
from .. import kernels
from .arrays import array, checked, np, write


def row_losses(logits, target, ignore_index, label_smoothing):
    """(each row's cross-entropy, 0 where ignored; whether its target counts), in float64."""
    z = array(logits).astype(np.float64)
    t = array(target).astype(np.int64)
    checked(np.where(t == ignore_index, 0, t), z.shape[1], _bounds.CROSS_ENTROPY)
    logp = z - z.max(axis=1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(axis=1, keepdims=True))
    valid = t != ignore_index
    picked = np.take_along_axis(logp, np.where(valid, t, 0)[:, None], axis=1)[:, 0]
    c = z.shape[1]
    loss = np.where(valid, -(1.0 - label_smoothing) * picked - label_smoothing / c * logp.sum(axis=1), 0.0)
    return loss, valid


def _write_lse(lse, logits):
    if lse is not None:
        z = array(logits).astype(np.float64)
        m = z.max(axis=1)
        write(lse, m + np.log(np.exp(z - m[:, None]).sum(axis=1)))


@kernels.cross_entropy.implement("cpu")
def cross_entropy(out, logits, target, ignore_index=-100, label_smoothing=0.0, lse=None):
    loss, valid = row_losses(logits, target, ignore_index, label_smoothing)
    write(out, np.stack([loss, valid], axis=1) if len(out.shape) == 2 else loss)
    _write_lse(lse, logits)


@kernels.cross_entropy_mean.implement("cpu")
def cross_entropy_mean(out, logits, target, ignore_index=-100, label_smoothing=0.0, lse=None):
    loss, valid = row_losses(logits, target, ignore_index, label_smoothing)
    count = float(valid.sum())
    write(out, np.array([loss.sum() / count if count else np.nan, count]))
    _write_lse(lse, logits)


@kernels.cross_entropy_backward.implement("cpu")
def cross_entropy_backward(out, logits, target, grad, ignore_index=-100, label_smoothing=0.0, lse=None):
    z = array(logits).astype(np.float64)
    t = array(target).astype(np.int64)
    if lse is not None:
        p = np.exp(z - array(lse).astype(np.float64)[:, None])
    else:
        e = np.exp(z - z.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
    valid = t != ignore_index
    c = z.shape[1]
    onehot = np.zeros_like(p)
    onehot[np.arange(len(t)), np.where(valid, t, 0)] = 1.0
    res = (p - ((1.0 - label_smoothing) * onehot + label_smoothing / c)) * array(grad)[:, None]
    write(out, np.where(valid[:, None], res, 0.0))
