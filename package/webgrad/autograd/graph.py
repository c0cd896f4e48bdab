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
           "save_on_cpu", "saved_tensors_hooks"]
