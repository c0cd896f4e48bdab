//! include "common.wgsl"
//! include "errors.wgsl"
// clip_grad_norm_ on WebGPU (the Python side is _backends/webgpu/grad_norm.py): the total p-norm of
// every gradient, and their scaling by min(max_norm / (norm + 1e-6), 1), without any read-back.
//
// A dispatch binds up to GRADS gradient buffers (WGSL cannot index bindings, and WebGPU guarantees only
// 8 storage buffers per stage), so the gradients go in chunks:
//   norm_partials  per chunk: each workgroup folds its share of the chunk's elements (|g|^p summed, or
//                  max |g| for p = inf) into one partial at scratch[partial_offset + workgroup]
//   norm_finish    one workgroup: folds all partials into the norm (scratch[0]) and the clip
//                  coefficient (scratch[1]); a non-finite norm is reported in the error word when
//                  error_code != 0 (error_if_nonfinite=True: the host raises at its next read-back)
//   scale          per chunk: g *= scratch[1]
// NaN propagates explicitly through max (WGSL leaves max(NaN, x) to the implementation).

const GRADS: u32 = 4u;
const WORKGROUP: u32 = 256u;

override P_KIND: u32 = 0u;   // 0: p = 2, 1: p = 1, 2: p = inf, 3: any other p > 0

struct Params {
    n: vec4<u32>,        // elements of each gradient of the chunk (0: no gradient in that slot)
    off: vec4<u32>,      // their first element in their buffers
    partial_offset: u32, // norm_partials: where this chunk's partials go; norm_finish: where they begin
    count: u32,          // norm_finish: how many partials
    p: f32,
    max_norm: f32,
    error_code: u32,
}

@group(0) @binding(0) var<storage, read_write> g0: array<f32>;
@group(0) @binding(1) var<storage, read_write> g1: array<f32>;
@group(0) @binding(2) var<storage, read_write> g2: array<f32>;
@group(0) @binding(3) var<storage, read_write> g3: array<f32>;
@group(0) @binding(4) var<storage, read_write> scratch: array<f32>;
@group(0) @binding(5) var<storage, read_write> errors: array<atomic<u32>>;  // errors.wgsl
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> tree: array<f32, WORKGROUP>;

// |v|^p, as folded into a partial.
fn term(v: f32) -> f32 {
    let a = abs(v);
    switch P_KIND {
        case 0u: { return a * a; }
        case 3u: { return pow(a, p.p); }
        default: { return a; }
    }
}

fn fold(acc: f32, t: f32) -> f32 {
    if (P_KIND == 2u) {
        return select(max(acc, t), nan_f32(), is_nan(acc) || is_nan(t));
    }
    return acc + t;
}

// The fold of `v` over the workgroup (every thread gets it).
fn workgroup_fold(v: f32, lid: u32) -> f32 {
    tree[lid] = v;
    workgroupBarrier();
    for (var stride = WORKGROUP / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) { tree[lid] = fold(tree[lid], tree[lid + stride]); }
        workgroupBarrier();
    }
    let r = tree[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(WORKGROUP)
fn norm_partials(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                 @builtin(num_workgroups) nwg: vec3<u32>) {
    let start = wid.x * WORKGROUP + lid;
    let step = nwg.x * WORKGROUP;
    var acc = 0.0;
    for (var i = start; i < p.n.x; i += step) { acc = fold(acc, term(g0[p.off.x + i])); }
    for (var i = start; i < p.n.y; i += step) { acc = fold(acc, term(g1[p.off.y + i])); }
    for (var i = start; i < p.n.z; i += step) { acc = fold(acc, term(g2[p.off.z + i])); }
    for (var i = start; i < p.n.w; i += step) { acc = fold(acc, term(g3[p.off.w + i])); }
    let total = workgroup_fold(acc, lid);
    if (lid == 0u) { scratch[p.partial_offset + wid.x] = total; }
}

@compute @workgroup_size(WORKGROUP)
fn norm_finish(@builtin(local_invocation_index) lid: u32) {
    var acc = 0.0;
    for (var i = lid; i < p.count; i += WORKGROUP) { acc = fold(acc, scratch[p.partial_offset + i]); }
    let total = workgroup_fold(acc, lid);
    if (lid != 0u) { return; }
    var norm = total;
    if (P_KIND == 0u) { norm = sqrt(total); }
    if (P_KIND == 3u) { norm = pow(total, 1.0 / p.p); }
    let coef = p.max_norm / (norm + 1e-6);
    scratch[0] = norm;
    scratch[1] = select(min(coef, 1.0), coef, is_nan(coef));  // clamp(max=1) keeps NaN, as PyTorch's
    if (p.error_code != 0u && (is_nan(norm) || is_inf(norm))) { report_error(p.error_code, 0, 0u); }
}

@compute @workgroup_size(WORKGROUP)
fn scale(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let coef = scratch[1];
    let step = nwg.x * WORKGROUP;
    for (var i = gid.x; i < p.n.x; i += step) { g0[p.off.x + i] *= coef; }
    for (var i = gid.x; i < p.n.y; i += step) { g1[p.off.y + i] *= coef; }
    for (var i = gid.x; i < p.n.z; i += step) { g2[p.off.z + i] *= coef; }
    for (var i = gid.x; i < p.n.w; i += step) { g3[p.off.w + i] *= coef; }
}
