//! include "common.wgsl"
// Row kernels over contiguous float32 [rows, cols]: softmax, log-softmax, their backward, and fused
// softmax cross-entropy forward and backward. The Python side is backends/webgpu/softmax_loss.py.
//
// A workgroup of 256 threads serves `lanes` rows, 256 / lanes threads per row (lane = lid % lanes,
// thread-in-row t = lid / lanes). A row's threads stride over its columns and meet in tree
// reductions through workgroup memory (row_max, row_sum). Every value is shifted by the row max
// before exp, so logits of +-1e4 stay finite.

override LOG: bool = false;   // log-softmax instead of softmax

struct Params {
    rows: u32,
    cols: u32,
    lanes: u32,
    groups: u32,
    x_offset: u32,       // logits / x / grad (softmax_backward)
    y_offset: u32,       // y (softmax_backward)
    out_offset: u32,
    target_offset: u32,
    target_stride: u32,
    grad_offset: u32,    // per-row upstream gradient (cross_entropy_backward)
    grad_stride: u32,
    ignore_index: i32,
    smoothing: f32,
}

@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read> targets: array<i32>;
@group(0) @binding(4) var<storage, read> row_grad: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> tree: array<f32, 256>;

// The max / sum of `v` over the threads of this thread's row (every thread gets the result).
fn row_max(v: f32, lid: u32) -> f32 {
    let lanes = p.lanes;
    tree[lid] = v;
    workgroupBarrier();
    for (var stride = 128u / lanes; stride > 0u; stride >>= 1u) {
        if (lid / lanes < stride) { tree[lid] = max(tree[lid], tree[lid + stride * lanes]); }
        workgroupBarrier();
    }
    let r = tree[lid % lanes];
    workgroupBarrier();
    return r;
}

fn row_sum(v: f32, lid: u32) -> f32 {
    let lanes = p.lanes;
    tree[lid] = v;
    workgroupBarrier();
    for (var stride = 128u / lanes; stride > 0u; stride >>= 1u) {
        if (lid / lanes < stride) { tree[lid] += tree[lid + stride * lanes]; }
        workgroupBarrier();
    }
    let r = tree[lid % lanes];
    workgroupBarrier();
    return r;
}

struct Row {
    valid: bool,
    index: u32,
    t: u32,          // this thread's first column
    step: u32,       // columns between this thread's elements
}

fn row_of(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> Row {
    let group = wid.x + wid.y * nwg.x;
    let r = group * p.lanes + lid % p.lanes;
    return Row(r < p.rows, r, lid / p.lanes, 256u / p.lanes);
}

// (max, log of sum exp(x - max)) of logits row `r` (at x_offset). Kept apart rather than added: at
// logits of 1e4 the float32 sum m + log(s) would lose the digits that x - m keeps exactly.
fn log_sum_exp(row: Row, lid: u32) -> vec2<f32> {
    let base = p.x_offset + row.index * p.cols;
    var m = -inf_f32();
    if (row.valid) {
        for (var c = row.t; c < p.cols; c += row.step) { m = max(m, x[base + c]); }
    }
    m = row_max(m, lid);
    var s = 0.0;
    if (row.valid) {
        for (var c = row.t; c < p.cols; c += row.step) { s += exp(x[base + c] - m); }
    }
    return vec2<f32>(m, log(row_sum(s, lid)));
}

@compute @workgroup_size(256)
fn softmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    if (wid.x + wid.y * nwg.x >= p.groups) { return; }
    let row = row_of(wid, nwg, lid);
    let lse = log_sum_exp(row, lid);
    if (!row.valid) { return; }
    let base = p.x_offset + row.index * p.cols;
    let dest = p.out_offset + row.index * p.cols;
    for (var c = row.t; c < p.cols; c += row.step) {
        let v = (x[base + c] - lse.x) - lse.y;
        out[dest + c] = select(exp(v), v, LOG);
    }
}

// softmax: out = y * (g - sum(g * y)); log-softmax: out = g - exp(y) * sum(g).  (g at x_offset)
@compute @workgroup_size(256)
fn softmax_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    if (wid.x + wid.y * nwg.x >= p.groups) { return; }
    let row = row_of(wid, nwg, lid);
    let gbase = p.x_offset + row.index * p.cols;
    let ybase = p.y_offset + row.index * p.cols;
    var s = 0.0;
    if (row.valid) {
        for (var c = row.t; c < p.cols; c += row.step) {
            s += select(x[gbase + c] * y[ybase + c], x[gbase + c], LOG);
        }
    }
    s = row_sum(s, lid);
    if (!row.valid) { return; }
    let dest = p.out_offset + row.index * p.cols;
    for (var c = row.t; c < p.cols; c += row.step) {
        let g = x[gbase + c];
        let yv = y[ybase + c];
        out[dest + c] = select(yv * (g - s), g - exp(yv) * s, LOG);
    }
}

fn target_of(r: u32) -> i32 { return targets[p.target_offset + r * p.target_stride]; }

// loss = -(1 - ls) * logp[t] - ls / C * sum(logp), 0 where t == ignore_index, NaN for a target
// outside [0, C) (the GPU cannot raise; the host checks nothing it would have to read back).
@compute @workgroup_size(256)
fn cross_entropy(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    if (wid.x + wid.y * nwg.x >= p.groups) { return; }
    let row = row_of(wid, nwg, lid);
    let lse = log_sum_exp(row, lid);
    var tgt = p.ignore_index;
    if (row.valid) { tgt = target_of(row.index); }
    let base = p.x_offset + row.index * p.cols;
    var picked = 0.0;
    var total = 0.0;
    if (row.valid) {
        for (var c = row.t; c < p.cols; c += row.step) {
            let v = x[base + c];
            total += v;
            if (i32(c) == tgt) { picked += v; }
        }
    }
    picked = row_sum(picked, lid);
    if (p.smoothing != 0.0) { total = row_sum(total, lid); }
    if (!row.valid || row.t != 0u) { return; }
    var loss = 0.0;
    if (tgt != p.ignore_index) {
        if (tgt < 0 || tgt >= i32(p.cols)) {
            loss = nan_f32();
        } else {
            loss = -(1.0 - p.smoothing) * ((picked - lse.x) - lse.y);
            if (p.smoothing != 0.0) {
                loss -= p.smoothing / f32(p.cols) * ((total - f32(p.cols) * lse.x) - f32(p.cols) * lse.y);
            }
        }
    }
    out[p.out_offset + row.index] = loss;
}

// out = grad[row] * (softmax(logits) - ((1 - ls) * onehot(t) + ls / C)); zero rows where ignored.
@compute @workgroup_size(256)
fn cross_entropy_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                          @builtin(local_invocation_index) lid: u32) {
    if (wid.x + wid.y * nwg.x >= p.groups) { return; }
    let row = row_of(wid, nwg, lid);
    let lse = log_sum_exp(row, lid);
    if (!row.valid) { return; }
    let tgt = target_of(row.index);
    let g = row_grad[p.grad_offset + row.index * p.grad_stride];
    let base = p.x_offset + row.index * p.cols;
    let dest = p.out_offset + row.index * p.cols;
    let uniform_part = p.smoothing / f32(p.cols);
    for (var c = row.t; c < p.cols; c += row.step) {
        var v = 0.0;
        if (tgt != p.ignore_index) {
            let onehot = select(0.0, 1.0 - p.smoothing, i32(c) == tgt);
            v = g * (exp((x[base + c] - lse.x) - lse.y) - onehot - uniform_part);
        }
        out[dest + c] = v;
    }
}
