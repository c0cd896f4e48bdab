"""The CPU reference of batch normalisation: float64, two-pass statistics, rounded once (as PyTorch's CPU
kernels)."""

from .. import kernels
from .arrays import array, f64, np, write


def channel(view, c, default):
    return np.full(c, default) if view is None else f64(view)


@kernels.batch_norm.implement("cpu")
def batch_norm(out, save, x, weight, bias, running_mean, running_var, training, momentum, eps,
               count=None):
    v = f64(x)
    c = v.shape[1]
    if training:
        mean = v.mean(axis=(0, 2))
        var = ((v - mean[None, :, None]) ** 2).mean(axis=(0, 2))  # biased: what normalises
        if count is not None:
            array(count)[...] += 1
        if running_mean is not None:
            m = v.shape[0] * v.shape[2]
            factor = 1.0 / float(array(count).reshape(-1)[0]) if momentum is None else momentum
            write(running_mean, (1.0 - factor) * f64(running_mean) + factor * mean)
            write(running_var, (1.0 - factor) * f64(running_var) + factor * var * (m / (m - 1)))
    else:
        mean, var = f64(running_mean), f64(running_var)
    invstd = 1.0 / np.sqrt(var + eps)
    if save is not None:
        write(save, np.stack([mean, invstd]))
    scale = (invstd * channel(weight, c, 1.0))[None, :, None]
    write(out, (v - mean[None, :, None]) * scale + channel(bias, c, 0.0)[None, :, None])


@kernels.batch_norm_backward.implement("cpu")
def batch_norm_backward(grad_input, grad_weight, grad_bias, grad, x, save, weight, training):
    g, v, (mean, invstd) = f64(grad), f64(x), f64(save)
    xhat = (v - mean[None, :, None]) * invstd[None, :, None]
    sum_g, sum_gx = g.sum(axis=(0, 2)), (g * xhat).sum(axis=(0, 2))
    if grad_weight is not None:
        write(grad_weight, sum_gx)
    if grad_bias is not None:
        write(grad_bias, sum_g)
    if grad_input is not None:
        scale = (invstd * channel(weight, v.shape[1], 1.0))[None, :, None]
        if training:
            m = v.shape[0] * v.shape[2]
            g = g - (sum_g / m)[None, :, None] - xhat * (sum_gx / m)[None, :, None]
        write(grad_input, g * scale)
