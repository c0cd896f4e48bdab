//! include "common.wgsl"
//! include "random_stream.wgsl"
// Fused scaled dot-product attention, flash-attention style (the Python side is _backends/webgpu/attention.py):
//   attention_forward   out = softmax(q k^T * scale + mask) v per (batch, head), dropout on the weights, and
//                       each row's log-sum-exp (lse) of the scores for the backward
//   attention_dq        grad_q, recomputing the weights from lse; it also leaves D = rowsum(grad * out)
//   attention_dkv       grad_k and grad_v (a thread per key), recomputing the weights from lse and reading D
// The score matrix is never stored: a workgroup walks the keys (or queries) in tiles and each thread keeps its
// row's running max, sum and output in registers (online softmax), so memory traffic is q, k, v and out.
//
// KSPLIT threads own one row: a query row in attention_forward / attention_dq (BR rows per workgroup), a key row
// in attention_dkv; thread t serves row t % BR and walks every KSPLIT-th row of the other side from t / BR on, so
// a warp reads one staged row at a time. With KSPLIT > 1 each part keeps its own running state (the forward's
// max, sum and output; attention_dq's grad_q; attention_dkv's grad_k and grad_v) and the parts merge through
// the tile's workgroup memory after the walk (flash-decoding's merge: M = max m_p, l = sum l_p exp(m_p - M),
// acc = sum acc_p exp(m_p - M)); part 0 stores the row. KSPLIT = 1 is one thread a row, no merge. A thread's
// vectors live in named vec4 registers (q0, q1, ... spliced in for the head dims: naga does not unroll loops over
// a private array, which would then sit in slow local memory; see matmul.wgsl). With
// TILED (GPUs), the workgroup stages each tile of keys and values (or queries and output gradients) in workgroup
// memory, one barrier before and after its use; without (software adapters, where a barrier costs a coroutine
// switch per four lanes), each thread reads the rows from the buffers directly.
//
// Every [B, H, rows, dim] operand, read or written (q, k, v, grad, out, grad_q, grad_k, grad_v), is addressed
// through its (offset, batch, head, row) strides in vec4s: ops/attention.py stores each output in the layout of
// its input (out as q, grad_q as q, ...), as PyTorch's fused kernels do, so a GPT's heads (views of a [B, T, 3C]
// projection) give out and gradients stored [B, T, nh, hs] that its reshapes see without copies. lse and D are
// contiguous [B, H, L].
//
// attention_forward walks its keys two a step (each part its KSPLIT-th keys, in pairs): the two scores' dot
// products and exps are independent, so their latencies overlap where one key a step waited on each in turn. The
// second key of the last pair may fall past the tile: it is clamped to a row of the tile and skipped. (The
// backward kernels keep one row a step: there the pairs' extra registers cost more than the overlap gained; H200,
// attention_dq 852 -> 884 us, attention_dkv 1,260 -> 1,928 us a gpt-6x384 step, the forward 637 -> 602.)
//
// Why one row a thread and not GEMM-style register tiles: tiled variants (4 x 4 score blocks a thread, the
// tiles' row maxima and weights through workgroup memory, four barriers a key tile) measured slower on an H200,
// the forward at parity and the backward at half this file's speed (docs/PERFORMANCE.md, "What limits speed").
// Without subgroup operations each key tile's row reductions cross workgroup memory behind barriers; here every
// reduction stays in a thread's registers.
//
// Masks: CAUSAL (query i attends keys j <= i, PyTorch's is_causal) and an optional mask view [B, H, L, S] of any
// strides (MASK_BINDING: float32 added to the scores, -inf meaning "never", or bool words, true = attend). A row
// that attends no key gets NaN, as PyTorch's softmax of a row of -inf. Dropout (DROPOUT_BINDING) keeps weight
// (i, j) of head bh where u(offset + (bh * L + i) * S + j) >= p (random_stream.wgsl's stream, as kernels.random
// draws it) and scales it by 1 / (1 - p): the same draw as F.dropout(softmax(...)) from the same generator state.
//
// Element types: q, k, v, grad, out and the gradients are all float32 or all float16 (T, spliced in by
// ELEMENT_TYPES: typed.py's aliases; a float16 module starts with `enable f16;`, on adapters with shader-f16).
// Every read converts to f32 (the tiles, the registers and all the math stay f32) and every store rounds once
// (to_T4: IEEE overflow to inf), so autocast's half attention reads and writes half tensors and makes no
// float32 copies of them; lse, D and a float mask stay float32.
//
// Spliced in by attention.py: E4, V4 (vec4s of a q / k row and of a v row), VS4 (the forward's slice of v: grid
// z walks the slices, so that a thread holds at most 16 vec4s of output), BC (keys per tile), QT (queries per
// tile of attention_dkv), BR (rows per workgroup), KSPLIT (threads per row), KVT and QGT (vec4s of the tiles: at
// least BR * KSPLIT where the parts merge), the registers and the helpers that use them, the merges included
// (HELPERS), and the mask's and dropout's bindings and helpers (MASK_BINDING, DROPOUT_BINDING).

//! splice ELEMENT_TYPES

override CAUSAL: bool = false;
override TILED: bool = true;
override LSE: bool = true;      // forward: write lse
override WANT_DK: bool = true;  // attention_dkv: write grad_k (and compute what it needs)
override WANT_DV: bool = true;

struct Params {
    L: u32, S: u32, H: u32, unused0: u32,
    q_off: u32, q_sb: u32, q_sh: u32, q_sl: u32,     // q, k, v and grad (of out) in vec4s: offset, strides of
    k_off: u32, k_sb: u32, k_sh: u32, k_sl: u32,     // batch, head, row
    v_off: u32, v_sb: u32, v_sh: u32, v_sl: u32,
    g_off: u32, g_sb: u32, g_sh: u32, g_sl: u32,
    o_off: u32, o_sb: u32, o_sh: u32, o_sl: u32,     // out / grad_q / grad_k, and the forward's out
    o2_off: u32, o2_sb: u32, o2_sh: u32, o2_sl: u32, // (attention_dq) / grad_v, likewise in vec4s
    lse_off: u32, d_off: u32, m_off: u32, m_sb: u32, // lse and D (contiguous [B, H, L]); the mask, in elements
    m_sh: u32, m_si: u32, m_sj: u32, seed: u32,
    offset: u32, seed_slot: u32, offset_slot: u32, scale: f32,
    p_drop: f32, drop_scale: f32, unused1: u32, unused2: u32,
}

@group(0) @binding(0) var<storage, read> qb: array<vec4<T>>;
@group(0) @binding(1) var<storage, read> kb: array<vec4<T>>;
@group(0) @binding(2) var<storage, read> vb: array<vec4<T>>;
@group(0) @binding(3) var<storage, read_write> ob: array<vec4<T>>;   // out / grad_q / grad_k
@group(0) @binding(4) var<storage, read_write> ob2: array<vec4<T>>;  // grad_v
@group(0) @binding(5) var<storage, read> gb: array<vec4<T>>;         // grad of out
@group(0) @binding(6) var<storage, read> oin: array<vec4<T>>;        // the forward's out (attention_dq)
@group(0) @binding(7) var<storage, read_write> stat_w: array<f32>;     // forward: lse; attention_dq: D
@group(0) @binding(8) var<storage, read> lse_r: array<f32>;
@group(0) @binding(9) var<storage, read> d_r: array<f32>;
@group(0) @binding(12) var<uniform> p: Params;
//! splice MASK_BINDING
//! splice DROPOUT_BINDING

const LOWEST: f32 = -3.4028234663852886e38;  // the running max before any key (finite: see attention_forward)

const NT: u32 = BR * KSPLIT;  // threads per workgroup

// The staged tiles, through which the parts merge after the walk: keys at 0 and values at BC * E4 (the forward's
// slice of values, or attention_dq's values); attention_dkv's queries (scaled) at 0 and output gradients at QT * E4.
var<workgroup> kvt: array<vec4<f32>, KVT>;
var<workgroup> qgt: array<vec4<f32>, QGT>;
var<workgroup> lt: array<f32, QT>;              // attention_dkv: the lse of the tile's queries
var<workgroup> dt: array<f32, QT>;              // ... and their D

// Row r of a tile, or (untiled) the row at vec4 index r of the buffer.
fn key(r: u32) -> vec4<f32> { if (TILED) { return kvt[r]; } return vec4<f32>(kb[r]); }
fn val_s(r: u32) -> vec4<f32> { if (TILED) { return kvt[BC * E4 + r]; } return vec4<f32>(vb[r]); }
fn val(r: u32) -> vec4<f32> { if (TILED) { return kvt[BC * E4 + r]; } return vec4<f32>(vb[r]); }
fn qrow(r: u32) -> vec4<f32> { if (TILED) { return qgt[r]; } return vec4<f32>(qb[r]) * p.scale; }
fn grow(r: u32) -> vec4<f32> { if (TILED) { return qgt[QT * E4 + r]; } return vec4<f32>(gb[r]); }

//! splice HELPERS

// The counters of a row's draws start at offset + (bh * L + i) * S (u32 arithmetic, wrapping).
fn first_counter(bh: u32, i: u32) -> u32 { return drop_offset() + (bh * p.L + i) * p.S; }

@compute @workgroup_size(NT)
fn attention_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let bh = wid.y;
    let b = bh / p.H;
    let h = bh % p.H;
    let part = t / BR;
    let i = wid.x * BR + t % BR;
    let row = i < p.L;
    let ic = min(i, p.L - 1u);  // rows past L compute on the last row and write nothing
    let slice = wid.z * VS4;
    load_q(p.q_off + b * p.q_sb + h * p.q_sh + ic * p.q_sl);
    acc_zero();
    // Scores of keys that are masked out never enter m or l: the running max starts finite, so no inf - inf.
    var m = LOWEST;
    var l = 0.0;
    var kend = p.S;
    if (CAUSAL) { kend = min(p.S, (wid.x + 1u) * BR); }
    let kbase = p.k_off + b * p.k_sb + h * p.k_sh;
    let vbase = p.v_off + b * p.v_sb + h * p.v_sh + slice;
    let c0 = first_counter(bh, ic);
    let dkey = drop_key();
    for (var j0 = 0u; j0 < kend; j0 += BC) {
        let n = min(BC, kend - j0);
        if (TILED) {
            for (var e = t; e < BC * E4; e += NT) {
                let r = e / E4;
                if (r < n) { kvt[e] = vec4<f32>(kb[kbase + (j0 + r) * p.k_sl + e % E4]); }
            }
            for (var e = t; e < BC * VS4; e += NT) {
                let r = e / VS4;
                if (r < n) { kvt[BC * E4 + e] = vec4<f32>(vb[vbase + (j0 + r) * p.v_sl + e % VS4]); }
            }
            workgroupBarrier();
        }
        // Two keys a step (see the top): tile rows ta and tb, keys ja and jb.
        for (var ta = part; ta < n; ta += 2u * KSPLIT) {
            let tb = min(ta + KSPLIT, n - 1u);
            let ja = j0 + ta;
            let jb = j0 + tb;
            let oka = row && !(CAUSAL && ja > i) && attends(b, h, ic, ja);
            let okb = row && ta + KSPLIT < n && !(CAUSAL && jb > i) && attends(b, h, ic, jb);
            if (!oka && !okb) { continue; }
            let sa = q_dot_k(select(kbase + ja * p.k_sl, ta * E4, TILED)) + mask_add(b, h, ic, ja);
            let sb = q_dot_k(select(kbase + jb * p.k_sl, tb * E4, TILED)) + mask_add(b, h, ic, jb);
            let top = max(select(LOWEST, sa, oka), select(LOWEST, sb, okb));
            if (top > m) {
                let f = exp(m - top);
                l *= f;
                acc_rescale(f);
                m = top;
            }
            if (oka) {
                let e = exp(sa - m);
                l += e;
                var w = e;
                if (dropping()) { w = select(0.0, e * p.drop_scale, kept(c0 + ja, dkey)); }
                acc_add(w, select(vbase + ja * p.v_sl, ta * VS4, TILED));
            }
            if (okb) {
                let e = exp(sb - m);
                l += e;
                var w = e;
                if (dropping()) { w = select(0.0, e * p.drop_scale, kept(c0 + jb, dkey)); }
                acc_add(w, select(vbase + jb * p.v_sl, tb * VS4, TILED));
            }
        }
        if (TILED) { workgroupBarrier(); }
    }
    if (KSPLIT > 1u) {
        // Every part's (m, l), then the row's max and sum; each part's output rescaled to that max, summed.
        kvt[t] = vec4<f32>(m, l, 0.0, 0.0);
        workgroupBarrier();
        var mr = LOWEST;
        for (var s = 0u; s < KSPLIT; s++) { mr = max(mr, kvt[s * BR + t % BR].x); }
        var lr = 0.0;
        for (var s = 0u; s < KSPLIT; s++) {
            let ml = kvt[s * BR + t % BR];
            lr += ml.y * exp(ml.x - mr);
        }
        acc_rescale(exp(m - mr));
        m = mr;
        l = lr;
        workgroupBarrier();
        acc_merge(t % BR, part);
    }
    if (row && part == 0u) {
        let at = p.o_off + b * p.o_sb + h * p.o_sh + i * p.o_sl + slice;
        if (l > 0.0) { store_acc(at, 1.0 / l); } else { store_acc(at, nan_f32()); }
        if (LSE && wid.z == 0u) {
            stat_w[p.lse_off + bh * p.L + i] = select(-inf_f32(), m + log(l), l > 0.0);
        }
    }
}

@compute @workgroup_size(NT)
fn attention_dq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let bh = wid.y;
    let b = bh / p.H;
    let h = bh % p.H;
    let part = t / BR;
    let i = wid.x * BR + t % BR;
    let row = i < p.L;
    let ic = min(i, p.L - 1u);
    load_q(p.q_off + b * p.q_sb + h * p.q_sh + ic * p.q_sl);
    load_do(p.g_off + b * p.g_sb + h * p.g_sh + ic * p.g_sl);
    // D = rowsum(grad * out): the softmax backward's sum
    let dsum = do_dot_o(p.o2_off + b * p.o2_sb + h * p.o2_sh + ic * p.o2_sl);
    if (row && part == 0u) { stat_w[p.d_off + bh * p.L + i] = dsum; }
    let lse = lse_r[p.lse_off + bh * p.L + ic];
    dq_zero();
    var kend = p.S;
    if (CAUSAL) { kend = min(p.S, (wid.x + 1u) * BR); }
    let kbase = p.k_off + b * p.k_sb + h * p.k_sh;
    let vbase = p.v_off + b * p.v_sb + h * p.v_sh;
    let c0 = first_counter(bh, ic);
    let dkey = drop_key();
    for (var j0 = 0u; j0 < kend; j0 += BC) {
        let n = min(BC, kend - j0);
        if (TILED) {
            for (var e = t; e < BC * E4; e += NT) {
                let r = e / E4;
                if (r < n) { kvt[e] = vec4<f32>(kb[kbase + (j0 + r) * p.k_sl + e % E4]); }
            }
            for (var e = t; e < BC * V4; e += NT) {
                let r = e / V4;
                if (r < n) { kvt[BC * E4 + e] = vec4<f32>(vb[vbase + (j0 + r) * p.v_sl + e % V4]); }
            }
            workgroupBarrier();
        }
        for (var jj = part; jj < n; jj += KSPLIT) {
            let j = j0 + jj;
            if (!row || (CAUSAL && j > i) || !attends(b, h, ic, j)) { continue; }
            let kr = select(kbase + j * p.k_sl, jj * E4, TILED);
            let pr = exp(q_dot_k(kr) + mask_add(b, h, ic, j) - lse);
            var dp = do_dot_v(select(vbase + j * p.v_sl, jj * V4, TILED));
            if (dropping()) { dp = select(0.0, dp * p.drop_scale, kept(c0 + j, dkey)); }
            dq_add(pr * (dp - dsum), kr);
        }
        if (TILED) { workgroupBarrier(); }
    }
    if (KSPLIT > 1u) { dq_merge(t % BR, part); }
    if (row && part == 0u) { store_dq(p.o_off + b * p.o_sb + h * p.o_sh + i * p.o_sl, p.scale); }
}

@compute @workgroup_size(NT)
fn attention_dkv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let bh = wid.y;
    let b = bh / p.H;
    let h = bh % p.H;
    let part = t / BR;
    let j = wid.x * BR + t % BR;
    let col = j < p.S;
    let jc = min(j, p.S - 1u);
    load_k(p.k_off + b * p.k_sb + h * p.k_sh + jc * p.k_sl);
    load_v(p.v_off + b * p.v_sb + h * p.v_sh + jc * p.v_sl);
    dk_zero();
    dv_zero();
    var i0 = 0u;
    if (CAUSAL) { i0 = wid.x * BR; }  // queries i >= j only: none before this block's first key
    let qbase = p.q_off + b * p.q_sb + h * p.q_sh;
    let gbase = p.g_off + b * p.g_sb + h * p.g_sh;
    let dkey = drop_key();
    for (var q0 = i0; q0 < p.L; q0 += QT) {
        let n = min(QT, p.L - q0);
        if (TILED) {
            for (var e = t; e < QT * E4; e += NT) {
                let r = e / E4;
                if (r < n) { qgt[e] = vec4<f32>(qb[qbase + (q0 + r) * p.q_sl + e % E4]) * p.scale; }
            }
            for (var e = t; e < QT * V4; e += NT) {
                let r = e / V4;
                if (r < n) { qgt[QT * E4 + e] = vec4<f32>(gb[gbase + (q0 + r) * p.g_sl + e % V4]); }
            }
            for (var r = t; r < n; r += NT) {
                lt[r] = lse_r[p.lse_off + bh * p.L + q0 + r];
                dt[r] = d_r[p.d_off + bh * p.L + q0 + r];
            }
            workgroupBarrier();
        }
        for (var ii = part; ii < n; ii += KSPLIT) {
            let i = q0 + ii;
            if (!col || (CAUSAL && jc > i) || !attends(b, h, i, jc)) { continue; }
            let qr = select(qbase + i * p.q_sl, ii * E4, TILED);
            let gr = select(gbase + i * p.g_sl, ii * V4, TILED);
            var lse = 0.0;
            var dsum = 0.0;
            if (TILED) {
                lse = lt[ii];
                dsum = dt[ii];
            } else {
                lse = lse_r[p.lse_off + bh * p.L + i];
                dsum = d_r[p.d_off + bh * p.L + i];
            }
            let pr = exp(k_dot_q(qr) + mask_add(b, h, i, jc) - lse);
            var keep = true;
            if (dropping()) { keep = kept(first_counter(bh, i) + jc, dkey); }
            if (WANT_DV) { dv_add(select(0.0, select(pr, pr * p.drop_scale, dropping()), keep), gr); }
            if (WANT_DK) {
                var dp = select(0.0, v_dot_g(gr), keep);
                if (dropping()) { dp *= p.drop_scale; }
                dk_add(pr * (dp - dsum), qr);
            }
        }
        if (TILED) { workgroupBarrier(); }
    }
    if (KSPLIT > 1u) {
        if (WANT_DK) { dk_merge(t % BR, part); }
        if (WANT_DV) { dv_merge(t % BR, part); }
    }
    if (col && part == 0u) {
        if (WANT_DK) { store_dk(p.o_off + b * p.o_sb + h * p.o_sh + j * p.o_sl); }
        if (WANT_DV) { store_dv(p.o2_off + b * p.o2_sb + h * p.o2_sh + j * p.o2_sl); }
    }
}
