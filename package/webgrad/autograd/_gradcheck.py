"""torch.autograd.gradcheck / gradgradcheck: a function's analytical gradients (the engine's backward passes,
one per output element; with check_forward_ad, autograd.forward_ad's tangents, one per input element) against
central finite differences, for the inputs that require grad.

Use float64 inputs on the CPU: in float32 the finite differences alone are off by more than the tolerances.
"""

import warnings

from .. import _tensor, dtypes
from .._autograd import no_grad
from .._tensor import Tensor


class GradcheckError(RuntimeError):
    """Raised by gradcheck and gradgradcheck when the gradients do not match (torch's class)."""


def _tensors(x):
    if isinstance(x, Tensor):
        return (x,)
    return tuple(x)


def _outputs(func, inputs):
    out = func(*inputs)
    outs = (out,) if isinstance(out, Tensor) else tuple(out)
    return tuple(o for o in outs if isinstance(o, Tensor))


def _numerical(func, inputs, wrt, eps):
    """jac[i][j]: a list of columns (one per element of input wrt[j]) of d out_i / d x, flattened."""
    # (grad mode stays on, the inputs keep requires_grad: gradgradcheck's function differentiates inside)
    base = tuple(t.detach().requires_grad_(t.requires_grad) if isinstance(t, Tensor) else t for t in inputs)
    columns = None
    for j, index in enumerate(wrt):
        x = base[index].detach()
        n = x.numel()
        eye = _tensor.eye(n, dtype=x.dtype, device=x.device) if n else None
        for k in range(n):
            step = eye[k].reshape(x.shape) * eps
            moved = [(x + step).requires_grad_(), (x - step).requires_grad_()]
            plus, minus = (tuple(o.detach() for o in _outputs(func, base[:index] + (m,) + base[index + 1:]))
                           for m in moved)
            if columns is None:
                columns = [[[] for _ in wrt] for _ in plus]
            for i, (p, m) in enumerate(zip(plus, minus)):
                columns[i][j].append(((p.double() - m.double()) / (2 * eps)).reshape(-1))
    return columns


def _analytical(func, inputs, wrt, create_graph=False):
    """jac[i][j]: a list of columns (one per element of input wrt[j]) of d out_i / d x, by backward passes."""
    from . import grad
    outs = _outputs(func, inputs)
    targets = [inputs[i] for i in wrt]
    jac = []
    for out in outs:
        n = out.numel()
        rows = [[] for _ in wrt]
        if out.requires_grad and out.dtype.is_floating:
            eye = _tensor.eye(n, dtype=out.dtype, device=out.device) if n else None
            for k in range(n):
                grads = grad(out, targets, eye[k].reshape(out.shape), retain_graph=True, allow_unused=True,
                             create_graph=create_graph)
                for j, g in enumerate(grads):
                    rows[j].append(g.double().reshape(-1) if g is not None else
                                   _tensor.zeros(targets[j].numel(), dtype=dtypes.float64, device=targets[j].device))
        else:
            rows = [[_tensor.zeros(t.numel(), dtype=dtypes.float64, device=t.device) for _ in range(n)] for t in targets]
        jac.append(rows)
    return jac, outs


def _jvp(func, inputs, index, tangent):
    """The tangents of func's outputs (zeros where one has none) for `tangent` on input `index` alone."""
    from . import forward_ad
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(inputs[index], tangent)
        args = tuple(dual if i == index else x for i, x in enumerate(inputs))  # (gradgradcheck differentiates them)
        outs = _outputs(func, args)
        tangents = [forward_ad.unpack_dual(o).tangent for o in outs]
    return tuple(_tensor.zeros_like(o) if t is None else t for t, o in zip(tangents, outs))


def _forward_problem(func, inputs, wrt, eps, atol, rtol, batched):
    """A message where the Jacobian autograd.forward_ad gives differs from finite differences (or, with
    `batched`, where a batch of tangents under vmap differs from each tangent alone); None where all agree."""
    from ..func import vmap
    from ..ops.shape import stack
    from ..random import randn_like
    outs = _outputs(func, inputs)
    if not outs:
        return None
    numerical = _numerical(func, inputs, wrt, eps)
    for j, index in enumerate(wrt):
        x = inputs[index]
        eye = _tensor.eye(x.numel(), dtype=x.dtype, device=x.device) if x.numel() else None
        columns = [_jvp(func, inputs, index, eye[k].reshape(x.shape)) for k in range(x.numel())]
        for i, out in enumerate(outs):
            if not out.dtype.is_floating:
                continue
            num = _matrix(numerical[i][j], out.numel(), x.numel(), by_rows=False)
            a = _matrix([c[i].double().reshape(-1) for c in columns], out.numel(), x.numel(), by_rows=False)
            if bool(((a - num).abs() > atol + rtol * num.abs()).any()):
                return (f"Jacobian computed with forward mode mismatch for output {i} with respect to input {index},\n"
                        f"numerical:{num.T}\nanalytical:{a.T}\n")
        if batched:
            tangents = [randn_like(x) for _ in range(2)]
            expected = [stack(shards) for shards in zip(*(_jvp(func, inputs, index, t) for t in tangents))]
            try:
                result = vmap(lambda t: _jvp(func, inputs, index, t))(stack(tangents))
            except RuntimeError as error:
                return f"While computing batched gradients, got: {error}\n\n{_BATCHED_GRAD_HINT}"
            for res, exp in zip(result, expected):
                if not bool(res.allclose(exp)):
                    return (f"For output {index} and input {index}:\n\n{_BATCHED_GRAD_HINT}\n\nGot:\n{res}\n\n"
                            f"Expected:\n{exp}")
    return None


_BATCHED_GRAD_HINT = ("gradcheck or gradgradcheck failed while testing batched gradient computation (the gradients "
                      "of a batch of seeds under vmap against those of each seed alone). Call gradcheck/gradgradcheck "
                      "with `check_batched_grad=False` to skip this test.")


def _batched_grad_problem(inputs, wrt, out, output_index):
    """A message where the gradients of two random seeds for `out`, taken at once under vmap, differ from those
    of each seed alone (as PyTorch's test of batched gradients); None where they agree."""
    from ..func import vmap
    from ..ops.shape import stack
    from ..random import randn_like
    from . import grad
    targets = [inputs[i] for i in wrt]

    def vjp(seed):
        grads = grad(out, targets, seed, retain_graph=True, allow_unused=True)
        return tuple(_tensor.zeros_like(t) if g is None else g for g, t in zip(grads, targets))

    seeds = [randn_like(out) for _ in range(2)]
    expected = [stack(shards) for shards in zip(*(vjp(seed) for seed in seeds))]
    try:
        result = vmap(vjp)(stack(seeds))
    except RuntimeError as error:
        return f"While computing batched gradients, got: {error}\n\n{_BATCHED_GRAD_HINT}"
    for input_index, (res, exp) in enumerate(zip(result, expected)):
        if not bool(res.allclose(exp)):
            return (f"For output {output_index} and input {input_index}:\n\n{_BATCHED_GRAD_HINT}\n\nGot:\n{res}\n\n"
                    f"Expected:\n{exp}")
    return None


def _matrix(vectors, n_rows, n_cols, by_rows):
    from ..ops.shape import stack
    if not vectors:
        return _tensor.zeros((n_rows, n_cols), dtype=dtypes.float64)
    m = stack(vectors).cpu()
    return m if by_rows else m.T


def _fail(msg, raise_exception):
    if raise_exception:
        raise GradcheckError(msg)
    return False


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_batched_forward_grad=False, check_forward_ad=False, check_backward_ad=True, fast_mode=False,
              masked=None):
    """True if func's gradients with respect to the inputs that require grad match finite differences (each
    element within atol + rtol * |numerical|); else GradcheckError naming the output, the input and both
    Jacobians (or False, raise_exception=False). check_backward_ad: the backward passes' Jacobian;
    check_forward_ad: the one autograd.forward_ad gives, a column per input element. check_batched_grad (and
    check_batched_forward_grad): also compare the gradients (tangents) of a batch of two random seeds taken at
    once under webgrad.func.vmap with those of each seed alone."""
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad to be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError("Setting check_batched_grad=True requires check_backward_ad to be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError("Setting check_batched_forward_grad=True requires check_forward_ad to be True")
    inputs = _tensors(inputs) if isinstance(inputs, (Tensor, tuple, list)) else (inputs,)
    wrt = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not wrt:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of the them "
                         "have requires_grad=True.")
    for i in wrt:
        if inputs[i].dtype is not dtypes.float64:
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating point. This check "
                          "will likely fail if all the inputs are not of double precision floating point. ",
                          UserWarning, stacklevel=2)
    if check_forward_ad:
        problem = _forward_problem(func, inputs, wrt, eps, atol, rtol, check_batched_forward_grad)
        if problem:
            return _fail(problem, raise_exception)
    if not check_backward_ad:
        return True
    analytical, outs = _analytical(func, inputs, wrt)
    if not outs:
        return True
    numerical = _numerical(func, inputs, wrt, eps)
    for i, out in enumerate(outs):
        if not out.dtype.is_floating:
            continue
        for j, index in enumerate(wrt):
            n_in, n_out = inputs[index].numel(), out.numel()
            a = _matrix(analytical[i][j], n_out, n_in, by_rows=True)  # [out, in]
            num = _matrix(numerical[i][j], n_out, n_in, by_rows=False)  # columns -> [out, in]
            if tuple(a.shape) != tuple(num.shape):
                a = a.reshape(num.shape)
            bad = ((a - num).abs() > atol + rtol * num.abs()).any()
            if bool(bad):
                return _fail(f"Jacobian mismatch for output {i} with respect to input {index},\n"
                             f"numerical:{num.T}\nanalytical:{a.T}\n", raise_exception)
        if check_batched_grad and out.dtype.is_floating and out.requires_grad:
            problem = _batched_grad_problem(inputs, wrt, out, i)
            if problem:
                return _fail(problem, raise_exception)
    again, _ = _analytical(func, inputs, wrt)  # the same backward twice must agree (within nondet_tol)
    for first, second in zip(analytical, again):
        for xs, ys in zip(first, second):
            for x, y in zip(xs, ys):
                if bool(((x - y).abs() > nondet_tol).any()):
                    return _fail("Backward is not reentrant, i.e., running backward with same input and grad_output "
                                 "multiple times gives different values, although analytical gradient matches "
                                 f"numerical gradient.The tolerance for nondeterminism was {nondet_tol}.",
                                 raise_exception)
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False, masked=False):
    """gradcheck of the function (inputs, grad_outputs) -> the gradients of func's outputs against grad_outputs
    (random, requiring grad, where not given): the second derivatives against finite differences of the first."""
    from . import grad
    from ..random import randn_like
    if check_batched_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_batched_grad=True requires check_rev_over_rev to be True")
    inputs = _tensors(inputs) if isinstance(inputs, (Tensor, tuple, list)) else (inputs,)
    if grad_outputs is None:
        with no_grad():
            outs = _outputs(func, inputs)
        grad_outputs = tuple(randn_like(o).requires_grad_(True) for o in outs if o.dtype.is_floating)
    else:
        grad_outputs = _tensors(grad_outputs)
    n_in = len(inputs)
    wrt = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]

    def first_derivatives(*args):
        xs, seeds = args[:n_in], args[n_in:]
        outs = [o for o in _outputs(func, xs) if o.dtype.is_floating]
        pairs = [(o, s) for o, s in zip(outs, seeds) if o.requires_grad]
        targets = [xs[i] for i in wrt]
        grads = grad([o for o, _ in pairs], targets, [s for _, s in pairs], create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_derivatives, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol, check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad,
                     check_forward_ad=check_fwd_over_rev, check_backward_ad=check_rev_over_rev, fast_mode=fast_mode,
                     masked=masked)
