// tanh, erfc and the standard normal cdf and pdf in float32, and GELU's constants: the functions of the op
// table's tanh, gelu and gelu_tanh records (ops/table.py), shared by elementwise.wgsl and matmul.wgsl's GELU
// epilogue (matmul.py splices this file in), so a fused product's activation rounds as the elementwise op does.
//! include "common.wgsl"

// tanh after Cephes' tanhf: a polynomial near 0 (where 1 - 2/(e+1) would cancel), and a form
// that saturates to +-1 instead of overflowing to NaN for large |x| (the builtin may do either).
fn tanh_f32(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    let z = abs(x);
    if (z < 0.625) {
        let s = x * x;
        return x + x * s * ((((-5.70498872745e-3 * s + 2.06390887954e-2) * s - 5.37397155531e-2) * s
            + 1.33314422036e-1) * s - 3.33332819422e-1);
    }
    let e = exp(2.0 * min(z, 20.0));
    let r = 1.0 - 2.0 / (e + 1.0);
    return select(r, -r, x < 0.0);
}

// erfc by Numerical Recipes' Chebyshev fit (erfcc), relative error below 1.2e-7; WGSL has no erf.
fn erfc_f32(x: f32) -> f32 {
    let z = abs(x);
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
        + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
        + t * (-0.82215223 + t * 0.17087277)))))))));
    return select(2.0 - r, r, x >= 0.0);
}

// Standard normal cdf and pdf, for the exact (erf) gelu.
fn norm_cdf(x: f32) -> f32 { return 0.5 * erfc_f32(-x * 0.7071067811865476); }
fn norm_pdf(x: f32) -> f32 { return 0.3989422804014327 * exp(-0.5 * x * x); }

const GELU_TANH_K: f32 = 0.7978845608028654;  // sqrt(2 / pi)
const GELU_TANH_C: f32 = 0.044715;
