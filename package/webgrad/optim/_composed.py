"""Helpers shared by the optimizers composed of tensor ops (adadelta, adagrad, adamax, nadam, radam)."""


def lerp_(start, end, weight):
    """start += weight * (end - start) in place, with PyTorch's formula (the form depends on weight), so
    results agree with torch's lerp_ to the last bit."""
    if weight < 0.5:
        return start.add_((end - start) * weight)
    return start.copy_(end - (end - start) * (1 - weight))


def adam_moments_(p, grad, exp_avg, exp_avg_sq, group, shrink, beta1, beta2):
    """The start of an Adam-family step on parameter p, in place: the gradient negated where the group maximizes,
    the weight decay (decoupled: p *= shrink, the operand of 1 - lr * weight_decay; else added to the gradient),
    then the moments' updates (exp_avg toward the gradient, exp_avg_sq toward its square). Returns the gradient
    the step uses."""
    wd = group["weight_decay"]
    if group["maximize"]:
        grad = -grad
    if shrink is not None:
        p.mul_(shrink)
    elif wd != 0:
        grad = grad.add(p, alpha=wd)
    lerp_(exp_avg, grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    return grad
