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

forward runs without recording a graph (its inner ops are invisible to autograd); its output tensors
become one node whose backward is yours. backward records a graph only under create_graph=True
(then written with webgrad ops, it can be differentiated again). As PyTorch's ctx: mark_non_differentiable
(a sort's indices), set_materialize_grads(False) (None instead of zeros for an output no gradient reached),
mark_dirty (forward modified an input in place and returns it).

Gradients without touching .grad: ``webgrad.autograd.grad(outputs, inputs, create_graph=...)``, as
torch.autograd.grad (a gradient penalty differentiates its result again; see _autograd.run_backward).
"""

from .. import _autograd
from .._autograd import enable_grad, is_grad_enabled, no_grad, record, set_grad_enabled  # noqa: F401  (grad modes)
from .._anomaly import detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled, set_detect_anomaly  # noqa: F401
from .._tensor import Tensor, zeros as _zeros
from ..ops.shape import cat as _cat
from .._legacy import Variable  # noqa: F401  (torch.autograd.Variable(t) is t detached, as modern PyTorch)


class FunctionCtx:
    """What forward leaves for backward and jvp: save_for_backward(...) -> saved_tensors (through the saved tensors
    hooks of webgrad.autograd.graph active when the Function ran), save_for_forward(...) -> saved_tensors inside
    jvp, plus any attribute."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.to_save = ()  # save_for_backward's tensors, until apply saves them (packs them, under hooks)
        self._saved = ()  # the saved tensors, or under hooks (unpack_hook, pack_hook's result) pairs
        self._packed = False
        self._for_forward = None  # save_for_forward's tensors while jvp runs, else None
        self.materialize_grads = True  # backward gets zeros (True) or None for an output no gradient reached
        self.dirty_tensors = ()  # inputs forward modified in place (mark_dirty)
        self.non_differentiable = ()  # outputs that take no gradient (mark_non_differentiable)

    def save_for_backward(self, *tensors):
        self.to_save = tensors
        self._saved, self._packed = tensors, False

    def save_for_forward(self, *tensors):
        self.saved_for_forward = tensors

    def mark_dirty(self, *args):
        """The inputs forward modified in place; it must return them. Each returned one is the input itself, its
        version counted once more and its grad_fn this Function's node, as PyTorch's."""
        self.dirty_tensors = args

    def mark_non_differentiable(self, *args):
        """Outputs that take no gradient (a sort's indices): they do not require grad, and backward gets zeros
        for them (None after set_materialize_grads(False))."""
        self.non_differentiable = args

    def set_materialize_grads(self, value):
        """False: backward gets None, instead of zeros, for an output whose gradient was not computed."""
        self.materialize_grads = bool(value)

    @property
    def saved_tensors(self):
        if self._for_forward is not None:
            return self._for_forward
        if self._packed:  # each access unpacks again, as PyTorch's
            return tuple(_autograd.unpack_saved(pair) for pair in self._saved)
        return self._saved

    @saved_tensors.setter
    def saved_tensors(self, tensors):
        self._saved, self._packed = tuple(tensors), False

    def _save(self):
        """Apply's save of what forward passed to save_for_backward: packed by the innermost saved tensors hooks
        when some are active (PyTorch packs them as its node is made, after forward)."""
        if _autograd.saved_hooks_active() and self._saved:
            self._saved = tuple(None if t is None else _autograd.pack_saved(t) for t in self._saved)
            self._packed = True


class Function:
    """Subclass with static forward and backward (or jvp, for forward AD); call as Cls.apply(*args).

    forward(ctx, *args), or forward(*args) with setup_context(ctx, inputs, output) (PyTorch's two styles);
    backward(ctx, *output grads) -> one gradient (or None) per argument; jvp(ctx, *input tangents) -> the
    output's tangent, called by autograd.forward_ad when a dual tensor enters apply (a tensor argument without a
    tangent gets zeros, any other argument None)."""

    @staticmethod
    def forward(*args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("You must implement the jvp function for custom autograd.Function to use it with "
                                  "forward mode AD.")

    vjp = backward

    @classmethod
    def apply(cls, *args):
        ctx = FunctionCtx(tuple(isinstance(a, Tensor) and a.requires_grad for a in args))
        with no_grad():
            if cls.setup_context is Function.setup_context:
                out = cls.forward(ctx, *args)
            else:
                out = cls.forward(*args)
                cls.setup_context(ctx, args, out)
        tangents = forward_ad._input_tangents(args) if forward_ad._levels and cls.jvp is not Function.jvp else None
        backward = _checked_backward(cls, ctx, args, forward_ad_boundary=tangents is not None)
        if isinstance(out, tuple) and all(isinstance(o, Tensor) for o in out) and out:
            _mark_dirty(ctx, args, out)
            result = _apply_several(cls, ctx, args, out, backward)
            _bump_dirty(ctx, result)
        elif not isinstance(out, Tensor):
            raise TypeError(f"{cls.__name__}.forward must return a Tensor or a tuple of Tensors, not "
                            f"{type(out).__name__}")
        else:
            _mark_dirty(ctx, args, (out,))
            if any(out is t for t in ctx.non_differentiable):
                result = out.detach()
            else:
                if any(out is a for a in args) and not _kept(ctx, out):
                    out = out.detach()  # a node of its own, even when forward hands an input back
                result = record(out, cls.__name__ + ".", args, backward)  # (PyTorch names its node FnBackward)
            _bump_dirty(ctx, (result,))
        if is_grad_enabled() and any(ctx.needs_input_grad):
            ctx._save()
        if tangents is not None:
            _forward_tangents(cls, ctx, tangents, result)
        return result


def _mark_dirty(ctx, args, outs):
    """PyTorch's checks of ctx.mark_dirty's tensors once forward returned: each must be an input (a leaf that
    requires grad cannot be modified in place while grad mode is on) and returned."""
    for t in ctx.dirty_tensors:
        if not any(t is o for o in outs):
            raise RuntimeError("Some elements marked as dirty during the forward method were not returned as output. "
                               "The inputs that are modified inplace must all be outputs of the Function.")
        if is_grad_enabled() and t.requires_grad and t.grad_fn is None and any(t is a for a in args):
            raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")


def _kept(ctx, out):
    """Whether apply returns output `out` itself: a dirty input, unless grad mode is off and it requires grad (then
    PyTorch returns a detached alias of it)."""
    return any(out is d for d in ctx.dirty_tensors) and (is_grad_enabled() or not out.requires_grad)


def _bump_dirty(ctx, outs):
    """Count the write of each dirty input (PyTorch bumps its version once more than forward's own in-place op),
    after the node took it as an input: its node is current, and a view of it or its base made before is stale."""
    for t in ctx.dirty_tensors:
        _autograd.note_write(t._view.storage, graph=t.requires_grad)
    if ctx.dirty_tensors:
        for o in outs:
            if o.grad_fn is not None:
                o.grad_fn.clock = _autograd.clock()


def _forward_tangents(cls, ctx, tangents, result):
    """Forward AD through a Function with jvp (PyTorch's): its outputs become dual tensors whose tangents are
    jvp(ctx, *input tangents), ctx.saved_tensors being what forward passed to save_for_forward."""
    ctx._for_forward = tuple(getattr(ctx, "saved_for_forward", ()))
    try:
        out_tangents = cls.jvp(ctx, *tangents)
    finally:
        ctx._for_forward = None
    outs = result if isinstance(result, tuple) else (result,)
    out_tangents = out_tangents if isinstance(out_tangents, tuple) else (out_tangents,)
    if len(out_tangents) != len(outs):
        raise RuntimeError(f"{cls.__name__}.jvp returned {len(out_tangents)} tangents; forward returned "
                           f"{len(outs)} outputs")
    for o, t in zip(outs, out_tangents):
        if t is not None and o.requires_grad:
            forward_ad._register_output(o, t)


def _checked_backward(cls, ctx, args, forward_ad_boundary=False):
    """The node's backward: cls.backward(ctx, *output grads), its gradients checked against the arguments.
    forward_ad_boundary: the outputs are dual tensors with the tangents of cls.jvp, so forward AD's walk back
    through the graph (autograd.forward_ad's) stops here instead of adding the inputs' tangents twice."""
    user_backward = cls.vjp if cls.backward is Function.backward else cls.backward
    # the arguments' shapes, not the arguments: the closure holds only what ctx saved (saved tensors hooks see it)
    shapes = tuple(tuple(a.shape) if isinstance(a, Tensor) else None for a in args)

    def backward_fn(*grad):
        if forward_ad_boundary and forward_ad._walking:
            return (None,) * len(shapes)
        grads = user_backward(ctx, *grad)
        grads = grads if isinstance(grads, tuple) else (grads,)
        if len(grads) > len(shapes) and all(g is None for g in grads[len(shapes):]):
            grads = grads[:len(shapes)]  # extra Nones are let pass, as PyTorch's (one per optional argument)
        if len(grads) != len(shapes):
            raise RuntimeError(f"{cls.__name__}.backward returned {len(grads)} gradients; forward took "
                               f"{len(shapes)} arguments (return None for those without one)")
        for i, (shape, g) in enumerate(zip(shapes, grads)):
            if g is not None and shape is not None and tuple(g.shape) != shape:
                raise RuntimeError(f"{cls.__name__}.backward: gradient {i} has shape {tuple(g.shape)}, "
                                   f"its input has shape {shape}")
        return grads
    return backward_fn


def _apply_several(cls, ctx, args, outs, one):
    """A forward that returns several tensors, as PyTorch's: one node whose backward gets one gradient per output
    (zeros for an output that took none, or None after ctx.set_materialize_grads(False); an integer or
    non-differentiable output always gets that). The differentiable outputs are laid end to end in one tensor,
    the node's, and each returned output is a view of its piece, so the gradients of all of them meet there; a
    saved output (ctx.save_for_backward of a tensor it returns) is that view, so a backward written with it can be
    differentiated again (create_graph). A dirty input (ctx.mark_dirty) is returned itself, in its view's place
    in the graph. A tensor returned twice is one output, at its last place (backward gets zeros at the others)."""
    last = {id(o): i for i, o in enumerate(outs)}
    non_differentiable = {i for i, o in enumerate(outs) if any(o is t for t in ctx.non_differentiable)}
    floating = [i for i, o in enumerate(outs)
                if o.dtype.is_floating and i not in non_differentiable and last[id(o)] == i]
    if len({outs[i].dtype for i in floating}) > 1:
        raise TypeError(f"{cls.__name__}.forward returned floating tensors of several dtypes "
                        f"({', '.join(str(outs[i].dtype) for i in floating)}): webgrad needs them of one")
    results = [o if _kept(ctx, o) else o.detach() if last[id(o)] == i else None for i, o in enumerate(outs)]
    if not floating or not is_grad_enabled() or not any(getattr(a, "requires_grad", False) for a in args):
        return tuple(results[last[id(o)]] for o in outs)
    with no_grad():
        packed = _cat([outs[i].reshape(-1) for i in floating])
    shapes = [tuple(o.shape) for o in outs]
    kinds = [(o.dtype, o.device) for o in outs]  # (not the outputs: the closure holds only what ctx saved)
    count = len(outs)
    starts = [0]
    for i in floating:
        starts.append(starts[-1] + outs[i].numel())
    reached = set()  # the outputs whose gradient this backward pass computed (their views' nodes ran)

    def backward_fn(grad):
        pieces = {i: grad[starts[k]:starts[k + 1]].view(shapes[i]) for k, i in enumerate(floating)
                  if ctx.materialize_grads or i in reached}
        reached.clear()
        if ctx.materialize_grads:
            non_differentiable_zeros = getattr(ctx, "_materialize_non_diff_grads", True)
            for i in range(count):
                if i not in pieces and (non_differentiable_zeros or i not in non_differentiable):
                    pieces[i] = _zeros(shapes[i], dtype=kinds[i][0], device=kinds[i][1])
        return one(*(pieces.get(i) for i in range(count)))
    record(packed, cls.__name__ + ".", args, backward_fn)
    views = list(results)
    for k, i in enumerate(floating):
        views[i] = packed[starts[k]:starts[k + 1]].view(shapes[i])
        views[i].grad_fn.name = cls.__name__ + "."  # (PyTorch's outputs all name the Function's node: FnBackward)
        _autograd.add_node_hook(views[i].grad_fn, lambda g, i=i: reached.add(i))
    ctx.saved_tensors = tuple(next((views[last[id(o)]] for o in outs if t is o), t) for t in ctx._saved)
    for i in floating:
        if results[i] is outs[i]:  # a dirty input: itself, where the view is in the graph
            results[i].grad_fn, results[i].requires_grad = views[i].grad_fn, True
        else:
            results[i] = views[i]
    return tuple(results[last[id(o)]] for o in outs)


def _as_tuple(x, name):
    if isinstance(x, Tensor):
        return (x,)
    if isinstance(x, (list, tuple)) and all(isinstance(t, Tensor) for t in x):
        return tuple(x)
    raise TypeError(f"grad(): {name} must be a Tensor or a sequence of Tensors, got {type(x).__name__}")


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of `outputs` with respect to `inputs` (a tuple, one per input), as torch.autograd.grad:
    grad_outputs are the seeds (None for a scalar output: 1); no tensor's .grad changes. create_graph: the
    gradients get a graph of their own, to be differentiated again (WGAN-GP's gradient penalty);
    retain_graph defaults to it. An input the outputs do not depend on raises unless allow_unused (then
    None) or materialize_grads (then zeros).

    is_grads_batched: the first dimension of each seed is a batch of seeds, and each gradient gets that
    dimension too (the vector-Jacobian products of every seed, as rows of a Jacobian). PyTorch runs one
    batched backward pass; webgrad runs webgrad.func.vmap over the seeds, one backward pass per seed."""
    outputs, inputs = _as_tuple(outputs, "outputs"), _as_tuple(inputs, "inputs")
    if allow_unused is None:
        allow_unused = materialize_grads
    elif materialize_grads and not allow_unused:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    else:
        grad_outputs = (grad_outputs,) if isinstance(grad_outputs, Tensor) else tuple(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(f"grad can be implicitly created only for scalar outputs; got {len(grad_outputs)} "
                           f"grad_outputs for {len(outputs)} outputs")
    for i, t in enumerate(inputs):
        if not t.requires_grad:
            raise RuntimeError(f"One of the differentiated Tensors (input {i}) does not require grad")
    seeds = []
    for i, (out, seed) in enumerate(zip(outputs, grad_outputs)):
        if not out.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        if seed is None:
            if out.numel() != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs (output {i} has shape "
                                   f"{list(out.shape)})")
            seed = out._full_like_value(1.0)
        else:
            seed_shape = tuple(seed.shape)[1:] if is_grads_batched else tuple(seed.shape)
            if seed_shape != tuple(out.shape):
                if is_grads_batched:
                    raise RuntimeError("If `is_grads_batched=True`, we interpret the first dimension of each "
                                       "grad_output as the batch dimension. The sizes of the remaining dimensions "
                                       "are expected to match the shape of corresponding output, but a mismatch "
                                       f"was detected: grad_output[{i}] has a shape of {seed_shape} and output[{i}] "
                                       f"has a shape of {tuple(out.shape)}. If you only want some tensors in "
                                       "`grad_output` to be considered batched, consider using vmap.")
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {tuple(seed.shape)} and "
                                   f"output[{i}] has a shape of {tuple(out.shape)}.")
        seeds.append(seed)
    keep = create_graph if retain_graph is None else bool(retain_graph)
    if is_grads_batched:
        grads = _batched_grads(outputs, inputs, seeds, keep, bool(create_graph))
    else:
        grads = _autograd.grad(list(zip(outputs, seeds)), inputs, retain_graph=keep, create_graph=bool(create_graph))
    result = []
    for t, g in zip(inputs, grads):
        if g is None:
            if not allow_unused:
                raise RuntimeError("One of the differentiated Tensors appears to not have been used in the graph. "
                                   "Set allow_unused=True if this is the desired behavior.")
            if materialize_grads:
                g = t._full_like_value(0.0)  # of the input's shape, also when batched (as PyTorch's)
        result.append(g)
    return tuple(result)


def _batched_grads(outputs, inputs, seeds, retain_graph, create_graph):
    """The gradients for each slice of the seeds along their first dimension, stacked along it (a seed grad made
    for a scalar output is mapped too, which vmap refuses, as PyTorch's); None for an input not reached. Every
    pass but the last keeps the graph, as PyTorch's one batched pass does."""
    from ..func import vmap
    unreached = [False] * len(inputs)
    passes = [0]
    size = seeds[0].shape[0] if seeds and seeds[0].dim() else 0

    def one_pass(*slice_seeds):
        passes[0] += 1
        grads = _autograd.grad(list(zip(outputs, slice_seeds)), inputs,
                               retain_graph=retain_graph or passes[0] < size, create_graph=create_graph)
        for j, g in enumerate(grads):
            unreached[j] = g is None
        return tuple(t._full_like_value(0.0) if g is None else g for g, t in zip(grads, inputs))

    stacked = vmap(one_pass)(*seeds)
    return [None if gone else g for g, gone in zip(stacked, unreached)]


from . import functional  # noqa: E402,F401  (torch.autograd.functional: jacobian, hessian, vjp, jvp, ...)
from ._gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: E402,F401
from . import forward_ad  # noqa: E402,F401  (torch.autograd.forward_ad: dual tensors, by reverse mode)
from . import function  # noqa: E402,F401  (torch.autograd.function: once_differentiable)
from . import graph  # noqa: E402,F401  (torch.autograd.graph: saved tensors hooks, Node)
