//! include "common.wgsl"
//! include "random_stream.wgsl"
// The row softmax of hand-written attention, fused (the Python side is _backends/webgpu/softmax_masked.py):
//   softmax_masked           y = softmax(s) over the last dim, s = value where mask else x * scale (a GPT's
//                            `(q @ k^T) * scale`, `masked_fill(mask, -inf)`, `softmax`); with DROPOUT also
//                            dropped = y / (1 - p) where kept, else 0 (the `attn_dropout` that follows)
//   softmax_masked_backward  grad_x = scale * y * (gy - sum(gy * y)), 0 where masked; gy = grad, or with DROPOUT the
//                            gradient of `dropped`: grad / (1 - p) where kept, else 0
// x, y, grad, dropped: contiguous [d0, d1, d2, cols]; the mask (bool words) a view of that shape with any
// strides (a causal [1, 1, T, T] buffer broadcast over batch and heads: strides 0). A value of -inf (VALUE_INF)
// leaves masked entries out of the row altogether; a row with nothing left is NaN, as PyTorch's softmax of -inf.
// The dropout draw of element e (row-major) is u(offset + e) >= p: F.dropout's of the same shape.
//
// GPUs: a workgroup of TPR threads per row, the row in vec4 units (units of 4 scalars where it is not
// vec4-aligned), one online (max, sum) pass reduced by a tree, then the output pass. Software adapters (*_rows):
// a thread per row, no barriers.

override TPR: u32 = 64u;
override VEC: bool = true;        // rows start on multiples of 4 floats and cols % 4 == 0
override MASKED: bool = true;     // a mask is bound
override VALUE_INF: bool = true;  // the masked value is -inf: masked entries leave the row
override DROPOUT: bool = false;
// The input (x forward, grad backward) is read through binding 0, where a recorded step's fused chain writes its
// result over it (the same buffer and offset: fusion.py): each thread reads an element before it writes it.
override IN_FROM_OUT: bool = false;

struct Params {
    d1: u32, d2: u32, cols: u32, rows: u32,
    x_off: u32, y_off: u32, g_off: u32, drop_off: u32,  // x_off: x (forward) / grad_x (backward)
    m_off: u32, m_s0: u32, m_s1: u32, m_s2: u32,
    m_s3: u32, seed: u32, offset: u32, seed_slot: u32,
    offset_slot: u32, value: f32, scale: f32, p_drop: f32,
    drop_scale: f32,
}

@group(0) @binding(0) var<storage, read_write> out4: array<vec4<f32>>;  // y (forward) / grad_x (backward)
@group(0) @binding(1) var<storage, read> x4: array<vec4<f32>>;         // x (forward) / grad (backward)
@group(0) @binding(2) var<storage, read> maskb: array<u32>;
@group(0) @binding(3) var<storage, read_write> drop4: array<vec4<f32>>; // dropped (forward, DROPOUT)
@group(0) @binding(4) var<storage, read> scalars: array<u32>;
@group(0) @binding(5) var<uniform> p: Params;
@group(0) @binding(6) var<storage, read> y4: array<vec4<f32>>;          // y (backward)

const LOWEST: f32 = -3.4028234663852886e38;
var<workgroup> red: array<vec2<f32>, 256>;

fn units() -> u32 { return (p.cols + 3u) / 4u; }

fn load(buf: u32, base: u32, u: u32) -> vec4<f32> {  // unit u of the row at element `base` of x4 / y4 (0 / 1)
    if (VEC) {
        if (buf == 1u) { return y4[(base >> 2u) + u]; }
        if (IN_FROM_OUT) { return out4[(base >> 2u) + u]; }
        return x4[(base >> 2u) + u];
    }
    var v = vec4<f32>();
    for (var k = 0u; k < 4u; k++) {
        let e = base + 4u * u + k;
        if (4u * u + k < p.cols) {
            if (buf == 1u) {
                v[k] = y4[e >> 2u][e & 3u];
            } else if (IN_FROM_OUT) {
                v[k] = out4[e >> 2u][e & 3u];
            } else {
                v[k] = x4[e >> 2u][e & 3u];
            }
        }
    }
    return v;
}

fn store(base: u32, u: u32, v: vec4<f32>) {
    if (VEC) {
        out4[(base >> 2u) + u] = v;
        return;
    }
    for (var k = 0u; k < 4u; k++) {
        let e = base + 4u * u + k;
        if (4u * u + k < p.cols) { out4[e >> 2u][e & 3u] = v[k]; }
    }
}

fn store_dropped(base: u32, u: u32, v: vec4<f32>) {
    if (VEC) {
        drop4[(base >> 2u) + u] = v;
        return;
    }
    for (var k = 0u; k < 4u; k++) {
        let e = base + 4u * u + k;
        if (4u * u + k < p.cols) { drop4[e >> 2u][e & 3u] = v[k]; }
    }
}

// The mask's words for row r (its first element), and which of unit u's elements are masked.
fn mask_row(r: u32) -> u32 {
    let i2 = r % p.d2;
    let rest = r / p.d2;
    return p.m_off + (rest / p.d1) * p.m_s0 + (rest % p.d1) * p.m_s1 + i2 * p.m_s2;
}

fn masked(mrow: u32, u: u32) -> vec4<bool> {
    var m = vec4<bool>();
    if (!MASKED) { return m; }
    for (var k = 0u; k < 4u; k++) {
        if (4u * u + k < p.cols) { m[k] = maskb[mrow + (4u * u + k) * p.m_s3] != 0u; }
    }
    return m;
}

// Which of unit u's elements take part in the row (in it, and not masked out by a -inf value).
fn live(mrow: u32, u: u32) -> vec4<bool> {
    let inside = vec4<u32>(4u * u) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(p.cols);
    if (VALUE_INF) { return inside & !masked(mrow, u); }
    return inside;
}

fn scores(base: u32, mrow: u32, u: u32) -> vec4<f32> {
    return select(load(0u, base, u) * p.scale, vec4<f32>(p.value), masked(mrow, u));
}

// (max, sum of exp(s - max)) of the pair a and b, each a (max, sum) of part of the row.
fn merge(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    let m = max(a.x, b.x);
    return vec2<f32>(m, a.y * exp(a.x - m) + b.y * exp(b.x - m));
}

fn fold(acc: vec2<f32>, s: vec4<f32>, ok: vec4<bool>) -> vec2<f32> {
    let top = max(max(select(LOWEST, s.x, ok.x), select(LOWEST, s.y, ok.y)),
                  max(select(LOWEST, s.z, ok.z), select(LOWEST, s.w, ok.w)));
    let m = max(acc.x, top);
    let e = select(vec4<f32>(), exp(s - m), ok);
    return vec2<f32>(m, acc.y * exp(acc.x - m) + (e.x + e.y) + (e.z + e.w));
}

fn tree_merge(v: vec2<f32>, t: u32) -> vec2<f32> {
    red[t] = v;
    workgroupBarrier();
    for (var s = TPR / 2u; s > 0u; s >>= 1u) {
        if (t < s) { red[t] = merge(red[t], red[t + s]); }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

fn tree_sum(v: f32, t: u32) -> f32 {
    red[t] = vec2<f32>(v, 0.0);
    workgroupBarrier();
    for (var s = TPR / 2u; s > 0u; s >>= 1u) {
        if (t < s) { red[t] += red[t + s]; }
        workgroupBarrier();
    }
    let r = red[0].x;
    workgroupBarrier();
    return r;
}

fn drop_key() -> u32 { return lowbias32(select(p.seed, scalars[p.seed_slot], p.seed_slot != 0xffffffffu)); }
fn drop_first() -> u32 { return select(p.offset, scalars[p.offset_slot], p.offset_slot != 0xffffffffu); }

// The kept entries of unit u of row r, as 1 / (1 - p) or 0.
fn keep(key: u32, first: u32, r: u32, u: u32) -> vec4<f32> {
    let c = first + r * p.cols + 4u * u;
    var v = vec4<f32>();
    for (var k = 0u; k < 4u; k++) {
        v[k] = select(0.0, p.drop_scale, f32(bits(c + k, key) >> 8u) * 5.9604644775390625e-8 >= p.p_drop);
    }
    return v;
}

fn write_row(r: u32, stats: vec2<f32>, u: u32, mrow: u32, key: u32, first: u32) {
    let base = r * p.cols;
    var y = select(vec4<f32>(), exp(scores(p.x_off + base, mrow, u) - stats.x) / stats.y, live(mrow, u));
    if (stats.y == 0.0) { y = vec4<f32>(nan_f32()); }
    store(p.y_off + base, u, y);
    if (DROPOUT) {
        let kept = keep(key, first, r, u);
        store_dropped(p.drop_off + base, u, select(vec4<f32>(), y * kept, kept != vec4<f32>()));
    }
}

@compute @workgroup_size(TPR)
fn softmax_masked(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) t: u32) {
    let r = wid.x + wid.y * nwg.x;
    if (r >= p.rows) { return; }  // (uniform across the workgroup)
    let n = units();
    let mrow = mask_row(r);
    let base = p.x_off + r * p.cols;
    var acc = vec2<f32>(LOWEST, 0.0);
    for (var u = t; u < n; u += TPR) { acc = fold(acc, scores(base, mrow, u), live(mrow, u)); }
    let stats = tree_merge(acc, t);
    var key = 0u;
    var first = 0u;
    if (DROPOUT) {
        key = drop_key();
        first = drop_first();
    }
    for (var u = t; u < n; u += TPR) { write_row(r, stats, u, mrow, key, first); }
}

fn grad_unit(r: u32, u: u32, key: u32, first: u32) -> vec4<f32> {
    let g = load(0u, p.g_off + r * p.cols, u);
    if (DROPOUT) { return g * keep(key, first, r, u); }
    return g;
}

fn write_grad(r: u32, u: u32, s: f32, mrow: u32, key: u32, first: u32) {
    let y = load(1u, p.y_off + r * p.cols, u);
    let d = p.scale * y * (grad_unit(r, u, key, first) - s);
    store(p.x_off + r * p.cols, u, select(d, vec4<f32>(), masked(mrow, u)));
}

@compute @workgroup_size(TPR)
fn softmax_masked_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                           @builtin(local_invocation_index) t: u32) {
    let r = wid.x + wid.y * nwg.x;
    if (r >= p.rows) { return; }
    let n = units();
    let mrow = mask_row(r);
    var key = 0u;
    var first = 0u;
    if (DROPOUT) {
        key = drop_key();
        first = drop_first();
    }
    var s = 0.0;
    for (var u = t; u < n; u += TPR) {
        s += dot(grad_unit(r, u, key, first), load(1u, p.y_off + r * p.cols, u));
    }
    s = tree_sum(s, t);
    for (var u = t; u < n; u += TPR) { write_grad(r, u, s, mrow, key, first); }
}

// ------------------------------------------------------------------ software adapters: a thread per row

const ROWS_WG: u32 = 64u;

@compute @workgroup_size(ROWS_WG)
fn softmax_masked_rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = gid.x + gid.y * nwg.x * ROWS_WG;
    if (r >= p.rows) { return; }
    let n = units();
    let mrow = mask_row(r);
    let base = p.x_off + r * p.cols;
    var acc = vec2<f32>(LOWEST, 0.0);
    for (var u = 0u; u < n; u++) { acc = fold(acc, scores(base, mrow, u), live(mrow, u)); }
    var key = 0u;
    var first = 0u;
    if (DROPOUT) {
        key = drop_key();
        first = drop_first();
    }
    for (var u = 0u; u < n; u++) { write_row(r, acc, u, mrow, key, first); }
}

@compute @workgroup_size(ROWS_WG)
fn softmax_masked_backward_rows(@builtin(global_invocation_id) gid: vec3<u32>,
                                @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = gid.x + gid.y * nwg.x * ROWS_WG;
    if (r >= p.rows) { return; }
    let n = units();
    let mrow = mask_row(r);
    var key = 0u;
    var first = 0u;
    if (DROPOUT) {
        key = drop_key();
        first = drop_first();
    }
    var s = 0.0;
    for (var u = 0u; u < n; u++) { s += dot(grad_unit(r, u, key, first), load(1u, p.y_off + r * p.cols, u)); }
    for (var u = 0u; u < n; u++) { write_grad(r, u, s, mrow, key, first); }
}
