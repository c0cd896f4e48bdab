// Rounding f32 -> f16 with IEEE results (included by f16.wgsl; spliced by typed.py element_types into the
// float16 variants of other kernels); the module must start with `enable f16;`.

const F16_MAX_ROUNDED: f32 = 65520.0;  // |x| at or beyond this rounds to inf in float16 (65504 is the largest)

// f32 -> f16 with IEEE results where WGSL leaves the conversion indeterminate: beyond the range it gives
// inf (by overflowing a half product at run time: a rounding toward zero would otherwise give 65504).
// NaN converts as Vulkan's OpFConvert does (to a NaN).
fn to_f16(x: f32) -> f16 {
    if ((bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u) { return f16(x); }
    let c = f16(clamp(x, -65504.0, 65504.0));
    if (abs(x) >= F16_MAX_ROUNDED) { return c * 2.0h; }
    return c;
}
