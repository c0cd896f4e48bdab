"""torch.autograd.graph: the graph's nodes (Node; a grad_fn's register_hook and register_prehook), and hooks on
the tensors it saves for backward.

    with webgrad.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
        y = model(x)          # every tensor an op saves for backward goes through pack_hook(tensor) -> any object
    y.sum().backward()        # and its backward computes with unpack_hook(that object) -> a tensor

As PyTorch's: the innermost active hooks pack; unpack runs each time a backward (or a custom Function's
ctx.saved_tensors) reads a saved tensor; what pack returned is freed with the graph (after a backward without
retain_graph). webgrad's ops keep what their backward reads in closures (_autograd.record): under hooks those
tensors are packed as the op is recorded, and the closure lets go of them when the hooks' block ends, from when on
only pack_hook's result keeps them (save_on_cpu's device memory is then freed). Ops save what their webgrad closure
reads: the same tensors as PyTorch's nodes for linear layers, convolutions, batch norms, cross-entropy,
pooling, attention and the elementwise ops, at times one more (x * y packs both where only x requires grad, PyTorch
only y; softmax packs its input too, for its second derivative; x / y packs x), and layer_norm one fewer.
"""

import abc
import functools
from typing import NamedTuple

from .. import _autograd


class Node(abc.ABC):
    """What a tensor's grad_fn is (isinstance(t.grad_fn, Node)): a recorded op, or a leaf's AccumulateGrad."""

    @abc.abstractmethod
    def name(self):
        """The node's name, as PyTorch's ("MulBackward0")."""


Node.register(_autograd.Node)
Node.register(_autograd.AccumulateGrad)


class GradientEdge(NamedTuple):
    """Where a tensor's gradient enters the graph: the node and which of its outputs."""

    node: object
    output_nr: int


def get_gradient_edge(tensor):
    """The GradientEdge of `tensor`: its grad_fn, or for a leaf that requires grad its AccumulateGrad."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that does not require gradients")
    if tensor.grad_fn is None:
        return GradientEdge(_autograd.AccumulateGrad(tensor), 0)
    return GradientEdge(tensor.grad_fn, 0)


class _MultiHandle:
    """register_multi_grad_hook's handle: remove() takes its hook off every tensor (also as a context manager)."""

    def __init__(self, handles):
        self.handles = handles

    def remove(self):
        for handle in self.handles:
            handle.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """fn on the gradients of several tensors, once per backward pass, as PyTorch's. mode "all": fn(grads), a list
    with one gradient per tensor (None for one the pass did not compute), once the pass computed them (webgrad
    calls it as the pass ends); mode "any": fn(grad) with the first gradient of one of them the pass computes.
    Returns a handle whose remove() takes the hook off."""
    supported_modes = ("all", "any")
    if mode not in supported_modes:
        raise ValueError(f"Expects mode to be one of {supported_modes} but got {mode}")
    tensors = tuple(tensors)
    if mode == "all":
        if not all(t.requires_grad for t in tensors):
            raise AssertionError("Expected gradient function to be set")  # (PyTorch's, looking for its grad_fn)
        buffers = {}  # id(BackwardPass) -> the gradients it computed so far

        def inner_hook(index, grad):
            backward_pass = _autograd.current_pass()
            if backward_pass is None:
                raise AssertionError("expected this hook to be called inside a backward call")
            key = id(backward_pass)
            if key not in buffers:
                buffers[key] = [None] * len(tensors)
                backward_pass.callbacks.append(lambda: fn(buffers.pop(key)))
            buffers[key][index] = grad
    else:
        fired = set()  # id(BackwardPass) of the passes that called fn already

        def inner_hook(index, grad):
            backward_pass = _autograd.current_pass()
            key = id(backward_pass)
            if key in fired:
                return
            fired.add(key)
            if backward_pass is not None:
                backward_pass.callbacks.append(lambda: fired.discard(key))
            fn(grad)

    # (mode "any" passes over a tensor that does not require grad, as PyTorch's: it never gets a gradient)
    return _MultiHandle(tuple(t.register_hook(functools.partial(inner_hook, i)) for i, t in enumerate(tensors)
                              if t.requires_grad))


def increment_version(tensor):
    """Count a write into `tensor` that autograd did not see (one made through its storage by other means), so
    that a backward that saved it refuses the changed values, as after an in-place op."""
    tensors = tensor if isinstance(tensor, (list, tuple)) else (tensor,)
    for t in tensors:
        _autograd.note_write(t._view.storage)


class saved_tensors_hooks:
    """Context manager: the tensors ops save for backward inside it are packed by pack_hook(tensor) (any object)
    and given back to backward by unpack_hook(packed) (a tensor with the values saved). Blocks nest: the innermost
    hooks pack."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        _autograd.push_saved_hooks(self.pack_hook, self.unpack_hook)
        return self

    def __exit__(self, *exc):
        _autograd.pop_saved_hooks()


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors hooks that keep the tensors saved for backward in CPU memory, and move each back to its
    device when backward reads it (a WebGPU model's activations leave GPU memory). pin_memory has no effect in
    webgrad (there is no pinned memory to copy from)."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack_to_cpu(tensor):
            return tensor.device, tensor.cpu()

        def unpack_from_cpu(packed):
            device, tensor = packed
            return tensor.to(device)

        super().__init__(pack_to_cpu, unpack_from_cpu)
        self.pin_memory = pin_memory


class disable_saved_tensors_hooks:
    """Context manager in which saved tensors hooks may not be used: entering saved_tensors_hooks inside it, or
    entering it while hooks are active, raises RuntimeError(error_message)."""

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        if _autograd.SAVED_HOOKS:
            raise RuntimeError(self.error_message)
        _autograd.HOOKS_DISABLED.append(self.error_message)
        return self

    def __exit__(self, *exc):
        _autograd.HOOKS_DISABLED.pop()

    def __call__(self, fn):
        """Used as a decorator: fn runs inside the block."""
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with disable_saved_tensors_hooks(self.error_message):
                return fn(*args, **kwargs)
        return wrapped


__all__ = ["GradientEdge", "Node", "disable_saved_tensors_hooks", "get_gradient_edge", "increment_version",
           "register_multi_grad_hook", "save_on_cpu", "saved_tensors_hooks"]
