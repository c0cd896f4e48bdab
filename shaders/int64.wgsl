// 64-bit integer helpers for the int64 checks (WebGPU holds int64 values in i32 words, in the int32 range only:
// see webgrad/dtypes.py). A 64-bit value is a vec2<u32> (low word, high word), two's complement. Pulled in with
// `//! include "int64.wgsl"` (elementwise.wgsl's *_i64 entry points, reduce.wgsl's exact int64 sums).

// x * y exactly, as a 64-bit two's complement number (low word, high word): four 16-bit partial products.
fn mul_wide(x: i32, y: i32) -> vec2<u32> {
    let ax = bitcast<u32>(abs(x));  // abs(-2**31) wraps to -2**31, whose bits are the magnitude 2**31
    let ay = bitcast<u32>(abs(y));
    let p00 = (ax & 0xffffu) * (ay & 0xffffu);
    let p01 = (ax & 0xffffu) * (ay >> 16u);
    let p10 = (ax >> 16u) * (ay & 0xffffu);
    let p11 = (ax >> 16u) * (ay >> 16u);
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    let lo = (p00 & 0xffffu) | (mid << 16u);
    let hi = p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u);
    if ((x < 0) == (y < 0)) { return vec2<u32>(lo, hi); }
    return vec2<u32>(~lo + 1u, ~hi + select(0u, 1u, lo == 0u));  // negated
}

// w + y for a 64-bit w (low, high) and an i32 y.
fn add_wide(w: vec2<u32>, y: i32) -> vec2<u32> {
    let lo = w.x + bitcast<u32>(y);
    return vec2<u32>(lo, w.y + select(0u, 0xffffffffu, y < 0) + select(0u, 1u, lo < w.x));
}

// Whether a 64-bit value lies in the int32 range (its high word is its low word's sign extension).
fn fits_i32(w: vec2<u32>) -> bool {
    return w.y == select(0u, 0xffffffffu, (w.x >> 31u) != 0u);
}

fn add_overflows(x: i32, y: i32) -> bool {
    let r = x + y;
    return ((x ^ r) & (y ^ r)) < 0;
}

fn sub_overflows(x: i32, y: i32) -> bool {
    let r = x - y;
    return ((x ^ y) & (x ^ r)) < 0;
}

fn mul_overflows(x: i32, y: i32) -> bool { return !fits_i32(mul_wide(x, y)); }
