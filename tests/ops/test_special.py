"""Elementwise math and torch.special (the op table's records, ops/elementwise_math.py, webgrad.special) against
PyTorch on every device: values over wide ranges and at special points (NaN, infinities, signed zeros, poles),
gradients (PyTorch's formulas, its zeros for piecewise-constant ops, its errors where it has no derivative),
dtypes and promotion, bad input."""

import re
import subprocess
import sys

import numpy as np
import pytest

import webgrad
from helpers import PACKAGE_DIR, ROOT
from webgrad.ops import table

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)
# a wide sweep: a grid over [-40, 40], random points in [-10, 10], and tiny to moderate magnitudes of both signs
SWEEP = np.concatenate([
    np.linspace(-40, 40, 801), RNG.uniform(-10, 10, 400), 10 ** RNG.uniform(-6, 1.6, 200),
    -(10 ** RNG.uniform(-6, 1.6, 200)), [0.5, 1.0, 2.0, 3.0, -0.5, -1.5, 1.4616321, 8.0, -8.0, 2.0 + 1e-6],
]).astype(np.float32)
SPECIALS = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-30, -1e-30, 88.0, -88.0, 1e-4, -1e-4, 0.7, -2.5]

UNARY = ["acos", "asin", "acosh", "asinh", "atanh", "sinh", "cosh", "erfc", "erfinv", "lgamma", "digamma", "i0",
         "sinc", "logit", "frac", "deg2rad", "rad2deg", "sgn"]
SPECIAL_UNARY = ["entr", "erfcx", "ndtr", "log_ndtr", "ndtri", "i0e", "i1", "i1e", "bessel_j0", "bessel_j1",
                 "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
                 "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0",
                 "airy_ai"]
POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
               "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
               "laguerre_polynomial_l", "legendre_polynomial_p"]


def _tol(device):
    return (2e-5, 1e-6) if device == "cpu" else (5e-5, 1e-6)


def assert_matches(ours, theirs, rtol, atol, what=""):
    """Values within rtol/atol, and NaN, +inf and -inf exactly where torch has them."""
    a = ours.detach().numpy().astype(np.float64) if isinstance(ours, webgrad.Tensor) else np.asarray(ours, np.float64)
    b = theirs.detach().numpy().astype(np.float64) if isinstance(theirs, torch.Tensor) else np.asarray(theirs)
    assert a.shape == b.shape, what
    for name, test in (("NaN", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        bad = test(a) != test(b)
        assert not bad.any(), f"{what}: {name} differs at {np.argwhere(bad)[0]}: ours {a[bad][0]}, torch {b[bad][0]}"
    fin = np.isfinite(b)
    np.testing.assert_allclose(a[fin], b[fin], rtol=rtol, atol=atol, err_msg=what)


def _ours(name):
    return getattr(webgrad.special, name) if name in SPECIAL_UNARY or name in POLYNOMIALS else getattr(webgrad, name)


def _theirs(name):
    return getattr(torch.special, name) if name in SPECIAL_UNARY or name in POLYNOMIALS else getattr(torch, name)


# ---------------------------------------------------------------------------------------------------- values
@pytest.mark.parametrize("name", UNARY + SPECIAL_UNARY)
def test_unary_over_a_wide_range(name, device):
    rtol, atol = _tol(device)
    # (Ai below -12: torch's float32 phase 2/3 |x|^3/2 is off by its rounding, some 1e-6 of the amplitude)
    x = SWEEP[SWEEP > -12] if name == "airy_ai" else SWEEP
    assert_matches(_ours(name)(webgrad.tensor(x, device=device)), _theirs(name)(torch.tensor(x)), rtol, atol, name)
    assert_matches(_ours(name)(webgrad.tensor(SPECIALS, device=device)), _theirs(name)(torch.tensor(SPECIALS)),
                   rtol, atol, f"{name} at special values")


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_polygamma_over_a_wide_range(n, device):
    # away from the poles (where float32 sin(pi x) leaves torch a finite value) and, below 0, from the
    # cancellation between the terms beside them (float32 zeta sums them term by term)
    x = SWEEP[(SWEEP > 0) | (np.abs(SWEEP - np.round(SWEEP)) > 0.2)]
    rtol = 2e-5 if device == "cpu" else 1e-3
    assert_matches(webgrad.polygamma(n, webgrad.tensor(x, device=device)), torch.polygamma(n, torch.tensor(x)),
                   rtol, 1e-6, f"polygamma({n})")
    assert_matches(webgrad.polygamma(n, webgrad.tensor([0.0, -0.0, float("inf"), float("nan"), 1e-30], device=device)),
                   torch.polygamma(n, torch.tensor([0.0, -0.0, float("inf"), float("nan"), 1e-30])), rtol, 1e-6)


def test_poles_are_infinite_where_torch_is_inaccurate(device):
    # trigamma at a negative integer is a pole; torch's float32 sin(pi x) is not 0 there, so torch gives a
    # large finite number: ours is inf (as torch's float64 would be, up to its own sin)
    out = webgrad.polygamma(1, webgrad.tensor([-3.0, -40.0], device=device)).tolist()
    assert out == [float("inf"), float("inf")]
    assert webgrad.lgamma(webgrad.tensor([-3.0, 0.0, -0.0], device=device)).tolist() == [float("inf")] * 3
    assert webgrad.digamma(webgrad.tensor([0.0, -0.0], device=device)).tolist() == [-float("inf"), float("inf")]


_PAIRS = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-30, 0.5, 2.5, -3.0, 7.0]


@pytest.mark.parametrize("name", ["copysign", "fmod", "xlogy", "heaviside", "fmax", "fmin", "nextafter",
                                  "logaddexp2", "igamma", "igammac", "xlog1py", "zeta"])
def test_binary_at_special_pairs(name, device):
    a, b = np.meshgrid(np.array(_PAIRS, np.float32), np.array(_PAIRS, np.float32))
    a, b = a.ravel(), b.ravel()
    ours = getattr(webgrad.special if name in ("xlog1py", "zeta") else webgrad, name)
    theirs = getattr(torch.special if name in ("xlog1py", "zeta") else torch, name)
    rtol, atol = _tol(device)
    assert_matches(ours(webgrad.tensor(a, device=device), webgrad.tensor(b, device=device)),
                   theirs(torch.tensor(a), torch.tensor(b)), rtol, atol, name)


@pytest.mark.parametrize("name", ["igamma", "igammac", "zeta", "fmod", "logaddexp2", "xlogy"])
def test_binary_over_a_range(name, device):
    a = RNG.uniform(0.05, 12, 600).astype(np.float32)
    b = RNG.uniform(0.05, 12, 600).astype(np.float32)
    if name == "zeta":
        a = a + 1.0
    if name in ("fmod", "logaddexp2", "xlogy"):
        a = (a - 6) * 3
    ours = getattr(webgrad.special if name == "zeta" else webgrad, name)
    theirs = getattr(torch.special if name == "zeta" else torch, name)
    rtol = 2e-5 if device == "cpu" else 2e-4
    assert_matches(ours(webgrad.tensor(a, device=device), webgrad.tensor(b, device=device)),
                   theirs(torch.tensor(a), torch.tensor(b)), rtol, 2e-6, name)


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_orthogonal_polynomials(name, device):
    # (no NaN x: torch's kernels return stale values there, another element's result; ours give NaN)
    x = np.array([-2.0, -1.0, -0.5, 0.0, 0.3, 0.5, 0.9, 1.0, 1.7, float("inf"), -float("inf")], np.float32)
    n = np.array([-1.0, 0.0, 1.0, 2.0, 3.7, 6.0, 7.0, 9.0, 12.0, float("nan"), float("inf")], np.float32)
    xs, ns = (v.ravel() for v in np.meshgrid(x, n))
    ours = getattr(webgrad.special, name)(webgrad.tensor(xs, device=device), webgrad.tensor(ns, device=device))
    theirs = getattr(torch.special, name)(torch.tensor(xs), torch.tensor(ns))
    assert_matches(ours, theirs, 1e-5 if device == "cpu" else 1e-4, 1e-5, name)
    # a Python number as n, and integer tensors, promote as torch's
    assert_matches(getattr(webgrad.special, name)(webgrad.tensor(x, device=device), 3),
                   getattr(torch.special, name)(torch.tensor(x), 3), 1e-5, 1e-5, f"{name}(x, 3)")


def test_round_decimals(device):
    x = RNG.uniform(-5000, 5000, 300).astype(np.float32)
    for d in (0, 1, 3, -1, -3):
        ours = webgrad.round(webgrad.tensor(x, device=device), decimals=d)
        assert_matches(ours, torch.round(torch.tensor(x), decimals=d), 1e-6, 1e-6, f"decimals={d}")
    t = webgrad.tensor([1.2345, -2.5], device=device)
    t.round_(decimals=2)
    np.testing.assert_allclose(t.numpy(), [1.23, -2.5], rtol=1e-6)
    assert webgrad.special.round(webgrad.tensor([2.5, 3.5], device=device)).tolist() == [2.0, 4.0]


def test_frexp(device):
    x = np.concatenate([SWEEP, [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1.0, 0.5, 2 ** 100]])
    x = x.astype(np.float32)
    m, e = webgrad.frexp(webgrad.tensor(x, device=device))
    tm, te = torch.frexp(torch.tensor(x))
    assert e.dtype is webgrad.int32
    assert_matches(m, tm, 0, 0, "mantissa")
    assert e.tolist() == te.tolist()
    out = webgrad.tensor(x, device=device).frexp()
    assert out.mantissa.shape == out.exponent.shape == (len(x),)


def test_integer_and_scalar_promotion(device):
    i = webgrad.tensor([1, 2, -3], dtype=webgrad.int32, device=device)
    ti = torch.tensor([1, 2, -3], dtype=torch.int32)
    for name in ("acos", "lgamma", "digamma", "i0", "sinc", "deg2rad", "erfinv", "logit"):
        assert getattr(webgrad, name)(i).dtype.name == str(getattr(torch, name)(ti).dtype).replace("torch.", "")
    for name in ("ndtr", "erfcx", "bessel_j0", "i1e"):
        assert getattr(webgrad.special, name)(i).dtype is webgrad.float32
    assert webgrad.sgn(i).tolist() == [1, 1, -1] and webgrad.sgn(i).dtype is webgrad.int32
    f = webgrad.tensor([1.5, -2.0, 3.0], device=device)
    tf = torch.tensor([1.5, -2.0, 3.0])
    cases = [("copysign", i, -1.0), ("copysign", i, i), ("fmod", i, 2), ("fmod", i, 2.5), ("fmod", i, f),
             ("xlogy", 2.0, f), ("xlogy", f, 3), ("xlogy", i, i), ("heaviside", i, i), ("fmax", i, i),
             ("fmin", i, f), ("remainder", i, 2)]
    for name, a, b in cases:
        def conv(v):
            if isinstance(v, webgrad.Tensor):
                return ti if v is i else tf
            return v
        ours, theirs = getattr(webgrad, name)(a, b), getattr(torch, name)(conv(a), conv(b))
        assert ours.dtype.name == str(theirs.dtype).replace("torch.", ""), (name, a, b)
        assert_matches(ours, theirs, 1e-6, 1e-7, name)
    assert_matches(webgrad.special.xlog1py(2.0, f), torch.special.xlog1py(2.0, tf), 1e-6, 1e-7, "xlog1py")
    assert_matches(webgrad.special.zeta(f + 1.0, 2), torch.special.zeta(tf + 1.0, 2), 1e-5, 1e-7, "zeta")


def test_integer_fmod_is_exact(device):
    a = RNG.integers(-10**6, 10**6, 200)
    b = RNG.integers(1, 1000, 200) * RNG.choice([-1, 1], 200)
    for dtype, tdtype in ((webgrad.int32, torch.int32), (webgrad.int64, torch.int64)):
        ours = webgrad.fmod(webgrad.tensor(a, dtype=dtype, device=device), webgrad.tensor(b, dtype=dtype, device=device))
        assert ours.dtype is dtype
        assert ours.tolist() == torch.fmod(torch.tensor(a, dtype=tdtype), torch.tensor(b, dtype=tdtype)).tolist()


# ---------------------------------------------------------------------------------------------------- gradients
def _grads(fn_ours, fn_theirs, arrays, device, requires=None):
    """Gradients of sum(f(*inputs) * W) in both libraries (W fixed random)."""
    requires = requires or [True] * len(arrays)
    ts = [torch.tensor(a, requires_grad=r) for a, r in zip(arrays, requires)]
    ws = [webgrad.tensor(a, device=device, requires_grad=r) for a, r in zip(arrays, requires)]
    tout, wout = fn_theirs(*ts), fn_ours(*ws)
    w = RNG.standard_normal(tuple(tout.shape)).astype(np.float32)
    (tout * torch.tensor(w)).sum().backward()
    (wout * webgrad.tensor(w, device=device)).sum().backward()
    assert_matches(wout, tout, 2e-5 if device == "cpu" else 1e-4, 1e-6, "forward")
    rtol = 1e-4 if device == "cpu" else 1e-3
    for k, (t, x, r) in enumerate(zip(ts, ws, requires)):
        if r:
            assert x.grad is not None, f"input {k} got no gradient"
            assert_matches(x.grad, t.grad, rtol, 1e-5, f"gradient of input {k}")


def _u(shape, lo, hi):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


@pytest.mark.parametrize("case", [
    ("polygamma0", lambda m, x: m.polygamma(0, x), [(0.5, 4)]),
    ("polygamma3", lambda m, x: m.polygamma(3, x), [(0.5, 4)]),
    ("polygamma_method", lambda m, x: x.polygamma(2), [(0.5, 4)]),
    ("mvlgamma3", lambda m, x: m.mvlgamma(x, 3), [(1.5, 5)]),
    ("multigammaln", lambda m, x: m.special.multigammaln(x, 2), [(1.5, 5)]),
    ("lerp_scalar", lambda m, a, b: m.lerp(a, b, 0.3), [(-2, 2), (-2, 2)]),
    ("lerp_scalar_high", lambda m, a, b: m.lerp(a, b, 0.8), [(-2, 2), (-2, 2)]),
    ("lerp_tensor", lambda m, a, b, w: m.lerp(a, b, w), [(-2, 2), (-2, 2), (-0.5, 1.5)]),
    ("clamp_min_tensor", lambda m, a, b: m.clamp_min(a, b), [(-2, 2), (-2, 2)]),
    ("clamp_max_tensor", lambda m, a, b: a.clamp_max(b), [(-2, 2), (-2, 2)]),
    ("clamp_min_scalar", lambda m, a: m.clamp_min(a, 0.3), [(-2, 2)]),
    ("rsub", lambda m, a, b: m.rsub(a, b, alpha=2), [(-2, 2), (-2, 2)]),
    ("renorm2", lambda m, a: m.renorm(a, 2, 0, 1.0), [(-2, 2)]),
    ("renorm1_dim1", lambda m, a: a.renorm(1, 1, 2.0), [(-2, 2)]),
    ("renorm_inf", lambda m, a: m.renorm(a, float("inf"), -1, 0.5), [(-2, 2)]),
    ("frexp", lambda m, a: m.frexp(a)[0], [(-50, 50)]),
    ("ldexp", lambda m, a, b: m.ldexp(a, b), [(-2, 2), (-3, 3)]),
    ("logit_eps", lambda m, a: m.logit(a, eps=0.2), [(0.01, 0.99)]),
    ("logit", lambda m, a: a.logit(), [(0.01, 0.99)]),
    ("i1e", lambda m, a: m.special.i1e(a), [(-9, 9)]),
    ("i0e", lambda m, a: m.special.i0e(a), [(-9, 9)]),
    ("i1", lambda m, a: m.special.i1(a), [(-9, 9)]),
    ("copysign", lambda m, a, b: m.copysign(a, b), [(-2, 2), (-2, 2)]),
    ("fmod", lambda m, a, b: m.fmod(a, b), [(-9, 9), (0.5, 3)]),
    ("xlogy", lambda m, a, b: m.xlogy(a, b), [(-2, 2), (0.1, 3)]),
    ("xlog1py", lambda m, a, b: m.special.xlog1py(a, b), [(-2, 2), (-0.9, 3)]),
    ("nextafter", lambda m, a, b: m.nextafter(a, b), [(-2, 2), (-2, 2)]),
    ("logaddexp2", lambda m, a, b: m.logaddexp2(a, b), [(-5, 5), (-5, 5)]),
    ("erfcx", lambda m, a: m.special.erfcx(a), [(-3, 9)]),
    ("log_ndtr", lambda m, a: m.special.log_ndtr(a), [(-9, 5)]),
    ("ndtri", lambda m, a: m.special.ndtri(a), [(0.01, 0.99)]),
    ("entr", lambda m, a: m.special.entr(a), [(0.01, 3)]),
    ("sinc", lambda m, a: m.sinc(a), [(-3, 3)]),
], ids=lambda c: c[0])
def test_gradients_match_torch(case, device):
    _, fn, domains = case
    arrays = [_u((4, 5), lo, hi) for lo, hi in domains]
    if case[0] in ("lerp_tensor", "clamp_min_tensor", "clamp_max_tensor", "copysign", "fmod", "xlogy", "xlog1py",
                   "nextafter", "logaddexp2", "ldexp", "rsub"):
        arrays[-1] = arrays[-1][:, :1] if case[0] != "lerp_tensor" else arrays[-1][0]  # broadcast the last one
    _grads(lambda *xs: fn(webgrad, *xs), lambda *xs: fn(torch, *xs), arrays, device)


def test_gradient_edge_cases(device):
    # ties in clamp_min/clamp_max with a tensor bound go to the input (torch's clamp); fmax/fmin ties to the first
    a = np.array([1.0, 2.0, 3.0, float("nan")], np.float32)
    b = np.array([1.0, 0.0, 3.0, 1.0], np.float32)
    for name in ("clamp_min", "clamp_max", "fmax", "fmin"):
        _grads(getattr(webgrad, name), getattr(torch, name), [a, b], device)
    # the limits at 0 (i1's and i1e's 0.5, sinc's 0) and xlogy's zero where x is 0
    _grads(webgrad.special.i1, torch.special.i1, [np.array([0.0, 1e-9, -1e-9], np.float32)], device)
    _grads(webgrad.special.i1e, torch.special.i1e, [np.array([0.0, 1e-9], np.float32)], device)
    _grads(webgrad.sinc, torch.sinc, [np.array([0.0, 1.0, -2.0], np.float32)], device)
    _grads(webgrad.xlogy, torch.xlogy, [np.array([0.0, 0.0, 1.0], np.float32), np.array([0.0, -1.0, 2.0], np.float32)],
           device)
    _grads(webgrad.copysign, torch.copysign, [np.array([0.0, -0.0, 2.0], np.float32), np.array([-1.0, 1.0, -0.0],
                                                                                                np.float32)], device)


@pytest.mark.parametrize("name,fn", [
    ("floor", lambda m, x, y: m.floor(x)), ("ceil", lambda m, x, y: x.ceil()), ("round", lambda m, x, y: m.round(x)),
    ("round_decimals", lambda m, x, y: m.round(x, decimals=2)), ("trunc", lambda m, x, y: m.trunc(x)),
    ("sign", lambda m, x, y: x.sign()), ("sgn", lambda m, x, y: m.sgn(x)),
    ("div_floor", lambda m, x, y: m.div(x, y, rounding_mode="floor")),
    ("div_trunc", lambda m, x, y: x.div(y, rounding_mode="trunc")),
    ("div_floor_scalar", lambda m, x, y: m.div(x, 0.7, rounding_mode="floor")),
])
def test_piecewise_constant_ops_give_zero_gradients(name, fn, device):
    x = webgrad.tensor(_u((3, 4), -5, 5), device=device, requires_grad=True)
    y = webgrad.tensor(_u((4,), 0.5, 2), device=device, requires_grad=True)
    out = fn(webgrad, x, y)
    assert out.requires_grad and out.grad_fn is not None  # as torch's: in the graph, its backward zeros
    (out * 3.0).sum().backward()
    assert x.grad is not None and x.grad.tolist() == np.zeros((3, 4)).tolist()
    tx, ty = torch.zeros(3, 4, requires_grad=True), torch.ones(4, requires_grad=True)
    fn(torch, tx, ty).sum().backward()
    if ty.grad is None:
        assert y.grad is None
    else:
        assert y.grad.tolist() == [0.0] * 4
    # nothing recorded where nothing requires grad, and integer results stay out of the graph
    assert not fn(webgrad, x.detach(), y.detach()).requires_grad


def test_no_derivative_where_torch_has_none(device):
    a = webgrad.tensor([1.0, 2.0], device=device, requires_grad=True)
    x = webgrad.tensor([0.5, 3.0], device=device, requires_grad=True)
    for fn, theirs, message in ((webgrad.igamma, torch.igamma, "igamma: input"),
                                (webgrad.igammac, torch.igammac, "igammac: input"),
                                (lambda s, q: webgrad.special.zeta(s + 1, q), lambda s, q: torch.special.zeta(s + 1, q),
                                 "zeta")):
        with pytest.raises(NotImplementedError, match=message):
            fn(a, x).sum().backward()
        with pytest.raises(NotImplementedError, match=message):
            theirs(torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([0.5, 3.0])).sum().backward()
    # the other argument's gradient is PyTorch's formula
    for name in ("igamma", "igammac"):
        _grads(getattr(webgrad, name), getattr(torch, name), [_u((6,), 0.5, 5), _u((6,), 0.1, 8)], device,
               requires=[False, True])
    _grads(webgrad.special.zeta, torch.special.zeta, [_u((6,), 1.5, 5), _u((6,), 0.1, 8)], device,
           requires=[False, True])
    with pytest.raises(RuntimeError, match="heaviside"):
        webgrad.heaviside(a, x).sum().backward()
    # no gradient history at all for the Bessel functions and polynomials, as torch
    assert not webgrad.special.bessel_j0(a).requires_grad
    assert not webgrad.special.chebyshev_polynomial_t(a, x).requires_grad
    assert not torch.special.bessel_j0(torch.ones(2, requires_grad=True)).requires_grad


# ---------------------------------------------------------------------------------------------------- errors
def test_bad_input_gets_torchs_errors(device):
    x = webgrad.tensor([1.0, 2.0], device=device)
    for call, exc, message in (
            (lambda: webgrad.polygamma(-1, x), RuntimeError, "negative n"),
            (lambda: webgrad.mvlgamma(x, 0), RuntimeError, "greater than or equal to 1"),
            (lambda: webgrad.frexp(webgrad.tensor([1, 2], device=device)), RuntimeError, "floating-point"),
            (lambda: webgrad.renorm(x, 2, 0, 1.0), RuntimeError, "at least 2 dimensions"),
            (lambda: webgrad.renorm(x.reshape(1, 2), 0, 0, 1.0), RuntimeError, "non-positive-norm"),
            (lambda: webgrad.renorm(x.reshape(1, 2), 2, 0, -1.0), RuntimeError, "maxnorm"),
            (lambda: webgrad.positive(webgrad.tensor([True], device=device)), RuntimeError, "bool"),
            (lambda: webgrad.lerp(x, webgrad.tensor([1.0, 2.0], dtype=webgrad.float16, device=device), 0.5),
             RuntimeError, "expected dtype"),
            (lambda: webgrad.copysign("a", x), TypeError, "unsupported"),
            (lambda: webgrad.frac(webgrad.tensor([1, 2], device=device)), NotImplementedError, "'Long'"),
            (lambda: webgrad.nextafter(webgrad.tensor([1], dtype=webgrad.int32, device=device),
                                       webgrad.tensor([2], dtype=webgrad.int32, device=device)),
             NotImplementedError, "'Int'"),
            (lambda: webgrad.igamma(webgrad.tensor([True], device=device), webgrad.tensor([True], device=device)),
             NotImplementedError, "'Bool'")):
        with pytest.raises(exc, match=message):
            call()


def test_positive_is_the_input_itself(device):
    x = webgrad.tensor([1.0, -2.0], device=device)
    assert webgrad.positive(x) is x and x.positive() is x


def test_reflected_operators(device):
    a, b = _u((3,), 0.5, 3), _u((3,), 0.5, 3)
    x, y = webgrad.tensor(a, device=device), webgrad.tensor(b, device=device)
    np.testing.assert_allclose(x.__rdiv__(y).numpy(), b / a, rtol=1e-6)
    np.testing.assert_allclose(x.__rmod__(y).numpy(), torch.tensor(a).__rmod__(torch.tensor(b)).numpy(), rtol=1e-5)
    np.testing.assert_allclose(x.__rmod__(2.5).numpy(), torch.tensor(a).__rmod__(2.5).numpy(), rtol=1e-5)


def test_torch_special_under_as_torch():
    code = ("import webgrad; webgrad.as_torch()\n"
            "import torch, torch.special\n"
            "from torch.special import erfcx, ndtr\n"
            "assert torch.special is webgrad.special\n"
            "x = torch.tensor([0.5, 2.0])\n"
            "print(round(ndtr(x)[0].item(), 6), round(erfcx(x)[1].item(), 6), torch.special.expit(x).shape,\n"
            "      round(torch.special.gammaln(x)[0].item(), 6), torch.special.logsumexp(x, 0).shape)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(PACKAGE_DIR), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:3] == [str(round(torch.special.ndtr(torch.tensor(0.5)).item(), 6)),
                                      str(round(torch.special.erfcx(torch.tensor(2.0)).item(), 6)),
                                      "torch.Size([2])"]  # (as_torch: reprs say torch)


def test_special_names_cover_torchs():
    ours = {n for n in dir(webgrad.special) if not n.startswith("_")}
    theirs = {n for n in dir(torch.special) if not n.startswith("_") and callable(getattr(torch.special, n))
              and not isinstance(getattr(torch.special, n), type)}
    assert theirs <= ours, sorted(theirs - ours)


# ---------------------------------------------------------------------------------------------------- the shaders
def _special_wgsl_functions():
    return set(re.findall(r"^fn (\w+)", (ROOT / "shaders" / "special.wgsl").read_text(), re.M))


def test_heavy_records_are_those_calling_special_wgsl():
    # elementwise_special.wgsl compiles the heavy records apart: a record calling special.wgsl's functions
    # that is not heavy would not compile into elementwise.wgsl, and one marked heavy without them is
    # needlessly apart
    functions = _special_wgsl_functions()
    for op in [*table.UNARY.values(), *table.BINARY.values()]:
        code = " ".join(c for c in (op.wgsl, op.grad if isinstance(op.grad, str) else "") if c)
        calls = any(re.search(rf"\b{f}\(", code) for f in functions)
        assert calls == op.heavy, op.name


def test_heavy_records_compile_apart():
    # elementwise.wgsl (every other record's module) holds no special function; a heavy record's own module
    # holds its case alone
    from webgrad._backends.webgpu import elementwise
    base = elementwise.SHADER.source()
    for fn in ("lgamma_f32", "bessel_j0_f32", "zeta_f32", "chebyshev_t_f32", "erfinv_f32"):
        assert f"fn {fn}(" not in base
    lgamma = elementwise.heavy_kernels("unary", "lgamma")[elementwise.UNARY].shader.source()
    assert "case OP_LGAMMA:" in lgamma and "case OP_DIGAMMA:" not in lgamma and "case OP_NEG:" not in lgamma
    assert "case OP_LGAMMA:" not in base and "case OP_NEG:" in base
    zeta = elementwise.heavy_kernels("binary", "zeta")
    assert "case BIN_ZETA:" in zeta[elementwise.BINARY].shader.source()
    assert elementwise.VEC4[zeta[elementwise.BINARY]].shader is zeta[elementwise.BINARY].shader


def test_fitted_coefficients_are_the_tools():
    fits = subprocess.run([sys.executable, "-m", "tools.special_fits"], capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": f"{PACKAGE_DIR}:{ROOT}", "PATH": "/usr/bin:/bin",
                               "OPENBLAS_NUM_THREADS": "1"}, timeout=300)
    assert fits.returncode == 0, fits.stderr
    shader = (ROOT / "shaders" / "special.wgsl").read_text()
    assert fits.stdout.strip() in shader
