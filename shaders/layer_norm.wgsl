// Layer normalisation over the rows of a contiguous float32 [rows, cols] (the Python side is
// _backends/webgpu/layer_norm.py):
//   layer_norm                 out = (x - mean) * rstd * w + b, and save[row] = (mean, rstd)
//   layer_norm_backward        grad_input = rstd * (g w - mean(g w) - xhat * mean(g w xhat)), and per chunk of
//                              rows the partial sums of g * xhat and g over its rows (stage 1 of grad_weight
//                              and grad_bias)
//   layer_norm_param_sums      stage 2: grad_weight, grad_bias = the sums of the chunks' partials
// where mean and the biased variance are over the row, rstd = 1 / sqrt(var + eps), xhat = (x - mean) * rstd.
// RMS: root-mean-square normalisation (F.rms_norm) by the same kernels: mean = 0 (saved as such), so var is the
// mean of x^2, and grad_input = rstd * (g w - xhat * mean(g w xhat)) (no mean to differentiate through).
//
// Two forms, by adapter (runtime.KERNEL_VARIANTS["layer_norm_rows"]):
// * GPUs: a workgroup of TPR threads per row (TPR a power of two, at most 256), the row walked in vec4 units
//   (or, where the row is not vec4-aligned, units of 4 scalars), tree reductions through workgroup memory. The
//   forward takes two reductions (the mean, then the variance of the centred values: no cancellation, as the
//   two-pass formula), the backward one of a vec2. Each pass re-reads the row, from the cache: a row is
//   1.5-3 KiB at d = 384-768. The backward's workgroup takes CHUNK rows one after another and keeps the sums
//   of its units across them in registers, so the parameter gradients cost one partial row per chunk, not a
//   second pass over the gradient.
// * Software adapters (lavapipe, SwiftShader): a thread per row (*_rows) and, for the parameter gradients, a
//   thread per column over every row (layer_norm_param_rows): no barriers, which cost a coroutine switch per
//   four lanes there.

override TPR: u32 = 128u;       // threads per row: the workgroup of the tree kernels
override VEC: bool = true;      // every row starts on a multiple of 4 floats and cols % 4 == 0: vec4 loads
override HAS_W: bool = false;
override HAS_B: bool = false;
override WANT_DX: bool = true;  // backward: write grad_input
override PARAMS: bool = false;  // backward: write the chunk's partial sums (grad_weight or grad_bias wanted)
override SAVE: bool = true;     // forward: write (mean, rstd)
override RMS: bool = false;     // root-mean-square normalisation: mean 0 (header)

struct Params {
    rows: u32,
    cols: u32,
    x_off: u32,
    out_off: u32,
    w_off: u32,
    b_off: u32,
    save_off: u32,
    g_off: u32,
    chunk: u32,     // backward: rows per workgroup
    chunks: u32,    // backward: partial rows (workgroups), param sums: rows of partials
    out2_off: u32,  // param sums: grad_bias's offset (out_off is grad_weight's)
    eps: f32,
}

// out, x and g are read and written through vec4 views only (an element e as [e >> 2][e & 3] where a row is not
// vec4-aligned): naga refuses two views of one binding in one entry point.
@group(0) @binding(0) var<storage, read_write> out4: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> x4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> save_w: array<f32>;
@group(0) @binding(4) var<storage, read> save_r: array<f32>;
@group(0) @binding(5) var<storage, read> g4: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> partial: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> out2: array<f32>;
@group(0) @binding(8) var<uniform> p: Params;

// backward: the units a thread keeps partial sums of, at most (layer_norm.py takes the *_rows kernels beyond)
const UNITS_MAX: u32 = 8u;

var<workgroup> red: array<vec2<f32>, 256>;
var<workgroup> red4: array<vec4<f32>, 256>;

// The vec2 sum over the TPR threads of the workgroup (every thread gets it).
fn tree(v: vec2<f32>, t: u32) -> vec2<f32> {
    red[t] = v;
    workgroupBarrier();
    for (var s = TPR / 2u; s > 0u; s >>= 1u) {
        if (t < s) { red[t] += red[t + s]; }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

fn units() -> u32 { return (p.cols + 3u) / 4u; }

// Which of unit u's four elements are in the row.
fn valid(u: u32) -> vec4<f32> {
    return select(vec4<f32>(), vec4<f32>(1.0), vec4<u32>(4u * u) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(p.cols));
}

// Unit u of a row (elements 4u .. 4u + 3, zeros past the row's end) of x, g, w or b.
fn load_x(base: u32, u: u32) -> vec4<f32> {
    if (VEC) { return x4[(base >> 2u) + u]; }
    var v = vec4<f32>();
    for (var k = 0u; k < 4u; k++) {
        let e = base + 4u * u + k;
        if (4u * u + k < p.cols) { v[k] = x4[e >> 2u][e & 3u]; }
    }
    return v;
}

fn load_g(base: u32, u: u32) -> vec4<f32> {
    if (VEC) { return g4[(base >> 2u) + u]; }
    var v = vec4<f32>();
    for (var k = 0u; k < 4u; k++) {
        let e = base + 4u * u + k;
        if (4u * u + k < p.cols) { v[k] = g4[e >> 2u][e & 3u]; }
    }
    return v;
}

fn load_w(u: u32) -> vec4<f32> {
    if (!HAS_W) { return vec4<f32>(1.0); }
    var v = vec4<f32>();
    for (var k = 0u; k < 4u; k++) {
        if (4u * u + k < p.cols) { v[k] = w[p.w_off + 4u * u + k]; }
    }
    return v;
}

fn load_b(u: u32) -> vec4<f32> {
    if (!HAS_B) { return vec4<f32>(); }
    var v = vec4<f32>();
    for (var k = 0u; k < 4u; k++) {
        if (4u * u + k < p.cols) { v[k] = b[p.b_off + 4u * u + k]; }
    }
    return v;
}

fn store_out(base: u32, u: u32, v: vec4<f32>) {
    if (VEC) {
        out4[(base >> 2u) + u] = v;
        return;
    }
    for (var k = 0u; k < 4u; k++) {
        let e = base + 4u * u + k;
        if (4u * u + k < p.cols) { out4[e >> 2u][e & 3u] = v[k]; }
    }
}

fn hsum(v: vec4<f32>) -> f32 { return (v.x + v.y) + (v.z + v.w); }

@compute @workgroup_size(TPR)
fn layer_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) t: u32) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.rows) { return; }  // (uniform across the workgroup: every barrier is reached by all or none)
    let xb = p.x_off + row * p.cols;
    let n = units();
    var mean = 0.0;
    if (!RMS) {  // (an override: uniform, so every thread reaches the tree's barriers or none does)
        var s = 0.0;
        for (var u = t; u < n; u += TPR) { s += hsum(load_x(xb, u)); }
        mean = tree(vec2<f32>(s, 0.0), t).x / f32(p.cols);
    }
    var q = 0.0;
    for (var u = t; u < n; u += TPR) {
        let d = (load_x(xb, u) - mean) * valid(u);
        q += dot(d, d);
    }
    let rstd = inverseSqrt(tree(vec2<f32>(q, 0.0), t).x / f32(p.cols) + p.eps);
    let ob = p.out_off + row * p.cols;
    for (var u = t; u < n; u += TPR) {
        store_out(ob, u, (load_x(xb, u) - mean) * rstd * load_w(u) + load_b(u));
    }
    if (SAVE && t == 0u) {
        save_w[p.save_off + 2u * row] = mean;
        save_w[p.save_off + 2u * row + 1u] = rstd;
    }
}

@compute @workgroup_size(TPR)
fn layer_norm_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_index) t: u32) {
    let group = wid.x + wid.y * nwg.x;
    if (group >= p.chunks) { return; }
    let n = units();
    let inv_cols = 1.0 / f32(p.cols);
    var sum_gxhat: array<vec4<f32>, UNITS_MAX>;  // this thread's units' partial sums over the chunk's rows
    var sum_g: array<vec4<f32>, UNITS_MAX>;
    let first = group * p.chunk;
    let last = min(first + p.chunk, p.rows);
    for (var row = first; row < last; row++) {
        let mean = save_r[p.save_off + 2u * row];
        let rstd = save_r[p.save_off + 2u * row + 1u];
        let xb = p.x_off + row * p.cols;
        let gb = p.g_off + row * p.cols;
        var s = vec2<f32>();
        for (var u = t; u < n; u += TPR) {
            let xhat = (load_x(xb, u) - mean) * rstd * valid(u);
            let gw = load_g(gb, u) * load_w(u);
            s += vec2<f32>(hsum(gw), dot(gw, xhat));
        }
        s = tree(s, t) * inv_cols;
        if (RMS) { s.x = 0.0; }
        var k = 0u;
        for (var u = t; u < n; u += TPR) {
            let xhat = (load_x(xb, u) - mean) * rstd * valid(u);
            let gv = load_g(gb, u);
            if (WANT_DX) {
                store_out(p.out_off + row * p.cols, u, rstd * (gv * load_w(u) - s.x - xhat * s.y));
            }
            if (PARAMS) {
                sum_gxhat[k] += gv * xhat;
                sum_g[k] += gv;
            }
            k++;
        }
    }
    if (PARAMS) {
        // partial: [chunks][2][units] vec4s (the tail of a row that is not a whole number of vec4s is 0)
        var k = 0u;
        for (var u = t; u < n; u += TPR) {
            partial[(2u * group) * n + u] = sum_gxhat[k];
            partial[(2u * group + 1u) * n + u] = sum_g[k];
            k++;
        }
    }
}

// Stage 2: a workgroup of 256 = PS_UNITS columns (vec4 units) x PS_SLICES slices of the chunks; each slice sums
// every PS_SLICES-th chunk, then a tree over the slices. grad_weight -> out, grad_bias -> out2 (each where wanted:
// HAS_W, HAS_B). Few columns a workgroup: a GPT's d = 384 (96 units) still makes 24 workgroups.
const PS_UNITS: u32 = 4u;
const PS_SLICES: u32 = 64u;

@compute @workgroup_size(256)
fn layer_norm_param_sums(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let n = units();
    let u = wid.x * PS_UNITS + t % PS_UNITS;
    let slice = t / PS_UNITS;
    // Both sums in one walk, four chunks (eight loads) in flight: one dependent load per chunk had made this pass
    // latency-bound (on an H200, 16.5 us for a GPT's 1,024 chunks of d = 384). Each sum keeps the chunks' order.
    var sum_w = vec4<f32>();  // g * xhat (grad_weight)
    var sum_b = vec4<f32>();  // g (grad_bias)
    if (u < n) {
        var c = slice;
        for (; c + 3u * PS_SLICES < p.chunks; c += 4u * PS_SLICES) {
            let w0 = partial[(2u * c) * n + u];
            let b0 = partial[(2u * c + 1u) * n + u];
            let w1 = partial[(2u * (c + PS_SLICES)) * n + u];
            let b1 = partial[(2u * (c + PS_SLICES) + 1u) * n + u];
            let w2 = partial[(2u * (c + 2u * PS_SLICES)) * n + u];
            let b2 = partial[(2u * (c + 2u * PS_SLICES) + 1u) * n + u];
            let w3 = partial[(2u * (c + 3u * PS_SLICES)) * n + u];
            let b3 = partial[(2u * (c + 3u * PS_SLICES) + 1u) * n + u];
            sum_w = (((sum_w + w0) + w1) + w2) + w3;
            sum_b = (((sum_b + b0) + b1) + b2) + b3;
        }
        for (; c < p.chunks; c += PS_SLICES) {
            sum_w += partial[(2u * c) * n + u];
            sum_b += partial[(2u * c + 1u) * n + u];
        }
    }
    for (var which = 0u; which < 2u; which++) {  // 0: grad_weight, 1: grad_bias
        red4[t] = select(sum_b, sum_w, which == 0u);
        workgroupBarrier();
        for (var s = PS_SLICES / 2u; s > 0u; s >>= 1u) {
            if (slice < s) { red4[t] += red4[t + PS_UNITS * s]; }
            workgroupBarrier();
        }
        if (slice == 0u && u < n) {
            let r = red4[t];
            for (var k = 0u; k < 4u; k++) {
                let c = 4u * u + k;
                if (c < p.cols) {
                    let e = p.out_off + c;
                    if (which == 0u && HAS_W) { out4[e >> 2u][e & 3u] = r[k]; }
                    if (which == 1u && HAS_B) { out2[p.out2_off + c] = r[k]; }
                }
            }
        }
        workgroupBarrier();
    }
}

// ------------------------------------------------------------------ software adapters: a thread per row / column

const ROWS_WG: u32 = 64u;

@compute @workgroup_size(ROWS_WG)
fn layer_norm_rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = gid.x + gid.y * nwg.x * ROWS_WG;
    if (row >= p.rows) { return; }
    let xb = p.x_off + row * p.cols;
    let n = units();
    var mean = 0.0;
    if (!RMS) {
        var s = 0.0;
        for (var u = 0u; u < n; u++) { s += hsum(load_x(xb, u)); }
        mean = s / f32(p.cols);
    }
    var q = 0.0;
    for (var u = 0u; u < n; u++) {
        let d = (load_x(xb, u) - mean) * valid(u);
        q += dot(d, d);
    }
    let rstd = inverseSqrt(q / f32(p.cols) + p.eps);
    let ob = p.out_off + row * p.cols;
    for (var u = 0u; u < n; u++) {
        store_out(ob, u, (load_x(xb, u) - mean) * rstd * load_w(u) + load_b(u));
    }
    if (SAVE) {
        save_w[p.save_off + 2u * row] = mean;
        save_w[p.save_off + 2u * row + 1u] = rstd;
    }
}

@compute @workgroup_size(ROWS_WG)
fn layer_norm_backward_rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = gid.x + gid.y * nwg.x * ROWS_WG;
    if (row >= p.rows) { return; }
    let mean = save_r[p.save_off + 2u * row];
    let rstd = save_r[p.save_off + 2u * row + 1u];
    let xb = p.x_off + row * p.cols;
    let gb = p.g_off + row * p.cols;
    let n = units();
    var s = vec2<f32>();
    for (var u = 0u; u < n; u++) {
        let xhat = (load_x(xb, u) - mean) * rstd * valid(u);
        let gw = load_g(gb, u) * load_w(u);
        s += vec2<f32>(hsum(gw), dot(gw, xhat));
    }
    s /= f32(p.cols);
    if (RMS) { s.x = 0.0; }
    let ob = p.out_off + row * p.cols;
    for (var u = 0u; u < n; u++) {
        let xhat = (load_x(xb, u) - mean) * rstd * valid(u);
        store_out(ob, u, rstd * (load_g(gb, u) * load_w(u) - s.x - xhat * s.y));
    }
}

// A thread per column c over every row: grad_weight[c] (out) and grad_bias[c] (out2).
@compute @workgroup_size(ROWS_WG)
fn layer_norm_param_rows(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    if (c >= p.cols) { return; }
    var acc = vec2<f32>();
    for (var row = 0u; row < p.rows; row++) {
        let mean = save_r[p.save_off + 2u * row];
        let rstd = save_r[p.save_off + 2u * row + 1u];
        let ge = p.g_off + row * p.cols + c;
        let xe = p.x_off + row * p.cols + c;
        let gv = g4[ge >> 2u][ge & 3u];
        acc += vec2<f32>(gv * (x4[xe >> 2u][xe & 3u] - mean) * rstd, gv);
    }
    let e = p.out_off + c;
    if (HAS_W) { out4[e >> 2u][e & 3u] = acc.x; }
    if (HAS_B) { out2[p.out2_off + c] = acc.y; }
}
