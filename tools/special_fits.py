"""The Chebyshev coefficients of shaders/special.wgsl, fitted to webgrad's float64 references.

    python -m tools.special_fits          # prints the WGSL constants and each fit's float32 error

Each fitted function is smooth on its interval (the singular or oscillating factors are taken out
analytically in the shader), so a Chebyshev series of modest degree reaches float32 precision and
Clenshaw's recurrence evaluates it stably in float32. The fits interpolate the float64 references of
webgrad.ops.special_numpy at Chebyshev points; the printed error is measured on a fine grid with the
series evaluated in float32, as the shader does.
"""

import math

import numpy as np
from numpy.polynomial import chebyshev as C

from webgrad.ops import special_numpy as S


def _lgamma_ratio(t):  # lgamma(x) / ((x - 1)(x - 2)) on x in [1, 2], t = 2x - 3
    x = (t + 3.0) / 2.0
    return S.lgamma(x) / ((x - 1.0) * (x - 2.0))


def _j0(t):  # J0(x), x in [0, 8], t = x^2 / 32 - 1
    return S.j0(np.sqrt(32.0 * (t + 1.0)))


def _j1_over_x(t):
    x = np.sqrt(32.0 * (t + 1.0))
    return np.where(x > 0, S.j1(np.maximum(x, 1e-300)) / np.maximum(x, 1e-300), 0.5)


def _psi_series(x, nu):
    """sum_k (psi(k+1) + psi(k+nu+1)) (-x^2/4)^k / (k! (k+nu)!), the series of A&S 9.1.11."""
    t = -x * x / 4.0
    total, term = np.zeros_like(x), np.ones_like(x)
    for k in range(60):
        if k:
            term = term * t / (k * (k + nu))
        psi = -S.EULER + sum(1.0 / j for j in range(1, k + 1))
        psi_nu = -S.EULER + sum(1.0 / j for j in range(1, k + nu + 1))
        total = total + (psi + psi_nu) * term
    return total


def _y0_regular(t):  # Y0(x) - (2/pi) log(x) J0(x) = -(2/pi) (log(2) J0(x) + sum psi(k+1) (-x^2/4)^k / k!^2)
    x = np.sqrt(32.0 * (t + 1.0))
    return -2.0 / np.pi * (math.log(2.0) * S.j0(x) + 0.5 * _psi_series(x, 0))


def _y1_regular(t):  # (Y1(x) - (2/pi)(log(x) J1(x) - 1/x)) / x = -(2/pi) log(2) J1(x)/x - (1/(2 pi)) sum ...
    x = np.sqrt(32.0 * (t + 1.0))
    return -2.0 / np.pi * math.log(2.0) * _j1_over_x(t) - _psi_series(x, 1) / (2.0 * np.pi)


def _hankel(nu, part):
    """P or Q of J_nu, Y_nu for x >= 8 as a function of t = 16/x - 1 (u = 8/x in (0, 1]):
    J = sqrt(2/(pi x)) (P cos chi - Q sin chi), Y = sqrt(2/(pi x)) (P sin chi + Q cos chi)."""
    def f(t):
        x = 16.0 / (t + 1.0)
        xs = np.minimum(x, 12.0)  # above 12 the references are these expansions themselves
        j, y = (S.j0(xs), S.y0(xs)) if nu == 0 else (S.j1(xs), S.y1(xs))
        chi = xs - (nu / 2.0 + 0.25) * np.pi
        r = np.sqrt(np.pi * xs / 2.0)
        p = r * (j * np.cos(chi) + y * np.sin(chi))
        q = r * (y * np.cos(chi) - j * np.sin(chi))
        hp, hq = S._hankel(np.maximum(x, 12.0), nu)
        return np.where(x > 12.0, hp, p) if part == "p" else np.where(x > 12.0, hq, q)
    return f


def _k_scaled(nu):
    """sqrt(x) exp(x) K_nu(x) for x >= 2 as a function of t = 4/x - 1."""
    def f(t):
        x = 4.0 / (t + 1.0)
        x = np.minimum(x, 1e8)
        return np.sqrt(x) * (S.k0e(x) if nu == 0 else S.k1e(x))
    return f


def _i_large(nu):
    """sqrt(x) exp(-x) I_nu(x) for x >= 8, t = 16/x - 1."""
    def f(t):
        x = np.minimum(16.0 / (t + 1.0), 1e8)
        return np.sqrt(x) * (S.i0e(x) if nu == 0 else S.i1e(x))
    return f


AIRY_U_MAX = 1.0 / (2.0 / 3.0 * 2.0 ** 1.5)  # 1/zeta at |x| = 2, zeta = 2/3 |x|^3/2


def _airy_x(t):
    """|x| for t in [-1, 1]: u = 1/zeta runs over (0, AIRY_U_MAX] (x = +-2 at t = 1)."""
    u = np.maximum((t + 1.0) / 2.0 * AIRY_U_MAX, 1e-12)
    return (1.5 / u) ** (2.0 / 3.0), 1.0 / u


def _airy_positive(t):  # 2 sqrt(pi) x^1/4 exp(zeta) Ai(x), x >= 2: 1 - u_1/zeta + ... (DLMF 9.7.5)
    x, zeta = _airy_x(t)
    near = x <= 40.0
    xs = np.minimum(x, 40.0)
    direct = 2.0 * np.sqrt(np.pi) * xs ** 0.25 * np.exp(zeta * near) * S.airy_ai(xs)
    u = S._airy_u(20)
    series = sum((-1) ** k * u[k] / np.maximum(zeta, 1.0) ** k for k in range(20))
    return np.where(near, direct, series)


def _airy_negative(part):
    """P or Q of Ai(-x) = (cos(zeta - pi/4) P + sin(zeta - pi/4) Q) / (sqrt(pi) x^1/4), x >= 2: from Ai(-x) and
    Bi(-x) (their Maclaurin series) up to 6, the asymptotic series above (DLMF 9.7.9, 9.7.11)."""
    def f(t):
        x, zeta = _airy_x(t)
        xs = np.minimum(x, 6.0)
        fm, gm = S._airy_maclaurin(-xs)
        ai, bi = S.AIRY_C1 * fm - S.AIRY_C2 * gm, np.sqrt(3.0) * (S.AIRY_C1 * fm + S.AIRY_C2 * gm)
        zs = 2.0 / 3.0 * xs ** 1.5
        n = np.sqrt(np.pi) * xs ** 0.25
        phi = zs - np.pi / 4
        p = n * (ai * np.cos(phi) - bi * np.sin(phi))
        q = n * (ai * np.sin(phi) + bi * np.cos(phi))
        sp, sq = S.airy_pq(np.maximum(zeta, 1.0))
        return np.where(x <= 6.0, p, sp) if part == "p" else np.where(x <= 6.0, q, sq)
    return f


FITS = [
    # name, function of t in [-1, 1], degree
    ("LGAMMA_12", _lgamma_ratio, 10),
    ("J0_SMALL", _j0, 11),
    ("J1_SMALL", _j1_over_x, 10),
    ("Y0_SMALL", _y0_regular, 11),
    ("Y1_SMALL", _y1_regular, 10),
    ("J0_P", _hankel(0, "p"), 8),
    ("J0_Q", _hankel(0, "q"), 8),
    ("J1_P", _hankel(1, "p"), 8),
    ("J1_Q", _hankel(1, "q"), 8),
    ("I0_LARGE", _i_large(0), 12),
    ("I1_LARGE", _i_large(1), 12),
    ("K0_LARGE", _k_scaled(0), 12),
    ("K1_LARGE", _k_scaled(1), 12),
    ("AIRY_POS", _airy_positive, 12),
    ("AIRY_P", _airy_negative("p"), 12),
    ("AIRY_Q", _airy_negative("q"), 12),
]


LENGTH = 13  # every series padded with zeros to this many coefficients


def clenshaw32(c, t):
    """The Chebyshev series c at t, in float32, as the shader's cheb() evaluates it."""
    c = np.asarray(c, np.float32)
    t = np.asarray(t, np.float32)
    b1 = np.zeros_like(t)
    b2 = np.zeros_like(t)
    t2 = np.float32(2) * t
    for k in range(len(c) - 1, 0, -1):
        b1, b2 = t2 * b1 - b2 + c[k], b1
    return t * b1 - b2 + c[0]


def fit(fn, degree):
    return C.chebinterpolate(fn, degree)


def main():
    for name, fn, degree in FITS:
        c = fit(fn, degree)
        grid = np.cos(np.linspace(0.0, math.pi, 4001)[1:-1])
        ref = fn(grid)
        scale = max(np.max(np.abs(ref)), 1e-300)
        exact = np.max(np.abs(C.chebval(grid, c) - ref)) / scale
        f32 = np.max(np.abs(clenshaw32(c, grid).astype(np.float64) - ref)) / scale
        c = np.concatenate([c, np.zeros(LENGTH - len(c))])  # one length: the shader has one cheb()
        rows = [", ".join(f"{v:.9e}" for v in c[i:i + 6]) for i in range(0, len(c), 6)]
        body = ",\n    ".join(rows)
        print(f"// {name}: degree {degree}; error / largest value: {exact:.1e} (the series), {f32:.1e} (float32)")
        print(f"const {name} = array<f32, {len(c)}>(\n    {body});")


if __name__ == "__main__":
    main()
