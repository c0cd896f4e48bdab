"""The CPU reference of layer normalisation (and RMS normalisation: rms) and its backward (in float64, rounded once
into each output)."""

from .. import kernels
from .arrays import array, f64, np, write


@kernels.layer_norm.implement("cpu")
def layer_norm(out, save, x, weight, bias, eps, rms=False):
    v = f64(x)
    mean = np.zeros((v.shape[0], 1)) if rms else v.mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt(((v - mean) ** 2).mean(axis=1, keepdims=True) + eps)
    res = (v - mean) * rstd
    if weight is not None:
        res = res * f64(weight)
    if bias is not None:
        res = res + f64(bias)
    write(out, res)
    if save is not None:
        write(save, np.concatenate([mean, rstd], axis=1))


@kernels.layer_norm_backward.implement("cpu")
def layer_norm_backward(grad_input, grad_weight, grad_bias, grad, x, save, weight, rms=False):
    g, v, s = f64(grad), f64(x), array(save).astype(np.float64)
    mean, rstd = s[:, :1], s[:, 1:]
    xhat = (v - mean) * rstd
    if grad_weight is not None:
        write(grad_weight, (g * xhat).sum(axis=0))
    if grad_bias is not None:
        write(grad_bias, g.sum(axis=0))
    if grad_input is not None:
        gw = g * f64(weight) if weight is not None else g
        centre = 0.0 if rms else gw.mean(axis=1, keepdims=True)
        write(grad_input, rstd * (gw - centre - xhat * (gw * xhat).mean(axis=1, keepdims=True)))
