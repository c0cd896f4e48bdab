"""webgrad.autograd.functional, as torch.autograd.functional: Jacobians, Hessians and their products of a
function of tensors, by reverse-mode passes of the engine (one autograd.grad pass per output element for a
Jacobian; jvp by the double-backward trick, as PyTorch computes it without forward-mode AD).

Each function takes `func` (tensors in, a tensor or a tuple of tensors out) and `inputs` (a tensor or a tuple
of them); results have the structure of PyTorch's: a tensor where both sides are single tensors, tuples where
they are tuples. create_graph: the results keep a graph (to be differentiated again); else they are detached.
strict: an output that does not depend on an input raises, instead of giving zeros. vectorize (jacobian,
hessian): the rows through autograd.grad(is_grads_batched=True), which maps webgrad.func.vmap over the seeds:
the same values and the same number of backward passes as without it.
"""

from .. import _tensor
from .._autograd import enable_grad
from .._tensor import Tensor


def _as_tuple(x, arg_name, fn_name):
    is_tuple = isinstance(x, tuple)
    items = x if is_tuple else (x,)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            where = f"The {arg_name} given to {fn_name}" + (f" at index {i}" if is_tuple else "")
            raise TypeError(f"{where} must be either a Tensor or a tuple of Tensors but the value at index {i} has "
                            f"type {type(t)}.")
    return is_tuple, items


def _grad_preprocess(inputs, create_graph):
    """The inputs as tensors of their own that require grad: detached copies' views (or, under create_graph, views
    that keep the inputs' own graph, so the results can be differentiated with respect to what made them)."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t.view_as(t))
        else:
            out.append(t.detach().requires_grad_(True))
    return tuple(out)


def _postprocess(results, create_graph):
    if isinstance(results, tuple):
        return tuple(_postprocess(r, create_graph) for r in results)
    if results is None or create_graph:
        return results
    return results.detach()


def _call(func, inputs, fn_name):
    with enable_grad():
        out = func(*inputs)
    is_tuple, outputs = _as_tuple(out, "outputs of the user-provided function", fn_name)
    return is_tuple, outputs


def _validate_v(v, other, is_other_tuple, fn_name):
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for i, (a, b) in enumerate(zip(v, other)):
        if tuple(a.shape) != tuple(b.shape):
            prefix = f"Entry {i} in " if is_other_tuple else ""
            raise RuntimeError(f"{prefix}v has invalid size: should be {list(b.shape)} but got {list(a.shape)}.")


def _grad(outputs, inputs, grad_outputs, create_graph, strict, stage):
    """autograd.grad of the sum over outputs (each with its seed) for each input, None where not reached; strict:
    refuse an input no output depends on."""
    from . import grad as autograd_grad
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        grads = (None,) * len(inputs)
    else:
        grads = autograd_grad([o for o, _ in pairs], inputs, [g for _, g in pairs], retain_graph=True,
                              create_graph=create_graph, allow_unused=True)
    if strict:
        for i, g in enumerate(grads):
            if g is None:
                raise RuntimeError(f"The {stage} of the user-provided function is independent of input {i}. This "
                                   "is not allowed in strict mode.")
    return grads


def _fill_zeros(grads, like):
    return tuple(g if g is not None else _tensor.zeros_like(t) for g, t in zip(grads, like))


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product at `inputs`; v may be None for a single-element output."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph)
        is_outputs_tuple, outputs = _call(func, inputs, "vjp")
        if v is not None:
            _, v = _as_tuple(v, "v", "vjp")
            _validate_v(v, outputs, is_outputs_tuple, "vjp")
        else:
            if len(outputs) != 1 or outputs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the user-provided function returns a single "
                                   "Tensor with a single element.")
            v = (_tensor.ones_like(outputs[0]),)
        grads = _fill_zeros(_grad(outputs, inputs, v, create_graph, strict, "output"), inputs)
    outputs = _postprocess(outputs, create_graph)
    grads = _postprocess(grads, create_graph)
    return (outputs if is_outputs_tuple else outputs[0]), (grads if is_inputs_tuple else grads[0])


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product, by differentiating the vjp u -> u^T J in u (the
    double-backward trick: it needs the backward of func's ops to be differentiable)."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph)
        if v is not None:
            _, v = _as_tuple(v, "v", "jvp")
            _validate_v(v, inputs, is_inputs_tuple, "jvp")
        else:
            if len(inputs) != 1 or inputs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the input to the user-provided function is a "
                                   "single Tensor with a single element.")
            v = (_tensor.ones_like(inputs[0]),)
        is_outputs_tuple, outputs = _call(func, inputs, "jvp")
        u = tuple(_tensor.zeros_like(o).requires_grad_(True) for o in outputs)
        grad_u = _grad(outputs, inputs, u, True, strict, "output")
        used = [(g, vi) for g, vi in zip(grad_u, v) if g is not None and g.requires_grad]
        if used:
            grads = _grad([g for g, _ in used], u, [vi for _, vi in used], create_graph, strict, "backward")
        else:
            grads = (None,) * len(u)
        grads = _fill_zeros(grads, outputs)
    outputs = _postprocess(outputs, create_graph)
    grads = _postprocess(grads, create_graph)
    return (outputs if is_outputs_tuple else outputs[0]), (grads if is_outputs_tuple else grads[0])


def _jacobian_rows(outputs, inputs, create_graph, strict):
    """rows[i][j]: d outputs[i] / d inputs[j], of shape outputs[i].shape + inputs[j].shape."""
    rows = []
    for i, out in enumerate(outputs):
        n = out.numel()
        per_input = [[] for _ in inputs]
        eye = _tensor.eye(n, dtype=out.dtype, device=out.device) if n else None
        for k in range(n):
            seed = eye[k].reshape(out.shape)
            grads = _grad((out,), inputs, (seed,), create_graph, False, "output")
            for j, g in enumerate(grads):
                if g is None:
                    if strict:
                        raise RuntimeError(f"Output {i} of the user-provided function is independent of input {j}. "
                                           "This is not allowed in strict mode.")
                    g = _tensor.zeros_like(inputs[j])
                per_input[j].append(g)
        from ..ops.shape import stack
        row = []
        for j, gs in enumerate(per_input):
            shape = tuple(out.shape) + tuple(inputs[j].shape)
            if gs:
                row.append(stack(gs).reshape(shape))
            else:
                row.append(_tensor.zeros(shape, dtype=inputs[j].dtype, device=inputs[j].device))
        rows.append(tuple(row))
    return rows


def _vectorized_rows(outputs, inputs, create_graph):
    """_jacobian_rows' result by one autograd.grad call with is_grads_batched (as PyTorch's vectorize=True):
    the seeds are the rows of an identity matrix over all outputs' elements, split by output."""
    from . import grad as autograd_grad
    from ..ops.shape import split
    numels = [o.numel() for o in outputs]
    total = sum(numels)
    like = outputs[0] if outputs else inputs[0]
    basis = split(_tensor.eye(total, dtype=like.dtype, device=like.device), numels, dim=1) if total else \
        [_tensor.zeros((0, n), dtype=like.dtype, device=like.device) for n in numels]
    pairs = [(o.reshape(-1), seed.to(o.dtype)) for o, seed in zip(outputs, basis) if o.requires_grad]
    grads = [None] * len(inputs)
    if pairs and total:
        grads = autograd_grad([o for o, _ in pairs], inputs, [s for _, s in pairs], retain_graph=create_graph,
                              create_graph=create_graph, allow_unused=True, is_grads_batched=True)
    rows = [[] for _ in outputs]
    for j, (g, x) in enumerate(zip(grads, inputs)):
        if g is None:
            g = _tensor.zeros((total,) + tuple(x.shape), dtype=x.dtype, device=x.device)
        for i, piece in enumerate(split(g, numels, dim=0)):
            rows[i].append(piece.reshape(tuple(outputs[i].shape) + tuple(x.shape)))
    return [tuple(row) for row in rows]


def _check_strategy(vectorize, strategy, create_graph, strict):
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
                             'function has more outputs than inputs, "forward-mode" tends to be more performant. '
                             'Otherwise, prefer to use "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError('torch.autograd.functional.jacobian: `create_graph=True` and `strategy='
                                      '"forward-mode"` are not supported together (yet). Please either set '
                                      '`create_graph=False` or `strategy="reverse-mode"`.')
        if strict:
            raise RuntimeError('torch.autograd.functional.jacobian: `strict=True` and `strategy="forward-mode"` are '
                               'not supported together (yet). Please either set `strict=False` or `strategy='
                               '"reverse-mode"`.')
        if not vectorize:
            raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse Hessian is only "
                                      "implemented for `vectorize=True`.")
    elif vectorize and strict:
        raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
                           "supported together. Please either set `strict=False` or `vectorize=False`.")


def _rows(outputs, inputs, create_graph, strict, vectorize):
    if vectorize:
        return _vectorized_rows(outputs, inputs, create_graph)
    return _jacobian_rows(outputs, inputs, create_graph, strict)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of func at inputs: for output i and input j a tensor of shape out_i.shape + in_j.shape,
    nested as torch's (a tensor, a tuple over inputs or outputs, or a tuple of tuples).

    vectorize: the rows come from one autograd.grad call with is_grads_batched (webgrad.func.vmap over the
    identity's rows: one backward pass per row, as without it). strategy="forward-mode" (with vectorize, as
    PyTorch requires) gives the same Jacobian, computed by the same reverse-mode passes."""
    _check_strategy(vectorize, strategy, create_graph, strict)
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph)
        is_outputs_tuple, outputs = _call(func, inputs, "jacobian")
        rows = _rows(outputs, inputs, create_graph, strict, vectorize)
    rows = [_postprocess(r, create_graph) for r in rows]
    if strategy == "forward-mode" and is_inputs_tuple:  # PyTorch's forward mode nests lists here, not tuples
        rows = [list(r) for r in rows]
        return rows if is_outputs_tuple else rows[0]
    rows = [r if is_inputs_tuple else r[0] for r in rows]
    return tuple(rows) if is_outputs_tuple else rows[0]


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar func at inputs: a tensor of shape in.shape + in.shape for a single input, else
    H[i][j] (a tuple of tuples) for inputs i and j. vectorize and outer_jacobian_strategy: as jacobian's."""
    _check_strategy(vectorize, outer_jacobian_strategy, create_graph, strict)
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*inp):
        out = func(*inp)
        is_out_tuple, outs = _as_tuple(out, "outputs of the user-provided function", "hessian")
        if is_out_tuple or outs[0].numel() != 1:
            raise RuntimeError("The function given to hessian should return a single Tensor with a single element.")
        grads = _grad(outs, inp, (_tensor.ones_like(outs[0]),), True, strict, "output")
        return tuple(g if g is not None else _tensor.zeros_like(t) for g, t in zip(grads, inp))

    with enable_grad():
        inputs = _grad_preprocess(inputs, create_graph)
        grads = gradient(*inputs)
        rows = _rows(grads, inputs, create_graph, strict, vectorize)
    rows = [_postprocess(r, create_graph) for r in rows]
    if not is_inputs_tuple:
        return rows[0][0]
    if outer_jacobian_strategy == "forward-mode":  # lists, as PyTorch's forward mode nests them
        return [list(r) for r in rows]
    return tuple(rows)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H) for a scalar func."""
    return _hessian_product(func, inputs, v, create_graph, strict, "vhp")


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v) for a scalar func (H symmetric: the same values as vhp, as PyTorch's, computed the
    same way)."""
    return _hessian_product(func, inputs, v, create_graph, strict, "hvp")


def _hessian_product(func, inputs, v, create_graph, strict, name):
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", name)
        inputs = _grad_preprocess(inputs, create_graph)
        if v is not None:
            _, v = _as_tuple(v, "v", name)
            _validate_v(v, inputs, is_inputs_tuple, name)
        else:
            if len(inputs) != 1 or inputs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the input to the user-provided function is a "
                                   "single Tensor with a single element.")
            v = (_tensor.ones_like(inputs[0]),)
        is_out_tuple, outputs = _call(func, inputs, name)
        if is_out_tuple or outputs[0].numel() != 1:
            raise RuntimeError(f"The function given to {name} should return a single Tensor with a single element.")
        grads = _grad(outputs, inputs, (_tensor.ones_like(outputs[0]),), True, strict, "output")
        used = [(g, vi) for g, vi in zip(grads, v) if g is not None and g.requires_grad]
        if used:
            second = _grad([g for g, _ in used], inputs, [vi for _, vi in used], create_graph, strict,
                           "double backward")
        else:
            if strict:
                raise RuntimeError("The jacobian of the user-provided function is independent of input 0. This is "
                                   "not allowed in strict mode.")
            second = (None,) * len(inputs)
        second = _fill_zeros(second, inputs)
    out = _postprocess(outputs[0], create_graph)
    second = _postprocess(second, create_graph)
    return out, (second if is_inputs_tuple else second[0])
