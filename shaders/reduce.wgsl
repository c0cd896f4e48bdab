//! include "common.wgsl"
// Reductions over the middle axis of a contiguous [outer, size, inner] view: out[o, i] = op over s of
// x[o, s, i]. The Python side is backends/webgpu/reduce.py.
//
// Work split: a workgroup of 256 threads serves `lanes` outputs side by side, 256 / lanes threads
// each (lane = lid % lanes, thread-in-lane t = lid / lanes). Consecutive lanes are consecutive
// outputs, so when inner > 1 neighbouring threads read neighbouring addresses. Each thread folds a
// strided slice of the size axis, then the lane's threads combine through a tree in workgroup memory.
// When there are few outputs but long rows, the size axis is also split into `chunks` (STAGE 1 writes
// a partial per chunk, values to `out` and indices to `idx_out`) and a second dispatch (STAGE 2)
// reduces the partials with the same code.
//
// argmax/argmin keep the first index among equal values (PyTorch's rule, and NumPy's); NaN counts
// as larger than everything for max/argmax and smaller for min/argmin, so it propagates.

override OP: u32 = 0u;          // RED_* code (reduce.py)
override INT_MATH: bool = false; // integer inputs: fold exactly in i32 (wrapping like int32)
override X_DTYPE: u32 = DT_F32;
override OUT_DTYPE: u32 = DT_F32;
override STAGE: u32 = 0u;        // 0: one pass; 1: first pass of two; 2: second pass of two

struct Params {
    outer: u32,
    size: u32,
    inner: u32,
    lanes: u32,        // outputs per workgroup, a power of two
    chunk: u32,        // elements of the size axis per chunk
    chunks: u32,
    groups: u32,       // workgroups that have work (the grid may round up)
    x_offset: u32,
    out_offset: u32,
}

@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read> idx_in: array<u32>;
@group(0) @binding(3) var<storage, read_write> idx_out: array<u32>;
@group(0) @binding(4) var<uniform> p: Params;

const NO_INDEX: u32 = 0xffffffffu;

struct AccF { v: f32, i: u32 }
struct AccI { v: i32, i: u32 }

var<workgroup> tree_f: array<f32, 256>;
var<workgroup> tree_i: array<i32, 256>;
var<workgroup> tree_idx: array<u32, 256>;

fn is_arg() -> bool { return OP == RED_ARGMAX || OP == RED_ARGMIN; }
fn wants_max() -> bool { return OP == RED_MAX || OP == RED_ARGMAX; }

fn identity_f() -> AccF {
    switch OP {
        case RED_SUM: { return AccF(0.0, NO_INDEX); }
        case RED_PROD: { return AccF(1.0, NO_INDEX); }
        default: { return AccF(select(inf_f32(), -inf_f32(), wants_max()), NO_INDEX); }
    }
}

fn identity_i() -> AccI {
    switch OP {
        case RED_SUM: { return AccI(0, NO_INDEX); }
        case RED_PROD: { return AccI(1, NO_INDEX); }
        default: { return AccI(select(2147483647, -2147483647 - 1, wants_max()), NO_INDEX); }
    }
}

// Does `a` win over `b` for max/min (NaN first, then value, then the smaller index)?
fn wins_f(a: AccF, b: AccF) -> bool {
    let an = is_nan(a.v);
    let bn = is_nan(b.v);
    if (an != bn) { return an; }
    if (!an && a.v != b.v) { return select((a.v < b.v), (a.v > b.v), wants_max()); }
    return a.i < b.i;
}

fn wins_i(a: AccI, b: AccI) -> bool {
    if (a.v != b.v) { return select((a.v < b.v), (a.v > b.v), wants_max()); }
    return a.i < b.i;
}

fn combine_f(a: AccF, b: AccF) -> AccF {
    switch OP {
        case RED_SUM: { return AccF(a.v + b.v, NO_INDEX); }
        case RED_PROD: { return AccF(a.v * b.v, NO_INDEX); }
        default: {
            if (wins_f(a, b)) { return a; }
            return b;
        }
    }
}

fn combine_i(a: AccI, b: AccI) -> AccI {
    switch OP {
        case RED_SUM: { return AccI(a.v + b.v, NO_INDEX); }
        case RED_PROD: { return AccI(a.v * b.v, NO_INDEX); }
        default: {
            if (wins_i(a, b)) { return a; }
            return b;
        }
    }
}

// The index an element carries: its position on the size axis, or (STAGE 2) the one its partial holds.
fn index_of(k: u32, s: u32) -> u32 {
    if (STAGE == 2u) { return idx_in[k]; }
    return s;
}

@compute @workgroup_size(256)
fn reduce(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let group = wid.x + wid.y * nwg.x;
    if (group >= p.groups) { return; }  // the whole workgroup leaves: barriers stay uniform
    let lanes = p.lanes;
    let lane = lid % lanes;
    let t = lid / lanes;
    let threads = 256u / lanes;
    let chunk = group % p.chunks;
    let q = (group / p.chunks) * lanes + lane;  // output index o * inner + i
    let valid = q < p.outer * p.inner;
    let o = q / p.inner;
    let i = q % p.inner;
    let s_end = min((chunk + 1u) * p.chunk, p.size);
    let base = p.x_offset + o * p.size * p.inner + i;
    // Where this lane's result goes: the partial slot (STAGE 1) or the output.
    let partial = (o * p.chunks + chunk) * p.inner + i;
    let dest = p.out_offset + q;

    if (INT_MATH) {
        var acc = identity_i();
        if (valid) {
            for (var s = chunk * p.chunk + t; s < s_end; s += threads) {
                let k = base + s * p.inner;
                acc = combine_i(acc, AccI(decode_i32(x[word_index(k, X_DTYPE)], k, X_DTYPE), index_of(k, s)));
            }
        }
        tree_i[lid] = acc.v;
        tree_idx[lid] = acc.i;
        workgroupBarrier();
        for (var stride = threads / 2u; stride > 0u; stride >>= 1u) {
            if (t < stride) {
                let r = combine_i(AccI(tree_i[lid], tree_idx[lid]),
                                  AccI(tree_i[lid + stride * lanes], tree_idx[lid + stride * lanes]));
                tree_i[lid] = r.v;
                tree_idx[lid] = r.i;
            }
            workgroupBarrier();
        }
        if (t == 0u && valid) {
            if (STAGE == 1u) {
                out[partial] = bitcast<u32>(tree_i[lid]);
                idx_out[partial] = tree_idx[lid];
            } else if (is_arg()) {
                out[dest] = tree_idx[lid];
            } else {
                out[dest] = encode_i32(tree_i[lid], OUT_DTYPE);
            }
        }
    } else {
        var acc = identity_f();
        if (valid) {
            for (var s = chunk * p.chunk + t; s < s_end; s += threads) {
                let k = base + s * p.inner;
                acc = combine_f(acc, AccF(decode_f32(x[word_index(k, X_DTYPE)], k, X_DTYPE), index_of(k, s)));
            }
        }
        tree_f[lid] = acc.v;
        tree_idx[lid] = acc.i;
        workgroupBarrier();
        for (var stride = threads / 2u; stride > 0u; stride >>= 1u) {
            if (t < stride) {
                let r = combine_f(AccF(tree_f[lid], tree_idx[lid]),
                                  AccF(tree_f[lid + stride * lanes], tree_idx[lid + stride * lanes]));
                tree_f[lid] = r.v;
                tree_idx[lid] = r.i;
            }
            workgroupBarrier();
        }
        if (t == 0u && valid) {
            if (STAGE == 1u) {
                out[partial] = bitcast<u32>(tree_f[lid]);
                idx_out[partial] = tree_idx[lid];
            } else if (is_arg()) {
                out[dest] = tree_idx[lid];
            } else {
                out[dest] = encode_f32(tree_f[lid], OUT_DTYPE);
            }
        }
    }
}
