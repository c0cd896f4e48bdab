//! include "common.wgsl"
//! include "errors.wgsl"
//! include "int64.wgsl"
// Scatters with a reduction and stream compaction (the Python side is _backends/webgpu/scatter.py).
//   link            a thread per src element (per index, ROWS): the element joins the list of the target it names
//                   (heads[target], filled with -1 by the host, becomes its number; next[its number], the head
//                   before it: one integer atomic exchange each, as embedding.wgsl's backward)
//   scatter_reduce  a thread per element of out: x's value, reduced with its list's src values (sum, prod, mean,
//                   amax, amin, or the one of the largest number for assign); no float atomics anywhere
//   compact         a thread per element: x[i] to out[positions[i] - 1] where positions (an inclusive prefix sum
//                   of a 0/1 mask) steps up
// The order in which a list is summed follows the atomics, so a float sum's last bits may vary between runs (as
// with CUDA's atomic scatter_add); amax, amin and assign do not depend on it. An index outside [0, size) joins no
// list and is reported through the error word (the host raises at its next read-back).

override OP: u32 = 0u;            // 0 sum, 1 prod, 2 mean, 3 amax, 4 amin, 5 assign (kernels.SCATTER_OPS)
override INCLUDE_SELF: bool = true;
override KIND: u32 = 0u;          // 0 float32, 1 int32 (wraps, as torch's), 2 int64 held in int32 words (checked)
override ROWS: bool = false;      // index is [K], naming rows j (index_add), rather than [outer, K, inner]

struct Params {
    outer: u32,
    size: u32,
    inner: u32,
    k: u32,
    x_offset: u32,
    src_offset: u32,
    index_offset: u32,
    out_offset: u32,
    nodes: u32,       // list nodes: outer * K * inner, or K (ROWS)
    n: u32,           // elements of out (compact: elements of x)
    index_code: u32,  // error code of an index out of range
    range_code: u32,  // error code of an int64 result outside the int32 range
}

@group(0) @binding(0) var<storage, read_write> heads: array<atomic<i32>>;
@group(0) @binding(0) var<storage, read> heads_r: array<i32>;
@group(0) @binding(1) var<storage, read> index: array<i32>;
@group(0) @binding(2) var<storage, read_write> next_w: array<i32>;
@group(0) @binding(2) var<storage, read> next_r: array<i32>;
@group(0) @binding(3) var<storage, read> src: array<u32>;
@group(0) @binding(4) var<storage, read> x: array<u32>;
@group(0) @binding(5) var<storage, read_write> out: array<u32>;
@group(0) @binding(6) var<uniform> p: Params;
@group(0) @binding(7) var<storage, read_write> errors: array<atomic<u32>>;

const WORKGROUP: u32 = 256u;

fn linear_id(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return gid.x + gid.y * groups.x * WORKGROUP;
}

@compute @workgroup_size(WORKGROUP)
fn link(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let q = linear_id(gid, groups);
    if (q >= p.nodes) {
        return;
    }
    let j = index[p.index_offset + q];
    if (j < 0 || u32(j) >= p.size) {
        report_error(p.index_code, j, p.size);
        return;
    }
    var dest = u32(j);
    if (!ROWS) {  // q = (o * K + k) * inner + i  ->  (o * size + j) * inner + i
        let i = q % p.inner;
        let o = q / p.inner / p.k;
        dest = (o * p.size + u32(j)) * p.inner + i;
    }
    next_w[q] = atomicExchange(&heads[dest], i32(q));
}

// ------------------------------------------------------------------------------------------- the reductions
fn add_i(a: i32, b: i32) -> i32 {
    let r = a + b;
    if (KIND == 2u && (a < 0) == (b < 0) && (r < 0) != (a < 0)) {
        report_error(p.range_code, 0, 0u);
    }
    return r;
}

fn mul_i(a: i32, b: i32) -> i32 {
    if (KIND == 2u && !fits_i32(mul_wide(a, b))) {
        report_error(p.range_code, 0, 0u);
    }
    return a * b;
}

fn floor_div_i(a: i32, b: i32) -> i32 {
    let q = a / b;
    return select(q, q - 1, (a % b != 0) && ((a < 0) != (b < 0)));
}

fn reduce_f(t: u32, head: i32, o: u32, i: u32) -> u32 {
    var acc = 0.0;
    var count = 0u;
    if (OP == 1u) { acc = 1.0; }
    if (OP == 3u) { acc = -inf_f32(); }
    if (OP == 4u) { acc = inf_f32(); }
    if (INCLUDE_SELF && OP != 5u) {
        acc = bitcast<f32>(x[p.x_offset + t]);
        count = 1u;
    }
    var last = -1;
    var node = head;
    for (var steps = 0u; node >= 0 && steps < p.nodes; steps++) {
        var at = u32(node);
        if (ROWS) { at = (o * p.k + at) * p.inner + i; }
        let v = bitcast<f32>(src[p.src_offset + at]);
        switch (OP) {
            case 0u, 2u: { acc += v; }
            case 1u: { acc *= v; }
            case 3u: { if (is_nan(v) || v > acc) { acc = v; } }
            case 4u: { if (is_nan(v) || v < acc) { acc = v; } }
            default: { if (node > last) { last = node; acc = v; } }
        }
        count += 1u;
        node = next_r[node];
    }
    if (OP == 2u) { acc = acc / f32(count); }
    return bitcast<u32>(acc);
}

fn reduce_i(t: u32, head: i32, o: u32, i: u32) -> u32 {
    var acc = 0;
    var count = 0;
    if (OP == 1u) { acc = 1; }
    if (OP == 3u) { acc = -2147483647 - 1; }
    if (OP == 4u) { acc = 2147483647; }
    if (INCLUDE_SELF && OP != 5u) {
        acc = bitcast<i32>(x[p.x_offset + t]);
        count = 1;
    }
    var last = -1;
    var node = head;
    for (var steps = 0u; node >= 0 && steps < p.nodes; steps++) {
        var at = u32(node);
        if (ROWS) { at = (o * p.k + at) * p.inner + i; }
        let v = bitcast<i32>(src[p.src_offset + at]);
        switch (OP) {
            case 0u, 2u: { acc = add_i(acc, v); }
            case 1u: { acc = mul_i(acc, v); }
            case 3u: { acc = max(acc, v); }
            case 4u: { acc = min(acc, v); }
            default: { if (node > last) { last = node; acc = v; } }
        }
        count += 1;
        node = next_r[node];
    }
    if (OP == 2u) { acc = floor_div_i(acc, count); }
    return bitcast<u32>(acc);
}

@compute @workgroup_size(WORKGROUP)
fn scatter_reduce(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let t = linear_id(gid, groups);
    if (t >= p.n) {
        return;
    }
    let i = t % p.inner;
    let rest = t / p.inner;
    let o = rest / p.size;
    let head = heads_r[select(t, rest % p.size, ROWS)];
    if (head < 0) {
        out[p.out_offset + t] = x[p.x_offset + t];
        return;
    }
    if (KIND == 0u) {
        out[p.out_offset + t] = reduce_f(t, head, o, i);
    } else {
        out[p.out_offset + t] = reduce_i(t, head, o, i);
    }
}

// ------------------------------------------------------------------------------------------- compaction
@group(0) @binding(1) var<storage, read> positions: array<i32>;

@compute @workgroup_size(WORKGROUP)
fn compact(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let q = linear_id(gid, groups);
    if (q >= p.n) {
        return;
    }
    let at = positions[p.index_offset + q];
    var before = 0;
    if (q > 0u) { before = positions[p.index_offset + q - 1u]; }
    if (at > before) {
        out[p.out_offset + u32(at) - 1u] = x[p.x_offset + q];
    }
}
