// GradScaler's unscale (the Python side is _backends/webgpu/amp.py): grad *= inv_scale in place, and the
// found-inf flag (a float32 0-d tensor, 0 or 1) set where any gradient element, before unscaling, is inf
// or NaN, as PyTorch's _amp_foreach_non_finite_check_and_unscale_. unscale_check6 takes up to six gradients
// per dispatch; the flag is written with an atomic max of 1.0's bits (the float32 0/1 read back as is).

const ONE_BITS: u32 = 0x3f800000u;  // 1.0f

// unscale_check6: up to six gradients, each in its own storage (bindings 0-5; WebGPU guarantees eight storage
// buffers a stage: six, inv_scale and the flag). Workgroups [first[j], first[j + 1]) take gradient j (a slot
// past the count has n = 0 and no workgroups). With a dispatch per gradient, each wrote the one flag, so they
// ran one after another (ResNet-18's 62 under autocast: 180 us of the H200's replayed step).
struct Params6 {
    n: array<vec4<u32>, 2>,       // elements of gradient j: n[j / 4][j % 4] (j < 6)
    offset: array<vec4<u32>, 2>,  // its first element in its storage
    first: array<vec4<u32>, 2>,   // its first workgroup (a slot past the count: 0xffffffff)
    inv_offset: u32,
    flag_offset: u32,
}

@group(0) @binding(0) var<storage, read_write> g0: array<f32>;
@group(0) @binding(1) var<storage, read_write> g1: array<f32>;
@group(0) @binding(2) var<storage, read_write> g2: array<f32>;
@group(0) @binding(3) var<storage, read_write> g3: array<f32>;
@group(0) @binding(4) var<storage, read_write> g4: array<f32>;
@group(0) @binding(5) var<storage, read_write> g5: array<f32>;
@group(0) @binding(6) var<storage, read> inv6: array<f32>;
@group(0) @binding(7) var<storage, read_write> flag6: array<atomic<u32>>;
@group(0) @binding(8) var<uniform> q: Params6;

fn at6(a: array<vec4<u32>, 2>, j: u32) -> u32 { return a[j / 4u][j % 4u]; }

// v unscaled; the flag set where v is inf or NaN
fn unscaled(v: f32) -> f32 {
    if ((bitcast<u32>(v) & 0x7fffffffu) >= 0x7f800000u) {
        atomicMax(&flag6[q.flag_offset], ONE_BITS);
    }
    return v * inv6[q.inv_offset];
}

@compute @workgroup_size(256)
fn unscale_check6(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
                  @builtin(num_workgroups) groups: vec3<u32>) {
    let w = wid.x + wid.y * groups.x;
    var j = 0u;
    for (var k = 1u; k < 6u; k++) {
        if (w >= at6(q.first, k)) { j = k; }
    }
    let i = (w - at6(q.first, j)) * 256u + lid.x;
    if (i >= at6(q.n, j)) { return; }
    let e = at6(q.offset, j) + i;
    switch j {
        case 0u: { g0[e] = unscaled(g0[e]); }
        case 1u: { g1[e] = unscaled(g1[e]); }
        case 2u: { g2[e] = unscaled(g2[e]); }
        case 3u: { g3[e] = unscaled(g3[e]); }
        case 4u: { g4[e] = unscaled(g4[e]); }
        default: { g5[e] = unscaled(g5[e]); }
    }
}

// restore_if (GradScaler's undo of a step taken on inf/NaN gradients, without a read-back): out = saved
// where found (a float32 sum of found-inf flags) is above 0, words copied as they are; else nothing is
// read or written past the flag, so a clean step costs one small dispatch per tensor.
struct Params {
    n: u32,            // words
    out_offset: u32,
    saved_offset: u32,
    found_offset: u32,
}

@group(0) @binding(3) var<uniform> p: Params;
@group(0) @binding(0) var<storage, read_write> out_words: array<u32>;
@group(0) @binding(1) var<storage, read> saved_words: array<u32>;
@group(0) @binding(2) var<storage, read> found: array<f32>;

@compute @workgroup_size(256)
fn restore_if(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
              @builtin(num_workgroups) groups: vec3<u32>) {
    if (!(found[p.found_offset] > 0.0)) { return; }
    let i = (wid.x + wid.y * groups.x) * 256u + lid.x;
    if (i >= p.n) { return; }
    out_words[p.out_offset + i] = saved_words[p.saved_offset + i];
}
