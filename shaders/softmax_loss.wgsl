//! include "common.wgsl"
//! include "errors.wgsl"
// Row kernels over contiguous float32 [rows, cols]: softmax, log-softmax, their backward, and fused
// softmax cross-entropy: its backward without a saved log-sum-exp, and its mean in one workgroup for small
// problems (the per-row forward and the backward from a saved log-sum-exp are cross_entropy.wgsl's). The Python
// side is _backends/webgpu/softmax_loss.py.
//
// Two forms of each kernel; softmax_loss.py picks one by adapter and shape (_thread_per_row):
// * `<name>_rows` (CPU adapters): one thread per row, a plain loop over its columns, 64 rows per
//   workgroup. No workgroup memory, no barrier. On SwiftShader (the CPU adapter headless Chromium
//   uses: 4-wide SIMD, each group of 4 invocations a coroutine) a workgroupBarrier switches between
//   all 64 coroutines of a 256-thread workgroup, and the tree form below needs ~10 barriers per
//   reduction: [128, 10] logits took 2.9 ms forward and 1.7 ms backward that way (2 cores), against
//   ~0.05 and ~0.07 ms with a thread per row, whose cost is only its storage accesses (~40-50 ns per
//   4 invocations each) and loop steps (~15-30 ns). Long rows too: [128, 1000] 45 ms vs 1.1 ms
//   forward.
// * `<name>` (GPUs; on CPU adapters, fewer than 4 long rows): a workgroup of 256 threads serves
//   `lanes` rows, 256 / lanes threads per row (lane = lid % lanes, thread-in-row t = lid / lanes).
//   A row's threads stride over its columns and meet in tree reductions through workgroup memory
//   (row_max, row_sum). On a GPU this is ahead of a thread per row or level with it (measured on
//   an H100: a thread's serial loop over its row's columns costs more than the tree's barriers,
//   from 10 columns up), but for very many short rows.
// Every value is shifted by the row max before exp, so logits of +-1e4 stay finite.

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
    error_code: u32,     // what cross_entropy reports for a target out of range (Runtime.error_code)
    out_stride: u32,     // (cross_entropy.wgsl's forward: its Params share this layout's first fields)
    lse_offset: u32,     // cross_entropy_mean with LSE: where each row's log-sum-exp goes
}

@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read> targets: array<i32>;
@group(0) @binding(4) var<storage, read> row_grad: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;
@group(0) @binding(6) var<storage, read_write> errors: array<atomic<u32>>;  // errors.wgsl
@group(0) @binding(7) var<storage, read_write> lse_w: array<f32>;  // cross_entropy_mean with LSE

override LSE: bool = false;   // cross_entropy_mean: write each row's log-sum-exp (for the backward)

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

// ------------------------------------------------------------------------- one thread per row

const ROW_WORKGROUP: u32 = 64u;

// This thread's row (rows >= p.rows: none).
fn row_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * ROW_WORKGROUP + lid;
}

// A thread sums a row in blocks of BLOCK columns, adding each block's sum to the total: float32
// rounding then grows with BLOCK + cols / BLOCK terms rather than with cols (the tree kernels' sums
// are pairwise; a plain running sum over a few hundred mixed-sign terms was measurably worse).
const BLOCK: u32 = 32u;

// (max, log of sum exp(x - max)) of the row of x starting at `base`, by one thread (see log_sum_exp).
fn row_log_sum_exp(base: u32) -> vec2<f32> {
    let cols = p.cols;
    var m = -inf_f32();
    for (var c = 0u; c < cols; c++) { m = max(m, x[base + c]); }
    var s = 0.0;
    for (var b = 0u; b < cols; b += BLOCK) {
        var part = 0.0;
        for (var c = b; c < min(b + BLOCK, cols); c++) { part += exp(x[base + c] - m); }
        s += part;
    }
    return vec2<f32>(m, log(s));
}

@compute @workgroup_size(ROW_WORKGROUP)
fn softmax_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let r = row_index(wid, nwg, lid);
    if (r >= p.rows) { return; }
    let cols = p.cols;
    let base = p.x_offset + r * cols;
    let dest = p.out_offset + r * cols;
    let lse = row_log_sum_exp(base);
    for (var c = 0u; c < cols; c++) {
        let v = (x[base + c] - lse.x) - lse.y;
        out[dest + c] = select(exp(v), v, LOG);
    }
}

@compute @workgroup_size(ROW_WORKGROUP)
fn softmax_backward_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) lid: u32) {
    let r = row_index(wid, nwg, lid);
    if (r >= p.rows) { return; }
    let cols = p.cols;
    let gbase = p.x_offset + r * cols;
    let ybase = p.y_offset + r * cols;
    var s = 0.0;
    for (var b = 0u; b < cols; b += BLOCK) {
        var part = 0.0;
        for (var c = b; c < min(b + BLOCK, cols); c++) {
            if (LOG) { part += x[gbase + c]; } else { part += x[gbase + c] * y[ybase + c]; }
        }
        s += part;
    }
    let dest = p.out_offset + r * cols;
    for (var c = 0u; c < cols; c++) {
        let g = x[gbase + c];
        let yv = y[ybase + c];
        out[dest + c] = select(yv * (g - s), g - exp(yv) * s, LOG);
    }
}

// Row r's (loss, counted) as cross_entropy computes them, by one thread: counted is 1.0 unless the target
// is ignore_index, where the loss is 0; NaN, reported in the error word, for another target outside [0, C). No branch skips work for
// ignored rows or bad targets: SwiftShader would run the skipped block anyway (masked) for every group of
// 4 rows; results are selected at the end.
fn row_loss(r: u32) -> vec2<f32> {
    let tgt = target_of(r);
    let cols = p.cols;
    let base = p.x_offset + r * cols;
    var m = -inf_f32();
    for (var c = 0u; c < cols; c++) { m = max(m, x[base + c]); }
    var s = 0.0;
    var total = 0.0;
    for (var b = 0u; b < cols; b += BLOCK) {
        var part = vec2<f32>();
        for (var c = b; c < min(b + BLOCK, cols); c++) {
            let v = x[base + c];
            part += vec2<f32>(exp(v - m), v);
        }
        s += part.x;
        total += part.y;
    }
    let l = log(s);
    if (LSE) { lse_w[p.lse_offset + r] = m + l; }
    let valid = tgt >= 0 && tgt < i32(cols);
    // The target's logit, read from inside the row whatever the target (used only when valid).
    let picked = x[base + min(u32(max(tgt, 0)), max(cols, 1u) - 1u)];
    var loss = -(1.0 - p.smoothing) * ((picked - m) - l);
    if (p.smoothing != 0.0) {
        loss -= p.smoothing / f32(cols) * ((total - f32(cols) * m) - f32(cols) * l);
    }
    loss = select(nan_f32(), loss, valid);
    let ignored = tgt == p.ignore_index;
    if (!valid && !ignored) { report_error(p.error_code, tgt, cols); }
    return select(vec2<f32>(loss, 1.0), vec2<f32>(0.0), ignored);
}

// reduction="mean" in ONE dispatch of one workgroup, for small problems (softmax_loss.MEAN_MAX_ELEMENTS: a
// classifier's batch), on every adapter: each thread sums the losses of rows lid, lid + MEAN_THREADS, ... and counts
// those whose target is not ignore_index, then a tree sums the threads' pairs. out[out_offset] = the mean
// (NaN when every row is ignored, as PyTorch), out[out_offset + 1] = the count (the backward's divisor).
// It replaces per-row (loss, counted) pairs, their column sums and a division: three dispatches.
// MEAN_THREADS: 256 on GPUs, 64 on CPU adapters (softmax_loss.py; fewer barriers' worth of coroutine
// switches on SwiftShader, whose one workgroup runs on one core).
override MEAN_THREADS: u32 = 256u;
var<workgroup> pair_tree: array<vec2<f32>, MEAN_THREADS>;

@compute @workgroup_size(MEAN_THREADS)
fn cross_entropy_mean(@builtin(local_invocation_index) lid: u32) {
    var acc = vec2<f32>();
    for (var r = lid; r < p.rows; r += MEAN_THREADS) {
        acc += row_loss(r);
    }
    pair_tree[lid] = acc;
    workgroupBarrier();
    for (var stride = MEAN_THREADS / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) { pair_tree[lid] += pair_tree[lid + stride]; }
        workgroupBarrier();
    }
    if (lid == 0u) {
        let sums = pair_tree[0];
        out[p.out_offset] = select(sums.x / sums.y, nan_f32(), sums.y == 0.0);
        out[p.out_offset + 1u] = sums.y;
    }
}

@compute @workgroup_size(ROW_WORKGROUP)
fn cross_entropy_backward_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                               @builtin(local_invocation_index) lid: u32) {
    let r = row_index(wid, nwg, lid);
    if (r >= p.rows) { return; }
    let tgt = target_of(r);
    let ignored = tgt == p.ignore_index;
    let g = row_grad[p.grad_offset + r * p.grad_stride];
    let cols = p.cols;
    let base = p.x_offset + r * cols;
    let dest = p.out_offset + r * cols;
    let lse = row_log_sum_exp(base);
    let uniform_part = p.smoothing / f32(cols);
    for (var c = 0u; c < cols; c++) {
        let onehot = select(0.0, 1.0 - p.smoothing, i32(c) == tgt);
        let v = g * (exp((x[base + c] - lse.x) - lse.y) - onehot - uniform_part);
        out[dest + c] = select(v, 0.0, ignored);
    }
}
