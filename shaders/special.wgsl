// Elementwise math in float32 for the op table's records marked heavy (inverse trigonometric and hyperbolic
// functions, erfinv, lgamma, digamma, polygamma, zeta, igamma, erfcx, ndtri, Bessel functions, orthogonal
// polynomials, fmod, nextafter, ...). elementwise_special.wgsl compiles them with elementwise.wgsl (whose helpers
// they use: nan_f32, log_f32, log1p_f32, erfc_f32, sin_f32, cos_f32, atan2_f32, pow_f32, ...) into a module of
// their own, so that other elementwise pipelines do not compile this code. The special cases (poles, signs,
// infinities, NaN) are PyTorch's; the float64 references are webgrad/ops/special_numpy.py. Series with a
// singular or oscillating factor taken out are Chebyshev fits evaluated by Clenshaw's recurrence (the
// coefficients at the end of this file are printed by `python -m tools.special_fits`).

const PI: f32 = 3.14159265358979;
const LN2: f32 = 0.6931471805599453;
const EULER: f32 = 0.5772156649015329;
const FRAC_2_PI: f32 = 0.6366197723675814;        // 2 / pi
const SQRT_2_OVER_PI: f32 = 0.7978845608028654;   // sqrt(2 / pi)
const FRAC_1_SQRT_2: f32 = 0.7071067811865476;
const FRAC_2_SQRT_PI: f32 = 1.1283791670955126;   // 2 / sqrt(pi)

fn negative_bit(x: f32) -> bool { return (bitcast<u32>(x) >> 31u) != 0u; }

// v, or NaN where x is NaN: gradient formulas whose builtins (exp, log, division) a GPU need not carry NaN through
// (WGSL lets a compiler assume no NaN: SwiftShader's exp(NaN) is inf).
fn keep_nan(x: f32, v: f32) -> f32 { return select(v, x, is_nan(x)); }
fn with_sign(r: f32, x: f32) -> f32 { return select(r, -r, negative_bit(x)); }

// inverse trigonometric and hyperbolic
// 1 - x^2 as (1 - x)(1 + x): exact enough near +-1, where asin and acos are steepest.
fn asin_f32(x: f32) -> f32 { return atan2_f32(x, sqrt_f32((1.0 - x) * (1.0 + x))); }
fn acos_f32(x: f32) -> f32 { return atan2_f32(sqrt_f32((1.0 - x) * (1.0 + x)), x); }

fn acosh_f32(x: f32) -> f32 {
    if (is_nan(x) || x < 1.0) { return nan_f32(); }
    if (x > 1e4) { return log_f32(x) + LN2; }  // (inf too)
    let t = x - 1.0;
    return log1p_f32(t + sqrt(t * (x + 1.0)));
}

fn asinh_f32(x: f32) -> f32 {
    if (is_nan(x) || is_inf(x)) { return x; }
    let a = abs(x);
    var r: f32;
    if (a > 1e4) {
        r = log_f32(a) + LN2;
    } else {
        r = log1p_f32(a + a * a / (1.0 + sqrt(1.0 + a * a)));
    }
    return with_sign(r, x);
}

fn atanh_f32(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    let a = abs(x);
    if (a > 1.0) { return nan_f32(); }
    if (a == 1.0) { return with_sign(inf_f32(), x); }
    return with_sign(0.5 * log1p_f32(2.0 * a / (1.0 - a)), x);
}

// exp(a) / 2 as exp(a / 2)^2 / 2 above 10 (e^-a is negligible there): no overflow before the result's own.
fn half_exp(a: f32) -> f32 {
    let h = exp(0.5 * a);
    return 0.5 * h * h;
}

fn cosh_f32(x: f32) -> f32 {
    if (is_nan(x) || is_inf(x)) { return abs(x); }
    let a = abs(x);
    if (a > 10.0) { return half_exp(a); }
    let e = exp(a);
    return 0.5 * (e + 1.0 / e);
}

fn sinh_f32(x: f32) -> f32 {
    if (is_nan(x) || is_inf(x)) { return x; }
    let a = abs(x);
    if (a > 10.0) { return with_sign(half_exp(a), x); }
    let e = expm1_f32(a);
    return with_sign(0.5 * (e + e / (e + 1.0)), x);
}

// erfinv after M. Giles, "Approximating the erfinv function" (single precision, relative error ~2e-7).
fn erfinv_f32(y: f32) -> f32 {
    if (is_nan(y)) { return y; }
    let a = abs(y);
    if (a > 1.0) { return nan_f32(); }
    if (a == 1.0) { return with_sign(inf_f32(), y); }
    var w = -log((1.0 - a) * (1.0 + a));
    var p: f32;
    if (w < 5.0) {
        w = w - 2.5;
        p = 2.81022636e-08;
        p = 3.43273939e-07 + p * w;
        p = -3.5233877e-06 + p * w;
        p = -4.39150654e-06 + p * w;
        p = 0.00021858087 + p * w;
        p = -0.00125372503 + p * w;
        p = -0.00417768164 + p * w;
        p = 0.246640727 + p * w;
        p = 1.50140941 + p * w;
    } else {
        w = sqrt(w) - 3.0;
        p = -0.000200214257;
        p = 0.000100950558 + p * w;
        p = 0.00134934322 + p * w;
        p = -0.00367342844 + p * w;
        p = 0.00573950773 + p * w;
        p = -0.0076224613 + p * w;
        p = 0.00943887047 + p * w;
        p = 1.00167406 + p * w;
        p = 2.83297682 + p * w;
    }
    return p * y;
}

fn erfc_checked(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    return erfc_f32(x);
}

fn ndtr_f32(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    return 0.5 * erfc_f32(-x * FRAC_1_SQRT_2);
}


// The Airy function Ai: its Maclaurin series for |x| <= 2; above, exp(-zeta) g / (2 sqrt(pi) x^1/4) with
// g = 1 - u_1/zeta + ... fitted in 1/zeta; below, (cos(zeta - pi/4) P + sin(zeta - pi/4) Q) / (sqrt(pi) |x|^1/4)
// with P, Q fitted in 1/zeta (zeta = 2/3 |x|^3/2); NaN at +-inf, as PyTorch's.
const AIRY_U_MAX: f32 = 0.5303300858899107;  // 1/zeta at |x| = 2

fn airy_ai_f32(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    if (is_inf(x)) { return nan_f32(); }
    let z = abs(x);
    if (z <= 2.0) {
        let x3 = x * x * x;
        var ft = 1.0;
        var gt = x;
        var f = 1.0;
        var g = x;
        for (var k = 1; k < 14; k++) {
            let k3 = 3.0 * f32(k);
            ft *= x3 / ((k3 - 1.0) * k3);
            gt *= x3 / (k3 * (k3 + 1.0));
            f += ft;
            g += gt;
        }
        return 0.3550280538878172 * f - 0.2588194037928068 * g;
    }
    let zeta = 2.0 / 3.0 * z * sqrt(z);
    let t = 2.0 / (zeta * AIRY_U_MAX) - 1.0;
    let n = 1.7724538509055159 * sqrt(sqrt(z));  // sqrt(pi) |x|^1/4
    if (x > 0.0) { return exp(-zeta) * cheb(AIRY_POS, t) / (2.0 * n); }
    let c = cos_f32(zeta);
    let s = sin_f32(zeta);
    return ((c + s) * cheb(AIRY_P, t) + (s - c) * cheb(AIRY_Q, t)) * FRAC_1_SQRT_2 / n;
}

// sin(x) / x as PyTorch's spherical_bessel_j0 (its series below 1/2, 0 at +-inf).
fn spherical_j0_f32(x: f32) -> f32 {
    if (is_inf(x)) { return 0.0; }
    if (abs(x) < 0.5) {
        let s = x * x;
        return 1.0 + s * (-1.0 / 6.0 + s * (1.0 / 120.0 + s * (-1.0 / 5040.0 + s * (1.0 / 362880.0
            + s * (-1.0 / 39916800.0 + s * (1.0 / 6227020800.0))))));
    }
    return sin_f32(x) / x;
}

fn sinc_f32(x: f32) -> f32 {
    if (x == 0.0) { return 1.0; }
    let p = PI * x;
    return sin_f32(p) / p;
}

fn d_sinc_f32(x: f32) -> f32 {
    if (abs(x) < 1e-3) { return -PI * PI * x / 3.0; }  // the series: the quotient below cancels (and underflows)
    let p = PI * x;
    return (p * cos_f32(p) - sin_f32(p)) / (p * x);
}

// (mantissa, exponent) of x = mantissa * 2^exponent, |mantissa| in [0.5, 1); 0, inf and NaN as (x, 0).
fn frexp_f32(x: f32) -> vec2<f32> {
    if (x == 0.0 || is_nan(x) || is_inf(x)) { return vec2<f32>(x, 0.0); }
    var bits = bitcast<u32>(x);
    var e = i32((bits >> 23u) & 0xffu);
    var shift = 0;
    if (e == 0) {  // subnormal: scaled into the normal range first
        bits = bitcast<u32>(x * 16777216.0);
        e = i32((bits >> 23u) & 0xffu);
        shift = 24;
    }
    return vec2<f32>(bitcast<f32>((bits & 0x807fffffu) | (126u << 23u)), f32(e - 126 - shift));
}

// logit with PyTorch's eps (NaN: eps=None, no clamping).
fn logit_f32(x: f32, eps: f32) -> f32 {
    var z = x;
    if (!is_nan(eps)) { z = select(select(x, 1.0 - eps, x > 1.0 - eps), eps, x < eps); }
    return log_f32(z / (1.0 - z));
}

fn d_logit_f32(g: f32, x: f32, eps: f32) -> f32 {
    if (is_nan(eps)) {
        if (x < 0.0 || x > 1.0) { return nan_f32(); }
    } else if (x < eps || x > 1.0 - eps) {
        return 0.0;
    }
    return g / (x * (1.0 - x));
}

fn entr_f32(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    if (x > 0.0) {
        if (is_inf(x)) { return -inf_f32(); }
        return -x * log(x);
    }
    if (x == 0.0) { return 0.0; }
    return -inf_f32();
}

// C's fmod: x - trunc(x / y) y, the quotient's rounding corrected so that |r| < |y| with x's sign.
fn fmod_f32(x: f32, y: f32) -> f32 {
    if (is_nan(x) || is_nan(y) || is_inf(x) || y == 0.0) { return nan_f32(); }
    if (is_inf(y)) { return x; }
    var r = x - trunc(x / y) * y;
    let ay = abs(y);
    if (x >= 0.0) {
        if (r < 0.0) { r += ay; }
        if (r >= ay) { r -= ay; }
    } else {
        if (r > 0.0) { r -= ay; }
        if (r <= -ay) { r += ay; }
    }
    return select(r, copysign_f32(0.0, x), r == 0.0);
}

fn nextafter_f32(x: f32, y: f32) -> f32 {
    if (is_nan(x) || is_nan(y)) { return nan_f32(); }
    if (x == y) { return y; }
    if (x == 0.0) { return bitcast<f32>(select(1u, 0x80000001u, y < 0.0)); }
    let b = bitcast<u32>(x);
    return bitcast<f32>(select(b - 1u, b + 1u, (y > x) == (x > 0.0)));  // away from zero, or toward it
}

fn logaddexp2_f32(x: f32, y: f32) -> f32 {
    let m = max_f32(x, y);
    if (is_inf(m) && x == y) { return m; }
    return m + log1p_f32(exp2(-abs(x - y))) * 1.4426950408889634;
}

fn xlogy_f32(x: f32, y: f32, plus_one: bool) -> f32 {
    if (is_nan(y)) { return y; }
    if (x == 0.0) { return 0.0; }
    return x * select(log_f32(y), log1p_f32(y), plus_one);
}

// The Chebyshev series c (13 coefficients, zero-padded) at t in [-1, 1].
fn cheb(c: array<f32, 13>, t: f32) -> f32 {
    var b1 = 0.0;
    var b2 = 0.0;
    let t2 = 2.0 * t;
    for (var k = 12; k > 0; k--) {
        let b = t2 * b1 - b2 + c[k];
        b2 = b1;
        b1 = b;
    }
    return t * b1 - b2 + c[0];
}

// ------------------------------------------------------------------ error function family
// exp(x^2) erfc(x): erfc_f32's fit (t exp(-x^2 + poly(t))) without its exp(-x^2), so nothing under- or
// overflows for x >= 0 (relative error ~1.2e-7); 2 exp(x^2) - erfcx(-x) below 0.
fn erfcx_pos(z: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.5 * z);
    return t * exp(-1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
        + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
}

fn erfcx_f32(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    if (x >= 0.0) {
        if (is_inf(x)) { return 0.0; }
        return erfcx_pos(x);
    }
    if (x < -9.5) { return inf_f32(); }  // 2 exp(x^2) overflows
    return 2.0 * exp(x * x) - erfcx_pos(-x);
}

// log(ndtr(x)) as PyTorch's calc_log_ndtr: through erfcx below -1, where ndtr underflows.
fn log_ndtr_f32(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    let t = x * FRAC_1_SQRT_2;
    if (x < -1.0) { return log_f32(0.5 * erfcx_f32(-t)) - t * t; }
    return log1p_f32(-0.5 * erfc_f32(t));
}

// The inverse of ndtr: sqrt(2) erfinv(2p - 1) in the middle (2p - 1 exact there); in the tails Abramowitz and
// Stegun 26.2.23 (error 4.5e-4), then Newton steps on log(ndtr), on the lower half (1 - p is exact above 1/2).
fn ndtri_f32(p: f32) -> f32 {
    if (is_nan(p) || p < 0.0 || p > 1.0) { return nan_f32(); }
    if (p == 0.0) { return -inf_f32(); }
    if (p == 1.0) { return inf_f32(); }
    if (p > 0.25 && p < 0.75) { return 1.4142135623730951 * erfinv_f32(2.0 * p - 1.0); }
    let q = min(p, 1.0 - p);
    let lq = log(q);
    let t = sqrt(-2.0 * lq);
    var x = -(t - (2.515517 + t * (0.802853 + t * 0.010328)) / (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))));
    for (var i = 0; i < 3; i++) {
        let c = ndtr_f32(x);
        let pdf = 0.3989422804014327 * exp(-0.5 * x * x);
        x -= (log(c) - lq) * c / pdf;
    }
    return select(x, -x, p > 0.5);
}

// ------------------------------------------------------------------ gamma family
// sin(pi x) for |x| <= 1/2 (callers reduce by an exact x - round(x)).
fn sinpi_small(d: f32) -> f32 { return sin_f32(PI * d); }

// cot(pi d) for |d| <= 1/2, through tan(pi (1/2 - |d|)) beyond 1/4: exactly 0 at d = +-1/2, where
// cos(pi d) of a rounded pi d is not.
fn cotpi_small(d: f32) -> f32 {
    if (abs(d) > 0.25) {
        let e = PI * (0.5 - abs(d));
        return with_sign(sin_f32(e) / cos_f32(e), d);
    }
    return cos_f32(PI * d) / sin_f32(PI * d);
}

// lgamma(x) = (x - 1)(x - 2) g(x) on [1, 2], g a Chebyshev fit: exact zeros at 1 and 2.
fn lgamma_12(x: f32) -> f32 { return (x - 1.0) * (x - 2.0) * cheb(LGAMMA_12, 2.0 * x - 3.0); }

fn lgamma_pos(x: f32) -> f32 {
    if (x < 1.0) { return lgamma_12(x + 1.0) - log_f32(x); }
    if (x <= 2.0) { return lgamma_12(x); }
    if (x < 8.0) {  // lgamma(x) = lgamma(z) + log((z)(z+1)...(x-1)), z in (1, 2]: each x - 1 exact
        var z = x;
        var p = 1.0;
        while (z > 2.0) {
            z -= 1.0;
            p *= z;
        }
        return lgamma_12(z) + log_f32(p);
    }
    if (is_inf(x)) { return x; }
    let r = 1.0 / x;  // Stirling's series
    let r2 = r * r;
    let s = r * (1.0 / 12.0 - r2 * (1.0 / 360.0 - r2 * (1.0 / 1260.0 - r2 / 1680.0)));
    return (x - 0.5) * log_f32(x) - x + 0.9189385332046727 + s;
}

fn lgamma_f32(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    if (x > 0.0) { return lgamma_pos(x); }
    let d = abs(x - round(x));  // exact; |sin(pi x)| = sin(pi d)
    if (d == 0.0 || is_inf(x)) { return inf_f32(); }  // the poles (0, -0 and the negative integers), -inf
    return 1.1447298858494002 - log_f32(sinpi_small(d)) - lgamma_pos(1.0 - x);  // reflection
}

// digamma as PyTorch's calc_digamma (float): reflection below 0 (pi / tan(pi x) from the exact
// x - round(x)), the recurrence up to 10, the asymptotic series there.
fn digamma_f32(x0: f32) -> f32 {
    if (is_nan(x0)) { return x0; }
    if (x0 == 0.0) { return select(-inf_f32(), inf_f32(), negative_bit(x0)); }
    var x = x0;
    var result = 0.0;
    if (x < 0.0) {
        if (x == floor(x)) { return nan_f32(); }  // the negative integers and -inf
        result = -PI * cotpi_small(x - round(x));
        x = 1.0 - x;
    }
    if (is_inf(x)) { return x; }
    while (x < 10.0) {
        result -= 1.0 / x;
        x += 1.0;
    }
    if (x == 10.0) { return result + 2.25175258906672110764; }
    var y = 0.0;
    if (x < 1e17) {
        let z = 1.0 / (x * x);
        y = z * (8.33333333333333333333e-2 + z * (-8.33333333333333333333e-3 + z * (3.96825396825396825397e-3
            + z * (-4.16666666666666666667e-3 + z * (7.57575757575757575758e-3 + z * (-2.10927960927960927961e-2
            + z * 8.33333333333333333333e-2))))));
    }
    return result + log(x) - 0.5 / x - y;
}

// trigamma as PyTorch's calc_trigamma (reflection below 1/2 with an exact sin(pi x) at the poles).
fn trigamma_f32(x0: f32) -> f32 {
    var x = x0;
    var sign = 1.0;
    var result = 0.0;
    if (x < 0.5) {
        sign = -1.0;
        let s = sinpi_small(x - round(x));
        result -= PI * PI / (s * s);
        x = 1.0 - x;
    }
    for (var i = 0; i < 6; i++) {
        result += 1.0 / (x * x);
        x += 1.0;
    }
    let ixx = 1.0 / (x * x);
    result += (1.0 + 1.0 / (2.0 * x) + ixx * (1.0 / 6.0 - ixx * (1.0 / 30.0 - ixx * (1.0 / 42.0)))) / x;
    return sign * result;
}

// (2k)! / B_2k, k = 1..12: the Euler-Maclaurin coefficients of Cephes' zeta.
const ZETA_A = array<f32, 12>(12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
    7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
    1.8152105401943546773e17, -7.1661652561756670113e18);

// a^e for zeta's terms (e <= -1, or NaN): C's pow, the infinite e included, which the GPU builtin leaves undefined.
fn zeta_pow(a: f32, e: f32) -> f32 {
    if (is_inf(e)) {
        let m = abs(a);
        if (m == 1.0) { return 1.0; }
        return select(0.0, inf_f32(), m < 1.0);
    }
    return pow_f32(a, e);
}

// The Hurwitz zeta function as Cephes' zeta (PyTorch's), in float32.
fn zeta_f32(x: f32, q: f32) -> f32 {
    // PyTorch's checks, in its order (a NaN passes the comparisons it fails)
    if (x == 1.0) { return inf_f32(); }
    if (x < 1.0) { return nan_f32(); }
    if (q <= 0.0) {
        if (q == floor(q)) { return inf_f32(); }
        if (x != floor(x) || is_nan(x)) { return nan_f32(); }
    }
    if (is_nan(x) || is_nan(q)) { return nan_f32(); }
    let machep = 5.9604645e-8;
    var s = zeta_pow(q, -x);
    var a = q;
    var b = 0.0;
    var i = 0;
    while (i < 9 || a <= 9.0) {
        i += 1;
        a += 1.0;
        b = zeta_pow(a, -x);
        s += b;
        if (abs(b / s) < machep) { return s; }
    }
    let w = a;
    s += b * w / (x - 1.0);
    s -= 0.5 * b;
    var aa = 1.0;
    var k = 0.0;
    for (var j = 0; j < 12; j++) {
        aa *= x + k;
        b /= w;
        let t = aa * b / ZETA_A[j];
        s += t;
        if (abs(t / s) < machep) { return s; }
        k += 1.0;
        aa *= x + k;
        b /= w;
        k += 1.0;
    }
    return s;
}

// psi^(n)(x) as PyTorch's: digamma, trigamma, else (-1)^(n+1) n! zeta(n + 1, x); below 0 (away from the
// poles) by the reflection psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi d^n/dx^n cot(pi x): zeta's terms beside
// the poles cancel there, beyond float32's precision.
fn polygamma_f32(n: f32, x: f32) -> f32 {
    if (n == 0.0) { return digamma_f32(x); }
    if (n == 1.0) { return trigamma_f32(x); }
    var f = 1.0;
    for (var k = 2.0; k <= n; k += 1.0) { f *= k; }
    let odd = (i32(n) & 1) == 1;
    if (x < 0.0 && x != floor(x) && n <= 20.0) {
        let reflected = select(-f, f, odd) * zeta_f32(n + 1.0, 1.0 - x);
        return select(reflected, -reflected, odd) - cot_derivative(i32(n), x);
    }
    let z = zeta_f32(n + 1.0, x);
    return select(-f, f, odd) * z;
}

// pi d^n/dx^n cot(pi x) = pi^(n+1) P_n(cot(pi x)), P_0(c) = c, P_{k+1}(c) = -(1 + c^2) P_k'(c), for n <= 20.
fn cot_derivative(n: i32, x: f32) -> f32 {
    // (every variable declared at the top, its values set by statements: a declaration inside a loop is not
    // re-initialised at each iteration by every WGSL compiler)
    var p: array<f32, 23>;  // P_k's coefficients, c^0 .. c^(k+1)
    var q: array<f32, 23>;
    for (var j = 0; j < 23; j++) { p[j] = 0.0; }
    p[1] = 1.0;
    for (var k = 0; k < n; k++) {
        for (var j = 0; j < 23; j++) { q[j] = 0.0; }
        for (var j = 1; j <= k + 1; j++) {  // -(1 + c^2) j p_j c^(j-1)
            let d = -f32(j) * p[j];
            q[j - 1] += d;
            q[j + 1] += d;
        }
        p = q;
    }
    let c = cotpi_small(x - round(x));
    var sum = 0.0;
    for (var j = n + 1; j >= 0; j--) { sum = sum * c + p[j]; }
    return pow(PI, f32(n + 1)) * sum;
}

// The regularized incomplete gamma functions P(a, x) and Q(a, x) = 1 - P(a, x), with PyTorch's special cases
// and its choice of method: P's power series, Q's continued fraction, or for small x Q's own series.
fn igamma_prefactor(a: f32, x: f32) -> f32 { return exp(a * log(x) - x - lgamma_f32(a)); }

fn igamma_series(a: f32, x: f32) -> f32 {
    var ap = a;
    var term = 1.0 / a;
    var sum = term;
    for (var i = 0; i < 500; i++) {
        ap += 1.0;
        term *= x / ap;
        sum += term;
        if (abs(term) < abs(sum) * 3e-8) { break; }
    }
    return sum * igamma_prefactor(a, x);
}

fn igammac_fraction(a: f32, x: f32) -> f32 {
    let tiny = 1e-30;
    var b = x + 1.0 - a;
    var c = 1.0 / tiny;
    var d = 1.0 / b;
    var h = d;
    for (var i = 1; i < 500; i++) {
        let an = -f32(i) * (f32(i) - a);
        b += 2.0;
        d = an * d + b;
        if (abs(d) < tiny) { d = tiny; }
        c = b + an / c;
        if (abs(c) < tiny) { c = tiny; }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (abs(del - 1.0) < 3e-8) { break; }
    }
    return igamma_prefactor(a, x) * h;
}

// lgamma(1 + a) for a in (-1/2, 1] without rounding 1 + a (lgamma_12's fit taken at 1 + a, or 2 + a).
fn lgamma1p_f32(a: f32) -> f32 {
    if (a >= 0.0) { return a * (a - 1.0) * cheb(LGAMMA_12, 2.0 * a - 1.0); }
    return (1.0 + a) * a * cheb(LGAMMA_12, 2.0 * a + 1.0) - log1p_f32(a);
}

// Q(a, x) for small x (Cephes' igamc_series): 1 - x^a / Gamma(1 + a) + x^a / Gamma(a) sum_n (-x)^n / (n! (a + n)).
fn igammac_series(a: f32, x: f32) -> f32 {
    var fac = 1.0;
    var sum = 0.0;
    for (var n = 1; n < 200; n++) {
        fac *= -x / f32(n);
        let term = fac / (a + f32(n));
        sum += term;
        if (abs(term) <= 3e-8 * abs(sum)) { break; }
    }
    let logx = log(x);
    var lg1p: f32;
    if (a <= 1.0) {
        lg1p = lgamma1p_f32(a);
    } else {
        lg1p = lgamma_f32(1.0 + a);
    }
    return -expm1_f32(a * logx - lg1p) - exp(a * logx - lgamma_f32(a)) * sum;
}

fn igammac_regular(a: f32, x: f32) -> f32 {
    var p_series: bool;
    if (x > 1.1) {
        p_series = x < a;
    } else if (x <= 0.5) {
        p_series = -0.4 / log(x) < a;
    } else {
        p_series = x * 1.1 < a;
    }
    if (p_series) { return 1.0 - igamma_series(a, x); }
    if (x > 1.1) { return igammac_fraction(a, x); }
    return igammac_series(a, x);
}

// upper = false: P(a, x); true: Q(a, x).
fn igamma_f32(a: f32, x: f32, upper: bool) -> f32 {
    // PyTorch's checks, in its order (a NaN falls through all but the ones it meets first)
    if (a < 0.0 || x < 0.0) { return nan_f32(); }
    let one = select(1.0, 0.0, upper);
    if (a == 0.0) { return select(nan_f32(), one, x > 0.0); }
    if (x == 0.0) { return 1.0 - one; }
    if (is_inf(a)) { return select(1.0 - one, nan_f32(), is_inf(x)); }
    if (is_inf(x)) { return one; }
    if (is_nan(a) || is_nan(x)) { return nan_f32(); }
    if (upper) { return igammac_regular(a, x); }
    if (x > 1.0 && x > a) { return 1.0 - igammac_regular(a, x); }
    return igamma_series(a, x);
}

// ------------------------------------------------------------------ Bessel functions
// J and Y above 8: sqrt(2/(pi x)) (P cos chi - Q sin chi) and (P sin chi + Q cos chi), chi = x - (2 nu + 1)
// pi / 4, P and Q fitted in 16/x - 1; cos chi and sin chi from sin_f32(x) and cos_f32(x) (exactly reduced).
fn hankel_jy(z: f32, nu: i32) -> vec2<f32> {
    let t = 16.0 / z - 1.0;
    var p: f32;
    var q: f32;
    var cc: f32;
    var sc: f32;
    let c = cos_f32(z);
    let s = sin_f32(z);
    if (nu == 0) {
        p = cheb(J0_P, t);
        q = cheb(J0_Q, t);
        cc = (c + s) * FRAC_1_SQRT_2;
        sc = (s - c) * FRAC_1_SQRT_2;
    } else {
        p = cheb(J1_P, t);
        q = cheb(J1_Q, t);
        cc = (s - c) * FRAC_1_SQRT_2;
        sc = -(c + s) * FRAC_1_SQRT_2;
    }
    let r = SQRT_2_OVER_PI / sqrt(z);
    return r * vec2<f32>(p * cc - q * sc, p * sc + q * cc);
}

fn bessel_j0_f32(x: f32) -> f32 {
    if (is_nan(x) || is_inf(x)) { return nan_f32(); }
    let z = abs(x);
    if (z <= 8.0) { return cheb(J0_SMALL, z * z / 32.0 - 1.0); }
    return hankel_jy(z, 0).x;
}

fn bessel_j1_f32(x: f32) -> f32 {
    if (is_nan(x) || is_inf(x)) { return nan_f32(); }
    let z = abs(x);
    var r: f32;
    if (z <= 8.0) {
        r = z * cheb(J1_SMALL, z * z / 32.0 - 1.0);
    } else {
        r = hankel_jy(z, 1).x;
    }
    return select(r, -r, x < 0.0);
}

fn bessel_y0_f32(x: f32) -> f32 {
    if (is_nan(x) || x < 0.0 || is_inf(x)) { return nan_f32(); }
    if (x == 0.0) { return -inf_f32(); }
    if (x <= 8.0) { return cheb(Y0_SMALL, x * x / 32.0 - 1.0) + FRAC_2_PI * log(x) * bessel_j0_f32(x); }
    return hankel_jy(x, 0).y;
}

fn bessel_y1_f32(x: f32) -> f32 {
    if (is_nan(x) || x < 0.0 || is_inf(x)) { return nan_f32(); }
    if (x == 0.0) { return -inf_f32(); }
    if (x <= 8.0) {
        return x * cheb(Y1_SMALL, x * x / 32.0 - 1.0) + FRAC_2_PI * (log(x) * bessel_j1_f32(x) - 1.0 / x);
    }
    return hankel_jy(x, 1).y;
}

// sum_k (z/2)^(2k+nu) / (k! (k+nu)!) for z in [0, 8], nu = 0, 1: positive terms, no cancellation.
fn bessel_i_series(z: f32, nu: i32) -> f32 {
    let t = 0.25 * z * z;
    var term = select(1.0, 0.5 * z, nu == 1);
    var sum = term;
    for (var k = 1; k < 40; k++) {
        term *= t / f32(k * (k + nu));
        sum += term;
        if (term < sum * 3e-8) { break; }
    }
    return sum;
}

// exp(-|x|) I_nu(|x|): the series up to 8, sqrt(x) exp(-x) I_nu(x) fitted in 16/x - 1 above.
fn bessel_i_scaled(z: f32, nu: i32) -> f32 {
    if (z <= 8.0) { return bessel_i_series(z, nu) * exp(-z); }
    if (is_inf(z)) { return 0.0; }
    let c = select(cheb(I0_LARGE, 16.0 / z - 1.0), cheb(I1_LARGE, 16.0 / z - 1.0), nu == 1);
    return c / sqrt(z);
}

fn bessel_i_f32(x: f32, nu: i32, scaled: bool) -> f32 {
    if (is_nan(x)) { return x; }
    let z = abs(x);
    var r: f32;
    if (scaled) {
        r = bessel_i_scaled(z, nu);
    } else {
        if (is_inf(x)) { return nan_f32(); }  // as PyTorch's i0 and i1
        if (z <= 8.0) {
            r = bessel_i_series(z, nu);
        } else {
            let h = exp(0.5 * z);  // exp(z) as h * h: no overflow before the result's own
            r = bessel_i_scaled(z, nu) * h * h;
        }
    }
    return select(r, -r, nu == 1 && x < 0.0);
}

// K_nu(x) for 0 < x <= 2 by the series of A&S 9.6.13 / 9.6.11 (psi(k+1) = -gamma + H_k).
fn bessel_k_small(x: f32, nu: i32) -> f32 {
    let t = 0.25 * x * x;
    let lg = log(0.5 * x);
    var term = 1.0;
    var h = 0.0;  // H_k
    var sum = 0.0;
    if (nu == 0) {
        for (var k = 0; k < 12; k++) {
            if (k > 0) {
                term *= t / f32(k * k);
                h += 1.0 / f32(k);
            }
            sum += (h - EULER) * term;
        }
        return -lg * bessel_i_series(x, 0) + sum;
    }
    var h1 = 1.0;  // H_{k+1}
    for (var k = 0; k < 12; k++) {
        if (k > 0) {
            term *= t / f32(k * (k + 1));
            h += 1.0 / f32(k);
            h1 += 1.0 / f32(k + 1);
        }
        sum += (h + h1 - 2.0 * EULER) * term;
    }
    return 1.0 / x + lg * bessel_i_series(x, 1) - 0.25 * x * sum;
}

// K_nu(x), or exp(x) K_nu(x) when scaled: the series up to 2, sqrt(x) exp(x) K_nu(x) fitted in 4/x - 1 above.
fn bessel_k_f32(x: f32, nu: i32, scaled: bool) -> f32 {
    if (is_nan(x) || x < 0.0) { return nan_f32(); }
    if (x == 0.0) { return inf_f32(); }
    if (x <= 2.0) {
        let k = bessel_k_small(x, nu);
        return select(k, k * exp(x), scaled);
    }
    if (is_inf(x)) { return 0.0; }
    let c = select(cheb(K0_LARGE, 4.0 / x - 1.0), cheb(K1_LARGE, 4.0 / x - 1.0), nu == 1) / sqrt(x);
    return select(c * exp(-x), c, scaled);
}

// ------------------------------------------------------------------ orthogonal polynomials
// The degree as PyTorch's int64 cast of the float n: truncation, NaN and infinities below 0.
fn poly_degree(n: f32) -> i32 {
    if (is_nan(n) || is_inf(n) || abs(n) >= 2147483648.0) { return -1; }
    return i32(trunc(n));
}

// p_k = (a x + b) p_{k-1} - c p_{k-2} style three-term recurrences, as PyTorch writes each.
fn chebyshev_rec(x: f32, k: i32, p1: f32) -> f32 {
    if (k == 0) { return 1.0; }
    if (k == 1) { return p1; }
    var p = 1.0;
    var q = p1;
    var r = 0.0;
    for (var j = 2; j <= k; j++) {
        r = (x + x) * q - p;
        p = q;
        q = r;
    }
    return r;
}

fn chebyshev_t_f32(x: f32, n: f32) -> f32 {
    let k = poly_degree(n);
    if (k < 0) { return 0.0; }
    if (abs(x) == 1.0) { return select(-1.0, 1.0, x > 0.0 || k % 2 == 0); }
    if (k > 6 && abs(x) < 1.0) { return cos_f32(f32(k) * acos_f32(x)); }
    return chebyshev_rec(x, k, x);
}

fn chebyshev_u_f32(x: f32, n: f32) -> f32 {
    let k = poly_degree(n);
    if (k < 0) { return 0.0; }
    let kf = f32(k);
    if (abs(x) == 1.0) { return select(-(kf + 1.0), kf + 1.0, x > 0.0 || k % 2 == 0); }
    if (k > 8 && abs(x) < 1.0) {
        let th = acos_f32(x);
        let s = sin_f32(th);
        if (s != 0.0) { return sin_f32((kf + 1.0) * th) / s; }
        return (kf + 1.0) * cos_f32((kf + 1.0) * th) / x;
    }
    return chebyshev_rec(x, k, x + x);
}

fn chebyshev_v_f32(x: f32, n: f32) -> f32 {
    let k = poly_degree(n);
    if (k < 0) { return 0.0; }
    let kf = f32(k);
    let odd = select(-(kf + kf + 1.0), kf + kf + 1.0, k % 2 == 0);
    if (abs(x) == 1.0) { return select(odd, 1.0, x > 0.0); }
    if (k > 8 && abs(x) < 1.0) {
        let th = acos_f32(x);
        if (sin_f32(th / 2.0) != 1.0) { return cos_f32((kf + 0.5) * th) / cos_f32(th / 2.0); }
        return odd;
    }
    return chebyshev_rec(x, k, x + x - 1.0);
}

fn chebyshev_w_f32(x: f32, n: f32) -> f32 {
    let k = poly_degree(n);
    if (k < 0) { return 0.0; }
    let kf = f32(k);
    let edge = select(select(-1.0, 1.0, k % 2 == 0), kf + kf + 1.0, x > 0.0);
    if (abs(x) == 1.0) { return edge; }
    if (k > 8 && abs(x) < 1.0) {
        let th = acos_f32(x);
        if (cos_f32(th / 2.0) != 1.0) { return sin_f32((kf + 0.5) * th) / sin_f32(th / 2.0); }
        return edge;
    }
    return chebyshev_rec(x, k, x + x + 1.0);
}

fn hermite_h_f32(x: f32, n: f32) -> f32 {
    let k = poly_degree(n);
    if (k < 0) { return 0.0; }
    if (k == 0) { return 1.0; }
    var p = 1.0;
    var q = x + x;
    for (var j = 2; j <= k; j++) {
        let r = (x + x) * q - 2.0 * f32(j - 1) * p;
        p = q;
        q = r;
    }
    return q;
}

fn hermite_he_f32(x: f32, n: f32) -> f32 {
    let k = poly_degree(n);
    if (k < 0) { return 0.0; }
    if (k == 0) { return 1.0; }
    var p = 1.0;
    var q = x;
    for (var j = 2; j <= k; j++) {
        let r = x * q - f32(j - 1) * p;
        p = q;
        q = r;
    }
    return q;
}

fn laguerre_l_f32(x: f32, n: f32) -> f32 {
    let k = poly_degree(n);
    if (k < 0) { return 0.0; }
    if (x == 0.0 || k == 0) { return 1.0; }
    var p = 1.0;
    var q = 1.0 - x;
    for (var j = 2; j <= k; j++) {
        let r = ((f32(2 * j - 1) - x) * q - f32(j - 1) * p) / f32(j);
        p = q;
        q = r;
    }
    return q;
}

fn legendre_p_f32(x: f32, n: f32) -> f32 {
    let k = poly_degree(n);
    if (k < 0) { return 0.0; }
    if (abs(x) == 1.0) { return select(-1.0, 1.0, x > 0.0 || k % 2 == 0); }
    if (k == 0) { return 1.0; }
    var p = 1.0;
    var q = x;
    for (var j = 2; j <= k; j++) {
        let r = (f32(2 * j - 1) * x * q - f32(j - 1) * p) / f32(j);
        p = q;
        q = r;
    }
    return q;
}

// ------------------------------------------------------------------ fitted Chebyshev series
// (printed by `python -m tools.special_fits`; each line's comment gives the fit's error)
// LGAMMA_12: degree 10; error / largest value: 2.7e-09 (the series), 9.1e-08 (float32)
const LGAMMA_12 = array<f32, 13>(
    4.914153930e-01, -7.611416167e-02, 8.432324966e-03, -1.079493726e-03, 1.490074800e-04, -2.151239991e-05,
    3.197932948e-06, -4.851691290e-07, 7.471368292e-08, -1.163091537e-08, 1.783240717e-09, 0.000000000e+00,
    0.000000000e+00);
// J0_SMALL: degree 11; error / largest value: 8.2e-11 (the series), 5.5e-07 (float32)
const J0_SMALL = array<f32, 13>(
    1.577279715e-01, -8.723442353e-03, 2.651786132e-01, -3.700949939e-01, 1.580671023e-01, -3.489376941e-02,
    4.819180069e-03, -4.606261662e-04, 3.246032882e-05, -1.761946905e-06, 7.608159536e-08, -2.677308537e-09,
    0.000000000e+00);
// J1_SMALL: degree 10; error / largest value: 2.5e-10 (the series), 3.0e-07 (float32)
const J1_SMALL = array<f32, 13>(
    8.104484633e-02, -1.489751451e-01, 1.609992624e-01, -8.268049177e-02, 2.221363965e-02, -3.646940601e-03,
    4.050337728e-04, -3.255554867e-05, 1.985877403e-06, -9.521977503e-08, 3.683973569e-09, 0.000000000e+00,
    0.000000000e+00);
// Y0_SMALL: degree 11; error / largest value: 3.0e-10 (the series), 7.1e-07 (float32)
const Y0_SMALL = array<f32, 13>(
    -3.314611320e-02, -2.744743055e-01, 1.790343141e-01, 2.615673463e-01, -1.773020128e-01, 4.719668960e-02,
    -7.287962480e-03, 7.531135933e-04, -5.632079141e-05, 3.206532536e-06, -1.440722460e-07, 5.244767306e-09,
    0.000000000e+00);
// Y1_SMALL: degree 10; error / largest value: 1.3e-09 (the series), 5.2e-07 (float32)
const Y1_SMALL = array<f32, 13>(
    2.538013236e-03, -1.608717305e-02, -9.591204536e-02, 8.445197260e-02, -2.832812394e-02, 5.289897544e-03,
    -6.414551451e-04, 5.505982873e-05, -3.538080016e-06, 1.770778935e-07, -7.104085169e-09, 0.000000000e+00,
    0.000000000e+00);
// J0_P: degree 8; error / largest value: 5.4e-12 (the series), 4.9e-08 (float32)
const J0_P = array<f32, 13>(
    9.995950648e-01, -5.380795615e-04, -1.317967711e-04, 1.514225139e-06, 1.584685419e-07, -8.560937596e-09,
    -2.958198992e-10, 6.592478724e-11, -2.059224315e-12, 0.000000000e+00, 0.000000000e+00, 0.000000000e+00,
    0.000000000e+00);
// J0_Q: degree 8; error / largest value: 5.4e-10 (the series), 7.4e-08 (float32)
const J0_Q = array<f32, 13>(
    -7.769355694e-03, -7.748032309e-03, 2.536541110e-05, 3.942735375e-06, -1.072348393e-07, -7.213182552e-09,
    7.379906373e-10, 1.024234185e-12, -6.468169292e-12, 0.000000000e+00, 0.000000000e+00, 0.000000000e+00,
    0.000000000e+00);
// J1_P: degree 8; error / largest value: 4.3e-12 (the series), 1.1e-07 (float32)
const J1_P = array<f32, 13>(
    1.000677536e+00, 9.010072520e-04, 2.217243492e-04, -1.965759426e-06, -2.088953235e-07, 1.028139347e-08,
    3.759368121e-10, -7.637502009e-11, 2.495288832e-12, 0.000000000e+00, 0.000000000e+00, 0.000000000e+00,
    0.000000000e+00);
// J1_Q: degree 8; error / largest value: 1.9e-10 (the series), 1.2e-07 (float32)
const J1_Q = array<f32, 13>(
    2.337682999e-02, 2.334680122e-02, -3.576010535e-05, -5.608630871e-06, 1.327387916e-07, 9.169022425e-09,
    -8.687386758e-10, -3.275706990e-12, 7.386222200e-12, 0.000000000e+00, 0.000000000e+00, 0.000000000e+00,
    0.000000000e+00);
// I0_LARGE: degree 12; error / largest value: 1.2e-12 (the series), 6.6e-08 (float32)
const I0_LARGE = array<f32, 13>(
    4.022452055e-01, 3.369116478e-03, 6.889758347e-05, 2.891370521e-06, 2.048918588e-07, 2.266668979e-08,
    3.396232222e-09, 4.940605650e-10, 1.188706488e-11, -3.150292249e-11, -1.320630036e-11, -1.752754279e-12,
    7.030771838e-13);
// I1_LARGE: degree 12; error / largest value: 1.3e-12 (the series), 6.5e-08 (float32)
const I1_LARGE = array<f32, 13>(
    3.892881175e-01, -9.761097491e-03, -1.105889388e-04, -3.882564809e-06, -2.512236239e-07, -2.631468852e-08,
    -3.835380695e-09, -5.589746344e-10, -1.897333718e-11, 3.252997774e-11, 1.411536476e-11, 1.992904314e-12,
    -6.983266003e-13);
// K0_LARGE: degree 12; error / largest value: 6.1e-12 (the series), 5.3e-08 (float32)
const K0_LARGE = array<f32, 13>(
    1.220151541e+00, -3.144810131e-02, 1.569883886e-03, -1.284954958e-04, 1.394981372e-05, -1.831755523e-06,
    2.766813630e-07, -4.660489714e-08, 8.574026948e-09, -1.697512199e-09, 3.576591966e-10, -7.927681398e-11,
    1.742025718e-11);
// K1_LARGE: degree 12; error / largest value: 5.9e-12 (the series), 7.4e-08 (float32)
const K1_LARGE = array<f32, 13>(
    1.360313095e+00, 1.039237366e-01, -2.857816860e-03, 1.952155185e-04, -1.936197974e-05, 2.406484948e-06,
    -3.501960601e-07, 5.741083914e-08, -1.034575624e-08, 2.015024919e-09, -4.189460436e-10, 9.184835115e-11,
    -2.000925059e-11);
// AIRY_POS: degree 12; error / largest value: 4.8e-12 (the series), 5.7e-08 (float32)
const AIRY_POS = array<f32, 13>(
    9.844053049e-01, -1.479278485e-02, 7.327177465e-04, -6.125954235e-05, 6.834766972e-06, -9.237229706e-07,
    1.436225343e-07, -2.489318610e-08, 4.709781727e-09, -9.583734554e-10, 2.073984390e-10, -4.717134313e-11,
    1.060888080e-11);
// AIRY_P: degree 12; error / largest value: 1.4e-10 (the series), 5.8e-08 (float32)
const AIRY_P = array<f32, 13>(
    9.967891298e-01, -4.130128828e-03, -8.239390723e-04, 9.509829060e-05, -2.336529286e-06, -1.611678544e-06,
    4.487176634e-07, -6.185462879e-08, -1.502214652e-09, 3.875506350e-09, -1.369970924e-09, 2.910321307e-10,
    -2.903949107e-11);
// AIRY_Q: degree 12; error / largest value: 4.7e-09 (the series), 1.5e-07 (float32)
const AIRY_Q = array<f32, 13>(
    1.719270774e-02, 1.664612911e-02, -6.058399029e-04, -4.351724762e-05, 1.412203897e-05, -1.735429049e-06,
    -1.723575750e-08, 7.141396091e-08, -2.154574155e-08, 3.594727978e-09, -2.672166938e-11, -2.375796031e-10,
    1.006366289e-10);
