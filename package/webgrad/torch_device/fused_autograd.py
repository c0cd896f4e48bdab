"""Composite ATen ops that run, forward and backward, as webgrad's own fused op in eager PyTorch on webgpu tensors.

PyTorch decomposes composite ops before they reach a device's kernels. F.cross_entropy becomes log_softmax and
nll_loss, and its backward nll_loss_backward (the targets' coefficients scattered into zeros) and
_log_softmax_backward_data: on webgpu, 2 kernels forward and 14 backward, each crossing PyTorch's dispatcher
and webgrad's wrappers, for what webgrad's F.cross_entropy does in one kernel forward and two backward.
Registered at AutogradPrivateUse1 (which PyTorch consults before the composite kernel for webgpu tensors), an op
here runs webgrad's op on views of the torch tensors, and its backward asks webgrad's autograd for the
gradients: webgrad's numerics, with PyTorch's autograd around them. Calls this path does not take run PyTorch's
decomposition as before: tensors that are not plain webgpu tensors (FakeTensors and functional tensors while
torch.compile traces), gradients wanted for other operands than the input, other dtypes.

A gradient computed here is not differentiable again (once_differentiable): a double backward through it
raises PyTorch's error instead of returning a wrong value.
"""

import torch
from torch.autograd.function import once_differentiable

import webgrad as wg

from . import storage as st

aten = torch.ops.aten
_LIB = torch.library.Library("aten", "IMPL")
_REDUCTIONS = ("none", "mean", "sum")  # ATen's Reduction enum
_FLOATS = (torch.float32, torch.float16)


def _plain(*tensors):
    """Whether every tensor given is an ordinary webgpu tensor (None allowed)."""
    return all(t is None or (type(t) is torch.Tensor and t.device.type == st.DEVICE.type) for t in tensors)


class _WebgradOp(torch.autograd.Function):
    """forward(run, differentiable input, *rest): `run` on webgrad views of the torch tensors, recorded by
    webgrad's autograd from a leaf viewing the input; backward: webgrad's autograd.grad of that record."""

    @staticmethod
    def forward(ctx, run, x, *rest):
        leaf = st.unwrap(x).detach().requires_grad_()
        with wg.enable_grad():
            out = run(leaf, *(st.unwrap(t) if isinstance(t, torch.Tensor) else t for t in rest))
        ctx.leaf, ctx.out, ctx.rest_count = leaf, out, len(rest)
        return st.wrap(out.detach())

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (gx,) = wg.autograd.grad(ctx.out, ctx.leaf, st.unwrap(grad.contiguous()))
        ctx.leaf = ctx.out = None  # the record's saved tensors go with it (retain_graph is PyTorch's concern)
        return (None, st.wrap(gx)) + (None,) * ctx.rest_count


def _apply(run, x, *rest):
    """run(x, *rest) through _WebgradOp where x needs a gradient, else once without recording."""
    if torch.is_grad_enabled() and x.requires_grad:
        return _WebgradOp.apply(run, x, *rest)
    with wg.no_grad():
        return st.wrap(run(st.unwrap(x), *(st.unwrap(t) if isinstance(t, torch.Tensor) else t for t in rest)))


def _cross_entropy_loss(input, target, weight=None, reduction=1, ignore_index=-100, label_smoothing=0.0):
    if not (_plain(input, target, weight) and input.dtype in _FLOATS and not target.requires_grad
            and (weight is None or not weight.requires_grad)):
        return aten.cross_entropy_loss.default.decompose(input, target, weight, reduction, ignore_index,
                                                         label_smoothing)

    def run(x, t, w):
        return wg.nn.functional.cross_entropy(x, t, w, ignore_index=ignore_index, reduction=_REDUCTIONS[reduction],
                                              label_smoothing=label_smoothing)
    return _apply(run, input, target, weight)


_LIB.impl("cross_entropy_loss", _cross_entropy_loss, "AutogradPrivateUse1")
