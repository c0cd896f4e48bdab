"""Sparse gradients (nn.Embedding(sparse=True)) in the optimizers that take them, as torch.optim's.

SGD (without weight decay) and Adagrad (without weight decay) step on a sparse gradient exactly as on its dense
equivalent (duplicates summed, as torch's coalesce sums them): a row the gradient leaves out gets a zero update
from Adagrad (its sum grows by zero) and from SGD without momentum; with momentum, torch's sparse buffer keeps the
rows of earlier gradients and decays them all, as the dense buffer does. So they run their dense step on the
densified gradient. SparseAdam's lazy update is not of this kind (rows left out keep their moments, unlike Adam's
decay): it has its own step (sparse_adam.py), on the coalesced rows.
"""


def params_with_grad(optimizer, group, weight_decay_refusal):
    """(param, dense gradient) for each parameter of `group` with a gradient, as Optimizer._params_with_grad, a
    sparse gradient densified. `weight_decay_refusal`: the message of torch's RuntimeError for a sparse gradient
    in a group with weight decay."""
    for p in group["params"]:
        grad = p.grad
        if grad is None:
            continue
        if not grad.is_sparse:
            yield from optimizer._params_with_grad({"params": [p]})
            continue
        if group["weight_decay"] != 0:
            raise RuntimeError(weight_decay_refusal)
        check_sparse_grad(p, grad)
        yield p, grad.to_dense()


def check_sparse_grad(p, grad):
    if tuple(grad.shape) != tuple(p.shape) or grad.dtype is not p.dtype or grad.device != p.device:
        raise RuntimeError(f"a parameter of shape {list(p.shape)} ({p.dtype.name}, {p.device}) has a sparse gradient "
                           f"of shape {list(grad.shape)} ({grad.dtype.name}, {grad.device}); they must match")
