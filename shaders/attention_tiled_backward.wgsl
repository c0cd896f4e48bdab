//! include "attention_io.wgsl"
// Register-tiled attention backward (the Python side is _backends/webgpu/attention_tiled_backward.py): the
// contract of attention.wgsl's attention_dq and attention_dkv (grad_q and D = rowsum(grad * out); grad_k and
// grad_v), computed as FlashAttention-2's backward without tensor cores, in the manner of a SIMT GEMM:
//   attention_dq   a workgroup owns BQ queries of one (batch, head): it stages their rows (q scaled) and output
//                  gradients once, then walks tiles of BK keys (causal: up to its last query). Per tile, each
//                  thread computes a 4 x 4 block of S = Q K^T and of dP = dO V^T in registers (queries
//                  qg + a TQ, keys kg + b TK), then P = exp(S - lse), dS = P (dP - D) (dP dropped and scaled as
//                  attention.wgsl does), writes dS^T to workgroup memory and adds dS K to its grad_q block:
//                  4 queries x the head's vec4s c = kg, kg + TK, ...; grad_q * scale is stored once at the end.
//   attention_dkv  a workgroup owns BK keys: it stages their k and v rows once, then walks tiles of BQ queries
//                  (causal: from its first key). Per tile the same 4 x 4 blocks (queries qg + a TQ, keys
//                  kg + b TK), P^T (dropped, scaled) and dS^T through workgroup memory, and each thread adds
//                  P^T dO and dS^T Q to its grad_v and grad_k blocks (4 keys x vec4s c = qg, qg + TQ, ...).
//                  WANT_DK / WANT_DV: grad_k and grad_v in one dispatch, or one each where the accumulators of
//                  both would take too many registers (the Python side's ACC_MAX).
// No thread walks a row serially: every score is a dot product of two staged vec4 rows in a loop over the head
// dim that the whole workgroup runs in lock step: per vec4 of the head dim, 8 vec4 reads of workgroup memory feed
// 16 dot products (64 FMAs), and per row of the accumulations 1 + NS reads feed 16 NS FMAs.
//
// Bank conflicts (32 banks of 4 bytes; a vec4 read is served 8 threads at a time): threads own strided rows
// (qg + a TQ, not 4 qg + a), so the 8 threads of a phase read 8 consecutive rows of a tile at the same column or
// one row (broadcast); each tile's row stride (RQ, RG, RK, RV, RS, RP, in vec4s) is odd, so consecutive rows fall
// in distinct banks. attention_dq's threads run kg fastest (a phase shares its queries: q and dO reads broadcast,
// k and v rows distinct); attention_dkv's run qg fastest (k and v broadcast). dS^T (attention_dq) is stored with
// a query block's 4 queries in one vec4, P^T and dS^T (attention_dkv) with a key block's 4 keys in one, so the
// accumulations read one vec4 of weights and the vec4s of the other operand's row.
//
// Rows past the ends are staged as zeros (their scores are masked out, so their weights are 0 and no inf or NaN
// of stale workgroup memory reaches a sum); attention_dq computes on queries past L and stores nothing for them.
// Registers are named (s0..s3, g00.., spliced in by the Python side's _helpers: naga leaves indexed private
// arrays in local memory); the helpers' loops run over the head dim and a tile's rows only.
//
// Spliced in: E4, V4 (vec4s of a q / k row and of a v row), BQ, BK (queries and keys of a tile), TQ = BQ / 4,
// TK = BK / 4 (threads along each), the row strides, ST_N and PT_N (the score tiles' vec4s), NSE and NSV (vec4s of
// the head dim a thread accumulates), the helpers (HELPERS), ELEMENT_TYPES, MASK_BINDING and DROPOUT_BINDING.

//! splice ELEMENT_TYPES

override CAUSAL: bool = false;
override WANT_DK: bool = true;  // attention_dkv: write grad_k (and compute what it needs)
override WANT_DV: bool = true;

const NT: u32 = TQ * TK;  // threads per workgroup

var<workgroup> qt: array<vec4<f32>, BQ * RQ>;  // q rows (scaled)
var<workgroup> gt: array<vec4<f32>, BQ * RG>;  // output gradient rows
var<workgroup> kt: array<vec4<f32>, BK * RK>;  // k rows
var<workgroup> vt: array<vec4<f32>, BK * RV>;  // v rows
var<workgroup> st: array<vec4<f32>, ST_N>;     // dS^T: attention_dq [BK][queries], attention_dkv [BQ][keys]
var<workgroup> pt: array<vec4<f32>, PT_N>;     // attention_dkv: P^T (dropped, scaled) [BQ][keys]
var<workgroup> lt: array<f32, BQ>;             // attention_dkv: the tile's queries' lse
var<workgroup> dt: array<f32, BQ>;             // ... and their D

// (P as grad_v weighs it: dropped and scaled, dS) of score s of query i and key j: zeros where the pair is
// outside the operands or masked out; dP is dropped and scaled where dropout is on (attention.wgsl's rule).
// Branch-free (selects, non-short-circuit &, the mask read at clamped indices): a thread's 16 calls inline into
// straight-line code (early returns in them made SwiftShader's compiler hang on the causal variant).
fn grads(b: u32, h: u32, i: u32, j: u32, inside: bool, s: f32, dp: f32, lse: f32, dsum: f32, c0: u32,
         dkey: u32) -> vec2<f32> {
    let ic = min(i, p.L - 1u);
    let jc = min(j, p.S - 1u);
    let ok = inside & !(CAUSAL & (j > i)) & attends(b, h, ic, jc);
    let pr = select(0.0, exp(s + mask_add(b, h, ic, jc) - lse), ok);
    var pv = pr;
    var d = dp;
    if (dropping()) {
        let keep = kept(c0 + j, dkey);
        pv = select(0.0, pr * p.drop_scale, keep);
        d = select(0.0, dp * p.drop_scale, keep);
    }
    return vec2<f32>(pv, select(0.0, pr * (d - dsum), ok));
}

// q rows (scaled) and output gradient rows i0 .. i0 + BQ of head (b, h) into qt and gt; zeros past L
fn stage_queries(t: u32, b: u32, h: u32, i0: u32) {
    let qbase = p.q_off + b * p.q_sb + h * p.q_sh;
    let gbase = p.g_off + b * p.g_sb + h * p.g_sh;
    for (var e = t; e < BQ * E4; e += NT) {
        let r = e / E4;
        let c = e % E4;
        var x = vec4<f32>();
        if (i0 + r < p.L) { x = vec4<f32>(qb[qbase + (i0 + r) * p.q_sl + c]) * p.scale; }
        qt[r * RQ + c] = x;
    }
    for (var e = t; e < BQ * V4; e += NT) {
        let r = e / V4;
        let c = e % V4;
        var x = vec4<f32>();
        if (i0 + r < p.L) { x = vec4<f32>(gb[gbase + (i0 + r) * p.g_sl + c]); }
        gt[r * RG + c] = x;
    }
}

// D = rowsum(grad * out) of query i (tile row r): the softmax backward's sum; 0 past L
fn d_of(b: u32, h: u32, i: u32, r: u32) -> f32 {
    var sum = 0.0;
    if (i < p.L) {
        let at = p.o2_off + b * p.o2_sb + h * p.o2_sh + i * p.o2_sl;
        for (var c = 0u; c < V4; c++) { sum += dot(gt[r * RG + c], vec4<f32>(oin[at + c])); }
    }
    return sum;
}

// k and v rows j0 .. j0 + BK of head (b, h) into kt and vt (v only if `values`); zeros from row `end` on
fn stage_keys(t: u32, b: u32, h: u32, j0: u32, end: u32, values: bool) {
    let kbase = p.k_off + b * p.k_sb + h * p.k_sh;
    let vbase = p.v_off + b * p.v_sb + h * p.v_sh;
    for (var e = t; e < BK * E4; e += NT) {
        let r = e / E4;
        let c = e % E4;
        var x = vec4<f32>();
        if (j0 + r < end) { x = vec4<f32>(kb[kbase + (j0 + r) * p.k_sl + c]); }
        kt[r * RK + c] = x;
    }
    if (values) {
        for (var e = t; e < BK * V4; e += NT) {
            let r = e / V4;
            let c = e % V4;
            var x = vec4<f32>();
            if (j0 + r < end) { x = vec4<f32>(vb[vbase + (j0 + r) * p.v_sl + c]); }
            vt[r * RV + c] = x;
        }
    }
}

//! splice HELPERS

@compute @workgroup_size(NT)
fn attention_dq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let bh = wid.y;
    let b = bh / p.H;
    let h = bh % p.H;
    let qg = t / TK;
    let kg = t % TK;
    let i0 = wid.x * BQ;
    stage_queries(t, b, h, i0);
    workgroupBarrier();
    let dkey = drop_key();
    query_rows(b, h, bh, i0, qg, kg);  // queries past L: the last one's lse (nothing of theirs is stored)
    dq_zero();
    var kend = p.S;
    if (CAUSAL) { kend = min(p.S, i0 + BQ); }
    for (var j0 = 0u; j0 < kend; j0 += BK) {
        stage_keys(t, b, h, j0, kend, true);
        workgroupBarrier();
        tile_scores(qg * RQ, kg * RK);
        tile_dp(qg * RG, kg * RV);
        tile_grads(b, h, j0 + kg, kend, dkey);
        store_ds_t(qg, kg);
        workgroupBarrier();
        dq_accumulate(min(BK, kend - j0), qg, kg);
        workgroupBarrier();
    }
    store_dq(b, h, i0 + qg, kg);
}

@compute @workgroup_size(NT)
fn attention_dkv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let bh = wid.y;
    let b = bh / p.H;
    let h = bh % p.H;
    let kg = t / TQ;
    let qg = t % TQ;
    let j0 = wid.x * BK;
    stage_keys(t, b, h, j0, p.S, WANT_DK);  // (the first tile's barrier covers these)
    let dkey = drop_key();
    dk_zero();
    dv_zero();
    var first = 0u;
    if (CAUSAL) { first = j0; }  // queries i >= j only: none before this block's first key
    for (var i0 = first; i0 < p.L; i0 += BQ) {
        stage_queries(t, b, h, i0);
        for (var r = t; r < BQ; r += NT) {
            var lse = 0.0;
            var dsum = 0.0;
            if (i0 + r < p.L) {
                lse = lse_r[p.lse_off + bh * p.L + i0 + r];
                dsum = d_r[p.d_off + bh * p.L + i0 + r];
            }
            lt[r] = lse;
            dt[r] = dsum;
        }
        workgroupBarrier();
        tile_scores(qg * RQ, kg * RK);
        if (WANT_DK) { tile_dp(qg * RG, kg * RV); }
        query_rows(b, h, bh, i0, qg, kg);
        tile_grads(b, h, j0 + kg, p.S, dkey);
        store_p_ds(qg, kg);
        workgroupBarrier();
        dkv_accumulate(min(BQ, p.L - i0), qg, kg);
        workgroupBarrier();
    }
    store_dkv(b, h, j0 + kg, qg);
}
