//! include "common.wgsl"
// Elementwise kernels: out[i] = f(in0[i], in1[i], in2[i], a, b) over strided views of one shape.
//
// Entry points (the Python side is _backends/webgpu/elementwise.py):
//   unary           out = op(in0, a, b)                     OP in the OP_* codes
//   unary_to_u8     the same, out a uint8 view (bytes packed four per word, written with atomics)
//   unary_backward  out = in0 * op'(x = in1, y = in2, a, b)  OP in the BW_* codes
//   binary          out = op(in0, in1)                       OP in the BIN_* codes
//   where_select    out = in0 ? in1 : in2
// The op codes and dtype codes are constants injected by shaders.py from elementwise.py's tables, so
// the two files cannot disagree about numbering.
//
// Specialisation through override constants:
override OP: u32 = 0u;
override INT_MATH: bool = false;     // compute in i32 (exact integer ops) instead of f32
override CONTIGUOUS: bool = false;   // every operand is contiguous: element i is at offset + i
override OUT_DTYPE: u32 = DT_F32;
override IN0_DTYPE: u32 = DT_F32;
override IN1_DTYPE: u32 = DT_F32;
override IN2_DTYPE: u32 = DT_F32;
// An in-place op binds out's buffer once (WebGPU forbids binding a buffer writable and readable at
// once) and reads that operand through `out`.
override IN0_FROM_OUT: bool = false;
override IN1_FROM_OUT: bool = false;
override IN2_FROM_OUT: bool = false;

const NO_SLOT: u32 = 0xffffffffu;

struct Params {
    n: u32,                        // elements
    rank: u32,                     // dims after merging (0..8)
    a_slot: u32,                   // index into `scalars` holding a (a dynamic scalar), or NO_SLOT
    b_slot: u32,
    a: f32,                        // the scalars inline, as f32 and as i32 (for integer math)
    b: f32,
    ai: i32,
    bi: i32,
    offset: vec4<i32>,             // first element of (out, in0, in1, in2)
    shape: array<vec4<u32>, 2>,    // dim d is shape[d / 4][d % 4]
    stride: array<vec4<i32>, 8>,   // stride[d] = element strides of (out, in0, in1, in2) along dim d
}

@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> in0: array<u32>;
@group(0) @binding(2) var<storage, read> in1: array<u32>;
@group(0) @binding(3) var<storage, read> in2: array<u32>;
@group(0) @binding(4) var<storage, read> scalars: array<u32>;
@group(0) @binding(5) var<uniform> p: Params;
@group(0) @binding(6) var<storage, read_write> out_u8: array<atomic<u32>>;

const WORKGROUP: u32 = 256u;

// Element offsets of (out, in0, in1, in2) for the i-th element in row-major order.
fn offsets(i: u32) -> vec4<i32> {
    if (CONTIGUOUS) {
        return p.offset + vec4<i32>(i32(i));
    }
    var rest = i;
    var off = p.offset;
    for (var d = p.rank; d > 0u; d--) {
        let n = p.shape[(d - 1u) / 4u][(d - 1u) % 4u];
        off += i32(rest % n) * p.stride[d - 1u];
        rest /= n;
    }
    return off;
}

// A float16 operand (beside a float32 or bool `out`: PyTorch's promotion of half and float) holds two
// elements a word, element k in the low (k even) or high half of word k / 2; it is read into f32 as it is, so
// that a mixed op needs no float32 copy of its half operand (pack and unpack are core WGSL: no shader-f16).
fn word_of(k: i32, dtype: u32) -> u32 {
    if (dtype == DT_F16) { return u32(k) >> 1u; }
    return word_index(u32(k), dtype);
}
fn decode_any(w: u32, k: u32, dtype: u32) -> f32 {
    if (dtype == DT_F16) { return unpack2x16float(w >> ((k & 1u) * 16u)).x; }
    return decode_f32(w, k, dtype);
}
fn word0(k: i32) -> u32 {
    let w = word_of(k, IN0_DTYPE);
    if (IN0_FROM_OUT) { return out[w]; }
    return in0[w];
}
fn word1(k: i32) -> u32 {
    let w = word_of(k, IN1_DTYPE);
    if (IN1_FROM_OUT) { return out[w]; }
    return in1[w];
}
fn word2(k: i32) -> u32 {
    let w = word_of(k, IN2_DTYPE);
    if (IN2_FROM_OUT) { return out[w]; }
    return in2[w];
}
fn load0_f(k: i32) -> f32 { return decode_any(word0(k), u32(k), IN0_DTYPE); }
fn load1_f(k: i32) -> f32 { return decode_any(word1(k), u32(k), IN1_DTYPE); }
fn load2_f(k: i32) -> f32 { return decode_any(word2(k), u32(k), IN2_DTYPE); }
fn load0_i(k: i32) -> i32 { return decode_i32(word0(k), u32(k), IN0_DTYPE); }
fn load1_i(k: i32) -> i32 { return decode_i32(word1(k), u32(k), IN1_DTYPE); }
fn load2_i(k: i32) -> i32 { return decode_i32(word2(k), u32(k), IN2_DTYPE); }

fn scalar_a() -> f32 {
    if (p.a_slot != NO_SLOT) { return bitcast<f32>(scalars[p.a_slot]); }
    return p.a;
}
fn scalar_b() -> f32 {
    if (p.b_slot != NO_SLOT) { return bitcast<f32>(scalars[p.b_slot]); }
    return p.b;
}
fn scalar_ai() -> i32 {
    if (p.a_slot != NO_SLOT) { return i32(bitcast<f32>(scalars[p.a_slot])); }
    return p.ai;
}
fn scalar_bi() -> i32 {
    if (p.b_slot != NO_SLOT) { return i32(bitcast<f32>(scalars[p.b_slot])); }
    return p.bi;
}

// ------------------------------------------------------------------ float helpers

fn flag(c: bool) -> f32 { return select(0.0, 1.0, c); }
fn iflag(c: bool) -> i32 { return select(0, 1, c); }

// The GPU builtins are undefined outside their domain; these give IEEE results there.
fn log_f32(x: f32) -> f32 {
    if (x < 0.0 || is_nan(x)) { return nan_f32(); }  // (SwiftShader's log of NaN is a number)
    if (x == 0.0) { return -inf_f32(); }
    return log(x);
}
fn sqrt_f32(x: f32) -> f32 {
    if (x < 0.0) { return nan_f32(); }
    return sqrt(x);
}
fn rsqrt_f32(x: f32) -> f32 {
    if (x < 0.0) { return nan_f32(); }
    if (x == 0.0) { return select(inf_f32(), -inf_f32(), (bitcast<u32>(x) >> 31u) != 0u); }  // 1/sqrt(-0) = -inf
    return inverseSqrt(x);
}
fn sign_f32(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    return select(select(0.0, 1.0, x > 0.0), -1.0, x < 0.0);
}

// log(1 + x) without losing x when it is small: near 0 as 2 atanh(s), s = x / (2 + x), by its odd series
// (|s| < 0.2 there, so seven terms reach float32's precision without trusting the builtin log's
// accuracy, which software adapters relax); elsewhere log(1 + x), with log_f32's IEEE edge cases.
fn log1p_f32(x: f32) -> f32 {
    if (x > -0.3 && x < 0.5) {
        let s = x / (2.0 + x);
        let s2 = s * s;
        return 2.0 * s * (1.0 + s2 * (1.0 / 3.0 + s2 * (0.2 + s2 * (1.0 / 7.0 + s2 * (1.0 / 9.0 + s2 * (1.0 / 11.0
            + s2 / 13.0))))));
    }
    return log_f32(1.0 + x);
}

fn sigmoid_f32(x: f32) -> f32 { return 1.0 / (1.0 + exp(-x)); }

//! include "activations.wgsl"

// x ** y with the real-valued results the builtin leaves undefined (x <= 0).
fn pow_f32(x: f32, y: f32) -> f32 {
    if (y == 0.0) { return 1.0; }
    if (y == 1.0) { return x; }
    if (y == 2.0) { return x * x; }
    if (x == 0.0) { return select(0.0, inf_f32(), y < 0.0); }
    let m = pow(abs(x), y);
    if (x > 0.0 || is_nan(x)) { return m; }
    if (fract(y) != 0.0) { return nan_f32(); }
    return select(m, -m, fract(0.5 * y) != 0.0);
}

// atan on [0, inf) after Cephes' atanf (reduction to |t| <= tan(pi/8), odd polynomial): the WGSL
// builtins atan/atan2 are only required to be accurate to 4096 ulp.
fn atan_pos(x: f32) -> f32 {
    var base = 0.0;
    var t = x;
    if (x > 2.414213562373095) {
        base = 1.5707963267948966;
        t = -1.0 / x;
    } else if (x > 0.4142135623730950) {
        base = 0.7853981633974483;
        t = (x - 1.0) / (x + 1.0);
    }
    let z = t * t;
    return base + ((((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z
        - 3.33329491539e-1) * z * t + t);
}

fn atan2_f32(y: f32, x: f32) -> f32 {
    if (is_nan(x) || is_nan(y)) { return nan_f32(); }
    let ax = abs(x);
    let ay = abs(y);
    var r = 0.0;
    if (ax >= ay && ax > 0.0) {
        r = atan_pos(ay / ax);
    } else if (ay > ax) {
        r = 1.5707963267948966 - atan_pos(ax / ay);
    }
    if ((bitcast<u32>(x) >> 31u) != 0u) { r = 3.141592653589793 - r; }
    if ((bitcast<u32>(y) >> 31u) != 0u) { r = -r; }
    return r;
}

// exp(x) - 1 without losing x when it is small: the Taylor series below |x| = 0.5 (its first dropped
// term is under 2e-8 relative there), exp(x) - 1 above (no cancellation left to lose digits to).
fn expm1_f32(x: f32) -> f32 {
    if (abs(x) < 0.5) {
        return x * (1.0 + x / 2.0 * (1.0 + x / 3.0 * (1.0 + x / 4.0 * (1.0 + x / 5.0 * (1.0 + x / 6.0
            * (1.0 + x / 7.0 * (1.0 + x / 8.0)))))));
    }
    return exp(x) - 1.0;
}

// erf from erfc_f32 away from 0, and its Maclaurin series near 0 (where 1 - erfc loses digits).
fn erf_f32(x: f32) -> f32 {
    if (abs(x) < 0.5) {
        let s = x * x;
        return 1.1283791670955126 * x * (1.0 - s * (1.0 / 3.0 - s * (0.1 - s * (1.0 / 42.0 - s * (1.0 / 216.0
            - s / 1320.0)))));
    }
    return 1.0 - erfc_f32(x);
}

// PyTorch's softplus: log(1 + exp(beta x)) / beta, linear above the threshold.
fn softplus_f32(x: f32, beta: f32, threshold: f32) -> f32 {
    if (x * beta > threshold) { return x; }
    return log1p_f32(exp(beta * x)) / beta;
}

// sqrt(x^2 + y^2) without overflow or underflow in the squares.
fn hypot_f32(x: f32, y: f32) -> f32 {
    if (is_inf(x) || is_inf(y)) { return inf_f32(); }
    let m = max(abs(x), abs(y));
    if (m == 0.0 || is_nan(m)) { return select(m, nan_f32(), is_nan(x) || is_nan(y)); }
    let r = min(abs(x), abs(y)) / m;
    return m * sqrt(1.0 + r * r);
}

fn min_f32(x: f32, y: f32) -> f32 {
    if (is_nan(x)) { return x; }
    if (is_nan(y)) { return y; }
    return min(x, y);
}
fn max_f32(x: f32, y: f32) -> f32 {
    if (is_nan(x)) { return x; }
    if (is_nan(y)) { return y; }
    return max(x, y);
}

// x ** y for integers, exact (wrapping like int32 arithmetic); a negative y gives 0 except for
// x = 1 or -1.
fn pow_i32(x: i32, y: i32) -> i32 {
    if (y < 0) {
        if (x == 1) { return 1; }
        if (x == -1) { return select(-1, 1, (y & 1) == 0); }
        return 0;
    }
    var result = 1;
    var base = x;
    var e = y;
    loop {
        if (e == 0) { break; }
        if ((e & 1) != 0) { result *= base; }
        base *= base;
        e >>= 1u;
    }
    return result;
}

// ------------------------------------------------------------------ elementwise math (the op table's cheap
// records; the others' functions are in special.wgsl, compiled apart: see elementwise_special.wgsl)
fn frac_f32(x: f32) -> f32 {
    if (is_inf(x)) { return nan_f32(); }
    return x - trunc(x);
}

// round(x, decimals) as PyTorch's: x * 10^d rounded (half to even) / 10^d, or x / 10^-d rounded * 10^-d.
fn round_decimals_f32(x: f32, decimals: f32) -> f32 {
    if (decimals == 0.0) { return round(x); }
    var ten = 1.0;
    for (var k = 0.0; k < abs(decimals); k += 1.0) { ten *= 10.0; }
    if (decimals > 0.0) { return round(x * ten) / ten; }
    return round(x / ten) * ten;
}

fn copysign_f32(x: f32, y: f32) -> f32 {
    return bitcast<f32>((bitcast<u32>(x) & 0x7fffffffu) | (bitcast<u32>(y) & 0x80000000u));
}

// ------------------------------------------------------------------ the op tables
// The cases come from package/webgrad/ops/table.py: one record per op, spliced in at `//! splice NAME`
// when the shader is loaded (the OP_*/BW_*/BIN_* codes are numbered from the same table).

fn unary_f(x: f32, a: f32, b: f32) -> f32 {
    switch OP {
        case OP_IDENTITY: { return x; }
        case OP_FILL: { return a; }
        //! splice unary_f
        default: { return nan_f32(); }
    }
}

// The ops with an exact int32 form (the table's int_wgsl).
fn unary_i(x: i32, a: i32, b: i32) -> i32 {
    switch OP {
        case OP_IDENTITY: { return x; }
        case OP_FILL: { return a; }
        //! splice unary_i
        default: { return 0; }
    }
}

// d op(x) / dx * g, given x and y = op(x).
fn backward_f(g: f32, x: f32, y: f32, a: f32, b: f32) -> f32 {
    switch OP {
        //! splice backward_f
        default: { return nan_f32(); }
    }
}

fn binary_f(x: f32, y: f32) -> f32 {
    switch OP {
        //! splice binary_f
        default: { return nan_f32(); }
    }
}

// The ops with an exact int32 form (the table's int_wgsl).
fn binary_i(x: i32, y: i32) -> i32 {
    switch OP {
        //! splice binary_i
        default: { return 0; }
    }
}

// ------------------------------------------------------------------ entry points
// Each thread handles elements gid, gid + stride, ...: the grid is capped at 65535 workgroups.

@compute @workgroup_size(WORKGROUP)
fn unary(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var i = gid.x; i < p.n; i += groups.x * WORKGROUP) {
        let o = offsets(i);
        if (INT_MATH) {
            out[o.x] = encode_i32(unary_i(load0_i(o.y), scalar_ai(), scalar_bi()), OUT_DTYPE);
        } else {
            out[o.x] = encode_f32(unary_f(load0_f(o.y), scalar_a(), scalar_b()), OUT_DTYPE);
        }
    }
}

// Writes one byte of a word with two atomics (clear, then set): neighbouring bytes of the same word
// may belong to other threads. Float results are truncated toward zero, then wrapped to 0..255.
@compute @workgroup_size(WORKGROUP)
fn unary_to_u8(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var i = gid.x; i < p.n; i += groups.x * WORKGROUP) {
        let o = offsets(i);
        var v: i32;
        if (INT_MATH) {
            v = unary_i(load0_i(o.y), scalar_ai(), scalar_bi());
        } else {
            v = i32(unary_f(load0_f(o.y), scalar_a(), scalar_b()));
        }
        let k = u32(o.x);
        let shift = (k & 3u) * 8u;
        atomicAnd(&out_u8[k >> 2u], ~(0xffu << shift));
        atomicOr(&out_u8[k >> 2u], (u32(v) & 0xffu) << shift);
    }
}

@compute @workgroup_size(WORKGROUP)
fn unary_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var i = gid.x; i < p.n; i += groups.x * WORKGROUP) {
        let o = offsets(i);
        let v = backward_f(load0_f(o.y), load1_f(o.z), load2_f(o.w), scalar_a(), scalar_b());
        out[o.x] = encode_f32(v, OUT_DTYPE);
    }
}

@compute @workgroup_size(WORKGROUP)
fn binary(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var i = gid.x; i < p.n; i += groups.x * WORKGROUP) {
        let o = offsets(i);
        if (INT_MATH) {
            out[o.x] = encode_i32(binary_i(load0_i(o.y), load1_i(o.z)), OUT_DTYPE);
        } else {
            out[o.x] = encode_f32(binary_f(load0_f(o.y), load1_f(o.z)), OUT_DTYPE);
        }
    }
}

@compute @workgroup_size(WORKGROUP)
fn where_select(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var i = gid.x; i < p.n; i += groups.x * WORKGROUP) {
        let o = offsets(i);
        let c = load0_i(o.y) != 0;
        if (INT_MATH) {
            out[o.x] = encode_i32(select(load2_i(o.w), load1_i(o.z), c), OUT_DTYPE);
        } else {
            out[o.x] = encode_f32(select(load2_f(o.w), load1_f(o.z), c), OUT_DTYPE);
        }
    }
}

// ------------------------------------------------------------------ vec4 entry points
// unary4, unary_backward4, binary4: the same ops, four elements per thread step with one vec4 load
// per operand and one vec4 store, when every operand is contiguous f32 or i32 and n and the offsets
// are multiples of 4 (elementwise.py checks). On a software adapter a load costs about the same for
// one word or four (SwiftShader: ~45 ns per 4 lanes either way), so these run ~3x faster there; on a
// GPU they issue a quarter of the memory instructions. They use only the vec4 views below.
@group(0) @binding(0) var<storage, read_write> out4: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> in0_4: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> in1_4: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> in2_4: array<vec4<u32>>;

fn quad0(j: i32) -> vec4<u32> { if (IN0_FROM_OUT) { return out4[j]; } return in0_4[j]; }
fn quad1(j: i32) -> vec4<u32> { if (IN1_FROM_OUT) { return out4[j]; } return in1_4[j]; }
fn quad2(j: i32) -> vec4<u32> { if (IN2_FROM_OUT) { return out4[j]; } return in2_4[j]; }

// Element c of word w (c: the byte of a uint8 word; 0 for 32-bit words) through the unary op.
fn unary_word(w: u32, c: u32, a: f32, b: f32, ai: i32, bi: i32) -> u32 {
    if (INT_MATH) { return encode_i32(unary_i(decode_i32(w, c, IN0_DTYPE), ai, bi), OUT_DTYPE); }
    return encode_f32(unary_f(decode_f32(w, c, IN0_DTYPE), a, b), OUT_DTYPE);
}

fn backward_word(g: u32, x: u32, y: u32, a: f32, b: f32) -> u32 {
    let v = backward_f(decode_f32(g, 0u, IN0_DTYPE), decode_f32(x, 0u, IN1_DTYPE), decode_f32(y, 0u, IN2_DTYPE), a, b);
    return encode_f32(v, OUT_DTYPE);
}

fn binary_word(x: u32, y: u32) -> u32 {
    if (INT_MATH) { return encode_i32(binary_i(decode_i32(x, 0u, IN0_DTYPE), decode_i32(y, 0u, IN1_DTYPE)), OUT_DTYPE); }
    return encode_f32(binary_f(decode_f32(x, 0u, IN0_DTYPE), decode_f32(y, 0u, IN1_DTYPE)), OUT_DTYPE);
}

@compute @workgroup_size(WORKGROUP)
fn unary4(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let o = p.offset / 4;
    let a = scalar_a();
    let b = scalar_b();
    let ai = scalar_ai();
    let bi = scalar_bi();
    for (var i = gid.x; i < p.n / 4u; i += groups.x * WORKGROUP) {
        let j = i32(i);
        let x = quad0(o.y + j);
        out4[o.x + j] = vec4<u32>(unary_word(x.x, 0u, a, b, ai, bi), unary_word(x.y, 0u, a, b, ai, bi),
                                  unary_word(x.z, 0u, a, b, ai, bi), unary_word(x.w, 0u, a, b, ai, bi));
    }
}

// unary_from_u8x4: a contiguous uint8 input (four elements a word, its offset a multiple of 4) into a
// contiguous f32/i32 output: one word read and one vec4 written per step. MNIST's batches are
// converted to floats this way (a byte at a time, the same conversion ran 3x slower on SwiftShader).
@compute @workgroup_size(WORKGROUP)
fn unary_from_u8x4(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let o = p.offset / 4;
    let a = scalar_a();
    let b = scalar_b();
    let ai = scalar_ai();
    let bi = scalar_bi();
    for (var i = gid.x; i < p.n / 4u; i += groups.x * WORKGROUP) {
        let j = i32(i);
        let w = in0[o.y + j];
        out4[o.x + j] = vec4<u32>(unary_word(w, 0u, a, b, ai, bi), unary_word(w, 1u, a, b, ai, bi),
                                  unary_word(w, 2u, a, b, ai, bi), unary_word(w, 3u, a, b, ai, bi));
    }
}

// Vec4 j of unary_backward4 (offsets o, in vec4s) with the gradient's words g
fn backward_quad(o: vec4<i32>, j: i32, g: vec4<u32>, a: f32, b: f32) {
    let x = quad1(o.z + j);
    let y = quad2(o.w + j);
    out4[o.x + j] = vec4<u32>(backward_word(g.x, x.x, y.x, a, b), backward_word(g.y, x.y, y.y, a, b),
                              backward_word(g.z, x.z, y.z, a, b), backward_word(g.w, x.w, y.w, a, b));
}

@compute @workgroup_size(WORKGROUP)
fn unary_backward4(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let o = p.offset / 4;
    let a = scalar_a();
    let b = scalar_b();
    for (var i = gid.x; i < p.n / 4u; i += groups.x * WORKGROUP) {
        let j = i32(i);
        backward_quad(o, j, quad0(o.y + j), a, b);
    }
}

// add_unary_backward4: unary_backward4 of a gradient that is a sum, in0 + in3 (fusion.py: in a captured step, a
// gradient accumulation's add and the op's backward that reads the sum alone, as one pass). The sum rounds to
// f32 as binary4's add did. in3's offset (in elements) sits in p.stride[0].x, which no vec4 entry point reads.
@group(0) @binding(7) var<storage, read> in3_4: array<vec4<f32>>;

@compute @workgroup_size(WORKGROUP)
fn add_unary_backward4(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let o = p.offset / 4;
    let o3 = p.stride[0].x / 4;
    let a = scalar_a();
    let b = scalar_b();
    for (var i = gid.x; i < p.n / 4u; i += groups.x * WORKGROUP) {
        let j = i32(i);
        backward_quad(o, j, bitcast<vec4<u32>>(bitcast<vec4<f32>>(quad0(o.y + j)) + in3_4[o3 + j]), a, b);
    }
}

@compute @workgroup_size(WORKGROUP)
fn binary4(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let o = p.offset / 4;
    for (var i = gid.x; i < p.n / 4u; i += groups.x * WORKGROUP) {
        let j = i32(i);
        let x = quad0(o.y + j);
        let y = quad1(o.z + j);
        out4[o.x + j] = vec4<u32>(binary_word(x.x, y.x), binary_word(x.y, y.y), binary_word(x.z, y.z), binary_word(x.w, y.w));
    }
}

// unary4s, unary_backward4s, binary4s: the vec4 entry points over strided views whose innermost merged dim is
// contiguous in every operand, with its size, the offsets and every other stride multiples of 4 (a slice of a
// wider row, a transposed head layout, a split's piece written into its gradient): each quad's offsets from the
// general walk (offsets() at its first element; a quad never crosses a row), so the walk's divisions run once per
// four elements and every load and store is a vec4. The general walk, one element at a time, was bound by those
// divisions.
fn quad_offsets(i: u32) -> vec4<i32> { return offsets(4u * i) / 4; }

@compute @workgroup_size(WORKGROUP)
fn unary4s(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let a = scalar_a();
    let b = scalar_b();
    let ai = scalar_ai();
    let bi = scalar_bi();
    for (var i = gid.x; i < p.n / 4u; i += groups.x * WORKGROUP) {
        let o = quad_offsets(i);
        let x = quad0(o.y);
        out4[o.x] = vec4<u32>(unary_word(x.x, 0u, a, b, ai, bi), unary_word(x.y, 0u, a, b, ai, bi),
                              unary_word(x.z, 0u, a, b, ai, bi), unary_word(x.w, 0u, a, b, ai, bi));
    }
}

@compute @workgroup_size(WORKGROUP)
fn unary_backward4s(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let a = scalar_a();
    let b = scalar_b();
    for (var i = gid.x; i < p.n / 4u; i += groups.x * WORKGROUP) {
        let o = quad_offsets(i);
        backward_quad(o, 0, quad0(o.y), a, b);
    }
}

@compute @workgroup_size(WORKGROUP)
fn binary4s(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var i = gid.x; i < p.n / 4u; i += groups.x * WORKGROUP) {
        let o = quad_offsets(i);
        let x = quad0(o.y);
        let y = quad1(o.z);
        out4[o.x] = vec4<u32>(binary_word(x.x, y.x), binary_word(x.y, y.y), binary_word(x.z, y.z),
                              binary_word(x.w, y.w));
    }
}

// ------------------------------------------------------------------ mixed float16 / float32 entry points
// binary4m, unary_backward4m, where4m: the ops with some operands float16 and the others float32 (PyTorch's
// promotion: a float32 result, math in f32), the half ones read as they are: four elements a thread step, one
// vec4 of f32 or i32 words or two words of half pairs per operand, one vec4 store. They serve contiguous and
// strided views (offsets(): the general walk at each quad's first element, or offset + i when CONTIGUOUS) whose
// innermost merged dim is contiguous in every operand with a size that is a multiple of 4, and whose offsets and
// other strides are multiples of 4 (elementwise.py's mixed4_fits), so that a quad of halves is one half of a
// vec4<u32>. Other layouts take the scalar entry points, whose loads read halves too (load0_f, ...).

// Four elements from element e (a multiple of 4) of operand k, as f32.
fn half_quad(v: vec4<u32>, e: i32) -> vec4<f32> {
    let w = select(v.xy, v.zw, (e & 4) != 0);
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}
fn word_quad(q: vec4<u32>, dtype: u32) -> vec4<f32> {
    return vec4<f32>(decode_f32(q.x, 0u, dtype), decode_f32(q.y, 0u, dtype), decode_f32(q.z, 0u, dtype),
                     decode_f32(q.w, 0u, dtype));
}
fn fquad0(e: i32) -> vec4<f32> {
    if (IN0_DTYPE == DT_F16) { return half_quad(quad0(e / 8), e); }
    return word_quad(quad0(e / 4), IN0_DTYPE);
}
fn fquad1(e: i32) -> vec4<f32> {
    if (IN1_DTYPE == DT_F16) { return half_quad(quad1(e / 8), e); }
    return word_quad(quad1(e / 4), IN1_DTYPE);
}
fn fquad2(e: i32) -> vec4<f32> {
    if (IN2_DTYPE == DT_F16) { return half_quad(quad2(e / 8), e); }
    return word_quad(quad2(e / 4), IN2_DTYPE);
}
fn encode_quad(v: vec4<f32>) -> vec4<u32> {
    return vec4<u32>(encode_f32(v.x, OUT_DTYPE), encode_f32(v.y, OUT_DTYPE), encode_f32(v.z, OUT_DTYPE),
                     encode_f32(v.w, OUT_DTYPE));
}

@compute @workgroup_size(WORKGROUP)
fn binary4m(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var i = gid.x; i < p.n / 4u; i += groups.x * WORKGROUP) {
        let o = offsets(4u * i);
        let x = fquad0(o.y);
        let y = fquad1(o.z);
        out4[o.x / 4] = encode_quad(vec4<f32>(binary_f(x.x, y.x), binary_f(x.y, y.y), binary_f(x.z, y.z),
                                              binary_f(x.w, y.w)));
    }
}

@compute @workgroup_size(WORKGROUP)
fn unary_backward4m(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let a = scalar_a();
    let b = scalar_b();
    for (var i = gid.x; i < p.n / 4u; i += groups.x * WORKGROUP) {
        let o = offsets(4u * i);
        let g = fquad0(o.y);
        let x = fquad1(o.z);
        let y = fquad2(o.w);
        out4[o.x / 4] = encode_quad(vec4<f32>(backward_f(g.x, x.x, y.x, a, b), backward_f(g.y, x.y, y.y, a, b),
                                              backward_f(g.z, x.z, y.z, a, b), backward_f(g.w, x.w, y.w, a, b)));
    }
}

@compute @workgroup_size(WORKGROUP)
fn where4m(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var i = gid.x; i < p.n / 4u; i += groups.x * WORKGROUP) {
        let o = offsets(4u * i);
        let c = quad0(o.y / 4) != vec4<u32>(0u);
        out4[o.x / 4] = encode_quad(select(fquad2(o.w), fquad1(o.z), c));
    }
}

// binary8h: a float16 `out` of float32 (or mixed) operands, each result rounded once from f32: eight elements a
// thread step, one vec4 of half pairs stored (a backward's product for a half operand, g * x of a float32 g and
// x, written as the half gradient with no float32 product to cast). The views as binary4m's, with out's offset,
// outer strides and the innermost size multiples of 8 (elementwise.py's half_out8_fits).
@compute @workgroup_size(WORKGROUP)
fn binary8h(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var i = gid.x; i < p.n / 8u; i += groups.x * WORKGROUP) {
        let o = offsets(8u * i);
        let x0 = fquad0(o.y);
        let x1 = fquad0(o.y + 4);
        let y0 = fquad1(o.z);
        let y1 = fquad1(o.z + 4);
        out4[o.x / 8] = vec4<u32>(pack_h2(vec2<f32>(binary_f(x0.x, y0.x), binary_f(x0.y, y0.y))),
                                  pack_h2(vec2<f32>(binary_f(x0.z, y0.z), binary_f(x0.w, y0.w))),
                                  pack_h2(vec2<f32>(binary_f(x1.x, y1.x), binary_f(x1.y, y1.y))),
                                  pack_h2(vec2<f32>(binary_f(x1.z, y1.z), binary_f(x1.w, y1.w))));
    }
}

// ------------------------------------------------------------------ float16 entry points
// unary_h8, unary_backward_h8, binary_h8: the same ops on contiguous float16 operands whose offsets and
// element count are multiples of 8 (f16.py sends float16 work here when it fits, else through float32
// copies): eight halves per thread step, one vec4<u32> of half pairs per operand, unpacked to f32
// (unpack2x16float and pack2x16float are core WGSL: this module needs no shader-f16), the op in f32
// and each result rounded once into a half (PyTorch's half elementwise numerics: f32 "opmath").

// A half's bits for f32 x where pack2x16float's result is indeterminate (WGSL): NaN stays NaN, |x| at
// or beyond 65520 (what rounds past 65504) gives inf; else h, the packed conversion of x.
fn half_bits(x: f32, h: u32) -> u32 {
    let bits = bitcast<u32>(x);
    let sign = (bits >> 16u) & 0x8000u;
    if ((bits & 0x7fffffffu) > 0x7f800000u) { return sign | 0x7e00u; }
    if ((bits & 0x7fffffffu) >= 0x477ff000u) { return sign | 0x7c00u; }  // 0x477ff000 = 65520.0
    return h;
}

fn pack_h2(v: vec2<f32>) -> u32 {
    let c = pack2x16float(clamp(v, vec2<f32>(-65504.0), vec2<f32>(65504.0)));
    return half_bits(v.x, c & 0xffffu) | (half_bits(v.y, c >> 16u) << 16u);
}

fn unary_h2(w: u32, a: f32, b: f32) -> u32 {
    let x = unpack2x16float(w);
    return pack_h2(vec2<f32>(unary_f(x.x, a, b), unary_f(x.y, a, b)));
}

fn backward_h2(g: u32, x: u32, y: u32, a: f32, b: f32) -> u32 {
    let gv = unpack2x16float(g);
    let xv = unpack2x16float(x);
    let yv = unpack2x16float(y);
    return pack_h2(vec2<f32>(backward_f(gv.x, xv.x, yv.x, a, b), backward_f(gv.y, xv.y, yv.y, a, b)));
}

fn binary_h2(x: u32, y: u32) -> u32 {
    let xv = unpack2x16float(x);
    let yv = unpack2x16float(y);
    return pack_h2(vec2<f32>(binary_f(xv.x, yv.x), binary_f(xv.y, yv.y)));
}

@compute @workgroup_size(WORKGROUP)
fn unary_h8(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let o = p.offset / 8;
    let a = scalar_a();
    let b = scalar_b();
    for (var i = gid.x; i < p.n / 8u; i += groups.x * WORKGROUP) {
        let j = i32(i);
        let x = quad0(o.y + j);
        out4[o.x + j] = vec4<u32>(unary_h2(x.x, a, b), unary_h2(x.y, a, b), unary_h2(x.z, a, b), unary_h2(x.w, a, b));
    }
}

@compute @workgroup_size(WORKGROUP)
fn unary_backward_h8(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let o = p.offset / 8;
    let a = scalar_a();
    let b = scalar_b();
    for (var i = gid.x; i < p.n / 8u; i += groups.x * WORKGROUP) {
        let j = i32(i);
        let g = quad0(o.y + j);
        let x = quad1(o.z + j);
        let y = quad2(o.w + j);
        out4[o.x + j] = vec4<u32>(backward_h2(g.x, x.x, y.x, a, b), backward_h2(g.y, x.y, y.y, a, b),
                                  backward_h2(g.z, x.z, y.z, a, b), backward_h2(g.w, x.w, y.w, a, b));
    }
}

@compute @workgroup_size(WORKGROUP)
fn binary_h8(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let o = p.offset / 8;
    for (var i = gid.x; i < p.n / 8u; i += groups.x * WORKGROUP) {
        let j = i32(i);
        let x = quad0(o.y + j);
        let y = quad1(o.z + j);
        out4[o.x + j] = vec4<u32>(binary_h2(x.x, y.x), binary_h2(x.y, y.y), binary_h2(x.z, y.z), binary_h2(x.w, y.w));
    }
}

// ------------------------------------------------------------------ int64 entry points
// unary_i64, binary_i64: the scalar entry points for an int64 `out` whose values the op can take out of the int32
// range, the values WebGPU holds in an int64 tensor (one i32 word per element: WGSL has no 64-bit integers, see
// webgrad/dtypes.py). Integer ops compute exactly in i32 and check their exact result against the range (the
// op table's int_overflow predicates, spliced below); float results are truncated and checked before their
// conversion. A result outside the range reports ERROR_CODE with its element index through the error word
// (errors.wgsl), raised by the host at its next read-back; the word written there is not a valid result.
@group(0) @binding(8) var<storage, read_write> errors: array<atomic<u32>>;
//! include "errors.wgsl"
override ERROR_CODE: u32 = 0u;

//! include "int64.wgsl"

// Whether pow_i32(x, y) leaves the int32 range (as pow_i32 squares, checked at each product it needs).
fn pow_overflows(x: i32, y: i32) -> bool {
    if (y < 0) { return false; }
    var result = 1;
    var base = x;
    var e = y;
    loop {
        if ((e & 1) != 0) {
            if (mul_overflows(result, base)) { return true; }
            result *= base;
        }
        e >>= 1u;
        if (e == 0) { break; }
        // base squared is a factor of the result from here on, whose other factors are nonzero integers
        if (mul_overflows(base, base)) { return true; }
        base *= base;
    }
    return false;
}

fn unary_overflows(x: i32, a: i32, b: i32) -> bool {
    switch OP {
        //! splice unary_overflow
        default: { return false; }
    }
}

fn binary_overflows(x: i32, y: i32) -> bool {
    switch OP {
        //! splice binary_overflow
        default: { return false; }
    }
}

// A float result as an int64 word: truncated toward zero, reported unless it lies in the int32 range.
fn float_to_i64(v: f32, i: u32) -> u32 {
    let t = trunc(v);
    if (!(t >= -2147483648.0 && t < 2147483648.0)) {  // (NaN fails both)
        report_error(ERROR_CODE, i32(i), p.n);
        return 0u;
    }
    return bitcast<u32>(i32(t));
}

@compute @workgroup_size(WORKGROUP)
fn unary_i64(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var i = gid.x; i < p.n; i += groups.x * WORKGROUP) {
        let o = offsets(i);
        if (INT_MATH) {
            let x = load0_i(o.y);
            let a = scalar_ai();
            let b = scalar_bi();
            if (unary_overflows(x, a, b)) { report_error(ERROR_CODE, i32(i), p.n); }
            out[o.x] = bitcast<u32>(unary_i(x, a, b));
        } else {
            out[o.x] = float_to_i64(unary_f(load0_f(o.y), scalar_a(), scalar_b()), i);
        }
    }
}

@compute @workgroup_size(WORKGROUP)
fn binary_i64(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var i = gid.x; i < p.n; i += groups.x * WORKGROUP) {
        let o = offsets(i);
        if (INT_MATH) {
            let x = load0_i(o.y);
            let y = load1_i(o.z);
            if (binary_overflows(x, y)) { report_error(ERROR_CODE, i32(i), p.n); }
            out[o.x] = bitcast<u32>(binary_i(x, y));
        } else {
            out[o.x] = float_to_i64(binary_f(load0_f(o.y), load1_f(o.z)), i);
        }
    }
}
