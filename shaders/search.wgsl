//! include "common.wgsl"
// Binary search and histograms (the Python side is _backends/webgpu/search.py).
//   searchsorted   a thread per value: a binary search of its row of `sorted`, torch's lower bound (right: upper
//                  bound)
//   histc_count    a thread per element: one integer atomic add to its bin's count
//   histc_finish   a thread per bin: the count as float32

override FLOAT: bool = true;  // float32 values, else int32 words (int32, and int64 held in int32)
override RIGHT: bool = false;

struct Params {
    rows: u32,
    m: u32,          // entries of a sorted row
    n: u32,          // values per row (histc: elements)
    sorted_offset: u32,
    values_offset: u32,
    out_offset: u32,
    bins: u32,
    low: f32,
    high: f32,
}

@group(0) @binding(0) var<storage, read> sorted: array<u32>;
@group(0) @binding(1) var<storage, read> values: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<i32>;
@group(0) @binding(3) var<uniform> p: Params;
@group(0) @binding(4) var<storage, read_write> counts: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read> counts_r: array<u32>;
@group(0) @binding(5) var<storage, read_write> hist: array<f32>;

const WORKGROUP: u32 = 256u;

// Whether the search goes right of entry s for value v: unless s >= v (right: s > v), as torch's lower and upper
// bounds, so that a NaN on either side sends it right (NaN tested on the bits: compilers may assume no NaN).
fn goes_right(s: u32, v: u32) -> bool {
    if (FLOAT) {
        let fs = bitcast<f32>(s);
        let fv = bitcast<f32>(v);
        if (is_nan(fs) || is_nan(fv)) { return true; }
        return select(fs < fv, fs <= fv, RIGHT);
    }
    return select(bitcast<i32>(s) < bitcast<i32>(v), bitcast<i32>(s) <= bitcast<i32>(v), RIGHT);
}

@compute @workgroup_size(WORKGROUP)
fn searchsorted(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let q = gid.x + gid.y * groups.x * WORKGROUP;
    if (q >= p.rows * p.n) {
        return;
    }
    let row = q / p.n;
    let v = values[p.values_offset + q];
    let base = p.sorted_offset + row * p.m;
    var lo = 0u;
    var hi = p.m;
    while (lo < hi) {
        let mid = (lo + hi) / 2u;
        if (goes_right(sorted[base + mid], v)) { lo = mid + 1u; } else { hi = mid; }
    }
    out[p.out_offset + q] = i32(lo);
}

@compute @workgroup_size(WORKGROUP)
fn histc_count(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let q = gid.x + gid.y * groups.x * WORKGROUP;
    if (q >= p.n) {
        return;
    }
    let v = bitcast<f32>(values[p.values_offset + q]);
    if (is_nan(v) || v < p.low || v > p.high) {
        return;
    }
    let bin = min(u32(floor((v - p.low) * f32(p.bins) / (p.high - p.low))), p.bins - 1u);
    atomicAdd(&counts[bin], 1u);
}

@compute @workgroup_size(WORKGROUP)
fn histc_finish(@builtin(global_invocation_id) gid: vec3<u32>) {
    let b = gid.x;
    if (b < p.bins) {
        hist[p.out_offset + b] = f32(counts_r[b]);
    }
}
