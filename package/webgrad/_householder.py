"""torch.geqrf and torch.ormqr: QR in LAPACK's compact Householder form, and products with its Q.

geqrf follows LAPACK's geqr2: column j's reflector H_j = I - tau_j v_j v_jᵀ (v_j: 1 at row j, the column's
entries below it) is made by larfg (beta = -sign(alpha) * ||x||, tau = (beta - alpha) / beta) and applied to the
columns on its right; R stays on and above the diagonal, the v_j below. Every step acts on the whole batch at once.
ormqr applies the reflectors to another matrix in the order op(Q) = H_1 H_2 ... H_k needs, with differentiable tensor
ops (so its gradients, like PyTorch's, reach input, tau and other).
"""

from ._autograd import no_grad
from ._tensor import Tensor, eye
from .ops.elementwise import where
from .ops.shape import cat


def _check(value, op, what):
    if not isinstance(value, Tensor):
        raise TypeError(f"{op}(): argument '{what}' must be Tensor, not {type(value).__name__}")
    if not value.dtype.is_floating:
        raise RuntimeError(f"torch.{op}: Expected a floating point or complex tensor as input. Got {value.dtype}")


def geqrf(input, *, out=None):
    """(a, tau): R on and above a's diagonal, the Householder vectors below it, tau their scales, as torch.geqrf
    (LAPACK's geqrf). Not differentiable, as PyTorch's is not."""
    _check(input, "geqrf", "input")
    if input.ndim < 2:
        raise RuntimeError(f"torch.geqrf: The input tensor A must have at least 2 dimensions, got {input.ndim}")
    if out is not None:
        raise NotImplementedError("geqrf(): out= is not supported; use the returned tensors")
    m, n = input.shape[-2:]
    k = min(m, n)
    with no_grad():
        a = input.detach().clone()
        taus = []
        for j in range(k):
            x = a[..., j:, j]
            alpha, tail = x[..., 0], x[..., 1:]
            xnorm = (tail * tail).sum(-1).sqrt()
            reflect = xnorm != 0  # larfg: a zero tail needs no reflection (tau 0, H = I)
            size = (alpha * alpha + xnorm * xnorm).sqrt()
            beta = where(alpha >= 0, -size, size)
            tau = where(reflect, (beta - alpha) / where(reflect, beta, 1.0), 0.0)
            v_tail = tail / where(reflect, alpha - beta, 1.0).unsqueeze(-1)
            new_column = cat([where(reflect, beta, alpha).unsqueeze(-1), v_tail], -1)
            if j + 1 < n:  # apply H_j to the columns on the right: C - tau v (vᵀ C)
                v = cat([alpha.new_ones(alpha.shape).unsqueeze(-1), v_tail], -1).unsqueeze(-1)
                right = a[..., j:, j + 1:]
                right = right - tau.unsqueeze(-1).unsqueeze(-1) * v * (v.mT @ right)
                a[..., j:, j + 1:] = right
            a[..., j:, j] = new_column
            taus.append(tau)
        tau = (cat([t.unsqueeze(-1) for t in taus], -1) if taus
               else input.new_zeros(tuple(input.shape[:-2]) + (0,)))
    return a, tau


def ormqr(input, tau, other, left=True, transpose=False, *, out=None):
    """op(Q) @ other (left) or other @ op(Q), Q = H_1 ... H_k from geqrf's (input, tau), op the transpose where
    transpose=True; as torch.ormqr. input: [*, mn, k] with mn other's rows (left) or columns (right)."""
    for value, what in ((input, "input"), (tau, "tau"), (other, "other")):
        _check(value, "ormqr", what)
    if out is not None:
        raise NotImplementedError("ormqr(): out= is not supported; use the returned tensor")
    if input.ndim < 2 or other.ndim < 2:
        raise RuntimeError("torch.ormqr: input and other must have at least 2 dimensions")
    mn = other.shape[-2] if left else other.shape[-1]
    if input.shape[-2] != mn:
        side = "other.shape[-2]" if left else "other.shape[-1]"
        raise RuntimeError(f"torch.ormqr: {side} must be equal to input.shape[-2], got {mn} and {input.shape[-2]}")
    reflectors = tau.shape[-1]
    if reflectors > input.shape[-1] or reflectors > mn:
        raise RuntimeError(f"torch.ormqr: tau.shape[-1] must be less than or equal to input.shape[-1] and to "
                           f"{input.shape[-2]}, got {reflectors}")
    if tuple(tau.shape[:-1]) != tuple(input.shape[:-2]):
        raise RuntimeError(f"torch.ormqr: Expected batch dimensions of tau {list(tau.shape[:-1])} to be equal to "
                           f"input's {list(input.shape[:-2])}")
    if input.numel() == 0 or reflectors == 0:  # no reflector to apply: Q = I, input and tau take no gradient
        return other.clone()
    # the reflectors' vectors: unit diagonal, input's entries below it, zeros above
    vectors = input[..., :reflectors].tril(-1) + eye(mn, reflectors, dtype=input.dtype, device=input.device)
    order = range(reflectors)
    if left != transpose:  # Q C and C Qᵀ apply H_k first
        order = reversed(order)
    result = other
    for i in order:
        v = vectors[..., i:i + 1]  # [*, mn, 1]
        t = tau[..., i:i + 1].unsqueeze(-1)
        if left:
            result = result - t * v * (v.mT @ result)
        else:
            result = result - t * (result @ v) * v.mT
    return result


FUNCTIONS = {"geqrf": geqrf, "ormqr": ormqr}
