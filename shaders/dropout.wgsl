//! include "random_stream.wgsl"
// Dropout in one pass: out[i] = x[i] * scale where u(offset + i) >= p, else 0 (u: random.wgsl's uniform of the
// counter-based stream; scale = 1 / (1 - p)). The mask is drawn, never stored: the backward is the same kernel
// on the gradient with the same seed and offset. The Python side is _backends/webgpu/dropout.py; seed and offset
// may be dynamic scalars, so that a replayed step draws anew.

struct Params {
    n: u32,
    x_off: u32,
    out_off: u32,
    seed: u32,
    offset: u32,
    seed_slot: u32,    // dynamic scalar slots, or 0xffffffff for the inline values
    offset_slot: u32,
    p: f32,
    scale: f32,
}

@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(0) var<storage, read_write> out4: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> x4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> scalars: array<u32>;
@group(0) @binding(3) var<uniform> p: Params;

const WORKGROUP: u32 = 256u;
const TWO_POW_M24: f32 = 5.9604644775390625e-8;

fn seed_key() -> u32 { return lowbias32(select(p.seed, scalars[p.seed_slot], p.seed_slot != 0xffffffffu)); }
fn first() -> u32 { return select(p.offset, scalars[p.offset_slot], p.offset_slot != 0xffffffffu); }
fn kept(c: u32, k: u32) -> bool { return f32(bits(c, k) >> 8u) * TWO_POW_M24 >= p.p; }

@compute @workgroup_size(WORKGROUP)
fn dropout(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let k = seed_key();
    let c0 = first();
    for (var i = gid.x; i < p.n; i += groups.x * WORKGROUP) {
        out[p.out_off + i] = select(0.0, x[p.x_off + i] * p.scale, kept(c0 + i, k));  // (dropped NaN and inf: 0)
    }
}

// Four elements a thread step (offsets and n multiples of 4).
@compute @workgroup_size(WORKGROUP)
fn dropout4(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let k = seed_key();
    let c0 = first();
    for (var j = gid.x; j < p.n / 4u; j += groups.x * WORKGROUP) {
        let c = c0 + 4u * j;
        let keep = vec4<bool>(kept(c, k), kept(c + 1u, k), kept(c + 2u, k), kept(c + 3u, k));
        out4[(p.out_off >> 2u) + j] = select(vec4<f32>(), x4[(p.x_off >> 2u) + j] * p.scale, keep);
    }
}
