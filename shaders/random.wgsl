//! include "common.wgsl"
//! include "random_stream.wgsl"
// Counter-based random numbers, bit-for-bit the stream _backends/kernels.py specifies (kernels.random) (the CPU backend draws the
// same): for element i, c = offset + i, k = h(seed), bits(j) = h(h(j ^ k) + k), h = lowbias32.
// The Python side is _backends/webgpu/rng.py. Seed and offset may come from dynamic scalars, so a
// replayed graph draws new numbers each time.

override DIST: u32 = 0u;        // RNG_UNIFORM, RNG_NORMAL or RNG_RANDINT (rng.py)
override OUT_DTYPE: u32 = DT_F32;

const NO_SLOT: u32 = 0xffffffffu;

struct Params {
    n: u32,
    out_offset: u32,
    seed: u32,
    offset: u32,
    seed_slot: u32,     // dynamic scalar slots, or NO_SLOT to use the inline values
    offset_slot: u32,
    span: u32,          // randint: b - a
    low: i32,           // randint: a
    a: f32,
    b: f32,
}

@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> scalars: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

const WORKGROUP: u32 = 256u;
const TWO_POW_M24: f32 = 5.9604644775390625e-8;


// ln(u) for u in (0, 1], accurate to ~1e-7 relative also near 1 (where WGSL's log is only required
// to be accurate to 2^-21 absolute): ln u = 2 atanh(z) with z = (u - 1) / (u + 1), |z| <= 1/3.
fn ln_unit(u: f32) -> f32 {
    if (u < 0.5) { return log(u); }
    let z = (u - 1.0) / (u + 1.0);
    let z2 = z * z;
    var s = 1.0 / 17.0;
    s = s * z2 + 1.0 / 15.0;
    s = s * z2 + 1.0 / 13.0;
    s = s * z2 + 1.0 / 11.0;
    s = s * z2 + 1.0 / 9.0;
    s = s * z2 + 1.0 / 7.0;
    s = s * z2 + 1.0 / 5.0;
    s = s * z2 + 1.0 / 3.0;
    s = s * z2 + 1.0;
    return 2.0 * z * s;
}

@compute @workgroup_size(WORKGROUP)
fn random(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    var seed = p.seed;
    if (p.seed_slot != NO_SLOT) { seed = scalars[p.seed_slot]; }
    var offset = p.offset;
    if (p.offset_slot != NO_SLOT) { offset = scalars[p.offset_slot]; }
    let k = lowbias32(seed);
    for (var i = gid.x; i < p.n; i += groups.x * WORKGROUP) {
        let c = offset + i;
        var word: u32;
        switch DIST {
            case RNG_NORMAL: {
                let u1 = (f32(bits(2u * c, k) >> 8u) + 1.0) * TWO_POW_M24;
                let u2 = f32(bits(2u * c + 1u, k) >> 8u) * TWO_POW_M24;
                // cos(2 pi u2) = -cos(pi (2 u2 - 1)), an argument in [-pi, pi) computed exactly.
                let v = p.a + p.b * sqrt(-2.0 * ln_unit(u1)) * -cos_f32(3.141592653589793 * (2.0 * u2 - 1.0));
                word = encode_f32(v, OUT_DTYPE);
            }
            case RNG_RANDINT: {
                word = encode_i32(p.low + i32(scale24(bits(c, k) >> 8u, p.span)), OUT_DTYPE);
            }
            default: {
                let u = f32(bits(c, k) >> 8u) * TWO_POW_M24;
                word = encode_f32(p.a + (p.b - p.a) * u, OUT_DTYPE);
            }
        }
        out[p.out_offset + i] = word;
    }
}
