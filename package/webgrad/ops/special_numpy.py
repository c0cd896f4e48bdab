"""NumPy references (float64) of the special functions in the op table: the CPU backend's kernels.

NumPy has no special functions and SciPy is not a dependency, so each is computed here from its series,
asymptotic expansion, continued fraction, integral or recurrence, to about float64 precision where the
tests compare (the float32 results PyTorch gives are then checked against these). The special cases
(poles, signs of zero, infinities, NaN) are PyTorch's. The WGSL versions (shaders/special.wgsl) follow
the same definitions in float32.

Imported by ops/table.py, which must import without NumPy (Pyodide): nothing here runs at import.
"""

import math
from fractions import Fraction

try:
    import numpy as np
except ImportError:  # pragma: no cover - Pyodide without NumPy: the CPU backend is absent there
    np = None

EULER = 0.57721566490153286061
SQRT_PI = 1.7724538509055160273
SQRT_2 = 1.4142135623730950488
LOG_PI = 1.1447298858494001741


def _vectorize(fn):
    return lambda x: np.vectorize(fn, otypes=[np.float64])(x) if np.size(x) else np.asarray(x, np.float64)


def _math_erf(v):
    return math.erf(v)


def _math_erfc(v):
    return math.erfc(v)


def _math_lgamma(v):
    if math.isnan(v) or math.isinf(v):
        return abs(v)
    if v <= 0 and v == math.floor(v):
        return math.inf  # the poles: +inf, as std::lgamma (math.lgamma raises there)
    return math.lgamma(v)


erf = _vectorize(_math_erf)
erfc = _vectorize(_math_erfc)
lgamma = _vectorize(_math_lgamma)


def _bernoulli(n):
    """B_0..B_n as Fractions (Akiyama-Tanigawa)."""
    out, a = [], [Fraction(0)] * (n + 1)
    for m in range(n + 1):
        a[m] = Fraction(1, m + 1)
        for j in range(m, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
        out.append(a[0])
    return out


_B = _bernoulli(26)
# (2k)! / B_2k for k = 1..12: the Euler-Maclaurin coefficients of the Hurwitz zeta function (Cephes' zeta)
ZETA_A = [float(Fraction(math.factorial(2 * k)) / _B[2 * k]) for k in range(1, 13)]
# B_2k / 2k for k = 1..7: digamma's asymptotic series, psi(x) ~ log x - 1/(2x) - sum B_2k / (2k x^2k)
DIGAMMA_A = [float(_B[2 * k] / (2 * k)) for k in range(1, 8)]


# ============================================================================ gamma family
def digamma(x):
    """psi(x), as PyTorch's calc_digamma: -inf/+inf at +0/-0, NaN at negative integers, reflection
    below 0, the recurrence up to 10 and the asymptotic series there."""
    x = np.asarray(x, np.float64)
    out = np.full(x.shape, np.nan)
    zero = x == 0
    out[zero] = np.copysign(np.inf, -x[zero])
    neg = (x < 0) & (x != np.trunc(x))
    pos = x > 0
    out[pos] = _digamma_pos(x[pos])
    xn = x[neg]
    r = xn - np.trunc(xn)
    out[neg] = _digamma_pos(1.0 - xn) - np.pi / np.tan(np.pi * r)
    return out


def _digamma_pos(x):
    x = x.copy()
    result = np.zeros_like(x)
    small = x < 10
    while small.any():
        result[small] -= 1.0 / x[small]
        x[small] += 1.0
        small = x < 10
    z = 1.0 / (x * x)
    poly = np.zeros_like(x)
    for a in reversed(DIGAMMA_A):
        poly = poly * z + a
    y = np.where(x < 1e17, z * poly, 0.0)
    with np.errstate(invalid="ignore"):
        return result + np.log(x) - 0.5 / x - y


def trigamma(x):
    """psi'(x), as PyTorch's calc_trigamma: reflection below 1/2, six recurrence steps, asymptotic series."""
    x = np.asarray(x, np.float64).copy()
    sign = np.ones_like(x)
    result = np.zeros_like(x)
    low = x < 0.5
    s = np.sin(np.pi * (x[low] - np.round(x[low])))  # sin(pi x) up to its sign, exact at the poles
    sign[low] = -1.0
    result[low] -= np.pi * np.pi / (s * s)
    x[low] = 1.0 - x[low]
    for _ in range(6):
        result += 1.0 / (x * x)
        x += 1.0
    ixx = 1.0 / (x * x)
    result += (1.0 + 1.0 / (2.0 * x) + ixx * (1.0 / 6 - ixx * (1.0 / 30 - ixx * (1.0 / 42)))) / x
    return sign * result


def zeta(x, q):
    """The Hurwitz zeta function sum_k (k + q)^-x, as Cephes' zeta (PyTorch's): inf at x = 1, NaN below,
    inf at non-positive integer q, NaN for a non-positive q with a non-integer x; else the first terms
    summed directly and the rest by Euler-Maclaurin."""
    x, q = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(q, np.float64))
    out = np.full(x.shape, np.nan)
    out[x == 1] = np.inf
    rest = ~(x == 1) & ~(x < 1)  # then PyTorch's checks on q, in its order (a NaN x gets past x < 1)
    with np.errstate(invalid="ignore"):
        out[rest & (q <= 0) & (q == np.floor(q))] = np.inf
    ok = rest & (x > 1) & ~np.isnan(q) & ~((q <= 0) & ((q == np.floor(q)) | (x != np.floor(x))))
    out[ok] = _zeta(x[ok], q[ok])
    return out


def _pow_neg(a, e):
    """a ** e where a < 0 only meets integer e (zeta's checks ensure it)."""
    with np.errstate(all="ignore"):
        m = np.abs(a) ** e
        odd = np.mod(e, 2) == 1
        return np.where((a < 0) & odd, -m, m)


def _zeta(x, q):
    machep = 1.11022302462515654042e-16
    s = _pow_neg(q, -x)
    a = q.copy()
    b = np.zeros_like(x)
    live = np.ones(x.shape, bool)
    direct = np.zeros(x.shape, bool)  # converged in the direct sum
    i = 0
    while live.any() and i < 100000:
        i += 1
        a = np.where(live, a + 1.0, a)
        bn = _pow_neg(a, -x)
        b = np.where(live, bn, b)
        s = np.where(live, s + bn, s)
        with np.errstate(all="ignore"):
            done = live & (np.abs(bn / s) < machep)
        direct |= done
        live &= ~done & ((i < 9) | (a <= 9.0))
    w = a
    conv = direct.copy()
    with np.errstate(all="ignore"):
        s = np.where(conv, s, s + b * w / (x - 1.0) - 0.5 * b)
        aa = np.ones_like(x)
        k = np.zeros_like(x)
        for A in ZETA_A:
            aa = aa * (x + k)
            b = b / w
            t = aa * b / A
            s = np.where(conv, s, s + t)
            conv |= np.abs(t / s) < machep
            k = k + 1.0
            aa = aa * (x + k)
            b = b / w
            k = k + 1.0
    return s


def polygamma(n, x):
    """psi^(n)(x): digamma for n = 0, trigamma for n = 1, else (-1)^(n+1) n! zeta(n + 1, x), as PyTorch."""
    x = np.asarray(x, np.float64)
    n = int(n)
    if n == 0:
        return digamma(x)
    if n == 1:
        return trigamma(x)
    sign = 1.0 if n % 2 else -1.0
    return sign * math.exp(math.lgamma(n + 1.0)) * zeta(np.full(x.shape, n + 1.0), x)


# ============================================================================ error function family
def erfinv(y):
    """The inverse of erf: a first guess (Giles' single-precision approximation) and three Halley
    steps, on erf for |y| < 1/2 and on erfc above (where 1 - |y| is exact), so small results keep
    their relative precision and results near +-1 their absolute one."""
    y = np.asarray(y, np.float64)
    a = np.abs(y)
    with np.errstate(all="ignore"):
        x = np.abs(_erfinv_guess(a))
        small = a < 0.5
        one_minus = 1.0 - a
        for _ in range(3):
            f = np.where(small, erf(x) - a, one_minus - erfc(x))
            d = 2.0 / SQRT_PI * np.exp(-x * x)
            step = f / (d + x * f)
            x = np.where(np.isfinite(step) & (a < 1), x - step, x)
        x = np.where(a == 1, np.inf, x)
        x = np.where((a > 1) | np.isnan(a), np.nan, x)
        x = np.where(a == 0, 0.0, x)
    return np.copysign(x, y)


def _erfinv_guess(x):
    w = -np.log((1.0 - x) * (1.0 + x))
    w1 = w - 2.5
    p1 = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
              0.246640727, 1.50140941):
        p1 = c + p1 * w1
    w2 = np.sqrt(w) - 3.0
    p2 = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
              1.00167406, 2.83297682):
        p2 = c + p2 * w2
    return np.where(w < 5.0, p1, p2) * x


def erfcx(x):
    """exp(x^2) erfc(x) without overflow: the product below 25, the asymptotic series above, and
    2 exp(x^2) - erfcx(-x) for negative x."""
    x = np.asarray(x, np.float64)
    ax = np.abs(x)
    with np.errstate(all="ignore"):
        mid = np.exp(np.minimum(ax, 25.0) ** 2) * erfc(np.minimum(ax, 25.0))
        z = 1.0 / (ax * ax)
        tail = (1.0 + z * (-0.5 + z * (0.75 + z * (-1.875 + z * (6.5625 + z * (-29.53125 + z * 162.421875)))))) \
            / (ax * SQRT_PI)
        pos = np.where(ax < 25.0, mid, tail)
        pos = np.where(np.isinf(ax), 0.0, pos)
        neg = 2.0 * np.exp(x * x) - pos
        out = np.where(x < 0, neg, pos)
    return np.where(np.isnan(x), np.nan, out)


def ndtr(x):
    """The standard normal cdf."""
    return 0.5 * erfc(-np.asarray(x, np.float64) / SQRT_2)


def log_ndtr(x):
    """log of the standard normal cdf, as PyTorch's calc_log_ndtr: through erfcx below -1 (no underflow)."""
    x = np.asarray(x, np.float64)
    t = x / SQRT_2
    with np.errstate(all="ignore"):
        low = np.log(erfcx(-t) / 2.0) - t * t
        high = np.log1p(-erfc(t) / 2.0)
    return np.where(x < -1.0, low, high)


def ndtri(p):
    """The inverse of the standard normal cdf: Abramowitz and Stegun 26.2.23 as a first guess and Newton
    steps on log(ndtr) (well conditioned in the far tail), on the lower half (1 - p is exact above)."""
    p = np.asarray(p, np.float64)
    q = np.minimum(p, 1.0 - p)
    with np.errstate(all="ignore"):
        t = np.sqrt(-2.0 * np.log(q))
        x = -(t - (2.515517 + t * (0.802853 + t * 0.010328)) / (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))))
        logq = np.log(q)
        for _ in range(5):
            c = ndtr(x)
            pdf = np.exp(-0.5 * x * x) / (SQRT_2 * SQRT_PI)
            step = (np.log(c) - logq) * c / pdf
            x = np.where(np.isfinite(step), x - step, x)
    out = np.where(p > 0.5, -x, x)
    out = np.where(p == 0, -np.inf, np.where(p == 1, np.inf, out))
    return np.where((p < 0) | (p > 1) | np.isnan(p), np.nan, out)


# ============================================================================ incomplete gamma
def _igamma_series(a, x):
    """P(a, x) by its power series (x < a + 1)."""
    term = 1.0 / a
    total = term.copy()
    ap = a.copy()
    for _ in range(2000):
        ap = ap + 1.0
        term = term * x / ap
        total = total + term
        if np.all(np.abs(term) < np.abs(total) * 1e-17):
            break
    return total * np.exp(a * np.log(x) - x - lgamma(a))


def _igammac_fraction(a, x):
    """Q(a, x) by its continued fraction (modified Lentz; x >= a + 1)."""
    tiny = 1e-300
    b = x + 1.0 - a
    c = np.full(a.shape, 1.0 / tiny)
    d = 1.0 / b
    h = d.copy()
    for i in range(1, 2000):
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        d = np.where(np.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = np.where(np.abs(c) < tiny, tiny, c)
        d = 1.0 / d
        delta = d * c
        h = h * delta
        if np.all(np.abs(delta - 1.0) < 1e-16):
            break
    return np.exp(a * np.log(x) - x - lgamma(a)) * h


def _lgamma1p(a):
    """lgamma(1 + a) without rounding 1 + a: its Taylor series -gamma a + sum_k (-1)^k zeta(k) a^k / k for
    |a| <= 1/2 (Cephes' lgam1p), lgamma(1 + a) elsewhere."""
    a = np.asarray(a, np.float64)
    small = np.abs(a) <= 0.5
    t = np.where(small, a, 0.0)
    total = -EULER * t
    power = -t  # (-a)^k
    for k in range(2, 60):
        power = power * -t
        total = total + _ZETA_INT[k] * power / k
    return np.where(small, total, lgamma(np.where(small, 0.0, 1.0 + a)))


_ZETA_INT = [0.0, 0.0] + [sum(1.0 / j ** k for j in range(1, 200)) + 1.0 / ((k - 1) * 199.5 ** (k - 1))
                          for k in range(2, 60)]  # zeta(k) (the tail past 199 by its integral)


def _igammac_series(a, x):
    """Q(a, x) for small x (Cephes' igamc_series): 1 - x^a / Gamma(1 + a) + x^a / Gamma(a) sum_n (-x)^n / (n! (a + n)),
    the first part as -expm1(a log x - lgamma(1 + a)) so that a small a keeps its precision."""
    fac = np.ones_like(a)
    total = np.zeros_like(a)
    for n in range(1, 2000):
        fac = fac * -x / n
        term = fac / (a + n)
        total = total + term
        if np.all(np.abs(term) <= 1e-17 * np.abs(total)):
            break
    logx = np.log(x)
    return -np.expm1(a * logx - _lgamma1p(a)) - np.exp(a * logx - lgamma(a)) * total


def _igammac_regular(a, x):
    """Q(a, x) for finite a, x > 0, by PyTorch's choice of method (its asymptotic regime, a ~ x > 20, by these too)."""
    q = np.empty(a.shape)
    p_series = np.where(x > 1.1, x < a, np.where(x <= 0.5, -0.4 / np.log(np.minimum(x, 0.5)) < a, x * 1.1 < a))
    fraction = (x > 1.1) & ~p_series
    small = ~p_series & ~fraction
    if p_series.any():
        q[p_series] = 1.0 - _igamma_series(a[p_series], x[p_series])
    if fraction.any():
        q[fraction] = _igammac_fraction(a[fraction], x[fraction])
    if small.any():
        q[small] = _igammac_series(a[small], x[small])
    return q


def _igamma_pair(a, x, lower):
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    out = np.full(a.shape, np.nan)
    ok = (a > 0) & (x > 0) & np.isfinite(a) & np.isfinite(x)
    aa, xx = a[ok], x[ok]
    with np.errstate(all="ignore"):
        if lower:  # PyTorch's: 1 - Q above 1 and a, the series below
            upper = (xx > 1.0) & (xx > aa)
            p = np.empty(aa.shape)
            p[upper] = 1.0 - _igammac_regular(aa[upper], xx[upper])
            if (~upper).any():
                p[~upper] = _igamma_series(aa[~upper], xx[~upper])
        else:
            p = _igammac_regular(aa, xx)
    out[ok] = p
    # PyTorch's special cases, in its order of checks (a NaN passes the comparisons it fails)
    one, zero = (1.0, 0.0) if lower else (0.0, 1.0)
    rest = ~((a < 0) | (x < 0))
    a0 = rest & (a == 0)
    out[a0] = np.where(x[a0] > 0, one, np.nan)
    rest &= ~a0
    x0 = rest & (x == 0)
    out[x0] = zero
    rest &= ~x0
    inf_a = rest & np.isinf(a)
    out[inf_a] = np.where(np.isinf(x[inf_a]), np.nan, zero)
    rest &= ~inf_a
    out[rest & np.isinf(x)] = one
    return out


def igamma(a, x):
    """The regularized lower incomplete gamma function P(a, x), with PyTorch's special cases."""
    return _igamma_pair(a, x, True)


def igammac(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    return _igamma_pair(a, x, False)


# ============================================================================ Bessel functions
def _asymptotic_terms(nu, count):
    """a_k(nu) = (4nu^2 - 1)(4nu^2 - 9)...(4nu^2 - (2k-1)^2) / (k! 8^k), k = 0..count-1."""
    mu, out, a = 4.0 * nu * nu, [], 1.0
    for k in range(count):
        out.append(a)
        a *= (mu - (2 * k + 1) ** 2) / ((k + 1) * 8.0)
    return out


def _bessel_i_series(x, nu):
    """sum_k (x/2)^(2k+nu) / (k! (k+nu)!) for nu = 0, 1 (all terms positive: accurate)."""
    t = x * x / 4.0
    term = np.ones_like(x) if nu == 0 else x / 2.0
    total = term.copy()
    for k in range(1, 200):
        term = term * t / (k * (k + nu))
        total = total + term
        if np.all(term <= total * 1e-17):
            break
    return total


def _bessel_i_scaled(x, nu):
    """exp(-|x|) I_nu(x) for nu = 0, 1: the series up to |x| = 30, the asymptotic expansion above."""
    x = np.asarray(x, np.float64)
    ax = np.abs(x)
    out = np.empty(x.shape)
    small = ax <= 30
    out[small] = _bessel_i_series(ax[small], nu) * np.exp(-ax[small])
    big = ax[~small]
    with np.errstate(all="ignore"):
        total = np.zeros_like(big)
        for k, a in enumerate(_asymptotic_terms(nu, 25)):
            total = total + (-1) ** k * a / big ** k
        out[~small] = total / np.sqrt(2 * np.pi * big)
    out = np.where(np.isinf(ax), 0.0, out)
    if nu == 1:
        out = np.where(x < 0, -out, out)
    return np.where(np.isnan(x), np.nan, out)


def i0e(x):
    return _bessel_i_scaled(x, 0)


def i1e(x):
    return _bessel_i_scaled(x, 1)


def i0(x):
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        out = i0e(x) * np.exp(np.abs(x))
    return np.where(np.isinf(x), np.nan, out)  # PyTorch's i0 gives NaN at +-inf


def i1(x):
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        out = i1e(x) * np.exp(np.abs(x))
    return np.where(np.isinf(x), np.nan, out)  # as PyTorch's


def _harmonic(k):
    return sum(1.0 / j for j in range(1, k + 1))


def _bessel_k_small(x, nu):
    """K_nu(x) for 0 < x <= 2, nu = 0, 1, by the series of A&S 9.6.13 / 9.6.11 (psi(k+1) = -gamma + H_k)."""
    t = x * x / 4.0
    lg = np.log(x / 2.0)
    if nu == 0:
        total = np.zeros_like(x)
        term = np.ones_like(x)
        for k in range(0, 60):
            if k:
                term = term * t / (k * k)
            total = total + (-EULER + _harmonic(k)) * term
        return -lg * _bessel_i_series(x, 0) + total
    total = np.zeros_like(x)
    term = np.ones_like(x)
    for k in range(0, 60):
        if k:
            term = term * t / (k * (k + 1))
        total = total + (2 * (-EULER) + _harmonic(k) + _harmonic(k + 1)) * term
    return 1.0 / x + lg * _bessel_i_series(x, 1) - x / 4.0 * total


def _bessel_k_scaled_integral(x, nu):
    """exp(x) K_nu(x) = int_0^inf exp(-x (cosh t - 1)) cosh(nu t) dt by the trapezoidal rule (the integrand
    is analytic and decays double-exponentially: the rule converges exponentially in the step)."""
    h = 0.02
    tmax = np.arccosh(1.0 + 750.0 / np.min(x)) if x.size else 1.0
    t = np.arange(0.0, tmax + h, h)
    f = np.exp(-np.multiply.outer(x, np.cosh(t) - 1.0)) * np.cosh(nu * t)
    return h * (f.sum(axis=-1) - 0.5 * f[..., 0])


def _bessel_k_scaled(x, nu):
    """exp(x) K_nu(x) for nu = 0, 1: the series up to 2, the integral up to 50, the asymptotic expansion above;
    inf at 0, NaN below, 0 at inf."""
    x = np.asarray(x, np.float64)
    out = np.full(x.shape, np.nan)
    small = (x > 0) & (x <= 2)
    mid = (x > 2) & (x <= 50)
    big = (x > 50) & np.isfinite(x)
    out[small] = _bessel_k_small(x[small], nu) * np.exp(x[small])
    if mid.any():
        out[mid] = _bessel_k_scaled_integral(x[mid], nu)
    xb = x[big]
    total = np.zeros_like(xb)
    for k, a in enumerate(_asymptotic_terms(nu, 25)):
        total = total + a / xb ** k
    out[big] = total * np.sqrt(np.pi / (2 * xb))
    out[x == 0] = np.inf
    out[np.isposinf(x)] = 0.0
    return out


def k0e(x):
    return _bessel_k_scaled(x, 0)


def k1e(x):
    return _bessel_k_scaled(x, 1)


def k0(x):
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        return np.where(np.isposinf(x), 0.0, k0e(x) * np.exp(-x))


def k1(x):
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        return np.where(np.isposinf(x), 0.0, k1e(x) * np.exp(-x))


def _bessel_j_series(x, nu):
    """J_nu(x), nu = 0, 1, by its power series (used for |x| <= 12: cancellation costs under 4 digits)."""
    t = -x * x / 4.0
    term = np.ones_like(x) if nu == 0 else x / 2.0
    total = term.copy()
    for k in range(1, 80):
        term = term * t / (k * (k + nu))
        total = total + term
    return total


def _bessel_y_series(x, nu):
    """Y_nu(x), nu = 0, 1, 0 < x <= 12, by A&S 9.1.13 / 9.1.11."""
    t = -x * x / 4.0
    lg = np.log(x / 2.0)
    total = np.zeros_like(x)
    term = np.ones_like(x)
    if nu == 0:
        for k in range(0, 80):
            if k:
                term = term * t / (k * k)
            total = total + (-EULER + _harmonic(k)) * term
        return 2.0 / np.pi * (lg * _bessel_j_series(x, 0) - total)
    for k in range(0, 80):
        if k:
            term = term * t / (k * (k + 1))
        total = total + (2 * (-EULER) + _harmonic(k) + _harmonic(k + 1)) * term
    return -2.0 / (np.pi * x) + 2.0 / np.pi * lg * _bessel_j_series(x, 1) - x / (2 * np.pi) * total


def _hankel(x, nu):
    """(P, Q) of the Hankel expansions (A&S 9.2.5-9.2.10) for x > 12."""
    a = _asymptotic_terms(nu, 30)
    p = np.zeros_like(x)
    q = np.zeros_like(x)
    for k, ak in enumerate(a):
        term = ak / x ** k
        if k % 2 == 0:
            p = p + (-1) ** (k // 2) * term
        else:
            q = q + (-1) ** (k // 2) * term
    return p, q


def _bessel_jy_large(x, nu):
    """(J_nu, Y_nu) for x > 12: sqrt(2/(pi x)) (P cos chi - Q sin chi), (P sin chi + Q cos chi),
    chi = x - (nu/2 + 1/4) pi, with cos chi and sin chi expanded from cos x and sin x (exactly reduced)."""
    p, q = _hankel(x, nu)
    c, s = np.cos(x), np.sin(x)
    if nu == 0:  # chi = x - pi/4
        cc, sc = (c + s) / SQRT_2, (s - c) / SQRT_2
    else:  # chi = x - 3 pi/4
        cc, sc = (s - c) / SQRT_2, -(c + s) / SQRT_2
    r = np.sqrt(2.0 / (np.pi * x))
    return r * (p * cc - q * sc), r * (p * sc + q * cc)


def _bessel_j(x, nu):
    x = np.asarray(x, np.float64)
    ax = np.abs(x)
    out = np.empty(x.shape)
    small = ax <= 12
    out[small] = _bessel_j_series(ax[small], nu)
    big = ~small & np.isfinite(ax)
    with np.errstate(all="ignore"):
        out[big] = _bessel_jy_large(ax[big], nu)[0]
    out[np.isinf(ax) | np.isnan(ax)] = np.nan  # PyTorch's J0, J1 give NaN at +-inf
    if nu == 1:
        out = np.where(x < 0, -out, out)
    return out


def _bessel_y(x, nu):
    x = np.asarray(x, np.float64)
    out = np.full(x.shape, np.nan)
    small = (x > 0) & (x <= 12)
    out[small] = _bessel_y_series(x[small], nu)
    big = (x > 12) & np.isfinite(x)
    with np.errstate(all="ignore"):
        out[big] = _bessel_jy_large(x[big], nu)[1]
    out[x == 0] = -np.inf
    return out  # NaN at inf, as PyTorch's


def j0(x):
    return _bessel_j(x, 0)


def j1(x):
    return _bessel_j(x, 1)


def y0(x):
    return _bessel_y(x, 0)


def y1(x):
    return _bessel_y(x, 1)


def spherical_j0(x):
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        out = np.where(np.abs(x) < 1e-8, 1.0 - x * x / 6.0, np.sin(x) / x)
    return np.where(np.isinf(x), 0.0, out)


# ============================================================================ orthogonal polynomials
def _degree(n):
    """PyTorch casts the (float) degree to int64: truncation; NaN and infinities become INT64_MIN (< 0)."""
    n = np.asarray(n, np.float64)
    finite = np.isfinite(n) & (np.abs(n) < 2.0 ** 62)
    return np.where(finite, np.trunc(np.where(finite, n, 0.0)), -1.0).astype(np.int64)


def _recurrence(x, n, p0, p1, step, first=2):
    """Elementwise p_n by p_k = step(k, x, p_{k-1}, p_{k-2}) for k = first..n, starting from p0, p1."""
    p, q = np.broadcast_to(p0, x.shape).astype(np.float64), np.broadcast_to(p1, x.shape).astype(np.float64)
    out = np.where(n == 0, p, q)
    top = int(n.max()) if n.size else 0
    for k in range(first, top + 1):
        with np.errstate(all="ignore"):
            r = step(k, x, q, p)
        p, q = q, r
        out = np.where(n == k, r, out)
    return out


def _poly_args(x, n):
    x, n = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(n, np.float64))
    return x, _degree(n)


def chebyshev_t(x, n, shifted=False):
    x, n = _poly_args(x, n)
    y = x + x - 1.0 if shifted else x
    rec = _recurrence(y, n, 1.0, y, lambda k, x, q, p: (x + x) * q - p)
    with np.errstate(all="ignore"):
        trig = np.cos(n * np.arccos(y))
    out = np.where((n > 6) & (np.abs(y) < 1), trig, rec)
    edge = np.where((y > 0) | (n % 2 == 0), 1.0, -1.0)
    out = np.where(np.abs(y) == 1, edge, out)
    return np.where(n < 0, 0.0, out)


def chebyshev_u(x, n, shifted=False):
    x, n = _poly_args(x, n)
    y = x + x - 1.0 if shifted else x
    rec = _recurrence(y, n, 1.0, y + y, lambda k, x, q, p: (x + x) * q - p)
    with np.errstate(all="ignore"):
        th = np.arccos(y)
        trig = np.where(np.sin(th) != 0, np.sin((n + 1) * th) / np.sin(th), (n + 1) * np.cos((n + 1) * th) / y)
    out = np.where((n > 8) & (np.abs(y) < 1), trig, rec)
    edge = np.where((y > 0) | (n % 2 == 0), n + 1.0, -(n + 1.0))
    out = np.where(np.abs(y) == 1, edge, out)
    return np.where(n < 0, 0.0, out)


def chebyshev_v(x, n, shifted=False):
    x, n = _poly_args(x, n)
    y = x + x - 1.0 if shifted else x
    rec = _recurrence(y, n, 1.0, y + y - 1.0, lambda k, x, q, p: (x + x) * q - p)
    odd = np.where(n % 2 == 0, n + n + 1.0, -(n + n + 1.0))
    with np.errstate(all="ignore"):
        th = np.arccos(y)
        trig = np.where(np.sin(th / 2) != 1, np.cos((n + 0.5) * th) / np.cos(th / 2), odd)
    out = np.where((n > 8) & (np.abs(y) < 1), trig, rec)
    edge = np.where(y > 0, 1.0, odd)
    out = np.where(np.abs(y) == 1, edge, out)
    return np.where(n < 0, 0.0, out)


def chebyshev_w(x, n, shifted=False):
    x, n = _poly_args(x, n)
    y = x + x - 1.0 if shifted else x
    rec = _recurrence(y, n, 1.0, y + y + 1.0, lambda k, x, q, p: (x + x) * q - p)
    edge = np.where(y > 0, n + n + 1.0, np.where(n % 2 == 0, 1.0, -1.0))
    with np.errstate(all="ignore"):
        th = np.arccos(y)
        trig = np.where(np.cos(th / 2) != 1, np.sin((n + 0.5) * th) / np.sin(th / 2), edge)
    out = np.where((n > 8) & (np.abs(y) < 1), trig, rec)
    out = np.where(np.abs(y) == 1, edge, out)
    return np.where(n < 0, 0.0, out)


def hermite_h(x, n):
    x, n = _poly_args(x, n)
    out = _recurrence(x, n, 1.0, x + x, lambda k, x, q, p: (x + x) * q - 2.0 * (k - 1) * p)
    return np.where(n < 0, 0.0, out)


def hermite_he(x, n):
    x, n = _poly_args(x, n)
    out = _recurrence(x, n, 1.0, x, lambda k, x, q, p: x * q - (k - 1) * p)
    return np.where(n < 0, 0.0, out)


def laguerre_l(x, n):
    x, n = _poly_args(x, n)
    out = _recurrence(x, n, 1.0, 1.0 - x, lambda k, x, q, p: ((2 * k - 1 - x) * q - (k - 1) * p) / k)
    out = np.where(x == 0, 1.0, out)
    return np.where(n < 0, 0.0, out)


def legendre_p(x, n):
    x, n = _poly_args(x, n)
    out = _recurrence(x, n, 1.0, x, lambda k, x, q, p: ((2 * k - 1) * x * q - (k - 1) * p) / k)
    edge = np.where((x > 0) | (n % 2 == 0), 1.0, -1.0)
    out = np.where(np.abs(x) == 1, edge, out)
    return np.where(n < 0, 0.0, out)


# ============================================================================ Airy function
AIRY_C1 = 0.35502805388781723926  # Ai(0)
AIRY_C2 = 0.25881940379280679840  # -Ai'(0)


def _airy_maclaurin(x):
    """(f, g) of Ai = c1 f - c2 g, Bi = sqrt(3) (c1 f + c2 g): f = sum 3^k (1/3)_k x^3k / (3k)!,
    g = sum 3^k (2/3)_k x^(3k+1) / (3k+1)! (A&S 10.4.2)."""
    x3 = x ** 3
    f_term, g_term = np.ones_like(x), x.copy()
    f, g = f_term.copy(), g_term.copy()
    for k in range(1, 80):
        f_term = f_term * x3 / ((3 * k - 1) * (3 * k))
        g_term = g_term * x3 / ((3 * k) * (3 * k + 1))
        f, g = f + f_term, g + g_term
    return f, g


def _airy_u(count):
    """u_k = (2k+1)(2k+3)...(6k-1) / (216^k k!) of the Airy asymptotic expansions (DLMF 9.7.2)."""
    out, u = [1.0], Fraction(1)
    for k in range(1, count):
        u = u * Fraction((6 * k - 5) * (6 * k - 3) * (6 * k - 1), 216 * k * (2 * k - 1))
        out.append(float(u))
    return out


def airy_pq(zeta, count=24):
    """P(zeta) = sum (-1)^k u_2k zeta^-2k and Q(zeta) = sum (-1)^k u_(2k+1) zeta^-(2k+1): for x > 6,
    Ai(-x) = (cos(zeta - pi/4) P + sin(zeta - pi/4) Q) / (sqrt(pi) x^1/4) and
    Bi(-x) = (cos(zeta - pi/4) Q - sin(zeta - pi/4) P) / (sqrt(pi) x^1/4), zeta = 2/3 x^3/2 (DLMF 9.7.9, 9.7.11)."""
    u = _airy_u(count)
    p = np.zeros_like(zeta)
    q = np.zeros_like(zeta)
    for k in range(count):
        term = u[k] / zeta ** k
        if k % 2 == 0:
            p = p + (-1) ** (k // 2) * term
        else:
            q = q + (-1) ** (k // 2) * term
    return p, q


def airy_ai(x):
    """Ai(x): its Maclaurin series on [-6, 3]; above, (1/pi) sqrt(x/3) K_1/3(zeta) (K by its integral, or its
    asymptotic series past zeta = 50); below, the asymptotic expansion; NaN at +-inf (as PyTorch)."""
    x = np.asarray(x, np.float64)
    out = np.full(x.shape, np.nan)
    mid = (x >= -6) & (x <= 3)
    f, g = _airy_maclaurin(x[mid])
    out[mid] = AIRY_C1 * f - AIRY_C2 * g
    high = (x > 3) & np.isfinite(x)
    xh = x[high]
    zeta = 2.0 / 3.0 * xh ** 1.5
    with np.errstate(all="ignore"):
        kscaled = np.empty(xh.shape)  # exp(zeta) K_1/3(zeta)
        near = zeta <= 50
        if near.any():
            kscaled[near] = _bessel_k_scaled_integral(zeta[near], 1.0 / 3.0)
        far = zeta[~near]
        total = np.zeros_like(far)
        for k, a in enumerate(_asymptotic_terms(1.0 / 3.0, 25)):
            total = total + a / far ** k
        kscaled[~near] = total * np.sqrt(np.pi / (2 * far))
        out[high] = np.sqrt(xh / 3.0) / np.pi * kscaled * np.exp(-zeta)
    low = (x < -6) & np.isfinite(x)
    z = -x[low]
    zeta = 2.0 / 3.0 * z ** 1.5
    p, q = airy_pq(zeta)
    phase = zeta - np.pi / 4
    out[low] = (np.cos(phase) * p + np.sin(phase) * q) / (np.sqrt(np.pi) * z ** 0.25)
    return out
