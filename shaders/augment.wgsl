//! include "common.wgsl"
// Data augmentation on image batches [N, C, H, W] (the Python side is backends/webgpu/augment.py; the
// semantics, and the CPU reference, are in backends/interface.py and backends/cpu.py):
//   crop_flip   a random crop of the padded image, then a random horizontal flip, drawn per sample
//   affine      out = x * scale[c] + shift[c] in float32, from uint8 or float32, NCHW or NHWC
// Random parameters come from the counter-based stream of random.wgsl (same hash, same counters), so a
// sample's crop and flip are the CPU backend's, and seed/offset may be dynamic scalars: a replayed step
// draws new augmentations each time.

override X_DTYPE: u32 = DT_F32;  // also out's dtype for crop_flip (uint8 is written four bytes a word)

const NO_SLOT: u32 = 0xffffffffu;
const WORKGROUP: u32 = 256u;
const TWO_POW_M24: f32 = 5.9604644775390625e-8;
// padding modes, the order of AUGMENT_PAD_MODES (backends/interface.py)
const PAD_CONSTANT: u32 = 0u;
const PAD_EDGE: u32 = 1u;
const PAD_REFLECT: u32 = 2u;

@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read> scalars: array<u32>;

// ------------------------------------------------------------------ the random stream (as random.wgsl)
fn lowbias32(v: u32) -> u32 {
    var x = v;
    x ^= x >> 16u;
    x *= 0x7feb352du;
    x ^= x >> 15u;
    x *= 0x846ca68bu;
    x ^= x >> 16u;
    return x;
}

fn bits(j: u32, k: u32) -> u32 { return lowbias32(lowbias32(j ^ k) + k); }

// floor(m * span / 2^24) exactly, for m < 2^24 (random.wgsl's scale24).
fn scale24(m: u32, span: u32) -> u32 {
    let m0 = m & 0xffffu;
    let m1 = m >> 16u;
    let s0 = span & 0xffffu;
    let s1 = span >> 16u;
    let low = m0 * s0;
    let mid = (low >> 16u) + ((m0 * s1) & 0xffffu) + ((m1 * s0) & 0xffffu);
    let hi = m1 * s1 + ((m0 * s1) >> 16u) + ((m1 * s0) >> 16u) + (mid >> 16u);
    let lo = (low & 0xffffu) | (mid << 16u);
    return (hi << 8u) | (lo >> 24u);
}

// ------------------------------------------------------------------ crop_flip
struct CropParams {
    n: u32,          // output elements
    words: u32,      // output words (n, or ceil(n / 4) for uint8)
    c: u32,
    h: u32,
    w: u32,
    oh: u32,
    ow: u32,
    pad_top: u32,
    pad_left: u32,
    span_i: u32,     // PH - OH + 1: the crop's possible top rows
    span_j: u32,
    x_offset: u32,   // elements
    out_offset: u32, // elements (a multiple of 4 for uint8)
    seed: u32,
    offset: u32,
    seed_slot: u32,
    offset_slot: u32,
    mode: u32,
    fill: f32,
    flip_p: f32,
}

@group(0) @binding(3) var<uniform> cp: CropParams;

// The image row (or column) at padded-relative coordinate t (0..size-1 is the image); -1: the fill value.
fn pad_index(t: i32, size: i32) -> i32 {
    if (t >= 0 && t < size) { return t; }
    switch cp.mode {
        case PAD_CONSTANT: { return -1; }
        case PAD_EDGE: { return clamp(t, 0, size - 1); }
        case PAD_REFLECT: { return select(2 * size - 2 - t, -t, t < 0); }
        default: { return select(2 * size - 1 - t, -t - 1, t < 0); }  // symmetric
    }
}

// Output element e: its value as a word of X_DTYPE (a uint8 value in the low byte).
fn crop_value(e: u32, k: u32, offset: u32) -> u32 {
    let v = e % cp.ow;
    let y = (e / cp.ow) % cp.oh;
    let plane = e / (cp.ow * cp.oh);   // n * C + c
    let sample = plane / cp.c;
    let c0 = offset + 3u * sample;
    let i = scale24(bits(c0, k) >> 8u, cp.span_i);
    let j = scale24(bits(c0 + 1u, k) >> 8u, cp.span_j);
    let flipped = f32(bits(c0 + 2u, k) >> 8u) * TWO_POW_M24 < cp.flip_p;
    let col = select(v, cp.ow - 1u - v, flipped);
    let r = pad_index(i32(i + y) - i32(cp.pad_top), i32(cp.h));
    let s = pad_index(i32(j + col) - i32(cp.pad_left), i32(cp.w));
    if (r < 0 || s < 0) {
        if (X_DTYPE == DT_U8) { return u32(cp.fill) & 0xffu; }
        return encode_f32(cp.fill, X_DTYPE);
    }
    let src = cp.x_offset + (plane * cp.h + u32(r)) * cp.w + u32(s);
    let word = x[word_index(src, X_DTYPE)];
    if (X_DTYPE == DT_U8) { return (word >> ((src & 3u) * 8u)) & 0xffu; }
    return word;
}

@compute @workgroup_size(WORKGROUP)
fn crop_flip(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    var seed = cp.seed;
    if (cp.seed_slot != NO_SLOT) { seed = scalars[cp.seed_slot]; }
    var offset = cp.offset;
    if (cp.offset_slot != NO_SLOT) { offset = scalars[cp.offset_slot]; }
    let k = lowbias32(seed);
    for (var q = gid.x; q < cp.words; q += groups.x * WORKGROUP) {
        if (X_DTYPE != DT_U8) {
            out[cp.out_offset + q] = crop_value(q, k, offset);
            continue;
        }
        // four bytes per word; in a last, partial word the bytes past the view keep their values
        let dst = (cp.out_offset >> 2u) + q;
        var word = 0u;
        for (var b = 0u; b < 4u; b++) {
            let e = 4u * q + b;
            if (e < cp.n) {
                word |= crop_value(e, k, offset) << (8u * b);
            } else {
                word |= out[dst] & (0xffu << (8u * b));
            }
        }
        out[dst] = word;
    }
}

// ------------------------------------------------------------------ affine
struct AffineParams {
    n: u32,              // output elements
    c: u32,
    hw: u32,             // H * W
    channels_last: u32,  // 1: x is [N, H, W, C]
    x_offset: u32,
    out_offset: u32,
    pad0: u32,
    pad1: u32,
    coef: array<vec4<f32>, 8>,  // scale[0..15], then shift[0..15]
}

@group(0) @binding(4) var<uniform> ap: AffineParams;  // its own binding: one entry point each

fn coefficient(i: u32) -> f32 { return ap.coef[i >> 2u][i & 3u]; }

@compute @workgroup_size(WORKGROUP)
fn affine(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var q = gid.x; q < ap.n; q += groups.x * WORKGROUP) {
        let s = q % ap.hw;
        let plane = q / ap.hw;
        let c = plane % ap.c;
        var src = q;
        if (ap.channels_last != 0u) { src = ((plane - c) * ap.hw + s * ap.c) + c; }
        src += ap.x_offset;
        let v = decode_f32(x[word_index(src, X_DTYPE)], src, X_DTYPE);
        out[ap.out_offset + q] = bitcast<u32>(v * coefficient(c) + coefficient(16u + c));
    }
}
