//! include "common.wgsl"
//! include "errors.wgsl"
// Softmax cross-entropy over wide rows (a language model's vocabulary: 50,257 logits a row), the Python side
// being _backends/webgpu/softmax_loss.py:
//   cross_entropy_online        each row's loss in ONE pass over its logits: a running (max, sum of exp) merged
//                               online, with the target's logit and (for label smoothing) the row's sum; each
//                               row's log-sum-exp saved (LSE) for the backward
//   cross_entropy_online_rows   the same, a thread per row (software adapters: no barriers)
//   cross_entropy_backward_lse  grad = g[row] * (exp(x - lse[row]) - (1 - ls) onehot - ls / C): one read of the
//                               logits and one write, no reduction (the forward's lse)
// A row is read in vec4s from its first 4-aligned element (a scalar head and tail around them: a row of 50,257
// floats starts anywhere modulo 4), through the one vec4 view of the logits (naga refuses two views of a binding in
// one entry point). On GPUs a workgroup of 256 threads takes a row and merges the threads' partial results in a
// tree; the previous kernels (softmax_loss.wgsl) read each row three times forward and three times backward.
// softmax_loss.py splices ELEMENT_TYPES (typed.py): XT, the logits' type, and OT, out's (float32 losses; the
// backward's gradient in the logits' type). float16 logits are read into f32 and every result rounded once, so a
// half row gives what its float32 copy would (autocast's cross-entropy keeps the half logits for the backward).
//! splice ELEMENT_TYPES

override LSE: bool = false;  // forward: write each row's log-sum-exp

struct Params {
    rows: u32,
    cols: u32,
    x_offset: u32,
    out_offset: u32,
    target_offset: u32,
    target_stride: u32,
    lse_offset: u32,
    grad_offset: u32,
    grad_stride: u32,
    ignore_index: i32,
    smoothing: f32,
    error_code: u32,
    out_stride: u32,   // forward: 1, or 2 to write (loss, counted) pairs
}

@group(0) @binding(0) var<storage, read_write> out: array<OT>;
@group(0) @binding(1) var<storage, read> x4: array<vec4<XT>>;
@group(0) @binding(2) var<storage, read> targets: array<i32>;
@group(0) @binding(3) var<storage, read_write> lse_w: array<f32>;
@group(0) @binding(4) var<storage, read> row_grad: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;
@group(0) @binding(6) var<storage, read_write> errors: array<atomic<u32>>;  // errors.wgsl
@group(0) @binding(7) var<storage, read> lse_r: array<f32>;

const LOWEST: f32 = -3.4028234663852886e38;
const WG: u32 = 256u;
const BLOCK: u32 = 32u;

fn x_at(e: u32) -> f32 { return f32(x4[e >> 2u][e & 3u]); }

// A thread's share of a row: (max, sum of exp(x - max), sum of x, the target's logit where this thread saw it).
struct Part { m: f32, l: f32, total: f32, picked: f32 }

fn take(a: Part, v: f32, c: u32, tgt: i32) -> Part {
    let m = max(a.m, v);
    return Part(m, a.l * exp(a.m - m) + exp(v - m), a.total + v, select(a.picked, v, i32(c) == tgt));
}

fn take4(a: Part, v: vec4<f32>, c: u32, tgt: i32) -> Part {
    let m = max(a.m, max(max(v.x, v.y), max(v.z, v.w)));
    let e = exp(v - m);
    var picked = a.picked;
    let k = tgt - i32(c);
    if (k >= 0 && k < 4) { picked = v[u32(k)]; }
    return Part(m, a.l * exp(a.m - m) + (e.x + e.y) + (e.z + e.w), a.total + (v.x + v.y) + (v.z + v.w), picked);
}

fn merge(a: Part, b: Part) -> Part {
    let m = max(a.m, b.m);
    return Part(m, a.l * exp(a.m - m) + b.l * exp(b.m - m), a.total + b.total, a.picked + b.picked);
}

// Row r's elements [0, cols) at positions start, start + step, ...: a scalar head up to the first 4-aligned
// element, vec4s, a scalar tail.
fn fold_row(r: u32, start: u32, step: u32, tgt: i32) -> Part {
    let base = p.x_offset + r * p.cols;
    let head = min(p.cols, (4u - (base & 3u)) & 3u);
    let quads = (p.cols - head) / 4u;
    var a = Part(LOWEST, 0.0, 0.0, 0.0);
    for (var c = start; c < head; c += step) { a = take(a, x_at(base + c), c, tgt); }
    let q0 = (base + head) >> 2u;
    // in blocks of BLOCK vec4s merged into the total: rounding grows with BLOCK + quads / BLOCK terms, not with the
    // row's length (a thread of the *_rows kernel walks a whole row of 50,257)
    for (var b = start; b < quads; b += BLOCK * step) {
        var part = Part(LOWEST, 0.0, 0.0, 0.0);
        for (var u = b; u < min(b + BLOCK * step, quads); u += step) {
            part = take4(part, vec4<f32>(x4[q0 + u]), head + 4u * u, tgt);
        }
        a = merge(a, part);
    }
    for (var c = head + 4u * quads + start; c < p.cols; c += step) { a = take(a, x_at(base + c), c, tgt); }
    return a;
}

fn target_of(r: u32) -> i32 { return targets[p.target_offset + r * p.target_stride]; }

// Row r's loss from its merged Part, written with its count (out_stride 2) and lse; errors as softmax_loss.wgsl's.
fn finish(r: u32, a: Part, tgt: i32) {
    let cols = f32(p.cols);
    let ll = log(a.l);
    var loss = -(1.0 - p.smoothing) * ((a.picked - a.m) - ll);
    if (p.smoothing != 0.0) { loss -= p.smoothing / cols * ((a.total - cols * a.m) - cols * ll); }
    let ignored = tgt == p.ignore_index;
    if (!ignored && (tgt < 0 || tgt >= i32(p.cols))) {
        loss = nan_f32();
        report_error(p.error_code, tgt, p.cols);
    }
    let at = p.out_offset + r * p.out_stride;
    out[at] = to_OT(select(loss, 0.0, ignored));
    if (p.out_stride == 2u) { out[at + 1u] = to_OT(select(1.0, 0.0, ignored)); }
    if (LSE) { lse_w[p.lse_offset + r] = a.m + ll; }
}

var<workgroup> tree: array<vec4<f32>, WG>;

@compute @workgroup_size(WG)
fn cross_entropy_online(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                        @builtin(local_invocation_index) t: u32) {
    let r = wid.x + wid.y * nwg.x;
    if (r >= p.rows) { return; }  // (uniform across the workgroup)
    let tgt = target_of(r);
    let a = fold_row(r, t, WG, tgt);
    tree[t] = vec4<f32>(a.m, a.l, a.total, a.picked);
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (t < s) {
            let x = tree[t];
            let y = tree[t + s];
            let m = merge(Part(x.x, x.y, x.z, x.w), Part(y.x, y.y, y.z, y.w));
            tree[t] = vec4<f32>(m.m, m.l, m.total, m.picked);
        }
        workgroupBarrier();
    }
    if (t == 0u) {
        let v = tree[0];
        finish(r, Part(v.x, v.y, v.z, v.w), tgt);
    }
}

const ROWS_WG: u32 = 64u;

@compute @workgroup_size(ROWS_WG)
fn cross_entropy_online_rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = gid.x + gid.y * nwg.x * ROWS_WG;
    if (r >= p.rows) { return; }
    let tgt = target_of(r);
    finish(r, fold_row(r, 0u, 1u, tgt), tgt);
}

// A thread takes 4 consecutive columns of a row; rows walk the grid's y (and wrap past it).
@compute @workgroup_size(WG)
fn cross_entropy_backward_lse(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                              @builtin(local_invocation_index) t: u32) {
    let c0 = (wid.x * WG + t) * 4u;
    if (c0 >= p.cols) { return; }
    let uniform_part = p.smoothing / f32(p.cols);
    for (var r = wid.y; r < p.rows; r += nwg.y) {
        let tgt = target_of(r);
        let ignored = tgt == p.ignore_index;
        let g = row_grad[p.grad_offset + r * p.grad_stride];
        let lse = lse_r[p.lse_offset + r];
        let base = p.x_offset + r * p.cols;
        let dest = p.out_offset + r * p.cols;
        for (var c = c0; c < min(c0 + 4u, p.cols); c++) {
            let onehot = select(0.0, 1.0 - p.smoothing, i32(c) == tgt);
            let v = g * (exp(x_at(base + c) - lse) - onehot - uniform_part);
            out[dest + c] = to_OT(select(v, 0.0, ignored));
        }
    }
}
