//! include "attention_io.wgsl"
// Fused scaled dot-product attention's forward, register-tiled (the Python side is
// _backends/webgpu/attention_tiled.py; attention.wgsl's attention_forward is the kernel it replaces on GPUs, and
// its contract is the same: out = softmax(q k^T * scale + mask) v, dropout on the weights, each row's lse).
//
// attention.wgsl gives a thread one query row and walks the keys one at a time: a score is a serial dot product
// of the head size, and each key's vector is read from workgroup memory for one multiply-add per element. Here a
// workgroup of TX x TY threads takes BQ = 4 TY queries of one (batch, head) and walks the keys in tiles of
// BK = 4 TX, as a GEMM does:
//   scores   S = Q K^T for the tile, thread (ty, tx) a 4 x 4 block in registers (queries 4 ty.., keys 4 tx..):
//            each step over the head dim reads a vec4 of 4 queries and a vec4 of 4 keys, 16 multiply-adds
//   max      each row's maximum over the tile through `red` (TX partials a row), the online softmax's rescale
//   weights  P = exp(S - m), dropped and scaled, stored transposed (a vec4 of 4 queries per key) in `ps`
//   output   O += P V, thread (ty, tx) owning 4 queries x VC vec4s of the value dims (tx, tx + TX, ...): each
//            key reads one vec4 of weights and VC vec4s of values for 16 VC multiply-adds
// The row sums l stay partial per thread (its 4 keys of each tile) and are added once at the end: the rows' max
// m is the same in every thread of a row, so the partial sums share its scale. Four barriers a tile: after the
// staging, after the partial maxima, after the weights, after the product (the next staging overwrites).
//
// Workgroup memory, in vec4s: qt (the tile's queries, scaled, transposed: [E][TY] vec4s of 4 queries), kt (keys
// transposed: [E][TX]), vs (values as they are: [BK][V4]), ps ([BK][TY]) and red ([TY][TX]). A warp's reads are
// broadcasts or consecutive vec4s (threads are numbered ty * TX + tx).
//
// Keys past S are staged as zeros and masked out, as are keys j > i with CAUSAL, keys the mask excludes and the
// rows past L (computed on zeros, never stored). Masked scores never enter m (which starts at LOWEST, finite),
// and get weight 0; a row that attends no key gets NaN and lse -inf, as attention.wgsl's.
//
// Spliced in by attention_tiled.py: E4, V4 (vec4s of a q / k row and of a v row), TX, TY, VC = V4 / TX, the
// output registers o{a}_{c} and their helpers (HELPERS), ELEMENT_TYPES (T), MASK_BINDING and DROPOUT_BINDING.

//! splice ELEMENT_TYPES

override CAUSAL: bool = false;
override LSE: bool = true;

const NT: u32 = TX * TY;
const BQ: u32 = 4u * TY;
const BK: u32 = 4u * TX;

var<workgroup> qs: array<vec4<f32>, BQ * P>;
var<workgroup> ks: array<vec4<f32>, BK * P>;
var<workgroup> vs: array<vec4<f32>, BK * V4>;
var<workgroup> ps: array<vec4<f32>, BK * TY>;
var<workgroup> red: array<vec4<f32>, TY * TX>;

//! splice HELPERS

fn hmax(v: vec4<f32>) -> f32 { return max(max(v.x, v.y), max(v.z, v.w)); }

// Whether query i attends key j (i < L, j < kend, causal, the mask).
fn attends1(b: u32, h: u32, i: u32, j: u32, kend: u32) -> bool {
    return i < p.L && j < kend && !(CAUSAL && j > i) && attends(b, h, i, j);
}

// Which of keys j, j + TX, j + 2 TX, j + 3 TX query i attends (components written out: a vector indexed by a
// variable would sit in local memory).
fn attended(b: u32, h: u32, i: u32, j: u32, kend: u32) -> vec4<bool> {
    return vec4<bool>(attends1(b, h, i, j, kend), attends1(b, h, i, j + TX, kend),
                      attends1(b, h, i, j + 2u * TX, kend), attends1(b, h, i, j + 3u * TX, kend));
}

fn mask_adds(b: u32, h: u32, i: u32, j: u32, ok: vec4<bool>) -> vec4<f32> {
    if (!HAS_MASK) { return vec4<f32>(); }
    return select(vec4<f32>(), vec4<f32>(mask_add(b, h, i, j), mask_add(b, h, i, j + TX),
                                         mask_add(b, h, i, j + 2u * TX), mask_add(b, h, i, j + 3u * TX)), ok);
}

// The weights e of row i (keys j, j + TX, ...), dropped (0) or scaled by 1 / (1 - p) as F.dropout draws them;
// c0 is the row's first counter.
fn dropped(e: vec4<f32>, c0: u32, j: u32, key: u32) -> vec4<f32> {
    let keep = vec4<bool>(kept(c0 + j, key), kept(c0 + j + TX, key), kept(c0 + j + 2u * TX, key),
                          kept(c0 + j + 3u * TX, key));
    return select(vec4<f32>(), e * p.drop_scale, keep);
}

fn score_row(q: vec4<f32>, k0: vec4<f32>, k1: vec4<f32>, k2: vec4<f32>, k3: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(dot(q, k0), dot(q, k1), dot(q, k2), dot(q, k3));
}

@compute @workgroup_size(NT)
fn attention_forward_tiled(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let bh = wid.y;
    let b = bh / p.H;
    let h = bh % p.H;
    let ty = t / TX;
    let tx = t % TX;
    let q0 = wid.x * BQ;
    let i = q0 + ty;  // this thread's queries: i, i + TY, i + 2 TY, i + 3 TY
    let qbase = p.q_off + b * p.q_sb + h * p.q_sh;
    for (var e = t; e < BQ * E4; e += NT) {  // the tile's queries, scaled
        let r = e / E4;
        var v = vec4<f32>();
        if (q0 + r < p.L) { v = vec4<f32>(qb[qbase + (q0 + r) * p.q_sl + e % E4]) * p.scale; }
        qs[r * P + e % E4] = v;
    }
    var kend = p.S;
    if (CAUSAL) { kend = min(p.S, q0 + BQ); }
    let kbase = p.k_off + b * p.k_sb + h * p.k_sh;
    let vbase = p.v_off + b * p.v_sb + h * p.v_sh;
    let dkey = drop_key();
    var m = vec4<f32>(LOWEST);  // the running max of the thread's 4 rows
    var l = vec4<f32>();        // their sums of weights over the thread's keys
    acc_zero();
    fetch(t, 0u, kend, kbase, vbase);
    for (var j0 = 0u; j0 < kend; j0 += BK) {
        stage(t);
        workgroupBarrier();
        fetch(t, j0 + BK, kend, kbase, vbase);
        // scores: s{a}[c] = q[i + a TY] . k[j + c TX] (the queries are scaled)
        var s0 = vec4<f32>();
        var s1 = vec4<f32>();
        var s2 = vec4<f32>();
        var s3 = vec4<f32>();
        for (var d = 0u; d < E4; d++) {
            let k0 = ks[tx * P + d];
            let k1 = ks[(tx + TX) * P + d];
            let k2 = ks[(tx + 2u * TX) * P + d];
            let k3 = ks[(tx + 3u * TX) * P + d];
            s0 += score_row(qs[ty * P + d], k0, k1, k2, k3);
            s1 += score_row(qs[(ty + TY) * P + d], k0, k1, k2, k3);
            s2 += score_row(qs[(ty + 2u * TY) * P + d], k0, k1, k2, k3);
            s3 += score_row(qs[(ty + 3u * TY) * P + d], k0, k1, k2, k3);
        }
        let j = j0 + tx;
        // A tile every query of the workgroup attends in full (no mask, below the diagonal, within L and S)
        // skips the tests: all but the diagonal's tiles of a causal GPT.
        var ok0 = vec4<bool>(true);
        var ok1 = ok0;
        var ok2 = ok0;
        var ok3 = ok0;
        if (HAS_MASK || j0 + BK > kend || (CAUSAL && j0 + BK > q0 + 1u) || q0 + BQ > p.L) {
            ok0 = attended(b, h, i, j, kend);
            ok1 = attended(b, h, i + TY, j, kend);
            ok2 = attended(b, h, i + 2u * TY, j, kend);
            ok3 = attended(b, h, i + 3u * TY, j, kend);
            s0 += mask_adds(b, h, i, j, ok0);
            s1 += mask_adds(b, h, i + TY, j, ok1);
            s2 += mask_adds(b, h, i + 2u * TY, j, ok2);
            s3 += mask_adds(b, h, i + 3u * TY, j, ok3);
        }
        let low = vec4<f32>(LOWEST);
        red[t] = vec4<f32>(hmax(select(low, s0, ok0)), hmax(select(low, s1, ok1)), hmax(select(low, s2, ok2)),
                           hmax(select(low, s3, ok3)));
        workgroupBarrier();
        var mt = m;
        for (var x = 0u; x < TX; x++) { mt = max(mt, red[ty * TX + x]); }
        let f = exp(m - mt);
        m = mt;
        acc_rescale(f);
        let zero = vec4<f32>();
        var e0 = select(zero, exp(s0 - m.x), ok0);
        var e1 = select(zero, exp(s1 - m.y), ok1);
        var e2 = select(zero, exp(s2 - m.z), ok2);
        var e3 = select(zero, exp(s3 - m.w), ok3);
        let ones = vec4<f32>(1.0);
        l = l * f + vec4<f32>(dot(e0, ones), dot(e1, ones), dot(e2, ones), dot(e3, ones));
        if (dropping()) {
            let last = p.L - 1u;
            e0 = dropped(e0, first_counter(bh, min(i, last)), j, dkey);
            e1 = dropped(e1, first_counter(bh, min(i + TY, last)), j, dkey);
            e2 = dropped(e2, first_counter(bh, min(i + 2u * TY, last)), j, dkey);
            e3 = dropped(e3, first_counter(bh, min(i + 3u * TY, last)), j, dkey);
        }
        // the weights of key tile row tx + c TX for the thread's 4 queries: ps[(tx + c TX) * TY + ty]
        ps[tx * TY + ty] = vec4<f32>(e0.x, e1.x, e2.x, e3.x);
        ps[(tx + TX) * TY + ty] = vec4<f32>(e0.y, e1.y, e2.y, e3.y);
        ps[(tx + 2u * TX) * TY + ty] = vec4<f32>(e0.z, e1.z, e2.z, e3.z);
        ps[(tx + 3u * TX) * TY + ty] = vec4<f32>(e0.w, e1.w, e2.w, e3.w);
        workgroupBarrier();
        // keys past the tile's end have weight 0 and zero values: the loop's bound stays a constant
        for (var k = 0u; k < BK; k++) { acc_add(ps[k * TY + ty], k * V4 + tx); }
        workgroupBarrier();
    }
    // each row's sum over the threads of its row
    red[t] = l;
    workgroupBarrier();
    var lt = vec4<f32>();
    for (var x = 0u; x < TX; x++) { lt += red[ty * TX + x]; }
    let inv = select(vec4<f32>(nan_f32()), 1.0 / lt, lt > vec4<f32>());
    store_rows(p.o_off + b * p.o_sb + h * p.o_sh + tx, i, inv);
    if (LSE && tx == 0u) {
        let lse = select(vec4<f32>(-inf_f32()), m + log(lt), lt > vec4<f32>());
        let at = p.lse_off + bh * p.L + i;
        if (i < p.L) { stat_w[at] = lse.x; }
        if (i + TY < p.L) { stat_w[at + TY] = lse.y; }
        if (i + 2u * TY < p.L) { stat_w[at + 2u * TY] = lse.z; }
        if (i + 3u * TY < p.L) { stat_w[at + 3u * TY] = lse.w; }
    }
}
