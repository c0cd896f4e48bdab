//! include "common.wgsl"
//! include "int64.wgsl"
// Reductions over the middle axis of a contiguous [outer, size, inner] view: out[o, i] = op over s of
// x[o, s, i]. The Python side is _backends/webgpu/reduce.py.
//
// Work split: a workgroup of 256 threads serves `lanes` outputs side by side, 256 / lanes threads
// each (lane = lid % lanes, thread-in-lane t = lid / lanes). Consecutive lanes are consecutive
// outputs, so when inner > 1 neighbouring threads read neighbouring addresses. Each thread folds a
// strided slice of the size axis, then the lane's threads combine through a tree in workgroup memory.
// When there are few outputs but long rows, the size axis is also split into `chunks` (STAGE 1 writes
// a partial per chunk, values to `out` and indices to `idx_out`) and a second dispatch (STAGE 2)
// reduces the partials with the same code.
//
// Each thread issues four loads before folding them (in the same order as one at a time): a loop that
// folds each element as it arrives waits one memory latency per element, which made a bias gradient
// (sum over 128 rows of 4096 columns, 8 threads per column) latency-bound.
//
// reduce_rows4 is the float32 path for long contiguous rows (inner = 1; sizes, chunks and the offset
// multiples of 4; not argmax/argmin): vec4 loads, one output row chunk per workgroup, four vec4s in
// flight per thread. With one chunk per row (STAGE 0) it writes the output directly. With several,
// either (STAGE 1) each workgroup writes its partial to `out` and the general entry point folds them
// (STAGE 2, a second dispatch), or (STAGE 3) it is ONE dispatch: each workgroup stores its partial in
// `scratch`, then takes a ticket from its row's counter there; the workgroup that draws the last ticket
// folds the row's partials into the output and sets the counter back to zero for the next reduction.
// A second dispatch cost more than its work: on an H200 the pass boundary and the one-workgroup pass
// took ~9 us beside ~21 us of reading 16.7M floats; with one dispatch a sum through the backend ran at
// 1,930 GB/s against 1,024 with two (bench kernels, same device call). storageBarrier() is what orders
// the partial's store before the ticket and the last workgroup's loads after it: naga (wgpu-native)
// gives it device-scope acquire-release semantics, but WGSL itself only promises workgroup scope (Tint
// in a browser emits that), so reduce.py takes STAGE 3 only where the binding vouches for device scope.
// The partials are atomics so that those loads go to the coherent level.
// Whole-tensor sums take this path.
//
// reduce_cols4 is the float32 path for columns (inner a multiple of 4, not argmax/argmin): a bias gradient, the
// sum over a batch's rows of [rows, features]. A workgroup folds COLS4 vec4 columns (64 floats, 256 contiguous
// bytes of each row) over one chunk of rows, COL_THREADS threads down each column with four rows in flight per
// thread; the chunks' partials are then folded as reduce_rows4 folds its own (STAGE 3, in the same dispatch,
// with a ticket counter per column group; else STAGE 1 and the general kernel's STAGE 2). The general kernel
// gave such a sum 8 threads a column, scalar loads and always two dispatches.
//
// argmax/argmin keep the first index among equal values (PyTorch's rule, and NumPy's); NaN counts
// as larger than everything for max/argmax and smaller for min/argmin, so it propagates.
//
// WIDE: an int64 sum or product, exact. WebGPU holds int64 in i32 words, in the int32 range only (see
// webgrad/dtypes.py), but a sum of such values may leave it. The accumulator's index field then carries a second
// word: for a sum the high word of an exact 64-bit total (add with carry), for a product an overflow flag (a
// true zero factor clears it: the product is 0 whatever the others). Partials keep it in idx_out/idx_in as
// argmax keeps its indices; the last stage writes the low word to `out` and a word to idx_out (at the output's
// position) that equals the low word's sign extension exactly when the total fits. reduce.py then checks the
// pair (check.wgsl's check_int64), reporting a total outside the range at the next read-back.

override OP: u32 = 0u;          // RED_* code (reduce.py)
override INT_MATH: bool = false; // integer inputs: fold exactly in i32 (wrapping like int32)
override X_DTYPE: u32 = DT_F32;
override OUT_DTYPE: u32 = DT_F32;
override WIDE: bool = false;     // int64 sum/prod with INT_MATH: exact, see above
override STAGE: u32 = 0u;        // 0: one pass; 1: first pass of two; 2: second pass of two;
                                  // 3: reduce_rows4 folding its partials in the same dispatch

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
@group(0) @binding(1) var<storage, read> x4: array<vec4<u32>>;  // reduce_rows4's view of x (float32)
@group(0) @binding(2) var<storage, read> idx_in: array<u32>;
@group(0) @binding(3) var<storage, read_write> idx_out: array<u32>;
@group(0) @binding(3) var<storage, read_write> scratch: array<atomic<u32>>;  // reduce_rows4's partials, tickets
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
        case RED_SUM: { return AccI(0, select(NO_INDEX, 0u, WIDE)); }
        case RED_PROD: { return AccI(1, select(NO_INDEX, 0u, WIDE)); }
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

// WIDE sums: (low, high) words added with carry; WIDE products: the wrapped product and an overflow flag.
fn combine_wide(a: AccI, b: AccI) -> AccI {
    if (OP == RED_SUM) {
        let lo = bitcast<u32>(a.v) + bitcast<u32>(b.v);
        return AccI(bitcast<i32>(lo), a.i + b.i + select(0u, 1u, lo < bitcast<u32>(a.v)));
    }
    if ((a.v == 0 && a.i == 0u) || (b.v == 0 && b.i == 0u)) { return AccI(0, 0u); }
    return AccI(a.v * b.v, a.i | b.i | select(0u, 1u, mul_overflows(a.v, b.v)));
}

// The second word a WIDE element starts with: its sign extension (sum) or no overflow (product).
fn wide_word(v: i32) -> u32 {
    if (OP == RED_SUM) { return select(0u, 0xffffffffu, v < 0); }
    return 0u;
}

// The word written beside a WIDE total: its sign extension exactly when it fits in the int32 range.
fn wide_check_word(acc: AccI) -> u32 {
    let sign = select(0u, 0xffffffffu, acc.v < 0);
    if (OP == RED_SUM) { return acc.i; }
    return select(sign, ~sign, acc.i != 0u);
}

fn combine_i(a: AccI, b: AccI) -> AccI {
    if (WIDE) { return combine_wide(a, b); }
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
// Only argmax/argmin read idx_in: the other ops' second pass may bind a dummy (reduce_rows4's partials).
fn index_of(k: u32, s: u32) -> u32 {
    if (STAGE == 2u && is_arg()) { return idx_in[k]; }
    return s;
}

fn load_i(base: u32, s: u32) -> AccI {
    let k = base + s * p.inner;
    let v = decode_i32(x[word_index(k, X_DTYPE)], k, X_DTYPE);
    if (WIDE) {
        if (STAGE == 2u) { return AccI(v, idx_in[k]); }  // a partial and its second word
        return AccI(v, wide_word(v));
    }
    return AccI(v, index_of(k, s));
}

fn load_f(base: u32, s: u32) -> AccF {
    let k = base + s * p.inner;
    return AccF(decode_f32(x[word_index(k, X_DTYPE)], k, X_DTYPE), index_of(k, s));
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
            var s = chunk * p.chunk + t;
            for (; s + 3u * threads < s_end; s += 4u * threads) {
                let v0 = load_i(base, s);
                let v1 = load_i(base, s + threads);
                let v2 = load_i(base, s + 2u * threads);
                let v3 = load_i(base, s + 3u * threads);
                acc = combine_i(combine_i(combine_i(combine_i(acc, v0), v1), v2), v3);
            }
            for (; s < s_end; s += threads) { acc = combine_i(acc, load_i(base, s)); }
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
                if (WIDE) { idx_out[q] = wide_check_word(AccI(tree_i[lid], tree_idx[lid])); }
            }
        }
    } else {
        var acc = identity_f();
        if (valid) {
            var s = chunk * p.chunk + t;
            for (; s + 3u * threads < s_end; s += 4u * threads) {
                let v0 = load_f(base, s);
                let v1 = load_f(base, s + threads);
                let v2 = load_f(base, s + 2u * threads);
                let v3 = load_f(base, s + 3u * threads);
                acc = combine_f(combine_f(combine_f(combine_f(acc, v0), v1), v2), v3);
            }
            for (; s < s_end; s += threads) { acc = combine_f(acc, load_f(base, s)); }
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

// ---- reduce_rows4: float32 rows, vec4 loads (see the top). Workgroup `group` folds chunk
// group % chunks of row group / chunks; p.size, p.chunk and p.x_offset are multiples of 4 (in floats).
fn fold4(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
    switch OP {
        case RED_SUM: { return a + b; }
        case RED_PROD: { return a * b; }
        default: {
            return vec4<f32>(combine_f(AccF(a.x, NO_INDEX), AccF(b.x, NO_INDEX)).v,
                             combine_f(AccF(a.y, NO_INDEX), AccF(b.y, NO_INDEX)).v,
                             combine_f(AccF(a.z, NO_INDEX), AccF(b.z, NO_INDEX)).v,
                             combine_f(AccF(a.w, NO_INDEX), AccF(b.w, NO_INDEX)).v);
        }
    }
}

fn fold1(a: f32, b: f32) -> f32 { return combine_f(AccF(a, NO_INDEX), AccF(b, NO_INDEX)).v; }

var<workgroup> last_ticket: u32;  // reduce_rows4: 1 in the workgroup that folds its row's partials

// Row o's counter is scratch[o] (o < ROWS4_TICKETS, reduce.py's constant), its p.chunks partials follow
// the counters, at scratch[ROWS4_TICKETS + o * p.chunks + chunk]: counters never share words with another
// shape's partials, so they stay zero between reductions (reduce.py keeps the buffer).
@compute @workgroup_size(256)
fn reduce_rows4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) t: u32) {
    let group = wid.x + wid.y * nwg.x;
    if (group >= p.groups) { return; }
    let chunk = group % p.chunks;
    let o = group / p.chunks;
    let base = (p.x_offset + o * p.size) / 4u;
    let s_end = min((chunk + 1u) * p.chunk, p.size) / 4u;
    var s = chunk * p.chunk / 4u + t;
    let id = identity_f().v;
    var acc = vec4<f32>(id);
    for (; s + 768u < s_end; s += 1024u) {
        let v0 = bitcast<vec4<f32>>(x4[base + s]);
        let v1 = bitcast<vec4<f32>>(x4[base + s + 256u]);
        let v2 = bitcast<vec4<f32>>(x4[base + s + 512u]);
        let v3 = bitcast<vec4<f32>>(x4[base + s + 768u]);
        acc = fold4(fold4(fold4(fold4(acc, v0), v1), v2), v3);
    }
    for (; s < s_end; s += 256u) { acc = fold4(acc, bitcast<vec4<f32>>(x4[base + s])); }
    tree_f[t] = fold1(fold1(fold1(acc.x, acc.y), acc.z), acc.w);
    workgroupBarrier();
    for (var stride = 128u; stride > 0u; stride >>= 1u) {
        if (t < stride) { tree_f[t] = fold1(tree_f[t], tree_f[t + stride]); }
        workgroupBarrier();
    }
    if (STAGE == 0u) {
        if (t == 0u) { out[p.out_offset + o] = bitcast<u32>(tree_f[0]); }
        return;
    }
    if (STAGE == 1u) {
        if (t == 0u) { out[o * p.chunks + chunk] = bitcast<u32>(tree_f[0]); }
        return;
    }
    let counter = o;
    let partials = ROWS4_TICKETS + o * p.chunks;
    if (t == 0u) { atomicStore(&scratch[partials + chunk], bitcast<u32>(tree_f[0])); }
    storageBarrier();  // the partial is visible device-wide before this workgroup's ticket is taken
    if (t == 0u) { last_ticket = select(0u, 1u, atomicAdd(&scratch[counter], 1u) == p.chunks - 1u); }
    if (workgroupUniformLoad(&last_ticket) == 0u) { return; }
    storageBarrier();  // every partial of the row, stored before its ticket, is seen after the last one
    var r = id;
    for (var c = t; c < p.chunks; c += 256u) {
        r = fold1(r, bitcast<f32>(atomicLoad(&scratch[partials + c])));
    }
    tree_f[t] = r;
    workgroupBarrier();
    for (var stride = 128u; stride > 0u; stride >>= 1u) {
        if (t < stride) { tree_f[t] = fold1(tree_f[t], tree_f[t + stride]); }
        workgroupBarrier();
    }
    if (t == 0u) {
        out[p.out_offset + o] = bitcast<u32>(tree_f[0]);
        atomicStore(&scratch[counter], 0u);  // ready for the next reduction (same queue: runs after this one)
    }
}

// ---- reduce_cols4: float32 columns, vec4 loads (see the top). x is [outer, size, inner] with inner % 4 == 0;
// workgroup `group` folds chunk group % chunks of column group (group / chunks) % column groups of row o.
const COLS4: u32 = 16u;
const COL_THREADS: u32 = 16u;  // 256 / COLS4
var<workgroup> tree4: array<vec4<f32>, 256>;

// Fold tree4's COL_THREADS entries of each column (t = column + COLS4 * thread) into tree4[column].
fn fold_columns(t: u32) {
    workgroupBarrier();
    for (var stride = 128u; stride >= COLS4; stride >>= 1u) {
        if (t < stride) { tree4[t] = fold4(tree4[t], tree4[t + stride]); }
        workgroupBarrier();
    }
}

fn store_column(word: u32, v: vec4<f32>) {  // word: the output's first word (out is u32 words)
    out[word] = bitcast<u32>(v.x);
    out[word + 1u] = bitcast<u32>(v.y);
    out[word + 2u] = bitcast<u32>(v.z);
    out[word + 3u] = bitcast<u32>(v.w);
}

@compute @workgroup_size(256)
fn reduce_cols4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) t: u32) {
    let group = wid.x + wid.y * nwg.x;
    if (group >= p.groups) { return; }
    let inner4 = p.inner / 4u;
    let column_groups = (inner4 + COLS4 - 1u) / COLS4;
    let chunk = group % p.chunks;
    let cg = (group / p.chunks) % column_groups;
    let o = group / (p.chunks * column_groups);
    let c = cg * COLS4 + t % COLS4;  // this thread's vec4 column
    let valid = c < inner4;
    let base = p.x_offset / 4u + o * p.size * inner4 + c;
    let s_end = min((chunk + 1u) * p.chunk, p.size);
    let id = identity_f().v;
    var acc = vec4<f32>(id);
    if (valid) {
        var s = chunk * p.chunk + t / COLS4;
        for (; s + 3u * COL_THREADS < s_end; s += 4u * COL_THREADS) {
            let v0 = bitcast<vec4<f32>>(x4[base + s * inner4]);
            let v1 = bitcast<vec4<f32>>(x4[base + (s + COL_THREADS) * inner4]);
            let v2 = bitcast<vec4<f32>>(x4[base + (s + 2u * COL_THREADS) * inner4]);
            let v3 = bitcast<vec4<f32>>(x4[base + (s + 3u * COL_THREADS) * inner4]);
            acc = fold4(fold4(fold4(fold4(acc, v0), v1), v2), v3);
        }
        for (; s < s_end; s += COL_THREADS) { acc = fold4(acc, bitcast<vec4<f32>>(x4[base + s * inner4])); }
    }
    tree4[t] = acc;
    fold_columns(t);
    let mine = t < COLS4 && valid;
    if (STAGE == 0u) {
        if (mine) { store_column(p.out_offset + o * p.inner + 4u * c, tree4[t]); }
        return;
    }
    if (STAGE == 1u) {  // partials [outer, chunks, inner] for the general kernel's STAGE 2
        if (mine) { store_column((o * p.chunks + chunk) * p.inner + 4u * c, tree4[t]); }
        return;
    }
    let counter = o * column_groups + cg;
    let partials = ROWS4_TICKETS + o * p.chunks * p.inner;  // [chunks, inner] of row o
    if (mine) {
        let w = partials + chunk * p.inner + 4u * c;
        let v = tree4[t];
        atomicStore(&scratch[w], bitcast<u32>(v.x));
        atomicStore(&scratch[w + 1u], bitcast<u32>(v.y));
        atomicStore(&scratch[w + 2u], bitcast<u32>(v.z));
        atomicStore(&scratch[w + 3u], bitcast<u32>(v.w));
    }
    storageBarrier();  // the partials are visible device-wide before this workgroup's ticket is taken
    if (t == 0u) { last_ticket = select(0u, 1u, atomicAdd(&scratch[counter], 1u) == p.chunks - 1u); }
    if (workgroupUniformLoad(&last_ticket) == 0u) { return; }
    storageBarrier();  // every partial of the column group, stored before its ticket, is seen after the last one
    var r = vec4<f32>(id);
    if (valid) {
        for (var k = t / COLS4; k < p.chunks; k += COL_THREADS) {
            let w = partials + k * p.inner + 4u * c;
            let v = vec4<u32>(atomicLoad(&scratch[w]), atomicLoad(&scratch[w + 1u]), atomicLoad(&scratch[w + 2u]),
                              atomicLoad(&scratch[w + 3u]));
            r = fold4(r, bitcast<vec4<f32>>(v));
        }
    }
    tree4[t] = r;
    fold_columns(t);
    if (mine) { store_column(p.out_offset + o * p.inner + 4u * c, tree4[t]); }
    if (t == 0u) { atomicStore(&scratch[counter], 0u); }  // ready for the next reduction (same queue: after this)
}
