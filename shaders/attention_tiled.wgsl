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
const E: u32 = 4u * E4;

var<workgroup> qt: array<vec4<f32>, E * TY>;
var<workgroup> kt: array<vec4<f32>, E * TX>;
var<workgroup> vs: array<vec4<f32>, BK * V4>;
var<workgroup> ps: array<vec4<f32>, BK * TY>;
var<workgroup> red: array<vec4<f32>, TY * TX>;

//! splice HELPERS

fn hmax(v: vec4<f32>) -> f32 { return max(max(v.x, v.y), max(v.z, v.w)); }

// Which of keys j0 .. j0 + 3 query i attends (i < L, keys < kend, causal, the mask).
fn attended(b: u32, h: u32, i: u32, j0: u32, kend: u32) -> vec4<bool> {
    var ok = vec4<bool>(false);
    if (i >= p.L) { return ok; }
    for (var c = 0u; c < 4u; c++) {
        let j = j0 + c;
        ok[c] = j < kend && !(CAUSAL && j > i) && attends(b, h, i, j);
    }
    return ok;
}

fn mask_adds(b: u32, h: u32, i: u32, j0: u32, ok: vec4<bool>) -> vec4<f32> {
    var m = vec4<f32>();
    for (var c = 0u; c < 4u; c++) { if (ok[c]) { m[c] = mask_add(b, h, i, j0 + c); } }
    return m;
}

// The weights e of row i (keys j0 ..), dropped (0) or scaled by 1 / (1 - p) as F.dropout draws them.
fn dropped(e: vec4<f32>, c0: u32, j0: u32, key: u32) -> vec4<f32> {
    var w = e * p.drop_scale;
    for (var c = 0u; c < 4u; c++) { if (!kept(c0 + j0 + c, key)) { w[c] = 0.0; } }
    return w;
}

@compute @workgroup_size(NT)
fn attention_forward_tiled(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let bh = wid.y;
    let b = bh / p.H;
    let h = bh % p.H;
    let ty = t / TX;
    let tx = t % TX;
    let q0 = wid.x * BQ;
    let i0 = q0 + 4u * ty;  // this thread's first query
    // the tile's queries, scaled, transposed: qt[d * TY + r / 4][r % 4] = q[q0 + r][d] * scale
    let qbase = p.q_off + b * p.q_sb + h * p.q_sh;
    for (var e = t; e < BQ * E4; e += NT) {
        let r = e % BQ;
        let d4 = e / BQ;
        var v = vec4<f32>();
        if (q0 + r < p.L) { v = vec4<f32>(qb[qbase + (q0 + r) * p.q_sl + d4]) * p.scale; }
        for (var c = 0u; c < 4u; c++) { qt[(4u * d4 + c) * TY + r / 4u][r % 4u] = v[c]; }
    }
    var kend = p.S;
    if (CAUSAL) { kend = min(p.S, q0 + BQ); }
    let kbase = p.k_off + b * p.k_sb + h * p.k_sh;
    let vbase = p.v_off + b * p.v_sb + h * p.v_sh;
    let dkey = drop_key();
    var m = vec4<f32>(LOWEST);  // the running max of rows i0 .. i0 + 3
    var l = vec4<f32>();        // their sums of weights over this thread's keys
    acc_zero();
    for (var j0 = 0u; j0 < kend; j0 += BK) {
        for (var e = t; e < BK * E4; e += NT) {
            let r = e % BK;
            let d4 = e / BK;
            var v = vec4<f32>();
            if (j0 + r < kend) { v = vec4<f32>(kb[kbase + (j0 + r) * p.k_sl + d4]); }
            for (var c = 0u; c < 4u; c++) { kt[(4u * d4 + c) * TX + r / 4u][r % 4u] = v[c]; }
        }
        for (var e = t; e < BK * V4; e += NT) {
            let r = e / V4;
            var v = vec4<f32>();
            if (j0 + r < kend) { v = vec4<f32>(vb[vbase + (j0 + r) * p.v_sl + e % V4]); }
            vs[e] = v;
        }
        workgroupBarrier();
        // scores: s{a}[c] = q[i0 + a] . k[j + c] * scale
        var s0 = vec4<f32>();
        var s1 = vec4<f32>();
        var s2 = vec4<f32>();
        var s3 = vec4<f32>();
        for (var d = 0u; d < E; d++) {
            let qv = qt[d * TY + ty];
            let kv = kt[d * TX + tx];
            s0 += qv.x * kv;
            s1 += qv.y * kv;
            s2 += qv.z * kv;
            s3 += qv.w * kv;
        }
        let j = j0 + 4u * tx;
        let ok0 = attended(b, h, i0, j, kend);
        let ok1 = attended(b, h, i0 + 1u, j, kend);
        let ok2 = attended(b, h, i0 + 2u, j, kend);
        let ok3 = attended(b, h, i0 + 3u, j, kend);
        s0 += mask_adds(b, h, i0, j, ok0);
        s1 += mask_adds(b, h, i0 + 1u, j, ok1);
        s2 += mask_adds(b, h, i0 + 2u, j, ok2);
        s3 += mask_adds(b, h, i0 + 3u, j, ok3);
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
            e0 = dropped(e0, first_counter(bh, min(i0, p.L - 1u)), j, dkey);
            e1 = dropped(e1, first_counter(bh, min(i0 + 1u, p.L - 1u)), j, dkey);
            e2 = dropped(e2, first_counter(bh, min(i0 + 2u, p.L - 1u)), j, dkey);
            e3 = dropped(e3, first_counter(bh, min(i0 + 3u, p.L - 1u)), j, dkey);
        }
        // weights transposed: ps[(4 tx + c) * TY + ty] holds key j + c's weights of the thread's 4 queries
        ps[(4u * tx) * TY + ty] = vec4<f32>(e0.x, e1.x, e2.x, e3.x);
        ps[(4u * tx + 1u) * TY + ty] = vec4<f32>(e0.y, e1.y, e2.y, e3.y);
        ps[(4u * tx + 2u) * TY + ty] = vec4<f32>(e0.z, e1.z, e2.z, e3.z);
        ps[(4u * tx + 3u) * TY + ty] = vec4<f32>(e0.w, e1.w, e2.w, e3.w);
        workgroupBarrier();
        let n = min(BK, kend - j0);
        for (var k = 0u; k < n; k++) { acc_add(ps[k * TY + ty], k * V4 + tx); }
        workgroupBarrier();
    }
    // each row's sum over the threads of its row
    red[t] = l;
    workgroupBarrier();
    var lt = vec4<f32>();
    for (var x = 0u; x < TX; x++) { lt += red[ty * TX + x]; }
    let obase = p.o_off + b * p.o_sb + h * p.o_sh + tx;
    let nan = nan_f32();
    let inv = select(vec4<f32>(nan), 1.0 / lt, lt > vec4<f32>());
    store_rows(obase, i0, inv);
    if (LSE && tx == 0u) {
        let lse = select(vec4<f32>(-inf_f32()), m + log(lt), lt > vec4<f32>());
        for (var a = 0u; a < 4u; a++) {
            if (i0 + a < p.L) { stat_w[p.lse_off + bh * p.L + i0 + a] = lse[a]; }
        }
    }
}
