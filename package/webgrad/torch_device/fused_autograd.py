"""Composite ATen ops that run, forward and backward, as webgrad's own fused op in eager PyTorch on webgpu tensors.

PyTorch decomposes composite ops before they reach a device's kernels, and each piece crosses PyTorch's
dispatcher and webgrad's wrappers (kernels.py) on its own:
  F.cross_entropy   log_softmax + nll_loss; backward nll_loss_backward (the targets' coefficients scattered into
                    zeros) and _log_softmax_backward_data: 2 kernels forward and 14 backward, for what webgrad's
                    F.cross_entropy does in one forward and two backward;
  F.linear          t + addmm; backward AddmmBackward's t, mm, mm and sum, where webgrad's linear has the bias in
                    its product's kernel and its gradient in the backward's;
  F.conv2d          convolution, and convolution_backward, which unfolds the input again for the weight's
                    gradient;
  F.max_pool2d      max_pool2d_with_indices, whose indices the backward then reads;
  F.batch_norm      _batch_norm_impl_index, then native_batch_norm with its statistics as two more results;
  F.layer_norm      native_layer_norm; its backward composed of a dozen elementwise ops and reductions, against
                    webgrad's one backward kernel;
  F.rms_norm        pow, mean, add, rsqrt and two products, and their backward, for webgrad's one kernel forward
                    and one backward pass (the LayerNorm kernels without the mean);
  F.scaled_dot_product_attention   on a device without a registered fused kernel, PyTorch's math path: bmm,
                    a mask from ones + tril + where, _safe_softmax and their backward, against webgrad's attention
                    kernels (or its products in chunks, ops/attention_chunked.py).
Registered at AutogradPrivateUse1 (which PyTorch consults before the composite kernel for webgpu tensors), an op
here runs webgrad's op on views of the torch tensors, and its backward asks webgrad's autograd for the
gradients: webgrad's numerics, with PyTorch's autograd around them. The MNIST MLP's eager step enters webgrad's
kernels from PyTorch's dispatcher 5 times instead of 23; a GPT's step (gpt-6x384) runs 271 ATen ops instead of
549. Calls this path does not take run PyTorch's decomposition as before: tensors that are not plain webgpu
tensors or parameters (FakeTensors and functional tensors while torch.compile traces), other dtypes, and for
cross-entropy a weight that wants a gradient.

A gradient computed here is not differentiable again (once_differentiable): a double backward through it
raises PyTorch's error instead of returning a wrong value.
"""

import torch
from torch.autograd.function import once_differentiable

import webgrad as wg
from webgrad import _autograd
from webgrad._tensor import Tensor

from . import storage as st

aten = torch.ops.aten
_LIB = torch.library.Library("aten", "IMPL")
_REDUCTIONS = ("none", "mean", "sum")  # ATen's Reduction enum
_FLOATS = (torch.float32, torch.float16)
_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)
_WEBGPU = st.DEVICE


def _once_differentiable(fn):
    """torch.autograd.function.once_differentiable, called straight where grad mode is off (a backward without
    create_graph: then its no_grad block and checks change nothing)."""
    guarded = once_differentiable(fn)

    def backward(ctx, *grads):
        if torch.is_grad_enabled():
            return guarded(ctx, *grads)
        return fn(ctx, *grads)
    return backward


def _plain(*tensors):
    """Whether every tensor given is an ordinary webgpu tensor or parameter (None allowed): not a tensor
    subclass that intercepts dispatch, as torch.compile's fake and functional tensors do."""
    for t in tensors:
        # (t.device == DEVICE: Tensor.device.type builds its string each time, ~0.4 us against ~0.08)
        if t is not None and (type(t) not in _PLAIN_TYPES or t.device != _WEBGPU):
            return False
    return True


class _WebgradOp(torch.autograd.Function):
    """forward(run, updated, reads_output, *inputs): `run` on webgrad views of the inputs, recorded by webgrad's
    autograd from leaves viewing the tensors that require grad; backward: webgrad's autograd.grad of that record for
    those leaves.

    The record reads the inputs' memory when the backward runs (and the output's, where `reads_output`: the
    attention kernels' backward), so those are also saved on PyTorch's side, as PyTorch's own kernels save them: an
    in-place write to one before the backward raises PyTorch's "modified by an inplace operation" error there, as
    it would for PyTorch's op, instead of a gradient from the new values. An output the backward does not read is
    not saved, so the in-place activation after a convolution or a batch norm (nn.ReLU(inplace=True)) stays legal.
    `updated` (indices into inputs) are tensors the op itself writes in place (running statistics) and its
    backward never reads: not saved."""

    @staticmethod
    def forward(ctx, run, updated, reads_output, *inputs):
        args, leaves, saved = [], [], []
        device = st.webgrad_device()
        for i, t in enumerate(inputs):
            if isinstance(t, torch.Tensor):
                v = Tensor._make(st.view_of(t), device)  # (a fresh tensor: a leaf of the record where t wants grad)
                if t.requires_grad:
                    v.requires_grad_()
                    leaves.append((len(args), v))
                if i not in updated:
                    saved.append(t)
                args.append(v)
            else:
                args.append(t)
        if _autograd.is_grad_enabled():  # (webgrad's own grad mode: on, unless a caller turned it off)
            out = run(*args)
        else:
            with wg.enable_grad():
                out = run(*args)
        result = st.wrap(out)  # (a view of out's memory: the record keeps out itself)
        ctx.save_for_backward(*saved, *((result,) if reads_output else ()))
        ctx.record = (out, leaves, len(inputs))
        return result

    @staticmethod
    @_once_differentiable
    def backward(ctx, grad):
        ctx.saved_tensors  # (PyTorch's check that nothing the record reads was written since)
        out, leaves, count = ctx.record
        ctx.record = None  # the record's saved tensors go with it
        seed = st.unwrap(grad.contiguous())
        grads = _one_node_grads(out, leaves, seed)
        if grads is None:
            grads = wg.autograd.grad(out, [v for _, v in leaves], seed, allow_unused=True)
        result = [None] * (3 + count)
        for (i, _), g in zip(leaves, grads):
            result[3 + i] = st.wrap(g) if g is not None else None
        return tuple(result)


def _one_node_grads(out, leaves, seed):
    """The leaves' gradients where the record is one node whose inputs are all leaves (a linear, a cross-entropy:
    most records): that node's backward function called as webgrad's engine would call it, without the engine's
    walk. None where the record is anything else, or where the engine has more to do (anomaly mode; something
    written in place since the node ran, which the engine checks)."""
    node = out.grad_fn
    if node is None or node.backward_fn is None or node.clock != _autograd.clock() or _autograd.is_anomaly_enabled():
        return None
    inputs = node.inputs
    for t in inputs:
        if t is not None and t.grad_fn is not None:
            return None
    with _autograd.set_grad_enabled(False):
        input_grads = node.backward_fn(seed)
    node.backward_fn = None  # (the engine frees the closure's saved tensors so too)
    captured = {id(v): None for _, v in leaves}
    for t, g in zip(inputs, input_grads):
        if t is None or g is None or id(t) not in captured:
            continue
        if type(g) is _autograd.SliceGrad:
            g = g.dense()
        if g.dtype is not t.dtype and t.dtype.is_floating:
            g = g.to(t.dtype)
        held = captured[id(t)]
        captured[id(t)] = g if held is None else held + g
    return [captured[id(v)] for _, v in leaves]


_NOTHING_UPDATED = frozenset()
_FUNCTION_APPLY = torch._C._FunctionBase.__dict__["apply"].__get__(None, _WebgradOp)


def _apply(run, *inputs, updated=(), reads_output=False):
    """run(*inputs) through _WebgradOp where an input needs a gradient, else once without recording."""
    if torch.is_grad_enabled():
        for t in inputs:
            if isinstance(t, torch.Tensor) and t.requires_grad:
                updated = frozenset(updated) if updated else _NOTHING_UPDATED
                if torch._C._are_functorch_transforms_active():
                    return _WebgradOp.apply(run, updated, reads_output, *inputs)
                # (autograd.Function.apply's own checks are for functorch's transforms, off here)
                return _FUNCTION_APPLY(run, updated, reads_output, *inputs)
    with wg.no_grad():
        return st.wrap(run(*(st.unwrap(t) if isinstance(t, torch.Tensor) else t for t in inputs)))


def _cross_entropy_loss(input, target, weight=None, reduction=1, ignore_index=-100, label_smoothing=0.0):
    # (PyTorch's nll_loss refuses a weight that requires grad: its decomposition raises that error)
    if not (_plain(input, target, weight) and input.dtype in _FLOATS and not target.requires_grad
            and (weight is None or not weight.requires_grad)):
        return aten.cross_entropy_loss.default.decompose(input, target, weight, reduction, ignore_index,
                                                         label_smoothing)

    def run(x, t, w):
        return wg.nn.functional.cross_entropy(x, t, w, ignore_index=ignore_index, reduction=_REDUCTIONS[reduction],
                                              label_smoothing=label_smoothing)
    return _apply(run, input, target, weight)


def _linear(input, weight, bias=None):
    if not (_plain(input, weight, bias) and input.dtype in _FLOATS and input.dtype == weight.dtype and input.dim()
            and (bias is None or bias.dtype == input.dtype)):
        return aten.linear.default.decompose(input, weight, bias)
    return _apply(wg.nn.functional.linear, input, weight, bias)


def _layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    if not (_plain(input, weight, bias) and input.dtype in _FLOATS
            and all(t is None or t.dtype == input.dtype for t in (weight, bias))):
        return aten.layer_norm.default.decompose(input, normalized_shape, weight, bias, eps, cudnn_enable)

    def run(x, w, b):
        return wg.nn.functional.layer_norm(x, tuple(normalized_shape), w, b, eps)
    return _apply(run, input, weight, bias)


def _rms_norm(input, normalized_shape, weight=None, eps=None):
    if not (_plain(input, weight) and input.dtype in _FLOATS and (weight is None or weight.dtype == input.dtype)):
        return aten.rms_norm.default.decompose(input, normalized_shape, weight, eps)

    def run(x, w):
        return wg.nn.functional.rms_norm(x, tuple(normalized_shape), w, eps)
    return _apply(run, input, weight)


def _scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None,
                                  enable_gqa=False):
    if not (_plain(query, key, value, attn_mask) and query.dtype in _FLOATS and query.dtype == key.dtype == value.dtype
            and (attn_mask is None or not attn_mask.requires_grad)):
        return aten.scaled_dot_product_attention.default.decompose(
            query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)

    def run(q, k, v, mask):
        return wg.nn.functional.scaled_dot_product_attention(q, k, v, mask, dropout_p, is_causal, scale, enable_gqa)
    # (the fused kernels' backward reads the output, as PyTorch's flash and memory-efficient kernels save theirs)
    return _apply(run, query, key, value, attn_mask, reads_output=True)


def _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    stats = (running_mean, running_var)
    if not (_plain(input, weight, bias, *stats) and input.dtype in _FLOATS and input.dim() >= 2 and momentum is not None
            and all(t is None or (t.dtype == torch.float32 and t.is_contiguous()) for t in (weight, bias, *stats))
            and not any(t is not None and t.requires_grad for t in stats)):
        return aten.batch_norm.default.decompose(input, weight, bias, running_mean, running_var, training, momentum,
                                                 eps, cudnn_enabled)
    for t in stats:
        if t is not None:
            st.forget_scalars(t)  # (updated in place on the device when training)

    def run(x, w, b, mean, var):
        return wg.nn.functional.batch_norm(x, mean, var, w, b, training, momentum, eps)
    return _apply(run, input, weight, bias, running_mean, running_var, updated=(3, 4))


def _conv2d(input, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    if not (_plain(input, weight, bias) and input.dtype in _FLOATS and input.dim() == 4 and weight.dim() == 4
            and all(t is None or t.dtype == input.dtype for t in (weight, bias))):
        return aten.conv2d.default.decompose(input, weight, bias, stride, padding, dilation, groups)

    def run(x, w, b):
        return wg.nn.functional.conv2d(x, w, b, tuple(stride), tuple(padding), tuple(dilation), groups)
    return _apply(run, input, weight, bias)


def _max_pool2d(input, kernel_size, stride=(), padding=(0, 0), dilation=(1, 1), ceil_mode=False):
    if not (_plain(input) and input.dtype in _FLOATS and input.dim() == 4):
        return aten.max_pool2d.default.decompose(input, kernel_size, stride, padding, dilation, ceil_mode)

    def run(x):
        return wg.nn.functional.max_pool2d(x, tuple(kernel_size), tuple(stride) or None, tuple(padding),
                                           tuple(dilation), ceil_mode)
    return _apply(run, input)


_LIB.impl("cross_entropy_loss", _cross_entropy_loss, "AutogradPrivateUse1")
_LIB.impl("conv2d", _conv2d, "AutogradPrivateUse1")
_LIB.impl("max_pool2d", _max_pool2d, "AutogradPrivateUse1")
_LIB.impl("batch_norm", _batch_norm, "AutogradPrivateUse1")
_LIB.impl("linear", _linear, "AutogradPrivateUse1")
_LIB.impl("layer_norm", _layer_norm, "AutogradPrivateUse1")
_LIB.impl("rms_norm", _rms_norm, "AutogradPrivateUse1")
_LIB.impl("scaled_dot_product_attention", _scaled_dot_product_attention, "AutogradPrivateUse1")
