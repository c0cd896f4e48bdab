"""The op table: one record per elementwise op, and everything else derives from it.

A record holds an op's name, its CPU forward and derivative (NumPy, float64), its WGSL forward and
derivative expressions, its integer behaviour, how it is exposed (``webgrad.f``, ``Tensor.f``,
``Tensor.f_``, ``nn.functional.f``, an ``nn`` Module) and how the tests exercise it. From the records:

* the CPU backend (``_backends/cpu/``) looks up ``cpu`` / ``grad_cpu`` / ``int_exact``;
* the WebGPU backend numbers the ops and splices a ``case`` per record into the ``switch`` statements
  of ``shaders/elementwise.wgsl`` when the shader is loaded (``_backends/webgpu/elementwise.py``);
* ``ops/elementwise.py`` builds the differentiable functions (forward kernel + backward kernel);
* ``ops/api.py``, ``webgrad/__init__.py``, ``nn/functional.py`` and ``nn/activation.py`` expose them;
* ``tests/op_cases.py`` turns every exposed record into a gradient-check, PyTorch and CPU-vs-WebGPU row.

How to add an op: append a record below. That is all (see README, "How to add an op").

Conventions. Unary kernels compute ``out = f(x, a, b)``: ``a`` and ``b`` are the op's scalar parameters
(``params`` names them, in order, with PyTorch's defaults). ``wgsl`` is an expression in ``x, a, b``,
or a body with ``return`` statements; it may call the helpers of ``elementwise.wgsl`` / ``common.wgsl``
(``tanh_f32``, ``sigmoid_f32``, ``log1p_f32``, ``expm1_f32``, ``erfc_f32``, ...). ``grad`` is the
backward kernel ``g * f'(x)`` as an expression in ``g, x, y = f(x), a, b``. ``cpu(x, a, b)`` and
``grad_cpu(x, y, a, b)`` (the derivative, without ``g``) get float64 NumPy arrays. Binary kernels
compute ``f(x, y)``; their gradients are written with tensor ops (``grad(g, x, y, out)``).

This module imports nothing from the engine: backends read it as plain data.
"""

import dis
import math
import re

from . import special_numpy as sf

try:  # the CPU reference functions use NumPy when they run; the table itself does not need it
    import numpy as np
except ImportError:  # pragma: no cover - Pyodide without NumPy: only the WebGPU columns are used
    np = None

FLOAT, SAME, BOOL = "float", "same", "bool"  # result dtype: float (ints promote), input's, bool


class Unary:
    """One unary op. See the module docstring for the fields' conventions.

    result:    FLOAT (integer inputs are converted to float32 first), SAME or BOOL.
    int_wgsl:  the exact int32 form (an expression in x, a, b), or None: then integer inputs of a SAME
               op are refused and the CPU computes in float64. With int_wgsl the CPU applies ``cpu`` to
               int64 arrays.
    int_overflow: a WGSL bool expression in x, a, b (i32): whether the exact result of int_wgsl leaves the
               int32 range (None: it never does). WebGPU holds int64 in int32 words and checks int64
               results with it (elementwise.wgsl's helpers: add_overflows, mul_overflows, mul_wide, ...).
    params:    ((name, default), ...) bound to a and b, as PyTorch names them.
    expose:    a subset of {"function", "method", "inplace", "functional", "inplace_arg"}: webgrad.f,
               Tensor.f, Tensor.f_, nn.functional.f, and an ``inplace=False`` argument of nn.functional.f
               and of the Module (PyTorch has it for most activations, not for sigmoid or tanh).
    module:    the nn Module's name (e.g. "ELU"), or None; module_repr_inplace: False where PyTorch's
               repr leaves `inplace=True` out (Hardsigmoid, Hardswish).
    test:      the input domain for the test rows: "normal", "pos" [0.5, 2], "away" |x| in [0.5, 2],
               "prob" [0.05, 0.95], "unit" (-0.9, 0.9), "gt1" [1.2, 3]; test_args: the parameters the
               tests pass; differentiable: False for ops the gradient checks leave out.
    float_only: integer and bool inputs are refused (NotImplementedError, as PyTorch's frac) instead of
               converted to float32.
    native:    cpu gets floating inputs in their own precision (float16 as float32) rather than float64
               (round's decimals: torch rounds x * 10^d computed in the input's precision).
    heavy:     the WGSL calls shaders/special.wgsl (lgamma, Bessel functions, inverse trigonometry, ...):
               the op compiles into a module of its own (elementwise_special.wgsl with its cases alone), so
               that no other elementwise pipeline compiles that code (a software adapter compiles every
               function a pipeline's switch reaches before it folds the switch on the op code).
    zero_grad: the op is piecewise constant (floor, sign, round, ...): its derivative is 0 wherever it
               exists, and as in PyTorch its floating result still joins the graph, its backward giving
               zeros (no kernel runs). A parameter may be None (PyTorch's logit eps): kernels get NaN.
    """

    kind = "unary"

    def __init__(self, name, wgsl, cpu, grad=None, grad_cpu=None, *, result=FLOAT, int_wgsl=None, int_overflow=None,
                 params=(), expose=("function", "method"), module=None, module_repr_inplace=True, test="normal",
                 test_args=None, node=None, differentiable=None, doc=None, zero_grad=False, heavy=False,
                 native=False, float_only=False):
        self.name, self.wgsl, self.cpu, self.grad, self.grad_cpu = name, wgsl, cpu, grad, grad_cpu
        self.zero_grad, self.heavy, self.native, self.float_only = zero_grad, heavy, native, float_only
        self.result, self.int_wgsl, self.int_overflow, self.params = result, int_wgsl, int_overflow, tuple(params)
        self.expose, self.module, self.module_repr_inplace = frozenset(expose), module, module_repr_inplace
        self.test = test
        self.test_args = tuple(test_args) if test_args is not None else tuple(d for _, d in self.params)
        self.node = node or "".join(p.capitalize() for p in name.split("_"))
        self.differentiable = (grad is not None) if differentiable is None else differentiable
        self.doc = doc or f"Elementwise {name}, as torch's."
        if len(self.params) > 2:
            raise ValueError(f"{name}: a unary kernel takes at most two scalar parameters (a, b)")
        if (grad is None) != (grad_cpu is None):
            raise ValueError(f"{name}: grad and grad_cpu come together")
        if zero_grad and grad is not None:
            raise ValueError(f"{name}: a zero_grad op has no derivative formula")

    @property
    def int_exact(self):
        return self.int_wgsl is not None

    @property
    def grad_reads(self):
        """Which of x (the input) and y (the result) the derivative reads, in either backend's formula: what
        its backward keeps. As in PyTorch, a result the derivative does not read may then be written in place
        (the VAE idiom ``mu.pow(2).add_(...)``) without invalidating the graph, and is freed sooner."""
        reads = _GRAD_READS.get(self.name)
        if reads is None:
            names = _names_read(self.grad_cpu)
            wgsl = set(_IDENTIFIER.findall(self.grad)) if isinstance(self.grad, str) else {"x", "y"}
            reads = _GRAD_READS[self.name] = ("x" in names or "x" in wgsl, "y" in names or "y" in wgsl)
        return reads

    def __repr__(self):
        return f"Unary({self.name!r})"


_GRAD_READS = {}  # name -> (reads x, reads y), cached (a record's formulas never change)
_IDENTIFIER = re.compile(r"(?<![\w.])[A-Za-z_]\w*")


def _names_read(fn):
    """The local names CPU formula `fn` loads (its parameters it uses); every parameter where that cannot be
    told."""
    try:
        found = set()
        for ins in dis.get_instructions(fn):
            if ins.opname.startswith("LOAD_FAST") or ins.opname.startswith("LOAD_DEREF"):
                found.update(ins.argval if isinstance(ins.argval, tuple) else (ins.argval,))
        return found
    except (TypeError, AttributeError):
        return {"x", "y"}


class Binary:
    """One binary op: out = f(x, y) on operands broadcast to one shape and promoted to one dtype.

    cpu(x, y): NumPy on float64 (or int64 when int_wgsl is given and both operands are integers).
    grad(g, x, y, out) -> (gx, gy): written with tensor ops; None: not differentiable (the result has no
    gradient history). It may raise for an input PyTorch gives no derivative for (igamma's first).
    differentiable: False leaves the op out of the generic gradient checks (default: grad is given).
    native: cpu gets floating operands in their own dtype rather than float64 (nextafter: the result is the
    dtype's neighbouring value). heavy, float_only: as Unary's (float_only: when neither operand is floating).
    int_overflow: as Unary's, an expression in x, y.
    """

    kind = "binary"

    def __init__(self, name, wgsl, cpu, grad=None, *, result=SAME, int_wgsl=None, int_overflow=None,
                 expose=("function", "method"), test=("normal", "normal"), node=None, doc=None, differentiable=None,
                 native=False, heavy=False, float_only=False):
        self.name, self.wgsl, self.cpu, self.grad = name, wgsl, cpu, grad
        self.native, self.heavy, self.float_only = native, heavy, float_only
        self.differentiable = (grad is not None) if differentiable is None else differentiable
        self.result, self.int_wgsl, self.int_overflow, self.expose = result, int_wgsl, int_overflow, frozenset(expose)
        self.test = tuple(test)
        self.node = node or "".join(p.capitalize() for p in name.split("_"))
        self.doc = doc or f"Elementwise {name}, as torch's."

    @property
    def int_exact(self):
        return self.int_wgsl is not None

    def __repr__(self):
        return f"Binary({self.name!r})"


# ===================================================================== NumPy helpers (CPU reference)
def _erf(x):
    # NumPy has no erf; math.erf vectorised is exact to double precision.
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _softplus(x, beta=1.0, threshold=20.0):
    bx = beta * x
    return np.where(bx > threshold, x, np.log1p(np.exp(np.minimum(bx, threshold))) / beta)


_SQRT_2_OVER_PI = 0.7978845608028654
_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)))


def _d_gelu(x):
    return 0.5 * (1.0 + _erf(x / np.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)


def _d_gelu_tanh(x):
    t = np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x ** 3))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x * x)


def _d_mish(x):
    t = np.tanh(_softplus(x))
    return t + x * _sigmoid(x) * (1.0 - t * t)


def _pow(x, y):
    """x ** y; for integers as WGSL's pow_i32 (and PyTorch): a negative exponent gives 0 but for 1 and -1."""
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype.kind == "f" or y.dtype.kind == "f":
        return np.power(x, y)
    x, y = np.broadcast_arrays(x, y)
    neg = y < 0
    out = np.power(x, np.where(neg, 0, y))
    return np.where(neg, np.where(x == 1, 1, np.where(x == -1, np.where(y % 2 == 0, 1, -1), 0)), out)


def _floor_divide(x, y):
    """Floor division; integers exactly, and 0 where an integer divisor is 0 (as the WGSL form: the CPU
    refuses host-known zero divisors before it gets here, as PyTorch)."""
    if x.dtype.kind == "f" or y.dtype.kind == "f":
        return np.floor(x / y)
    return np.floor_divide(x, np.where(y == 0, 1, y)) * (y != 0)


def _shift(x, y, left):
    """x << y or x >> y on int64 arrays as PyTorch's: a count outside [0, 64) shifts every bit out."""
    inside = (y >= 0) & (y < 64)
    count = np.where(inside, y, 0)
    if left:
        return np.where(inside, np.left_shift(x, count), 0)
    return np.where(inside, np.right_shift(x, count), np.where(x < 0, -1, 0))


def _on_integers(fn):
    """A bitwise op's CPU form: on int64 operands as it is; floating ones truncated to int32 first and the result
    wrapped to int32, as the WGSL floating forms compute."""
    def cpu(x, y):
        if x.dtype.kind != "f" and y.dtype.kind != "f":
            return fn(x, y)
        return fn(np.trunc(x).astype(np.int64), np.trunc(y).astype(np.int64)).astype(np.int32).astype(np.float64)
    return cpu


_LSHIFT = "select(0, x << u32(y & 31), (y >= 0) && (y < 32))"
_RSHIFT = "select(select(0, -1, (x < 0)), x >> u32(y & 31), (y >= 0) && (y < 32))"


def _round_decimals(x, decimals):
    if decimals == 0:
        return np.round(x)
    ten = x.dtype.type(10.0 ** abs(decimals))  # in x's own precision, as torch (the record is native)
    return np.round(x * ten) / ten if decimals > 0 else np.round(x / ten) * ten


def _between(x, lo, hi):  # strict, as PyTorch's hardtanh/relu6 backward
    return ((x > lo) & (x < hi)).astype(np.float64)


_IS_INT32_MIN = "x == -2147483647 - 1"  # -x and abs(x) leave the int32 range only there
_ACT = ("functional",)           # activations: nn.functional.f only
_ACT_INPLACE = ("functional", "inplace_arg")

# ===================================================================== unary ops
UNARY = {op.name: op for op in (
    # ---- arithmetic and rounding (exact on integers)
    Unary("neg", "-x", lambda x, a, b: -x, "-g", lambda x, y, a, b: -1.0, result=SAME, int_wgsl="-x",
          int_overflow=_IS_INT32_MIN, expose=("function", "method", "inplace")),
    Unary("abs", "abs(x)", lambda x, a, b: np.abs(x), "g * sign_f32(x)", lambda x, y, a, b: np.sign(x),
          result=SAME, int_wgsl="abs(x)", int_overflow=_IS_INT32_MIN, expose=("function", "method", "inplace"),
          test="away"),
    Unary("sign", "select(select(0.0, 1.0, x > 0.0), -1.0, x < 0.0)", lambda x, a, b: np.nan_to_num(np.sign(x)),
          result=SAME, int_wgsl="sign(x)",  # sign(nan) is 0, as torch's
          expose=("function", "method", "inplace"), zero_grad=True),
    Unary("square", "x * x", lambda x, a, b: x * x, "2.0 * g * x", lambda x, y, a, b: 2.0 * x, result=SAME,
          int_wgsl="x * x", int_overflow="mul_overflows(x, x)", expose=("function", "method", "inplace"),
          node="Pow"),  # (PyTorch's square is pow(x, 2): PowBackward0)
    Unary("floor", "floor(x)", lambda x, a, b: np.floor(x), result=SAME, int_wgsl="x",
          expose=("function", "method", "inplace"), zero_grad=True),
    Unary("ceil", "ceil(x)", lambda x, a, b: np.ceil(x), result=SAME, int_wgsl="x",
          expose=("function", "method", "inplace"), zero_grad=True),
    # half to even, as torch; decimals as torch's round(x, decimals=): through x * 10^d (or x / 10^-d)
    Unary("round", "round_decimals_f32(x, a)", lambda x, a, b: _round_decimals(x, a), result=SAME, int_wgsl="x",
          params=(("decimals", 0),), test_args=(), expose=("function", "method", "inplace"), zero_grad=True,
          native=True),
    Unary("trunc", "trunc(x)", lambda x, a, b: np.trunc(x), result=SAME, int_wgsl="x",
          expose=("function", "method", "inplace"), zero_grad=True),
    # ---- exponentials, logarithms, powers, trigonometry
    Unary("exp", "exp(x)", lambda x, a, b: np.exp(x), "g * y", lambda x, y, a, b: y,
          expose=("function", "method", "inplace")),
    Unary("exp2", "exp2(x)", lambda x, a, b: np.exp2(x), "g * y * 0.6931471805599453",
          lambda x, y, a, b: y * np.log(2.0), expose=("function", "method", "inplace")),
    Unary("expm1", "expm1_f32(x)", lambda x, a, b: np.expm1(x), "g * (y + 1.0)", lambda x, y, a, b: y + 1.0,
          expose=("function", "method", "inplace")),
    Unary("log", "log_f32(x)", lambda x, a, b: np.log(x), "g / x", lambda x, y, a, b: 1.0 / x,
          expose=("function", "method", "inplace"), test="pos"),
    Unary("log2", "log_f32(x) * 1.4426950408889634", lambda x, a, b: np.log2(x), "g / (x * 0.6931471805599453)",
          lambda x, y, a, b: 1.0 / (x * np.log(2.0)), expose=("function", "method", "inplace"), test="pos"),
    Unary("log10", "log_f32(x) * 0.4342944819032518", lambda x, a, b: np.log10(x), "g / (x * 2.302585092994046)",
          lambda x, y, a, b: 1.0 / (x * np.log(10.0)), expose=("function", "method", "inplace"), test="pos"),
    Unary("log1p", "log1p_f32(x)", lambda x, a, b: np.log1p(x), "g / (1.0 + x)", lambda x, y, a, b: 1.0 / (1.0 + x),
          expose=("function", "method", "inplace"), test="pos"),
    Unary("sqrt", "sqrt_f32(x)", lambda x, a, b: np.sqrt(x), "g / (2.0 * y)", lambda x, y, a, b: 0.5 / y,
          expose=("function", "method", "inplace"), test="pos"),
    Unary("rsqrt", "rsqrt_f32(x)", lambda x, a, b: 1.0 / np.sqrt(x), "-0.5 * g * y * y * y",
          lambda x, y, a, b: -0.5 * y / x, expose=("function", "method", "inplace"), test="pos"),
    Unary("reciprocal", "1.0 / x", lambda x, a, b: 1.0 / x, "-g * y * y", lambda x, y, a, b: -y * y,
          expose=("function", "method", "inplace"), test="away"),
    Unary("sin", "sin_f32(x)", lambda x, a, b: np.sin(x), "g * cos_f32(x)", lambda x, y, a, b: np.cos(x),
          expose=("function", "method", "inplace")),
    Unary("cos", "cos_f32(x)", lambda x, a, b: np.cos(x), "-g * sin_f32(x)", lambda x, y, a, b: -np.sin(x),
          expose=("function", "method", "inplace")),
    Unary("tan", "sin_f32(x) / cos_f32(x)", lambda x, a, b: np.tan(x), "g * (1.0 + y * y)",
          lambda x, y, a, b: 1.0 + y * y, expose=("function", "method", "inplace")),
    Unary("atan", "select(atan_pos(x), -atan_pos(-x), x < 0.0)", lambda x, a, b: np.arctan(x),
          "g / (1.0 + x * x)", lambda x, y, a, b: 1.0 / (1.0 + x * x), expose=("function", "method", "inplace")),
    Unary("erf", "erf_f32(x)", lambda x, a, b: _erf(x), "g * 1.1283791670955126 * exp(-x * x)",
          lambda x, y, a, b: 2.0 / np.sqrt(np.pi) * np.exp(-x * x), expose=("function", "method", "inplace")),
    Unary("sigmoid", "sigmoid_f32(x)", lambda x, a, b: _sigmoid(x), "g * y * (1.0 - y)",
          lambda x, y, a, b: y * (1.0 - y), expose=("function", "method", "inplace", "functional"),
          module="Sigmoid"),
    Unary("tanh", "tanh_f32(x)", lambda x, a, b: np.tanh(x), "g * (1.0 - y * y)", lambda x, y, a, b: 1.0 - y * y,
          expose=("function", "method", "inplace", "functional"), module="Tanh"),
    # ---- activations (nn.functional and an nn Module each)
    Unary("relu", "select(max(x, 0.0), x, is_nan(x))", lambda x, a, b: np.maximum(x, 0), "select(0.0, g, x > 0.0)",
          lambda x, y, a, b: (x > 0).astype(np.float64), result=SAME, int_wgsl="max(x, 0)",
          expose=("function", "method", "inplace", "functional", "inplace_arg"), module="ReLU", test="away"),
    Unary("relu6", "select(min(max(x, 0.0), 6.0), x, is_nan(x))", lambda x, a, b: np.clip(x, 0.0, 6.0),
          "select(0.0, g, x > 0.0 && x < 6.0)", lambda x, y, a, b: _between(x, 0.0, 6.0), result=SAME,
          int_wgsl="min(max(x, 0), 6)", expose=_ACT_INPLACE, module="ReLU6", test="away"),
    Unary("hardtanh", "select(min(max(x, a), b), x, is_nan(x))", lambda x, a, b: np.clip(x, a, b),
          "select(0.0, g, x > a && x < b)", lambda x, y, a, b: _between(x, a, b),
          params=(("min_val", -1.0), ("max_val", 1.0)), expose=_ACT_INPLACE, module="Hardtanh",
          test_args=(-1.0, 1.5)),
    Unary("leaky_relu", "select(a * x, x, x > 0.0)", lambda x, a, b: np.where(x > 0, x, x * a),
          "select(g * a, g, x > 0.0)", lambda x, y, a, b: np.where(x > 0, 1.0, a),
          params=(("negative_slope", 0.01),), expose=_ACT_INPLACE, module="LeakyReLU", test="away", test_args=(0.1,)),
    Unary("elu", "select(a * expm1_f32(x), x, x > 0.0)", lambda x, a, b: np.where(x > 0, x, a * np.expm1(x)),
          "select(g * a * exp(x), g, x > 0.0)", lambda x, y, a, b: np.where(x > 0, 1.0, a * np.exp(x)),
          params=(("alpha", 1.0),), expose=_ACT_INPLACE, module="ELU", test="away", test_args=(0.7,)),
    Unary("celu", "select(a * expm1_f32(x / a), x, x > 0.0)", lambda x, a, b: np.where(x > 0, x, a * np.expm1(x / a)),
          "select(g * exp(x / a), g, x > 0.0)", lambda x, y, a, b: np.where(x > 0, 1.0, np.exp(x / a)),
          params=(("alpha", 1.0),), expose=_ACT_INPLACE, module="CELU", test="away", test_args=(1.5,)),
    Unary("selu", f"{_SELU_SCALE} * select({_SELU_ALPHA} * expm1_f32(x), x, x > 0.0)",
          lambda x, a, b: _SELU_SCALE * np.where(x > 0, x, _SELU_ALPHA * np.expm1(x)),
          f"select(g * {_SELU_SCALE * _SELU_ALPHA} * exp(x), g * {_SELU_SCALE}, x > 0.0)",
          lambda x, y, a, b: np.where(x > 0, _SELU_SCALE, _SELU_SCALE * _SELU_ALPHA * np.exp(x)),
          expose=_ACT_INPLACE, module="SELU", test="away"),
    Unary("gelu", "x * norm_cdf(x)", lambda x, a, b: 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0))),
          "g * (norm_cdf(x) + x * norm_pdf(x))", lambda x, y, a, b: _d_gelu(x),
          expose=(), node="Gelu"),  # nn.functional.gelu (ops/elementwise.py) picks this or gelu_tanh
    Unary("gelu_tanh", "0.5 * x * (1.0 + tanh_f32(GELU_TANH_K * (x + GELU_TANH_C * x * x * x)))",
          lambda x, a, b: _gelu_tanh(x), """
            let x2 = x * x;
            let t = tanh_f32(GELU_TANH_K * x * (1.0 + GELU_TANH_C * x2));
            let dt = GELU_TANH_K * (1.0 + 3.0 * GELU_TANH_C * x2) * (1.0 - t * t);
            return g * (0.5 * (1.0 + t) + 0.5 * x * dt);""", lambda x, y, a, b: _d_gelu_tanh(x),
          expose=(), node="Gelu"),
    Unary("silu", "x * sigmoid_f32(x)", lambda x, a, b: x * _sigmoid(x), """
            let s = sigmoid_f32(x);
            return g * s * (1.0 + x * (1.0 - s));""", lambda x, y, a, b: _sigmoid(x) * (1.0 + x * (1.0 - _sigmoid(x))),
          expose=("function",) + _ACT_INPLACE, module="SiLU"),
    Unary("mish", "x * tanh_f32(softplus_f32(x, 1.0, 20.0))", lambda x, a, b: x * np.tanh(_softplus(x)), """
            let t = tanh_f32(softplus_f32(x, 1.0, 20.0));
            return g * (t + x * sigmoid_f32(x) * (1.0 - t * t));""", lambda x, y, a, b: _d_mish(x),
          expose=_ACT_INPLACE, module="Mish"),
    Unary("softplus", "softplus_f32(x, a, b)", lambda x, a, b: _softplus(x, a, b), """
            if (x * a > b) { return g; }
            return g * sigmoid_f32(a * x);""", lambda x, y, a, b: np.where(a * x > b, 1.0, _sigmoid(a * x)),
          params=(("beta", 1.0), ("threshold", 20.0)), expose=_ACT, module="Softplus", test_args=(2.0, 20.0)),
    Unary("logsigmoid", "min(x, 0.0) - log1p_f32(exp(-abs(x)))",
          lambda x, a, b: np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x))),
          "g * sigmoid_f32(-x)", lambda x, y, a, b: _sigmoid(-x), expose=_ACT, module="LogSigmoid"),
    Unary("hardsigmoid", "select(clamp(x / 6.0 + 0.5, 0.0, 1.0), x, is_nan(x))", lambda x, a, b: np.clip(x / 6.0 + 0.5, 0.0, 1.0),
          "select(0.0, g / 6.0, x > -3.0 && x < 3.0)", lambda x, y, a, b: _between(x, -3.0, 3.0) / 6.0,
          expose=_ACT_INPLACE, module="Hardsigmoid", module_repr_inplace=False),
    Unary("hardswish", "select(x * clamp(x / 6.0 + 0.5, 0.0, 1.0), x, is_nan(x))", lambda x, a, b: x * np.clip(x / 6.0 + 0.5, 0.0, 1.0), """
            if (x < -3.0) { return 0.0; }
            if (x <= 3.0) { return g * (x / 3.0 + 0.5); }
            return g;""", lambda x, y, a, b: np.where(x < -3.0, 0.0, np.where(x <= 3.0, x / 3.0 + 0.5, 1.0)),
          expose=_ACT_INPLACE, module="Hardswish", module_repr_inplace=False),
    Unary("softsign", "x / (1.0 + abs(x))", lambda x, a, b: x / (1.0 + np.abs(x)),
          "g / ((1.0 + abs(x)) * (1.0 + abs(x)))", lambda x, y, a, b: 1.0 / (1.0 + np.abs(x)) ** 2,
          expose=_ACT, module="Softsign"),
    # ---- tests (bool results)
    Unary("isnan", "flag(is_nan(x))", lambda x, a, b: np.isnan(x), result=BOOL, int_wgsl="0"),
    Unary("isinf", "flag(is_inf(x))", lambda x, a, b: np.isinf(x), result=BOOL, int_wgsl="0"),
    Unary("isfinite", "flag(!is_nan(x) && !is_inf(x))", lambda x, a, b: np.isfinite(x), result=BOOL, int_wgsl="1"),
    Unary("logical_not", "flag(x == 0.0)", lambda x, a, b: ~x.astype(np.bool_), result=BOOL, int_wgsl="iflag(x == 0)"),
    Unary("bitwise_not", "f32(~i32(x))", lambda x, a, b: _on_integers(lambda v, _: ~v)(x, x), result=SAME,
          int_wgsl="~x", expose=()),  # (ops/bitwise.py; floats: on the values truncated to int32, as the others)
    # ---- kernels behind hand-written functions (scalar operands, clamp): no exposure of their own
    Unary("affine", "x * a + b", lambda x, a, b: x * a + b, result=SAME, int_wgsl="x * a + b",
          int_overflow="!fits_i32(add_wide(mul_wide(x, a), b))", expose=()),
    Unary("clamp", "select(min(max(x, a), b), x, is_nan(x))", lambda x, a, b: np.minimum(np.maximum(x, a), b),
          "select(0.0, g, x >= a && x <= b)", lambda x, y, a, b: ((x >= a) & (x <= b)).astype(np.float64),
          result=SAME, int_wgsl="min(max(x, a), b)", expose=()),
    Unary("rdiv", "a / x", lambda x, a, b: a / x, "-g * a / (x * x)", lambda x, y, a, b: -y / x, expose=()),
    Unary("pow", "pow_f32(x, a)", lambda x, a, b: _pow(x, a), """
            if (a == 0.0) { return 0.0; }
            return g * a * pow_f32(x, a - 1.0);""", lambda x, y, a, b: np.where(a == 0, 0.0, a * np.power(x, a - 1.0)),
          result=SAME, int_wgsl="pow_i32(x, a)", int_overflow="pow_overflows(x, a)", expose=()),
    Unary("rpow", "pow_f32(a, x)", lambda x, a, b: _pow(a, x), """
            if (a == 0.0 && x >= 0.0) { return 0.0; }
            return g * y * log_f32(a);""", lambda x, y, a, b: y * np.log(a), result=SAME, int_wgsl="pow_i32(a, x)",
          int_overflow="pow_overflows(a, x)", expose=()),
    # (ne as "not equal": WGSL's float != is ordered on some drivers, false where either side is NaN)
    *(Unary(name, "flag(!(x == a))" if name == "ne" else f"flag(x {sym} a)", fn, result=BOOL,
            int_wgsl=f"iflag(x {sym} a)", expose=())
      for name, sym, fn in (("eq", "==", lambda x, a, b: x == a), ("ne", "!=", lambda x, a, b: x != a),
                            ("lt", "<", lambda x, a, b: x < a), ("le", "<=", lambda x, a, b: x <= a),
                            ("gt", ">", lambda x, a, b: x > a), ("ge", ">=", lambda x, a, b: x >= a))),
)}


# ===================================================================== binary ops
def _atan2_grad(g, x, y, out):
    denom = x * x + y * y
    return g * y / denom, -g * x / denom


def _hypot_grad(g, x, y, out):
    return g * x / out, g * y / out


def _logaddexp_grad(g, x, y, out):
    return g * (x - out).exp(), g * (y - out).exp()


BINARY = {op.name: op for op in (
    Binary("add", "x + y", lambda x, y: x + y, int_wgsl="x + y", int_overflow="add_overflows(x, y)", expose=()),
    Binary("sub", "x - y", lambda x, y: x - y, int_wgsl="x - y", int_overflow="sub_overflows(x, y)", expose=()),
    Binary("mul", "x * y", lambda x, y: x * y, int_wgsl="x * y", int_overflow="mul_overflows(x, y)", expose=()),
    Binary("div", "x / y", lambda x, y: x / y, result=FLOAT, expose=()),
    Binary("floor_divide", "floor(x / y)", lambda x, y: _floor_divide(x, y), int_wgsl="""
            if (y == 0) { return 0; }
            let q = x / y;
            if (q * y != x && (x < 0) != (y < 0)) { return q - 1; }
            return q;""", int_overflow="x == -2147483647 - 1 && y == -1", expose=()),
    Binary("pow", "pow_f32(x, y)", _pow, int_wgsl="pow_i32(x, y)", int_overflow="pow_overflows(x, y)", expose=()),
    Binary("minimum", "min_f32(x, y)", lambda x, y: np.minimum(x, y), int_wgsl="min(x, y)", expose=()),
    Binary("maximum", "max_f32(x, y)", lambda x, y: np.maximum(x, y), int_wgsl="max(x, y)", expose=()),
    Binary("atan2", "atan2_f32(x, y)", lambda x, y: np.arctan2(x, y), _atan2_grad, result=FLOAT,
           test=("normal", "away")),
    Binary("hypot", "hypot_f32(x, y)", lambda x, y: np.hypot(x, y), _hypot_grad, result=FLOAT,
           test=("away", "away")),
    Binary("logaddexp", """
            let m = max_f32(x, y);
            if (is_inf(m) && x == y) { return m; }
            return m + log1p_f32(exp(-abs(x - y)));""", lambda x, y: np.logaddexp(x, y), _logaddexp_grad,
           result=FLOAT),
    *(Binary(name, "flag(!(x == y))" if name == "ne" else f"flag(x {sym} y)", fn, result=BOOL,
             int_wgsl=f"iflag(x {sym} y)", expose=())
      for name, sym, fn in (("eq", "==", lambda x, y: x == y), ("ne", "!=", lambda x, y: x != y),
                            ("lt", "<", lambda x, y: x < y), ("le", "<=", lambda x, y: x <= y),
                            ("gt", ">", lambda x, y: x > y), ("ge", ">=", lambda x, y: x >= y))),
    Binary("logical_and", "flag(!(x == 0.0) && !(y == 0.0))", lambda x, y: np.logical_and(x, y), result=BOOL,
           int_wgsl="iflag(x != 0 && y != 0)", expose=()),
    Binary("logical_or", "flag(!(x == 0.0) || !(y == 0.0))", lambda x, y: np.logical_or(x, y), result=BOOL,
           int_wgsl="iflag(x != 0 || y != 0)", expose=()),
    Binary("logical_xor", "flag((x == 0.0) != (y == 0.0))", lambda x, y: np.logical_xor(x, y), result=BOOL,
           int_wgsl="iflag((x != 0) != (y != 0))", expose=()),
    # Bitwise ops and shifts. The public functions (ops/bitwise.py) take integers (bools get the logical ops, floats
    # are refused, as PyTorch); the kernels' floating form works on the values truncated to int32. Shifts as
    # PyTorch's: a count beyond the width (or negative) shifts every bit out, leaving 0 (<<) or the sign (>>). The
    # CPU computes integers in int64 and wraps into the output's width; WebGPU's int64 words hold int32 values, so
    # a left shift whose exact int64 result leaves that range is refused (int_overflow) rather than wrapped.
    # (Comparisons stand in parentheses: WGSL reads `a < b ... c > d` as a template list.)
    Binary("bitwise_and", "f32(i32(x) & i32(y))", _on_integers(lambda x, y: x & y), int_wgsl="x & y", expose=()),
    Binary("bitwise_or", "f32(i32(x) | i32(y))", _on_integers(lambda x, y: x | y), int_wgsl="x | y", expose=()),
    Binary("bitwise_xor", "f32(i32(x) ^ i32(y))", _on_integers(lambda x, y: x ^ y), int_wgsl="x ^ y", expose=()),
    Binary("bitwise_left_shift", f"let x = i32(x); let y = i32(y); return f32({_LSHIFT});",
           _on_integers(lambda x, y: _shift(x, y, True)), int_wgsl=_LSHIFT,
           int_overflow="(x != 0) && (y >= 0) && (y < 64) && select((((x << u32(y & 31)) >> u32(y & 31)) != x), "
                        "((countTrailingZeros(x) + y) < 64), (y > 31))", expose=()),
    Binary("bitwise_right_shift", f"let x = i32(x); let y = i32(y); return f32({_RSHIFT});",
           _on_integers(lambda x, y: _shift(x, y, False)), int_wgsl=_RSHIFT, expose=()),
)}


# ===================================================================== elementwise math and torch.special
# The WGSL functions are shaders/special.wgsl's, the NumPy references special_numpy.py's (sf); gradients are
# PyTorch's formulas (derivatives.yaml), and ops PyTorch does not differentiate (the Bessel functions and
# orthogonal polynomials) give results without gradient history, as there.
_MATH = ("function", "method", "inplace")
_SPECIAL = ("special",)  # webgrad.special.<name> only (torch.special's own names)
_TINY = 1.1920929e-07  # float32's epsilon: PyTorch's i1/i1e backward use their limit 0.5 below it (and at NaN)


def _logit(x, eps):
    if eps is not None and not math.isnan(eps):
        x = np.where(x < eps, eps, np.where(x > 1.0 - eps, 1.0 - eps, x))
    return np.log(x / (1.0 - x))


def _d_logit(x, eps):
    d = 1.0 / (x * (1.0 - x))
    if eps is None or math.isnan(eps):
        return np.where((x < 0) | (x > 1), np.nan, d)
    return np.where((x < eps) | (x > 1.0 - eps), 0.0, d)


def _sinc(x):
    p = np.pi * x
    return np.where(x == 0, 1.0, np.sin(p) / np.where(x == 0, 1.0, p))


def _d_sinc(x):
    p = np.pi * x
    safe = np.where(x == 0, 1.0, x)
    return np.where(x == 0, 0.0, (p * np.cos(p) - np.sin(p)) / (np.pi * safe * safe))


def _entr(x):
    return np.where(x > 0, -x * np.log(np.where(x > 0, x, 1.0)), np.where(x == 0, 0.0, np.where(x < 0, -np.inf, x)))


def _d_i1(x, y, scaled):
    safe = np.where(np.abs(x) > _TINY, x, _TINY)
    d = (sf.i0e(safe) - y * (np.sign(safe) + 1.0 / safe)) if scaled else (sf.i0(safe) - y / safe)
    return np.where(np.abs(x) > _TINY, d, 0.5)


def _unary_bessel(name, wgsl, cpu):  # no derivative in PyTorch: results without gradient history
    return Unary(name, wgsl, lambda x, a, b: cpu(x), expose=_SPECIAL, doc=f"torch.special.{name}, as torch's.",
                 heavy=True)


UNARY.update({op.name: op for op in (
    # ---- inverse trigonometric and hyperbolic
    Unary("asin", "asin_f32(x)", lambda x, a, b: np.arcsin(x), "g / sqrt_f32((1.0 - x) * (1.0 + x))",
          lambda x, y, a, b: 1.0 / np.sqrt((1.0 - x) * (1.0 + x)), expose=_MATH, test="unit", heavy=True),
    Unary("acos", "acos_f32(x)", lambda x, a, b: np.arccos(x), "-g / sqrt_f32((1.0 - x) * (1.0 + x))",
          lambda x, y, a, b: -1.0 / np.sqrt((1.0 - x) * (1.0 + x)), expose=_MATH, test="unit", heavy=True),
    Unary("asinh", "asinh_f32(x)", lambda x, a, b: np.arcsinh(x), "g / sqrt(x * x + 1.0)",
          lambda x, y, a, b: 1.0 / np.sqrt(x * x + 1.0), expose=_MATH, heavy=True),
    Unary("acosh", "acosh_f32(x)", lambda x, a, b: np.arccosh(x), "g / sqrt_f32((x - 1.0) * (x + 1.0))",
          lambda x, y, a, b: 1.0 / np.sqrt((x - 1.0) * (x + 1.0)), expose=_MATH, test="gt1", heavy=True),
    Unary("atanh", "atanh_f32(x)", lambda x, a, b: np.arctanh(x), "g / ((1.0 - x) * (1.0 + x))",
          lambda x, y, a, b: 1.0 / ((1.0 - x) * (1.0 + x)), expose=_MATH, test="unit", heavy=True),
    Unary("sinh", "sinh_f32(x)", lambda x, a, b: np.sinh(x), "g * cosh_f32(x)", lambda x, y, a, b: np.cosh(x),
          expose=_MATH, heavy=True),
    Unary("cosh", "cosh_f32(x)", lambda x, a, b: np.cosh(x), "g * sinh_f32(x)", lambda x, y, a, b: np.sinh(x),
          expose=_MATH, heavy=True),
    # ---- error function, gamma function and relatives
    Unary("erfc", "erfc_checked(x)", lambda x, a, b: sf.erfc(x), "keep_nan(x, -g * FRAC_2_SQRT_PI * exp(-x * x))",
          lambda x, y, a, b: -2.0 / np.sqrt(np.pi) * np.exp(-x * x), expose=_MATH, heavy=True),
    Unary("erfinv", "erfinv_f32(x)", lambda x, a, b: sf.erfinv(x), "keep_nan(y, g * 0.886226925452758 * exp(y * y))",
          lambda x, y, a, b: np.sqrt(np.pi) / 2.0 * np.exp(y * y), expose=_MATH, test="unit", heavy=True),
    Unary("lgamma", "lgamma_f32(x)", lambda x, a, b: sf.lgamma(x), "g * digamma_f32(x)",
          lambda x, y, a, b: sf.digamma(x), expose=_MATH, test="pos", heavy=True),
    Unary("digamma", "digamma_f32(x)", lambda x, a, b: sf.digamma(x), "g * trigamma_f32(x)",
          lambda x, y, a, b: sf.trigamma(x), expose=_MATH, test="pos", heavy=True),
    # polygamma(n, x) takes n first: the kernel behind ops/elementwise_math.py's polygamma
    Unary("polygamma", "polygamma_f32(a, x)", lambda x, a, b: sf.polygamma(a, x), "g * polygamma_f32(a + 1.0, x)",
          lambda x, y, a, b: sf.polygamma(a + 1, x), params=(("n", 0),), expose=(), test="pos", heavy=True),
    Unary("i0", "bessel_i_f32(x, 0, false)", lambda x, a, b: sf.i0(x), "g * bessel_i_f32(x, 1, false)",
          lambda x, y, a, b: sf.i1(x), expose=_MATH, heavy=True),
    Unary("sinc", "sinc_f32(x)", lambda x, a, b: _sinc(x), "g * d_sinc_f32(x)", lambda x, y, a, b: _d_sinc(x),
          expose=_MATH, heavy=True),
    Unary("logit", "logit_f32(x, a)", lambda x, a, b: _logit(x, a), "d_logit_f32(g, x, a)",
          lambda x, y, a, b: _d_logit(x, a), params=(("eps", None),), expose=_MATH, test="prob", heavy=True),
    # ---- conversions and parts
    Unary("frac", "frac_f32(x)", lambda x, a, b: x - np.trunc(x), "g", lambda x, y, a, b: 1.0, result=SAME,
          expose=_MATH, float_only=True),
    Unary("deg2rad", "x * 0.017453292519943295", lambda x, a, b: x * (np.pi / 180.0), "g * 0.017453292519943295",
          lambda x, y, a, b: np.pi / 180.0, expose=_MATH),
    Unary("rad2deg", "x * 57.29577951308232", lambda x, a, b: x * (180.0 / np.pi), "g * 57.29577951308232",
          lambda x, y, a, b: 180.0 / np.pi, expose=_MATH),
    # frexp's two parts (ops/elementwise_math.py's frexp): mantissa in [0.5, 1) and exponent, as floats
    Unary("frexp_mantissa", "frexp_f32(x).x", lambda x, a, b: np.frexp(x)[0], result=SAME, expose=(), heavy=True),
    Unary("frexp_exponent", "frexp_f32(x).y", lambda x, a, b: np.frexp(x)[1].astype(np.float64), result=SAME,
          expose=(), heavy=True),
    Unary("sgn", "select(select(0.0, 1.0, x > 0.0), -1.0, x < 0.0)", lambda x, a, b: np.nan_to_num(np.sign(x)),
          result=SAME, int_wgsl="sign(x)", expose=_MATH, zero_grad=True),
    # ---- torch.special
    Unary("entr", "entr_f32(x)", lambda x, a, b: _entr(x), "keep_nan(x, -g * (1.0 + log_f32(x)))",
          lambda x, y, a, b: -(1.0 + np.log(x)), expose=_SPECIAL, test="pos", heavy=True),
    Unary("erfcx", "erfcx_f32(x)", lambda x, a, b: sf.erfcx(x), "g * (2.0 * x * y - FRAC_2_SQRT_PI)",
          lambda x, y, a, b: 2.0 * x * y - 2.0 / np.sqrt(np.pi), expose=_SPECIAL, heavy=True),
    Unary("ndtr", "ndtr_f32(x)", lambda x, a, b: sf.ndtr(x), "keep_nan(x, g * 0.3989422804014327 * exp(-0.5 * x * x))",
          lambda x, y, a, b: np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi), expose=_SPECIAL, heavy=True),
    Unary("log_ndtr", "log_ndtr_f32(x)", lambda x, a, b: sf.log_ndtr(x),
          "keep_nan(y + 0.5 * x * x, g * 0.3989422804014327 * exp(-(y + 0.5 * x * x)))",
          lambda x, y, a, b: np.exp(-(y + 0.5 * x * x)) / np.sqrt(2.0 * np.pi), expose=_SPECIAL, heavy=True),
    Unary("ndtri", "ndtri_f32(x)", lambda x, a, b: sf.ndtri(x), "keep_nan(y, g * 2.5066282746310002 * exp(0.5 * y * y))",
          lambda x, y, a, b: np.sqrt(2.0 * np.pi) * np.exp(0.5 * y * y), expose=_SPECIAL, test="prob", heavy=True),
    Unary("i0e", "bessel_i_f32(x, 0, true)", lambda x, a, b: sf.i0e(x),
          "g * (bessel_i_f32(x, 1, true) - sign_f32(x) * y)",
          lambda x, y, a, b: sf.i1e(x) - np.sign(x) * y, expose=_SPECIAL, heavy=True),
    Unary("i1", "bessel_i_f32(x, 1, false)", lambda x, a, b: sf.i1(x),
          f"select(g * (bessel_i_f32(x, 0, false) - y / x), 0.5 * g, is_nan(x) || abs(x) <= {_TINY})",
          lambda x, y, a, b: _d_i1(x, y, False), expose=_SPECIAL, heavy=True),
    Unary("i1e", "bessel_i_f32(x, 1, true)", lambda x, a, b: sf.i1e(x),
          f"select(g * (bessel_i_f32(x, 0, true) - y * (sign_f32(x) + 1.0 / x)), 0.5 * g, is_nan(x) || abs(x) <= {_TINY})",
          lambda x, y, a, b: _d_i1(x, y, True), expose=_SPECIAL, heavy=True),
    _unary_bessel("bessel_j0", "bessel_j0_f32(x)", sf.j0),
    _unary_bessel("bessel_j1", "bessel_j1_f32(x)", sf.j1),
    _unary_bessel("bessel_y0", "bessel_y0_f32(x)", sf.y0),
    _unary_bessel("bessel_y1", "bessel_y1_f32(x)", sf.y1),
    _unary_bessel("modified_bessel_i0", "bessel_i_f32(x, 0, false)", sf.i0),
    _unary_bessel("modified_bessel_i1", "bessel_i_f32(x, 1, false)", sf.i1),
    _unary_bessel("modified_bessel_k0", "bessel_k_f32(x, 0, false)", sf.k0),
    _unary_bessel("modified_bessel_k1", "bessel_k_f32(x, 1, false)", sf.k1),
    _unary_bessel("scaled_modified_bessel_k0", "bessel_k_f32(x, 0, true)", sf.k0e),
    _unary_bessel("scaled_modified_bessel_k1", "bessel_k_f32(x, 1, true)", sf.k1e),
    _unary_bessel("spherical_bessel_j0", "spherical_j0_f32(x)", sf.spherical_j0),
    _unary_bessel("airy_ai", "airy_ai_f32(x)", sf.airy_ai),
)})


def _zeros(t):
    return t.new_zeros(t.shape)


def _not_implemented(op, which):
    raise NotImplementedError(f"the derivative for '{op}{which}' is not implemented.")


def _copysign_grad(g, x, y, out):
    ratio = (out / x).masked_fill(x == 0, 0.0)
    return g * ratio, _zeros(y)


def _fmod_grad(g, x, y, out):
    return g, -g * (x / y).trunc()


def _xlogy_grad(g, x, y, out):
    return FUNCTIONS["xlogy"](g, y).masked_fill((x == 0) & (y <= 0), 0.0), g * x / y


def _xlog1py_grad(g, x, y, out):
    return FUNCTIONS["xlog1py"](g, y).masked_fill((x == 0) & (y <= -1), 0.0), g * x / (y + 1)


def _fmax_grad(g, x, y, out):
    first = (x >= y) | y.isnan()  # ties and a NaN other go to the first operand, as PyTorch's
    return g.masked_fill(~first, 0.0), g.masked_fill(first, 0.0)


def _fmin_grad(g, x, y, out):
    first = (x <= y) | y.isnan()
    return g.masked_fill(~first, 0.0), g.masked_fill(first, 0.0)


def _logaddexp2_grad(g, x, y, out):
    return g / (1 + (y - x).exp2()), g / (1 + (x - y).exp2())


def _igamma_grad(upper):
    def grad(g, a, x, out):
        if a.requires_grad:
            _not_implemented("igammac" if upper else "igamma", ": input")
        d = g * ((a - 1) * x.log() - x - a.lgamma()).exp()
        return None, (-d if upper else d)
    return grad


def _zeta_grad(g, x, q, out):
    if x.requires_grad:
        _not_implemented("zeta", "")
    return None, g * -x * FUNCTIONS["zeta"](x + 1.0, q)


def _heaviside_grad(g, x, y, out):
    raise RuntimeError("derivative for aten::heaviside is not implemented")


def _polynomial(name, wgsl, cpu):  # no derivative in PyTorch
    return Binary(name, wgsl, lambda x, n: cpu(x, n), result=FLOAT, expose=_SPECIAL, heavy=True,
                  doc=f"torch.special.{name}(input, n), as torch's (n truncated to an integer).")


BINARY.update({op.name: op for op in (
    Binary("copysign", "copysign_f32(x, y)", lambda x, y: np.copysign(x, y), _copysign_grad, result=FLOAT,
           expose=_MATH),
    Binary("fmod", "fmod_f32(x, y)", lambda x, y: np.fmod(x, y), _fmod_grad, int_wgsl="select(x % y, 0, y == 0)",
           expose=_MATH, test=("normal", "away"), heavy=True),
    Binary("xlogy", "xlogy_f32(x, y, false)", lambda x, y: _xlogy(x, y, np.log), _xlogy_grad, result=FLOAT,
           expose=_MATH + ("special",), test=("normal", "pos"), heavy=True),
    Binary("heaviside", "select(select(0.0, 1.0, x > 0.0), y, x == 0.0)",
           lambda x, y: np.where(x == 0, y, (x > 0).astype(x.dtype)), _heaviside_grad,
           int_wgsl="select(select(0, 1, x > 0), y, x == 0)", expose=_MATH, differentiable=False),
    Binary("fmax", "select(select(max(x, y), x, is_nan(y)), y, is_nan(x))", lambda x, y: np.fmax(x, y), _fmax_grad,
           int_wgsl="max(x, y)", expose=("function", "method")),
    Binary("fmin", "select(select(min(x, y), x, is_nan(y)), y, is_nan(x))", lambda x, y: np.fmin(x, y), _fmin_grad,
           int_wgsl="min(x, y)", expose=("function", "method")),
    Binary("nextafter", "nextafter_f32(x, y)", lambda x, y: np.nextafter(x, y),
           lambda g, x, y, out: (g, _zeros(y)), result=FLOAT, expose=_MATH, native=True, heavy=True,
           float_only=True),
    Binary("logaddexp2", "logaddexp2_f32(x, y)", lambda x, y: np.logaddexp2(x, y), _logaddexp2_grad, result=FLOAT,
           expose=("function", "method"), heavy=True, float_only=True),
    Binary("igamma", "igamma_f32(x, y, false)", lambda x, y: sf.igamma(x, y), _igamma_grad(False), result=FLOAT,
           expose=_MATH, test=("pos", "pos"), differentiable=False, heavy=True, float_only=True),
    Binary("igammac", "igamma_f32(x, y, true)", lambda x, y: sf.igammac(x, y), _igamma_grad(True), result=FLOAT,
           expose=_MATH, test=("pos", "pos"), differentiable=False, heavy=True, float_only=True),
    Binary("xlog1py", "xlogy_f32(x, y, true)", lambda x, y: _xlogy(x, y, np.log1p), _xlog1py_grad, result=FLOAT,
           expose=_SPECIAL, test=("normal", "pos"), heavy=True),
    Binary("zeta", "zeta_f32(x, y)", lambda x, y: sf.zeta(x, y), _zeta_grad, result=FLOAT, expose=_SPECIAL,
           differentiable=False, heavy=True),
    _polynomial("chebyshev_polynomial_t", "chebyshev_t_f32(x, y)", sf.chebyshev_t),
    _polynomial("chebyshev_polynomial_u", "chebyshev_u_f32(x, y)", sf.chebyshev_u),
    _polynomial("chebyshev_polynomial_v", "chebyshev_v_f32(x, y)", sf.chebyshev_v),
    _polynomial("chebyshev_polynomial_w", "chebyshev_w_f32(x, y)", sf.chebyshev_w),
    _polynomial("shifted_chebyshev_polynomial_t", "chebyshev_t_f32(x + x - 1.0, y)",
                lambda x, n: sf.chebyshev_t(x, n, shifted=True)),
    _polynomial("shifted_chebyshev_polynomial_u", "chebyshev_u_f32(x + x - 1.0, y)",
                lambda x, n: sf.chebyshev_u(x, n, shifted=True)),
    _polynomial("shifted_chebyshev_polynomial_v", "chebyshev_v_f32(x + x - 1.0, y)",
                lambda x, n: sf.chebyshev_v(x, n, shifted=True)),
    _polynomial("shifted_chebyshev_polynomial_w", "chebyshev_w_f32(x + x - 1.0, y)",
                lambda x, n: sf.chebyshev_w(x, n, shifted=True)),
    _polynomial("hermite_polynomial_h", "hermite_h_f32(x, y)", sf.hermite_h),
    _polynomial("hermite_polynomial_he", "hermite_he_f32(x, y)", sf.hermite_he),
    _polynomial("laguerre_polynomial_l", "laguerre_l_f32(x, y)", sf.laguerre_l),
    _polynomial("legendre_polynomial_p", "legendre_p_f32(x, y)", sf.legendre_p),
)})


def _xlogy(x, y, log):
    return np.where(np.isnan(y), np.nan, np.where(x == 0, 0.0, x * log(np.where(x == 0, 1.0, y))))


# The differentiable function of each record, as ops/elementwise.py builds it (its `function`): the gradients
# written with their own op (xlogy's, zeta's) read it here, the table importing nothing of the engine.
FUNCTIONS = {}

# Bumped by register/unregister: the WebGPU backend renumbers its op codes only when it changed (a version
# check per launch instead of comparing the tables' keys on the hot path).
VERSION = [0]


def register(op):
    """Add a record at run time (tests do this to prove a new op needs nothing else). Returns it.

    Backends that number ops or compile shaders from the table must be created after the registration
    (``webgrad.webgpu.reset()`` drops the current one); ops/elementwise.py builds the function on demand."""
    table = UNARY if op.kind == "unary" else BINARY
    table[op.name] = op
    VERSION[0] += 1
    return op


def unregister(name):
    UNARY.pop(name, None)
    BINARY.pop(name, None)
    VERSION[0] += 1
