"""The CPU reference of the fused optimizer updates: one update per parameter, in float64 and rounded once into
the tensors' dtype, following PyTorch's single-tensor implementations (torch/optim/{sgd,adam,rmsprop}.py) step
by step."""

from .. import kernels
from .arrays import array, f64, np, write


def optim_grad(param, grad, hyper):
    """The gradient an update uses: negated for maximize, then plus weight_decay * param."""
    g = f64(grad)
    if hyper["maximize"]:
        g = -g
    if hyper["weight_decay"] != 0 and not hyper.get("decoupled", False):
        g = g + hyper["weight_decay"] * f64(param)
    return g


def skipped(hyper):
    """hyper['skip_if'] holds a value above 0: the update changes nothing, and adds 1 to
    hyper['skipped_steps'] where given (see the interface)."""
    flag = hyper.get("skip_if")
    if flag is None or not float(array(flag).reshape(-1)[0]) > 0.0:
        return False
    if hyper.get("skipped_steps") is not None:
        array(hyper["skipped_steps"]).reshape(-1)[0] += 1
    return True


@kernels.sgd_step.implement("cpu")
def sgd_step(param, grad, momentum_buffer, hyper):
    if skipped(hyper):
        return
    g = optim_grad(param, grad, hyper)
    if momentum_buffer is not None:
        m = hyper["momentum"]
        buf = g if hyper["first"] else m * f64(momentum_buffer) + (1.0 - hyper["dampening"]) * g
        write(momentum_buffer, buf)
        g = g + m * buf if hyper["nesterov"] else buf
    write(param, f64(param) - hyper["lr"] * g)


@kernels.adam_step.implement("cpu")
def adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, hyper):
    if skipped(hyper):
        return
    lr, b1, b2, t = hyper["lr"], hyper["beta1"], hyper["beta2"], hyper["step"]
    if hyper.get("skipped_steps") is not None:
        t -= float(array(hyper["skipped_steps"]).reshape(-1)[0])
    g = optim_grad(param, grad, hyper)
    p = f64(param)
    if hyper["decoupled"]:  # AdamW: decay the parameter itself, not through the gradient
        p = p * (1.0 - lr * hyper["weight_decay"])
    m = b1 * f64(exp_avg) + (1.0 - b1) * g
    v = b2 * f64(exp_avg_sq) + (1.0 - b2) * g * g
    write(exp_avg, m)
    write(exp_avg_sq, v)
    if max_exp_avg_sq is not None:
        v = np.maximum(f64(max_exp_avg_sq), v)
        write(max_exp_avg_sq, v)
    bias_correction1 = 1.0 - b1 ** t
    bias_correction2 = 1.0 - b2 ** t
    denom = np.sqrt(v) / bias_correction2 ** 0.5 + hyper["eps"]
    write(param, p - (lr / bias_correction1) * m / denom)


@kernels.rmsprop_step.implement("cpu")
def rmsprop_step(param, grad, square_avg, momentum_buffer, grad_avg, hyper):
    if skipped(hyper):
        return
    alpha, eps = hyper["alpha"], hyper["eps"]
    g = optim_grad(param, grad, hyper)
    sq = alpha * f64(square_avg) + (1.0 - alpha) * g * g
    write(square_avg, sq)
    if grad_avg is not None:  # centered: normalise by an estimate of the gradient's variance
        ga = alpha * f64(grad_avg) + (1.0 - alpha) * g
        write(grad_avg, ga)
        avg = np.sqrt(sq - ga * ga) + eps
    else:
        avg = np.sqrt(sq) + eps
    if momentum_buffer is not None:
        buf = hyper["momentum"] * f64(momentum_buffer) + g / avg
        write(momentum_buffer, buf)
        write(param, f64(param) - hyper["lr"] * buf)
    else:
        write(param, f64(param) - hyper["lr"] * g / avg)


@kernels.adam_steps.implement("cpu")
def adam_steps(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, hypers):
    for args in zip(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, hypers):
        kernels.adam_step.impls["cpu"](*args)
