//! include "common.wgsl"
//! include "errors.wgsl"
// Indexing along the middle axis of [outer, size, inner] (the Python side is _backends/webgpu/index.py):
//   index_select           out[o, k, i] = x[o, index[k], i]
//   gather                 out[o, k, i] = x[o, index[o, k, i], i]
//   gather_add             out[o, index[o, k, i], i] += grad[o, k, i]  (backward of gather)
// (index_select's backward is embedding.wgsl's.) gather_add scatters with atomics into an `out` the host zeroed
// first (float adds by compare-and-swap: WGSL has no float atomics), so the order of additions, and the last bits
// of a sum, can vary between runs. An index outside [0, size) (negative ones too, as PyTorch's index_select
// and gather) reads nothing: the output element is 0, and the forward kernels report the index in the
// error word (errors.wgsl; the host raises at its next read-back). The scatter-add adds nowhere and
// report nothing: its forward kernel has reported the same index already.

override X_DTYPE: u32 = DT_F32;   // uint8 sources are unpacked to int32; 32-bit dtypes copy words as-is
override INT_MATH: bool = false;  // scatter-add in i32 (exact) rather than f32

struct Params {
    n: u32,          // elements of out (gathers) or of grad (scatter-adds)
    size: u32,
    inner: u32,
    k: u32,
    x_offset: u32,   // x, or grad for the scatter-adds
    index_offset: u32,
    out_offset: u32,
    error_code: u32, // what report_error records for a bad index (Runtime.error_code)
}

@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read> index: array<i32>;
@group(0) @binding(3) var<uniform> p: Params;
@group(0) @binding(4) var<storage, read_write> out_atomic: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read_write> errors: array<atomic<u32>>;

const WORKGROUP: u32 = 256u;

// For element q of an [outer, K, inner] array: (o, k, i).
fn split_q(q: u32) -> vec3<u32> {
    let i = q % p.inner;
    let rest = q / p.inner;
    return vec3<u32>(rest / p.k, rest % p.k, i);
}

// The row an index names, or -1 when it is out of range.
fn row(j: i32) -> i32 {
    return select(-1, j, j >= 0 && j < i32(p.size));
}

// row(j), reporting an index out of range.
fn checked_row(j: i32) -> i32 {
    let r = row(j);
    if (r < 0) { report_error(p.error_code, j, p.size); }
    return r;
}

fn copy_word(q: u32, j: i32, c: vec3<u32>) {
    if (j < 0) {
        out[p.out_offset + q] = 0u;
        return;
    }
    let src = p.x_offset + (c.x * p.size + u32(j)) * p.inner + c.z;
    if (X_DTYPE == DT_U8) {
        out[p.out_offset + q] = encode_i32(decode_i32(x[src >> 2u], src, DT_U8), DT_I32);
    } else {
        out[p.out_offset + q] = x[src];
    }
}

fn add_at(k: u32, v: u32) {
    if (INT_MATH) {
        atomicAdd(&out_atomic[k], v);
        return;
    }
    var old = atomicLoad(&out_atomic[k]);
    loop {
        let r = atomicCompareExchangeWeak(&out_atomic[k], old, bitcast<u32>(bitcast<f32>(old) + bitcast<f32>(v)));
        if (r.exchanged) { break; }
        old = r.old_value;
    }
}

fn scatter(q: u32, j: i32, c: vec3<u32>) {
    if (j >= 0) {
        add_at(p.out_offset + (c.x * p.size + u32(j)) * p.inner + c.z, x[p.x_offset + q]);
    }
}

@compute @workgroup_size(WORKGROUP)
fn index_select(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var q = gid.x; q < p.n; q += groups.x * WORKGROUP) {
        let c = split_q(q);
        copy_word(q, checked_row(index[p.index_offset + c.y]), c);
    }
}

@compute @workgroup_size(WORKGROUP)
fn gather(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var q = gid.x; q < p.n; q += groups.x * WORKGROUP) {
        copy_word(q, checked_row(index[p.index_offset + q]), split_q(q));
    }
}

@compute @workgroup_size(WORKGROUP)
fn gather_add(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var q = gid.x; q < p.n; q += groups.x * WORKGROUP) {
        scatter(q, row(index[p.index_offset + q]), split_q(q));
    }
}
