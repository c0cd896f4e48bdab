"""torch.func's differentiating transforms: grad, grad_and_value, vjp, jvp, jacrev, jacfwd and hessian, by
webgrad's reverse-mode engine (autograd.grad; Jacobian rows from autograd.functional).

Each transform runs `func` on stand-ins of the differentiated arguments: fresh leaves that require grad, or,
where an argument already carries a graph that an enclosing computation differentiates, a view that keeps
that graph. The results stay differentiable inside another transform (grad(grad(f)), jacfwd(jacrev(f)),
grad(vmap(grad(f)))), and where a differentiated argument requires grad and grad mode is on when the
transform is called (regular autograd outside, as a level of its own); anywhere else they are detached, as
torch.func unwraps them. One difference: at the outermost transform, tensors that func closes over (a
module's own parameters) are constants to the results, where torch.func's results would also carry their
graph; pass such tensors as arguments (functional_call) to differentiate through them. A result kept
differentiable is built with create_graph=True, so it needs the second derivatives of func's ops.

Forward mode is computed by reverse mode: jvp differentiates the vjp u -> u^T J in u (the double-backward
trick, as autograd.functional.jvp), and jacfwd builds the same Jacobian as jacrev, one backward pass per
output element. The values equal torch.func's; only the cost differs (jacfwd's is that of jacrev). jvp runs func
at a level of autograd.forward_ad, its primals dual tensors, so that a custom autograd.Function that defines jvp()
(and perhaps no backward) gives its outputs' tangents itself, as PyTorch's.
"""

import functools

from .._autograd import enable_grad, is_grad_enabled
from .._tensor import Tensor, ones_like, zeros_like
from ..autograd import forward_ad as _forward_ad
from ..autograd import functional as _functional
from ..autograd import grad as _autograd_grad
from . import _pytree
from ._vmap import check_randomness_arg, randomness_mode

# How many differentiating transforms are running their function now: a transform called inside another keeps
# its results differentiable, since the enclosing one differentiates them.
_running = [0]


def _slice_argnums(args, argnums, as_tuple=True):
    """The arguments at argnums (an int: that argument, or a 1-tuple where as_tuple; a tuple: a tuple)."""
    if not isinstance(argnums, (int, tuple)) or isinstance(argnums, bool):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    argnums = _wrap_argnums(argnums, len(args))
    if isinstance(argnums, int):
        return (args[argnums],) if as_tuple else args[argnums]
    return tuple(args[i] for i in argnums)


def _wrap_argnum(argnum, num_args):
    if not isinstance(argnum, int):
        raise RuntimeError(f"argnum must be int, got: {type(argnum)}")
    if -num_args <= argnum < num_args:
        return argnum % num_args
    raise RuntimeError(f"Got argnum={argnum}, but only {num_args} positional inputs")


def _wrap_argnums(argnums, num_args):
    if isinstance(argnums, int):
        return _wrap_argnum(argnums, num_args)
    wrapped = tuple(_wrap_argnum(a, num_args) for a in argnums)
    if not wrapped:
        raise RuntimeError("argnums must be non-empty")
    if len(set(wrapped)) != len(wrapped):
        raise RuntimeError(f"argnums elements must be unique, got {argnums}")
    return wrapped


def _replace_args(args, new, argnums):
    argnums = _wrap_argnums(argnums, len(args))
    if isinstance(argnums, int):
        return tuple(new if i == argnums else a for i, a in enumerate(args))
    return tuple(new[argnums.index(i)] if i in argnums else a for i, a in enumerate(args))


class _Run:
    """func(*args, **kwargs) with stand-ins for the arguments at argnums (all of them where argnums is None).

    leaves: the stand-ins, flattened (spec rebuilds their tree); output, aux: what func returned;
    connected: whether the results must stay differentiable (see the module's docstring)."""

    def __init__(self, func, args, kwargs, argnums, has_aux, api):
        outer_grad = is_grad_enabled()
        differentiated = args if argnums is None else _slice_argnums(args, argnums, as_tuple=False)
        flat, self.spec = _pytree.flatten(differentiated)
        for x in flat:
            if not isinstance(x, Tensor):
                raise ValueError(f"Thing passed to transform API must be Tensor, got {type(x)}")
        _running[0] += 1
        try:
            with enable_grad():  # a transform differentiates func whatever the grad mode outside it
                self.leaves = [x.view_as(x) if outer_grad and x.requires_grad else x.detach().requires_grad_(True)
                               for x in flat]
                stand_ins = _pytree.unflatten(self.leaves, self.spec)
                output = func(*(stand_ins if argnums is None else _replace_args(args, stand_ins, argnums)), **kwargs)
        finally:
            _running[0] -= 1
        self.aux = None
        if has_aux:
            if not (isinstance(output, tuple) and len(output) == 2):
                raise RuntimeError(f"{api}: output of function f should be a tuple: (output, aux) if has_aux is True")
            output, self.aux = output
        self.output = output
        self.connected = outer_grad and (_running[0] > 0 or any(x.requires_grad for x in flat))

    def finish(self, tree):
        """tree with its tensors detached unless the results stay differentiable."""
        if self.connected:
            return tree
        return _pytree.tree_map(lambda x: x.detach() if isinstance(x, Tensor) else x, tree)


def _check_tensor_outputs(flat_output, api):
    if not flat_output or (len(flat_output) == 1 and flat_output[0] is None):
        raise RuntimeError(f"{api}: Expected f to be a function that has non-empty output (got output = "
                           f"{flat_output})")
    for out in flat_output:
        if not isinstance(out, Tensor):
            raise RuntimeError(f"{api}: expected f(*primals) to return only tensors, got unsupported type "
                               f"{type(out)}")


def _grads(outputs, inputs, seeds, create_graph, retain_graph=True):
    """d(sum of outputs . seeds)/d(input) for each input, zeros where an input is not reached (as torch.func)."""
    pairs = [(o, s) for o, s in zip(outputs, seeds) if o.requires_grad]
    if not pairs:
        return [zeros_like(t) for t in inputs]
    with enable_grad():
        grads = _autograd_grad([o for o, _ in pairs], inputs, [s for _, s in pairs], retain_graph=retain_graph,
                               create_graph=create_graph, allow_unused=True)
    return [zeros_like(t) if g is None else g for g, t in zip(grads, inputs)]


def _grad_and_value(func, argnums, has_aux, args, kwargs):
    api = "grad_and_value(f)(*args)"
    run = _Run(func, args, kwargs, argnums, has_aux, api)
    output = run.output
    if not isinstance(output, Tensor):
        raise RuntimeError(f"{api}: Expected f(*args) to return a Tensor, got {type(output)}")
    if output.dim() != 0:
        raise RuntimeError(f"{api}: Expected f(*args) to return a scalar Tensor, got tensor with {output.dim()} "
                           "dims. Maybe you wanted to use the vjp or jacrev APIs instead?")
    grads = _grads([output], run.leaves, [ones_like(output)], run.connected, retain_graph=run.connected)
    grad_input = run.finish(_pytree.unflatten(grads, run.spec))
    value = run.finish(output)
    return grad_input, ((value, run.finish(run.aux)) if has_aux else value)


def grad_and_value(func, argnums=0, has_aux=False):
    """A function that returns (the gradient of func at its arguments argnums, func's value), as
    torch.func.grad_and_value. func returns a scalar tensor (and aux where has_aux: then the value is
    (output, aux)); argnums: an int (the gradient has that argument's structure, a tensor or a pytree such as
    a dict of parameters) or a tuple of ints (a tuple of those). The arguments are not modified and no .grad
    is touched."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return _grad_and_value(func, argnums, has_aux, args, kwargs)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """A function that returns the gradient of func (a scalar tensor) with respect to its arguments argnums,
    as torch.func.grad; with has_aux, (gradient, aux). Nests: grad(grad(f)) is the second derivative."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        gradient, value = _grad_and_value(func, argnums, has_aux, args, kwargs)
        return (gradient, value[1]) if has_aux else gradient
    return wrapper


def vjp(func, *primals, has_aux=False):
    """(func(*primals), vjp_fn), as torch.func.vjp: vjp_fn(cotangents) (a pytree of func's output's structure)
    returns the vector-Jacobian products, a tuple with one entry per primal; it may be called many times.
    With has_aux, (output, vjp_fn, aux)."""
    api = "vjp(f, *primals)"
    run = _Run(func, primals, {}, None, has_aux, api)
    flat_output, output_spec = _pytree.flatten(run.output)
    _check_tensor_outputs(flat_output, api)
    for out in flat_output:
        if not out.dtype.is_floating:
            raise RuntimeError(f"vjp(f, ...): All outputs of f must be floating-point or complex Tensors, got Tensor "
                               f"with dtype {out.dtype}")

    def vjp_fn(cotangents, retain_graph=True, create_graph=None):
        flat_cotangents, cotangents_spec = _pytree.flatten(cotangents)
        if cotangents_spec != output_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree structure of "
                               f"outputs to the function. cotangents: {cotangents_spec}, primal output: "
                               f"{output_spec}")
        wanted = is_grad_enabled() if create_graph is None else create_graph
        keep = wanted and (run.connected or _running[0] > 0
                           or any(isinstance(c, Tensor) and c.requires_grad for c in flat_cotangents))
        result = _grads(flat_output, run.leaves, flat_cotangents, keep, retain_graph)
        return _pytree.unflatten(result, run.spec)

    output = run.finish(run.output)
    return (output, vjp_fn, run.finish(run.aux)) if has_aux else (output, vjp_fn)


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """(func(*primals), J tangents), as torch.func.jvp: primals a tuple (of pytrees of tensors), tangents of the
    same structure and shapes. Computed by reverse mode (the double-backward trick), so func's ops need
    second derivatives; with has_aux, (output, jvp_out, aux)."""
    api = "jvp(f, primals, tangents)"
    if not isinstance(primals, tuple):
        raise RuntimeError(f"{api}: Expected primals to be a tuple. E.g. it should be valid to call f(*primals).")
    flat_primals, primals_spec = _pytree.flatten(primals)
    flat_tangents, tangents_spec = _pytree.flatten(tangents)
    if primals_spec != tangents_spec:
        raise RuntimeError(f"{api}: Expected primals and tangents to have the same python structure. For example, "
                           "if primals is a tuple of 3 tensors, tangents also must be. Got primals with structure "
                           f"{primals_spec} and tangents with structure {tangents_spec}")
    for argname, flat in (("primals", flat_primals), ("tangents", flat_tangents)):
        if not flat:
            raise RuntimeError(f"{api}: Expected {argname} to contain at least one Tensor.")
        for x in flat:
            if not isinstance(x, Tensor):
                raise RuntimeError(f"{api}: Expected {argname} to only contain Tensors, got {type(x)}")
    for p, t in zip(flat_primals, flat_tangents):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError("Trying to set a forward gradient that has a different size than that of the original "
                               f"Tensor, this is not supported. Tensor is of size {list(p.shape)} while the given "
                               f"forward gradient is of size {list(t.shape)}.")
    if _forward_ad._levels:  # inside forward AD already (a jvp of a jvp): by reverse mode alone
        run = _Run(func, primals, {}, None, has_aux, api)
        flat_output, output_spec, keep, products = _jvp_products(run, flat_tangents, api, None)
    else:
        with _forward_ad.dual_level():
            duals = _forward_ad._levels[-1]["duals"]

            def func_of_duals(*stand_ins):  # the stand-ins are dual tensors, for a custom Function's jvp()
                duals.extend((leaf, leaf, t) for leaf, t in zip(_pytree.flatten(stand_ins)[0], flat_tangents))
                return func(*stand_ins)
            run = _Run(func_of_duals, primals, {}, None, has_aux, api)
            flat_output, output_spec, keep, products = _jvp_products(run, flat_tangents, api, duals)
    if strict and any(p is None for p in products):
        raise RuntimeError("jvp(f, primals, tangents, strict=True): The output of f is independent of the inputs. "
                           "This is not allowed with strict=True.")
    products = [zeros_like(o) if p is None else p for p, o in zip(products, flat_output)]
    output = run.finish(run.output)
    jvp_out = _pytree.unflatten(products, output_spec)
    jvp_out = jvp_out if keep else _pytree.tree_map(lambda x: x.detach(), jvp_out)
    return (output, jvp_out, run.finish(run.aux)) if has_aux else (output, jvp_out)


def _jvp_products(run, flat_tangents, api, duals):
    """(flat output, its spec, keep, J t per output or None where it depends on no primal) of jvp's run.
    duals: the forward AD level's dual tensors where func ran at one: when a custom Function with jvp() made some of
    its own, the tangents are forward AD's (its walk stops at those outputs, whose Function may have no backward)."""
    flat_output, output_spec = _pytree.flatten(run.output)
    _check_tensor_outputs(flat_output, api)
    keep = run.connected or (is_grad_enabled() and any(t.requires_grad for t in flat_tangents))
    if duals is not None and len(duals) > len(run.leaves):
        products = [_forward_ad._tangent(o, duals) if o.requires_grad else None for o in flat_output]
        return flat_output, output_spec, keep, products
    with enable_grad():
        # J t = d/du <u^T J, t> for any u: the vjp with a seed u that requires grad, differentiated in u
        seeds = [zeros_like(o).requires_grad_(True) for o in flat_output]
        vjps = _grads(flat_output, run.leaves, seeds, create_graph=True)
        used = [(g, t) for g, t in zip(vjps, flat_tangents) if g.requires_grad]
        products = [None] * len(seeds)
        if used:
            products = _autograd_grad([g for g, _ in used], seeds, [t for _, t in used], retain_graph=True,
                                      create_graph=keep, allow_unused=True)
    return flat_output, output_spec, keep, products


def _jacobian(func, argnums, has_aux, args, api):
    """The Jacobian of func's outputs (a pytree) with respect to the arguments at argnums: for each output
    leaf, a tensor of shape out.shape + in.shape per differentiated input, in that input's structure."""
    run = _Run(func, args, {}, argnums, has_aux, api)
    flat_output, output_spec = _pytree.flatten(run.output)
    _check_tensor_outputs(flat_output, api)
    with enable_grad():
        rows = _functional._jacobian_rows(flat_output, run.leaves, run.connected, False)
    jacobian = _pytree.unflatten([_pytree.unflatten(row, run.spec) for row in rows], output_spec)
    jacobian = run.finish(jacobian)
    return (jacobian, run.finish(run.aux)) if has_aux else jacobian


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """A function that returns the Jacobian of func with respect to its arguments argnums, by reverse mode
    (one backward pass per output element), as torch.func.jacrev: output pytree of (argnums' structure) of
    tensors of shape out.shape + in.shape. chunk_size (rows per batched pass in PyTorch) changes no value
    here: the rows are always computed one at a time."""
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    @functools.wraps(func)
    def wrapper(*args):
        return _jacobian(func, argnums, has_aux, args, "vjp(f, *primals)")
    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """torch.func.jacfwd: the Jacobian of func with respect to its arguments argnums, of jacrev's structure.
    Computed by reverse mode (its values equal torch's forward-mode ones). randomness: as vmap's, over the
    one call of func ('error' refuses a random op inside; 'same' and 'different' allow it, and since func
    runs once every column sees the same draws)."""
    check_randomness_arg(randomness)

    @functools.wraps(func)
    def wrapper(*args):
        with randomness_mode(randomness):
            return _jacobian(func, argnums, has_aux, args, "jvp(f, primals, tangents)")
    return wrapper


def hessian(func, argnums=0):
    """The Hessian of func with respect to its arguments argnums, as torch.func.hessian: jacfwd(jacrev(func))."""
    return jacfwd(jacrev(func, argnums), argnums)


def linearize(func, *primals):
    """(func(*primals), jvp_fn), as torch.func.linearize: jvp_fn(*tangents) is J tangents at primals (tangents
    of the primals' structure and shapes). PyTorch traces the linear map once; here each call of jvp_fn runs
    jvp again (func included), so its values are the same and its cost is a jvp's."""
    output = func(*primals)
    flat_primals, primals_spec = _pytree.flatten(primals)

    def jvp_fn(*tangents):
        flat_tangents, tangents_spec = _pytree.flatten(tangents)
        if tangents_spec != primals_spec:
            raise RuntimeError(f"Expected the tangents {tangents_spec} to have the same argspec as the primals "
                               f"{primals_spec}")
        for i, (p, t) in enumerate(zip(flat_primals, flat_tangents)):
            for what in ("shape", "device", "dtype"):
                if getattr(t, what) != getattr(p, what):
                    raise RuntimeError(f"tangent:{i} with {what} {getattr(t, what)} in flattened pytree doesn't "
                                       f"match the {what} {getattr(p, what)} of the corresponding primal.")
        return jvp(func, primals, tangents)[1]

    return output, jvp_fn
