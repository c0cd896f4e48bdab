//! include "common.wgsl"
//! include "errors.wgsl"
// check_finite: report a NaN or an infinity among n float32 values in the error word (errors.wgsl), so
// the host learns it at its next read-back, with no sync of its own. The Python side is
// _backends/webgpu/check.py; webgrad.replayable(check_finite=...) checks each step's loss with it.

struct Params {
    n: u32,
    offset: u32,
    nan_code: u32,   // reported for a NaN (Runtime.error_code)
    inf_code: u32,   // reported for an infinity
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> errors: array<atomic<u32>>;  // errors.wgsl
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn check_finite(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var i = gid.x; i < p.n; i += nwg.x * 64u) {
        let v = x[p.offset + i];
        if (is_nan(v)) { report_error(p.nan_code, i32(i), p.n); }
        if (is_inf(v)) { report_error(p.inf_code, i32(i), p.n); }
    }
}

// check_int64: an exact int64 total (reduce.wgsl's WIDE sums and products, scan.wgsl's int64 prefix sums) as its
// low words (lo, the result's storage, from p.offset) and a second word per element (hi, contiguous from 0) that
// equals the low word's sign extension exactly when the total lies in the int32 range, the values WebGPU holds
// in an int64 tensor. Another word reports p.nan_code (the message of an int64 result out of range), with the
// element's index.
@group(0) @binding(0) var<storage, read> lo: array<i32>;
@group(0) @binding(3) var<storage, read> hi: array<u32>;

@compute @workgroup_size(64)
fn check_int64(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var i = gid.x; i < p.n; i += nwg.x * 64u) {
        if (hi[i] != select(0u, 0xffffffffu, lo[p.offset + i] < 0)) { report_error(p.nan_code, i32(i), p.n); }
    }
}
