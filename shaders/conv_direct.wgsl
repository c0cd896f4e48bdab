// Direct convolutions for narrow products on GPUs: the MNIST-sized layers where conv_gemm.wgsl's tiles are
// mostly empty or mostly index arithmetic (at most 32 output rows, or a weight gradient of at most 256
// 4x4 blocks). Both kernels read the same gathered matrix G as conv_gemm.wgsl (see its header):
//     G[(c, i, j), (n, y, x)] = img[n, c, y*SY + i*DY + PY, x*SX + j*DX + PX], 0 outside the planes
// and A(m, k) = a[a_off + (k / A_BLK) * a_bs + m * lda + k % A_BLK] (A_BLK = 0: one row-major matrix).
//
// conv_direct: out [M, N*P] = A [M, K] @ G, written into an NCHW tensor (column (n, y, x) of row m goes to
//   out[o_off + (n*M + m)*o_plane + y*o_row + x*OSX]), bias per row and ReLU in the store. Used for conv2d
//   (A = W, G gathers x) and for the stride-1 input gradient (A = Wᵀ read in blocks of kh*kw, G gathers dY
//   with D = -dilation, P = pad), when M (output channels, or input channels) is at most 32.
//   Design: a thread per position (two with PPT = 2: q and q + 256), all M rows in its registers (MV
//   vec4 accumulators). The workgroup stages A in workgroup memory CCH input channels at a time,
//   [k][MV] vec4s: each gathered value is loaded once (neighbouring threads, neighbouring x: coalesced)
//   and feeds M products whose weights come from broadcast vec4 loads. conv_gemm's tiles would gather
//   each value per tile into workgroup memory and reuse it only M times through a 4x4 or 8x8 register block
//   whose rows past M are zeros (the MNIST CNN: M = 16 or 32, K = 9 to 288).
//
// conv_direct_wgrad: partial[z] [M, K] = sum over the positions q of chunk z of dY[n, m, p] * G[k, q]
//   (A = dY, NCHW, read directly: a[a_off + (n*M + m)*QP + p]). The weight gradient of a convolution
//   whose [M, K] output is small (the first layer of a CNN: 16 x 9, 64 x 27): the backend's row sum
//   (reduce.wgsl, in a fixed order) adds the chunks' partials into dW. A workgroup walks its chunk QT
//   positions at a time: the gathered tile and the dY tile (vec4s along k and m) in workgroup memory, each
//   thread a 4 x 4 block of dW (a unit), LANES threads per unit summing every LANES-th position of the
//   tile, their sums added through workgroup memory at the end.
//
// Every global read is bounds-checked. The host side is package/webgrad/_backends/webgpu/conv_direct.py.

struct Params {
    M: u32, K: u32, positions: u32, a_off: u32,   // positions: N * QP
    lda: u32, a_bs: u32, g_off: u32, ch: u32,     // img planes: [images][ch][ih][iw]
    ih: u32, iw: u32, o_off: u32, bias_off: u32,
    o_plane: u32, o_row: u32, chunk: u32, sy: u32,  // chunk: conv_direct_wgrad's positions per workgroup
    sx: u32, dy: i32, dx: i32, py: i32,
    px: i32, chunks: u32, _pad0: u32, _pad1: u32,  // chunks: conv_direct_wgrad's workgroups
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> img: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<uniform> P: Params;

override KH: u32 = 1u;
override KW: u32 = 1u;
override QW: u32 = 1u;           // positions per grid row
override QP: u32 = 1u;           // positions per image
override A_BLK: u32 = 0u;
const THREADS: u32 = 256u;

fn a_at(m: u32, k: u32) -> f32 {
    if (m >= P.M || k >= P.K) { return 0.0; }
    if (A_BLK == 0u) { return a[P.a_off + m * P.lda + k]; }
    let blk = max(A_BLK, 1u);  // a division by an override constant of 0 is rejected (Tint), even unreached
    return a[P.a_off + (k / blk) * P.a_bs + m * P.lda + k % blk];
}

// G[k, q]: 0 outside the planes (and past K or the positions)
fn gather(k: u32, q: u32) -> f32 {
    if (k >= P.K || q >= P.positions) { return 0.0; }
    let taps = KH * KW;
    let c = k / taps;
    let t = k - c * taps;
    let i = t / KW;
    let n = q / QP;
    let r = q - n * QP;
    let y = r / QW;
    let iy = i32(y * P.sy) + P.py + i32(i) * P.dy;
    let ix = i32((r - y * QW) * P.sx) + P.px + i32(t - i * KW) * P.dx;
    if (iy < 0 || iy >= i32(P.ih) || ix < 0 || ix >= i32(P.iw)) { return 0.0; }
    return img[P.g_off + ((n * P.ch + c) * P.ih + u32(iy)) * P.iw + u32(ix)];
}

// ------------------------------------------------------------------------------------ conv_direct
override MV: u32 = 1u;           // vec4 accumulators per position: ceil(M / 4), 1..8
override CCH: u32 = 1u;          // gathered channels per staged piece of A (CCH*KH*KW*MV <= A_TILE)
override PPT: u32 = 1u;          // positions per thread, 1 or 2
override OSX: u32 = 1u;
override HAS_BIAS: bool = false;
override RELU: bool = false;
const A_TILE: u32 = 1024u;       // vec4s: 16 KiB
var<workgroup> a_sh: array<vec4<f32>, A_TILE>;

// accumulators: a0v for the thread's position q (rows 4v .. 4v+3), a1v for q + THREADS (PPT = 2): named
// variables, as conv_gemm.wgsl's (arrays indexed by loop counters end up in local memory)
var<private> a00: vec4<f32>; var<private> a01: vec4<f32>; var<private> a02: vec4<f32>; var<private> a03: vec4<f32>;
var<private> a04: vec4<f32>; var<private> a05: vec4<f32>; var<private> a06: vec4<f32>; var<private> a07: vec4<f32>;
var<private> a10: vec4<f32>; var<private> a11: vec4<f32>; var<private> a12: vec4<f32>; var<private> a13: vec4<f32>;
var<private> a14: vec4<f32>; var<private> a15: vec4<f32>; var<private> a16: vec4<f32>; var<private> a17: vec4<f32>;

fn fma0(base: u32, v: f32) {
    a00 += a_sh[base] * v;
    if (MV > 1u) { a01 += a_sh[base + 1u] * v; }
    if (MV > 2u) { a02 += a_sh[base + 2u] * v; }
    if (MV > 3u) { a03 += a_sh[base + 3u] * v; }
    if (MV > 4u) { a04 += a_sh[base + 4u] * v; }
    if (MV > 5u) { a05 += a_sh[base + 5u] * v; }
    if (MV > 6u) { a06 += a_sh[base + 6u] * v; }
    if (MV > 7u) { a07 += a_sh[base + 7u] * v; }
}

fn fma01(base: u32, v: f32, w: f32) {  // PPT = 2: each staged weight vec4 feeds both positions
    var s = a_sh[base]; a00 += s * v; a10 += s * w;
    if (MV > 1u) { s = a_sh[base + 1u]; a01 += s * v; a11 += s * w; }
    if (MV > 2u) { s = a_sh[base + 2u]; a02 += s * v; a12 += s * w; }
    if (MV > 3u) { s = a_sh[base + 3u]; a03 += s * v; a13 += s * w; }
    if (MV > 4u) { s = a_sh[base + 4u]; a04 += s * v; a14 += s * w; }
    if (MV > 5u) { s = a_sh[base + 5u]; a05 += s * v; a15 += s * w; }
    if (MV > 6u) { s = a_sh[base + 6u]; a06 += s * v; a16 += s * w; }
    if (MV > 7u) { s = a_sh[base + 7u]; a07 += s * v; a17 += s * w; }
}

// One position's window origin and the start of its image: (iy0, ix0, n*ch) or n past the images
struct Pos { iy0: i32, ix0: i32, img0: u32, live: bool, out0: u32 }

fn position(q: u32) -> Pos {
    let n = q / QP;
    let r = q - n * QP;
    let y = r / QW;
    let x = r - y * QW;
    return Pos(i32(y * P.sy) + P.py, i32(x * P.sx) + P.px, n * P.ch, q < P.positions,
               P.o_off + n * P.M * P.o_plane + y * P.o_row + x * OSX);
}

fn tap(p: Pos, c: u32, iy: i32, ix: i32) -> f32 {
    if (!p.live || iy < 0 || iy >= i32(P.ih) || ix < 0 || ix >= i32(P.iw)) { return 0.0; }
    return img[P.g_off + ((p.img0 + c) * P.ih + u32(iy)) * P.iw + u32(ix)];
}

fn finish(x: f32, m: u32) -> f32 {
    var v = x;
    if (HAS_BIAS) { v += bias[P.bias_off + m]; }
    if (RELU) { v = max(v, 0.0); }
    return v;
}

fn store(p: Pos, v: vec4<f32>, m0: u32) {
    if (!p.live) { return; }
    for (var t = 0u; t < 4u; t++) {
        let m = m0 + t;
        if (m < P.M) { out[p.out0 + m * P.o_plane] = finish(v[t], m); }
    }
}

fn store8(p: Pos, v0: vec4<f32>, v1: vec4<f32>, v2: vec4<f32>, v3: vec4<f32>, v4: vec4<f32>, v5: vec4<f32>,
          v6: vec4<f32>, v7: vec4<f32>) {
    store(p, v0, 0u);
    if (MV > 1u) { store(p, v1, 4u); }
    if (MV > 2u) { store(p, v2, 8u); }
    if (MV > 3u) { store(p, v3, 12u); }
    if (MV > 4u) { store(p, v4, 16u); }
    if (MV > 5u) { store(p, v5, 20u); }
    if (MV > 6u) { store(p, v6, 24u); }
    if (MV > 7u) { store(p, v7, 28u); }
}

@compute @workgroup_size(THREADS)
fn conv_direct(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nw: vec3<u32>) {
    let q = (wid.x + wid.y * nw.x) * THREADS * PPT + li;
    let p0 = position(q);
    let p1 = position(q + THREADS);
    let taps = KH * KW;
    for (var c0 = 0u; c0 < P.ch; c0 += CCH) {
        let cn = min(CCH, P.ch - c0);
        workgroupBarrier();  // the previous piece is consumed
        for (var e = li; e < cn * taps * MV; e += THREADS) {
            let k = e / MV;
            let m = 4u * (e - k * MV);
            let kg = c0 * taps + k;
            a_sh[e] = vec4<f32>(a_at(m, kg), a_at(m + 1u, kg), a_at(m + 2u, kg), a_at(m + 3u, kg));
        }
        workgroupBarrier();
        for (var c = 0u; c < cn; c++) {
            for (var i = 0u; i < KH; i++) {
                let dyi = i32(i) * P.dy;
                for (var j = 0u; j < KW; j++) {
                    let dxj = i32(j) * P.dx;
                    let base = ((c * KH + i) * KW + j) * MV;
                    let v = tap(p0, c0 + c, p0.iy0 + dyi, p0.ix0 + dxj);
                    if (PPT == 2u) {
                        fma01(base, v, tap(p1, c0 + c, p1.iy0 + dyi, p1.ix0 + dxj));
                    } else {
                        fma0(base, v);
                    }
                }
            }
        }
    }
    store8(p0, a00, a01, a02, a03, a04, a05, a06, a07);
    if (PPT == 2u) { store8(p1, a10, a11, a12, a13, a14, a15, a16, a17); }
}

// ------------------------------------------------------------------------------ conv_direct_wgrad
override QT: u32 = 16u;          // positions per staged tile
override K4: u32 = 1u;           // ceil(K / 4)
override M4: u32 = 1u;           // ceil(M / 4)
override UNITS: u32 = 1u;        // 4x4 blocks of dW: M4 * K4 (at most THREADS): thread li's is li % UNITS
override LANES: u32 = 1u;        // THREADS / UNITS: threads per unit
// The tiles run along the positions, a row of QT + 1 vec4s per 4 k (or 4 m): staged a whole vec4 per
// thread, neighbouring threads at neighbouring positions (conflict-free), and read by neighbouring units
// (different kb) one vec4 apart in banks (the padding) rather than on one bank.
override QS: u32 = QT + 1u;
var<workgroup> xs: array<vec4<f32>, QS * K4>;   // xs[kb*QS + qq] = G[4kb .. 4kb+3, q0 + qq]
var<workgroup> ds: array<vec4<f32>, QS * M4>;   // ds[mb*QS + qq] = dY[n, 4mb .. 4mb+3, p] of q0 + qq
var<workgroup> lanes: array<vec4<f32>, THREADS>;

// the thread's unit: rows 4mb + r (r = 0..3) of its 4x4 block, each a vec4 along k (named: see a00)
var<private> u0: vec4<f32>; var<private> u1: vec4<f32>; var<private> u2: vec4<f32>; var<private> u3: vec4<f32>;

fn dy_at(m: u32, q: u32, end: u32) -> f32 {
    if (m >= P.M || q >= end) { return 0.0; }
    let n = q / QP;
    return a[P.a_off + (n * P.M + m) * QP + (q - n * QP)];
}

// lane 0's sum over the lanes of one row of a unit (every thread calls it: it holds barriers)
fn lanes_sum(li: u32, v: vec4<f32>) -> vec4<f32> {
    workgroupBarrier();
    lanes[li] = v;
    workgroupBarrier();
    var s = v;
    if (li < UNITS) {
        for (var l = 1u; l < LANES; l++) { s += lanes[l * UNITS + li]; }
    }
    return s;
}

// partial[(m*K + k) * chunks + z]: each output's chunks side by side, rows that the row sum reads coalesced
// (a workgroup writes only its M*K sums, scattered)
fn write_row(z: u32, u: u32, r: u32, v: vec4<f32>) {
    let mb = u / K4;
    let m = 4u * mb + r;
    let k = 4u * (u - mb * K4);
    if (m >= P.M) { return; }
    let first = (m * P.K + k) * P.chunks + z;
    for (var t = 0u; t < 4u; t++) {
        if (k + t < P.K) { out[first + t * P.chunks] = v[t]; }
    }
}

@compute @workgroup_size(THREADS)
fn conv_direct_wgrad(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
                     @builtin(num_workgroups) nw: vec3<u32>) {
    let z = wid.x + wid.y * nw.x;
    if (z >= P.chunks) { return; }  // past the last chunk of a 2-D grid (the whole workgroup: uniform)
    let start = z * P.chunk;
    let end = min(start + P.chunk, P.positions);
    let lane = li / UNITS;
    let u = li - lane * UNITS;
    let busy = lane < LANES;  // threads past LANES * UNITS only stage tiles
    let xa = u % K4;
    let da = u / K4;
    for (var q0 = start; q0 < end; q0 += QT) {
        workgroupBarrier();  // the previous tile is consumed
        for (var e = li; e < QT * K4; e += THREADS) {
            let qq = e % QT;
            let k = 4u * (e / QT);
            let q = select(P.positions, q0 + qq, q0 + qq < end);  // past the chunk: zeros
            xs[(e / QT) * QS + qq] = vec4<f32>(gather(k, q), gather(k + 1u, q), gather(k + 2u, q), gather(k + 3u, q));
        }
        for (var e = li; e < QT * M4; e += THREADS) {
            let qq = e % QT;
            let m = 4u * (e / QT);
            let q = q0 + qq;
            ds[(e / QT) * QS + qq] = vec4<f32>(dy_at(m, q, end), dy_at(m + 1u, q, end), dy_at(m + 2u, q, end),
                                               dy_at(m + 3u, q, end));
        }
        workgroupBarrier();
        if (busy) {
            for (var qq = lane; qq < QT; qq += LANES) {
                let xv = xs[xa * QS + qq];
                let dv = ds[da * QS + qq];
                u0 += dv.x * xv; u1 += dv.y * xv; u2 += dv.z * xv; u3 += dv.w * xv;
            }
        }
    }
    if (LANES == 1u) {
        if (busy) {
            write_row(z, u, 0u, u0); write_row(z, u, 1u, u1); write_row(z, u, 2u, u2); write_row(z, u, 3u, u3);
        }
        return;
    }
    // several lanes per unit: lane 0 adds the others', row by row
    let keep = li < UNITS;
    var s = lanes_sum(li, select(vec4<f32>(0.0), u0, busy));
    if (keep) { write_row(z, u, 0u, s); }
    s = lanes_sum(li, select(vec4<f32>(0.0), u1, busy));
    if (keep) { write_row(z, u, 1u, s); }
    s = lanes_sum(li, select(vec4<f32>(0.0), u2, busy));
    if (keep) { write_row(z, u, 2u, s); }
    s = lanes_sum(li, select(vec4<f32>(0.0), u3, busy));
    if (keep) { write_row(z, u, 3u, s); }
}
