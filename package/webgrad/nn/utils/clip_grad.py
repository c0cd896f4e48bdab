"""Gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_.

On WebGPU the norm of all gradients and their scaling are fused kernels (_backends/webgpu/grad_norm.py):
a few dispatches for the whole model, no read-back, so clipping records into a `webgrad.replayable`
step. Elsewhere (the CPU, float64) the same is composed from ops, as PyTorch does.
"""

import math

from ... import dtypes
from ...autograd import no_grad
from ..._tensor import Tensor, tensor
from ..._backends import kernels

_NONFINITE = ("The total norm of order {p} for gradients from `parameters` is non-finite, so it cannot be "
              "clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
              "`error_if_nonfinite=False`")


def _grads(parameters):
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    return [p.grad for p in params if p.grad is not None]


@no_grad()
def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale the gradients of `parameters` in place so that their total norm_type-norm (all gradients
    as one vector) is at most max_norm: by min(max_norm / (norm + 1e-6), 1). Returns the total norm, a
    0-d tensor on the gradients' device. error_if_nonfinite: raise RuntimeError when the norm is NaN or
    infinite (on WebGPU at the next read-back, as any device-side error). `foreach` is accepted for
    PyTorch compatibility (WebGPU always fuses)."""
    grads = _grads(parameters)
    max_norm, norm_type = float(max_norm), float(norm_type)
    if not grads:
        return tensor(0.0)
    devices = {g.device for g in grads}
    if len(devices) > 1:
        raise RuntimeError(f"clip_grad_norm_: all gradients must be on one device, got {sorted(map(str, devices))}")
    device = grads[0].device
    message = _NONFINITE.format(p=norm_type) if error_if_nonfinite else None
    if device.backend.has(kernels.clip_grad_norm) and all(g.dtype is dtypes.float32 and g.is_contiguous() for g in grads):
        total = tensor([0.0], device=device)
        kernels.clip_grad_norm(device.backend, total._view, [g._view for g in grads], max_norm, norm_type, message)
        return total.reshape(())
    if norm_type == math.inf:
        norms = [g.abs().max() for g in grads]
        total = norms[0] if len(norms) == 1 else _stack(norms).max()
    else:
        norms = [g.abs().pow(norm_type).sum() for g in grads]
        total = _stack(norms).sum().pow(1.0 / norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(message)
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.to(dtype=g.dtype))
    return total


def _stack(scalars):
    from ...ops.shape import stack
    return stack(scalars)


@no_grad()
def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient of `parameters` in place to [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    for g in _grads(parameters):
        g.clamp_(min=-clip_value, max=clip_value)


@no_grad()
def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm_type-norm of `tensors` (a tensor or an iterable of them; usually gradients) as if they were one
    vector: the norm of their norms, a 0-d tensor on the first tensor's device. error_if_nonfinite: raise
    RuntimeError when it is NaN or infinite (this reads it back). `foreach` is accepted for PyTorch compatibility."""
    from ...linalg import vector_norm
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    first_device = tensors[0].device
    norms = [vector_norm(t, norm_type).to(first_device) for t in tensors]
    total = vector_norm(_stack(norms), norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(_NONFINITE.format(p=norm_type))
    return total


@no_grad()
def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients of `parameters` in place by min(max_norm / (total_norm + 1e-6), 1), given their total
    norm (get_total_norm of the gradients): clip_grad_norm_ in two halves, so the norm can be computed, logged or
    reduced across processes in between. No read-back: the factor is a tensor on the device."""
    grads = _grads(parameters)
    max_norm = float(max_norm)
    if not grads:
        return
    if not isinstance(total_norm, Tensor):
        total_norm = tensor(float(total_norm))
    coef = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.to(device=g.device, dtype=g.dtype))
