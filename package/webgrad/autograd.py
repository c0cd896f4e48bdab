"""webgrad.autograd, as torch.autograd: grad modes, and custom differentiable ops (``Function``).

The engine itself is ``_autograd.py``; this is the public namespace.

Custom ops:

    class LeakyReLU(webgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x, alpha):
            ctx.save_for_backward(x)
            ctx.alpha = alpha
            return ...                       # any computation: webgrad ops, a webgrad.webgpu.Kernel
        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad_x, None              # one gradient (or None) per forward argument

    y = LeakyReLU.apply(x, 0.01)

forward runs without recording a graph (its inner ops are invisible to autograd); its one output
tensor becomes a node whose backward is yours. backward runs without recording as well (no
higher-order gradients, as everywhere in webgrad).
"""

from ._autograd import enable_grad, is_grad_enabled, no_grad, record, set_grad_enabled  # noqa: F401  (grad modes)
from ._anomaly import detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled, set_detect_anomaly  # noqa: F401
from ._tensor import Tensor
from ._legacy import Variable  # noqa: F401  (torch.autograd.Variable(t) is t detached, as modern PyTorch)


class FunctionCtx:
    """What forward leaves for backward: save_for_backward(...) -> saved_tensors, plus any attribute."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.saved_tensors = ()

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors


class Function:
    """Subclass with static forward(ctx, *args) and backward(ctx, grad); call as Cls.apply(*args)."""

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError("a Function subclass must define forward(ctx, *args)")

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError("a Function subclass must define backward(ctx, grad) to be differentiated")

    @classmethod
    def apply(cls, *args):
        ctx = FunctionCtx(tuple(isinstance(a, Tensor) and a.requires_grad for a in args))
        with no_grad():
            out = cls.forward(ctx, *args)
        if not isinstance(out, Tensor):
            raise TypeError(f"{cls.__name__}.forward must return one Tensor, not {type(out).__name__}")
        if any(out is a for a in args):
            out = out.detach()  # a node of its own, even when forward hands an input back

        def backward_fn(grad):
            grads = cls.backward(ctx, grad)
            grads = grads if isinstance(grads, tuple) else (grads,)
            if len(grads) != len(args):
                raise RuntimeError(f"{cls.__name__}.backward returned {len(grads)} gradients; forward took "
                                   f"{len(args)} arguments (return None for those without one)")
            for i, (a, g) in enumerate(zip(args, grads)):
                if g is not None and isinstance(a, Tensor) and tuple(g.shape) != tuple(a.shape):
                    raise RuntimeError(f"{cls.__name__}.backward: gradient {i} has shape {tuple(g.shape)}, "
                                       f"its input has shape {tuple(a.shape)}")
            return grads

        return record(out, cls.__name__, args, backward_fn)
