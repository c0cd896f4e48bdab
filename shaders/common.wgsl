// Helpers shared by the kernel files; pulled in with `//! include "common.wgsl"` (see shaders.py).
//
// How dtypes are stored on the GPU (every buffer is bound as array<u32>):
//   float32  one word per element, the f32 bits
//   int32    one word per element, the i32 bits
//   int64    one word per element, the i32 bits: WebGPU holds int64 values in the int32 range only (see
//            webgrad/dtypes.py); the kernels that can leave it check (elementwise.wgsl's *_i64 entry points)
//   bool     one word per element, 0 or 1
//   uint8    four elements per word, little-endian (element i is byte i % 4 of word i / 4)
// The dtype codes DT_F32, DT_I32, DT_I64, DT_U8 and DT_BOOL are injected by shaders.py.

// NaN and infinity cannot be written as WGSL constants (constant evaluation rejects them), so they
// are made at run time from bit patterns held in private variables.
var<private> NAN_BITS: u32 = 0x7fc00000u;
var<private> INF_BITS: u32 = 0x7f800000u;

fn nan_f32() -> f32 { return bitcast<f32>(NAN_BITS); }
fn inf_f32() -> f32 { return bitcast<f32>(INF_BITS); }

// Bit tests rather than `x != x`: WGSL lets a compiler assume floats are never NaN or infinite.
fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn is_inf(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }

// Which word of the buffer holds element i.
fn word_index(i: u32, dtype: u32) -> u32 {
    return select(i, i >> 2u, dtype == DT_U8);
}

// Element i's value from its word `w`, as f32 or as i32 (float -> int truncates toward zero).
fn decode_f32(w: u32, i: u32, dtype: u32) -> f32 {
    switch dtype {
        case DT_F32: { return bitcast<f32>(w); }
        case DT_I32, DT_I64: { return f32(bitcast<i32>(w)); }
        case DT_U8: { return f32((w >> ((i & 3u) * 8u)) & 0xffu); }
        default: { return select(0.0, 1.0, w != 0u); }
    }
}

fn decode_i32(w: u32, i: u32, dtype: u32) -> i32 {
    switch dtype {
        case DT_F32: { return i32(bitcast<f32>(w)); }
        case DT_I32, DT_I64: { return bitcast<i32>(w); }
        case DT_U8: { return i32((w >> ((i & 3u) * 8u)) & 0xffu); }
        default: { return select(0, 1, w != 0u); }
    }
}

// The word that stores `v` as a 32-bit dtype (float32, int32 or bool; uint8 is written by packing).
fn encode_f32(v: f32, dtype: u32) -> u32 {
    switch dtype {
        case DT_F32: { return bitcast<u32>(v); }
        case DT_I32, DT_I64: { return bitcast<u32>(i32(v)); }
        default: { return select(1u, 0u, v == 0.0); }  // (not `v != 0.0`: ordered on some drivers, false for NaN)
    }
}

fn encode_i32(v: i32, dtype: u32) -> u32 {
    switch dtype {
        case DT_F32: { return bitcast<u32>(f32(v)); }
        case DT_I32, DT_I64: { return bitcast<u32>(v); }
        default: { return select(0u, 1u, v != 0); }
    }
}

// sin and cos after Cephes' sinf/cosf: reduce by multiples of pi/4 (pi/4 split in three parts, exact
// for |x| < 8192), then a polynomial on [-pi/4, pi/4]; error ~1e-7. WGSL only promises 2^-11
// absolute accuracy for the builtins, and GPUs' fast versions lose it outside [-pi, pi].
fn reduce_quarter_pi(ax: f32, j: ptr<function, u32>) -> f32 {
    var q = u32(ax * 1.2732395447351628);  // 4 / pi
    var y = f32(q);
    if ((q & 1u) != 0u) {
        q += 1u;
        y += 1.0;
    }
    *j = q & 7u;
    return ((ax - y * 0.78515625) - y * 2.4187564849853515625e-4) - y * 3.77489497744594108e-8;
}

fn sin_poly(z: f32) -> f32 {
    let zz = z * z;
    return ((-1.9515295891e-4 * zz + 8.3321608736e-3) * zz - 1.6666654611e-1) * zz * z + z;
}

fn cos_poly(z: f32) -> f32 {
    let zz = z * z;
    return ((2.443315711809948e-5 * zz - 1.388731625493765e-3) * zz + 4.166664568298827e-2) * zz * zz
        - 0.5 * zz + 1.0;
}

fn sin_f32(x: f32) -> f32 {
    if (is_nan(x) || is_inf(x)) { return nan_f32(); }
    var j = 0u;
    let z = reduce_quarter_pi(abs(x), &j);
    var negative = x < 0.0;
    if (j > 3u) {
        negative = !negative;
        j -= 4u;
    }
    let r = select(sin_poly(z), cos_poly(z), j == 1u || j == 2u);
    return select(r, -r, negative);
}

fn cos_f32(x: f32) -> f32 {
    if (is_nan(x) || is_inf(x)) { return nan_f32(); }
    var j = 0u;
    let z = reduce_quarter_pi(abs(x), &j);
    var negative = false;
    if (j > 3u) {
        negative = true;
        j -= 4u;
    }
    if (j > 1u) { negative = !negative; }
    let r = select(cos_poly(z), sin_poly(z), j == 1u || j == 2u);
    return select(r, -r, negative);
}
