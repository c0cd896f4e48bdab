"""Second derivatives of the op table's unary ops, for gradients of gradients (create_graph=True).

A unary op's backward computes gx = K(g, xs, ys) = g * f'(x) with its derivative kernel
(elementwise._unary_grad), where xs and ys are the operands its formula reads (elementwise._kept: the input
x, the result y, or one of them in both slots). When that gradient is differentiated again (a gradient
penalty: torch.autograd.grad(..., create_graph=True), then a backward through its result), its node needs
dK/dg (the derivative kernel again: K is linear in g) and dK/dxs, dK/dys, written here with tensor
operators only, so that they are differentiable in turn.

Ops piecewise linear in x (ReLU, LeakyReLU, clamp, abs, ...) have a zero second derivative almost
everywhere, as in PyTorch. An op with no formula here raises NotImplementedError naming it, rather than
taking its derivative for a constant.
"""

import math

# K's derivative in its x operand only is zero (the formula is piecewise constant in x).
PIECEWISE_LINEAR = frozenset((
    "relu", "relu6", "hardtanh", "leaky_relu", "clamp", "abs", "neg", "hardshrink", "softshrink", "threshold",
))

_SQRT_2PI = math.sqrt(2.0 * math.pi)


def _sigmoid_slope(g, x, a):
    s = (x * a).sigmoid()
    return g * (a * s * (1.0 - s))


# g * f''(x): the derivative of K = g * f'(x) in x, for ops whose formula reads x alone
IN_X = {
    "pow": lambda g, x, a, b: g * 0.0 * x if a in (0.0, 1.0) else g * (a * (a - 1.0)) * x ** (a - 2.0),
    "square": lambda g, x, a, b: 2.0 * g,
    "sin": lambda g, x, a, b: -g * x.sin(),
    "cos": lambda g, x, a, b: -g * x.cos(),
    "log": lambda g, x, a, b: -g / (x * x),
    "log2": lambda g, x, a, b: -g / (x * x * math.log(2.0)),
    "log10": lambda g, x, a, b: -g / (x * x * math.log(10.0)),
    "log1p": lambda g, x, a, b: -g / ((1.0 + x) * (1.0 + x)),
    "atan": lambda g, x, a, b: -2.0 * g * x / ((1.0 + x * x) * (1.0 + x * x)),
    "erf": lambda g, x, a, b: g * (-4.0 / math.sqrt(math.pi)) * x * (-x * x).exp(),
    "softplus": lambda g, x, a, b: _sigmoid_slope(g, x, a) * (x * a <= b).to(g.dtype),
    "gelu": lambda g, x, a, b: g * (-0.5 * x * x).exp() / _SQRT_2PI * (2.0 - x * x),
    "silu": lambda g, x, a, b: g * (x.sigmoid() * (1.0 - x.sigmoid()) * (2.0 + x * (1.0 - 2.0 * x.sigmoid()))),
    "elu": lambda g, x, a, b: g * a * x.exp() * (x <= 0).to(g.dtype),
    "celu": lambda g, x, a, b: g / a * (x / a).exp() * (x <= 0).to(g.dtype),
}

# the derivative of K in y, for ops whose formula reads the result y alone (exp: K = g * y)
IN_Y = {
    "exp": lambda g, y, a, b: g,
    "exp2": lambda g, y, a, b: g * math.log(2.0),
    "expm1": lambda g, y, a, b: g,
    "sqrt": lambda g, y, a, b: -g / (2.0 * y * y),
    "reciprocal": lambda g, y, a, b: -2.0 * g * y,
    "sigmoid": lambda g, y, a, b: g * (1.0 - 2.0 * y),
    "tanh": lambda g, y, a, b: -2.0 * g * y,
}


# the derivatives of K in (x, y), for ops whose formula reads both (rsqrt's kernel: K = -0.5 g y^3)
IN_BOTH = {
    "rsqrt": lambda g, x, y, a, b: (None, -1.5 * g * y * y),
    "rdiv": lambda g, x, y, a, b: (2.0 * a * g / (x * x * x), None),
}


def unary_backward_backward(op, g, xs, ys, a, b, first):
    """The backward function of the node K(g, xs, ys) = g * op'(x): g2 times (dK/dg, dK/dxs, dK/dys).
    first(op, g, xs, ys, a, b): K itself (elementwise._unary_grad), which is dK/dg times g (K is linear in g)."""

    def backward(g2):
        dg = first(op, g2, xs, ys, a, b) if g.requires_grad else None
        if not (xs.requires_grad or ys.requires_grad):
            return dg, None, None
        return (dg, *_second(op, g2 * g, xs, ys, a, b))

    return backward


def _second(op, gg, xs, ys, a, b):
    """(the derivative of K in xs, in ys) times gg = g2 * g; when one operand fills both slots, all of it in
    the first."""
    if op in PIECEWISE_LINEAR:
        return gg * 0.0, None
    if xs is ys and op in IN_X:
        return IN_X[op](gg, xs, a, b), None
    if xs is ys and op in IN_Y:
        return IN_Y[op](gg, ys, a, b), None
    if xs is not ys and op in IN_BOTH:
        return IN_BOTH[op](gg, xs, ys, a, b)
    raise NotImplementedError(f"create_graph=True: the second derivative of {op} is not available in webgrad yet "
                              "(higher-order gradients through it are not supported)")
