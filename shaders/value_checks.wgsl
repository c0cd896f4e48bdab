//! include "common.wgsl"
//! include "errors.wgsl"
// Value checks that cannot raise where they run: the Python side is _backends/webgpu/value_checks.py.
//
// check_values: the elements of x that PyTorch refuses where it reads them (one_hot's classes outside
// [0, num_classes), binary_cross_entropy's probabilities outside [0, 1], an integer divisor of 0) set the
// runtime's error word (errors.wgsl) with the element's position, raised at the host's next read-back.
//
// device_error_flag: the error word as a float flag (1.0 where a kernel reported an error that an exception
// will raise), combined with GradScaler's inf flag: the optimizer's updates take it as their skip flag, so that
// a step whose checks failed leaves the model as it was (optim.wgsl's SKIP_IF).

override INT: bool = false;    // x holds int32 words (int32, int64); else float32
override NAN: bool = false;    // report a NaN
override LOW: bool = false;    // report an element not >= low
override HIGH: bool = false;   // report an element not <= high
override ZERO: bool = false;   // report an element == 0

struct Params {
    n: u32,
    offset: u32,
    low: u32,          // the bound's bits: i32 where INT, else f32
    high: u32,
    nan_code: u32,     // Runtime.error_code of each check's message
    low_code: u32,
    high_code: u32,
    zero_code: u32,
    always_code: u32,  // where not 0, every element fails (an integer bound that no int32 value meets)
}

@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> errors: array<atomic<u32>>;  // errors.wgsl
@group(0) @binding(2) var<uniform> p: Params;

fn int_code(v: i32) -> u32 {
    if (LOW && v < bitcast<i32>(p.low)) { return p.low_code; }
    if (HIGH && v > bitcast<i32>(p.high)) { return p.high_code; }
    if (ZERO && v == 0) { return p.zero_code; }
    return 0u;
}

// NaN is tested on its bits (is_nan): a compiler may assume comparisons never see one.
fn float_code(v: f32) -> u32 {
    let nan = is_nan(v);
    if (NAN && nan) { return p.nan_code; }
    if (LOW && (nan || v < bitcast<f32>(p.low))) { return p.low_code; }
    if (HIGH && (nan || v > bitcast<f32>(p.high))) { return p.high_code; }
    if (ZERO && v == 0.0) { return p.zero_code; }
    return 0u;
}

@compute @workgroup_size(64)
fn check_values(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var i = gid.x; i < p.n; i += nwg.x * 64u) {
        let w = x[p.offset + i];
        var code = p.always_code;
        if (code == 0u) { code = select(float_code(bitcast<f32>(w)), int_code(bitcast<i32>(w)), INT); }
        if (code != 0u) {
            report_error(code, i32(i), p.n);
            return;  // (the first error wins: one is enough)
        }
    }
}

// ------------------------------------------------------------------ device_error_flag

override FOUND: bool = false;  // combine with GradScaler's flag

struct FlagParams {
    out_offset: u32,
    found_offset: u32,
    unused0: u32,
    unused1: u32,
}

// Codes with this bit set report to a callback, and the read goes on (Runtime.error_code): they skip nothing.
const HANDLER_CODE: u32 = 0x80000000u;

@group(0) @binding(3) var<storage, read_write> flag: array<f32>;
@group(0) @binding(4) var<storage, read> error_word: array<u32>;  // the runtime's error word, read as it stands
@group(0) @binding(5) var<storage, read> found: array<f32>;
@group(0) @binding(6) var<uniform> fp: FlagParams;

@compute @workgroup_size(1)
fn device_error_flag() {
    let code = error_word[0];
    var f = select(0.0, 1.0, code != 0u && code < HANDLER_CODE);
    if (FOUND) { f = max(f, found[fp.found_offset]); }
    flag[fp.out_offset] = f;
}
