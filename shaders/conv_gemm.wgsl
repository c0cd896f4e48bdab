// Implicit-GEMM convolution for GPUs: conv2d, its input gradient and its weight gradient as one
// register-tiled matrix product each, with the batch folded into the product (every image's positions
// side by side in one long dimension), the unfolded image gathered on the fly (never stored).
//
// The gathered matrix G has a row per (channel c, window row i, window column j) and a column per
// position q = (image n, y, x) of a QH x QW grid:
//     G[(c, i, j), (n, y, x)] = img[n, c, y*SY + i*DY + PY, x*SX + j*DX + PX]
// and 0 where a coordinate falls outside the CH x IH x IW planes of img.
//   conv2d:          out [O, N*OH*OW] = W [O, C*kh*kw] @ G(x)      S = stride, D = dilation, P = -pad
//   input gradient:  dX  [C, N*H*W]   = Wᵀ [C, O*kh*kw] @ G(dY)    S = 1, D = -dilation, P = pad
//                    (stride 1: dX[h] gathers dY[h + pad - i*dilation]; strided: see the phases below)
//   weight gradient: dW [O, C*kh*kw]  = dY [O, N*OH*OW] @ G(x)ᵀ     (WGRAD: K runs over the positions)
// The first two write their [M, N*P] result into an NCHW tensor (column q = (n, y, x) of row m goes to
// out[n, m, y, x]); the weight gradient writes a plain row-major [M, N].
// A strided input gradient is s*s products, one per output phase (h % s, w % s): each phase receives
// only the window taps that land on whole dY positions (for 3x3 stride 2: 4, 2, 2 and 1 of the 9), so
// no work is spent on the zeros a single gather would multiply (3/4 of it). A phase writes every s-th
// column of every s-th row (o_row = s*W, OSX = s); conv_gemm.py copies its taps of W into a matrix.
//
// PHASED: the s*s phases of a stride-2 input gradient in one dispatch (conv_gemm.py's backward_input), where
// s*s dispatches wrote every s-th element of the output with scalar stores (3.6 floats a sector: a 1-tap
// phase of a [128, 64, 32, 32] input gradient spent half its time storing). Workgroup z takes slice z of
// the phase table Params.ph: the slices of phase p are its K split, z0 .. z0 + slices - 1. A phase's K
// runs over (tap u, tap v, dY channel o), o innermost, so that A is read as vec4s from the weight
// transposed once to [C, kh, kw, O] (PH_O = O): A(c, (u, v, o)) = a[a_off + c*lda + tap(u, v)*O + o],
// tap(u, v) = t0 + u*t_row + v*t_col. The gather reads dY[n, o, y + py + u*dy, x + px + v*dx]. Every
// slice writes its raw tile into the scratch [slices][M][N] (vec4 stores where N % 4 == 0); conv_unphase
// then writes each element of the output once, in order (coalesced), from the slices of its phase (0
// where the phase has no taps). PHASED's loads and its loop are functions of their own (the *_ph ones,
// entry points conv_phased4/1): with them as branches on PHASED inside the shared functions, every other
// product of this shader ran 20-25% slower on an H200 (naga, Vulkan), the branches folded or not.
//
// A(m, k) = a[a_off + (k / A_BLK) * a_bs + m * lda + k % A_BLK]: K comes in blocks of A_BLK contiguous
// elements (A_BLK = 0: one row-major matrix). conv2d: one matrix; input gradient: the weight itself read as Wᵀ
// (blocks of kh*kw, C*kh*kw apart: no transposed copy); weight gradient: dY (blocks of one image plane,
// O*P apart).
//
// Design: a workgroup of WG_X x WG_Y threads computes a BM x BN tile (BM = WG_Y*TM, BN = WG_X*TN), each
// thread a TM x TN block in registers (TM, TN in {4, 8}); K advances BK at a time through double-buffered
// workgroup tiles, both k-major ([BK][BM/4] and [BK][BN/4] vec4s), with the next step's pieces fetched into
// registers before the current step's multiply (one barrier per step). A thread's rows are TM/4 groups
// of 4, WG_Y*4 apart (its columns likewise): neighbouring threads read neighbouring vec4s of workgroup
// memory. Pieces of A run along k (vec4 loads when A_VEC: A_BLK, lda, a_bs and a_off multiples of 4);
// pieces of B along the positions q, 4 at a time: when QW % 4 == 0 the four share one image row, so
// their window tap and row are decoded once. Every global read is bounds-checked.
// SPLIT: workgroup z takes K steps [z*split_steps, (z+1)*split_steps) and writes its raw partial tile
// into a scratch [splits][M][N]; conv_reduce sums the splits in a fixed order (deterministic) and
// applies the epilogue. Epilogue: bias per row m (conv2d's output channel) and ReLU, then
// bounds-checked stores (vec4 when OUT_VEC: four columns in one image plane, 16-byte aligned).
//
// The register code is written out (named accumulators, branches on override constants that fold
// away): arrays indexed by loop counters end up in slow local memory (see matmul.wgsl's notes).
// The host side is package/webgrad/_backends/webgpu/conv_gemm.py.
//
// Element types: conv_gemm.py splices ELEMENT_TYPES below (typed.py element_types): the aliases AT (A,
// binding 0), GT (the gathered image, binding 1) and OT (the output and the bias, bindings 2 and 3), and
// to_OT/to_OT4, the f32 -> OT rounding of the store. float32 everywhere, or float16 operands (the module
// then starts with `enable f16;`): halves are read into f32 registers and workgroup tiles, products and
// sums run in f32 and the result is rounded once at the store (autocast's numerics, as cuDNN's half
// convolutions). A split product keeps its partial tiles in f32: its main kernel has OT = f32, its
// reduction AT = f32.
//! splice ELEMENT_TYPES

struct Phase {
    slices: vec4<u32>,  // first slice (workgroup z), slices, K steps, K steps per slice
    a: vec4<u32>,       // K, t0, t_row, t_col (A's tap offsets, in units of O)
    taps: vec4<u32>,    // log2 of the taps along x (1 or 2 taps), 0, 0, 0
    gather: vec4<i32>,  // dy, dx, py, px
}

struct Params {
    M: u32, N: u32, K: u32, steps: u32,       // steps = ceil(K / BK)
    a_off: u32, g_off: u32, o_off: u32, bias_off: u32,
    lda: u32, a_bs: u32, ch: u32, ih: u32,    // img planes: [images][ch][ih][iw]
    iw: u32, qh: u32, splits: u32, split_steps: u32,
    o_plane: u32, o_row: u32,                 // NCHW output: plane size, row stride (x stride: OSX)
    sy: u32, sx: u32, dy: i32, dx: i32, py: i32, px: i32,  // the gather's S, D and P
    ph: array<Phase, 4>,                      // PHASED (and conv_unphase): the phases; zeros elsewhere
}

@group(0) @binding(0) var<storage, read> a1: array<AT>;
@group(0) @binding(0) var<storage, read> a4: array<vec4<AT>>;
@group(0) @binding(1) var<storage, read> img: array<GT>;
@group(0) @binding(2) var<storage, read_write> out1: array<OT>;
@group(0) @binding(2) var<storage, read_write> out4: array<vec4<OT>>;
@group(0) @binding(3) var<storage, read> bias: array<OT>;
@group(0) @binding(4) var<uniform> P: Params;

override WGRAD: bool = false;    // B = Gᵀ and a row-major output; else B = G and an NCHW output
override SPLIT: bool = false;    // out is the scratch buffer of partial tiles
override HAS_BIAS: bool = false;
override RELU: bool = false;
override A_BLK: u32 = 0u;        // 0: A is one row-major matrix (one block)
override KH: u32 = 1u;
override KW: u32 = 1u;
override QW: u32 = 1u;           // positions per grid row
override QP: u32 = 1u;           // positions per image (QH * QW)
override OSX: u32 = 1u;          // NCHW output: column stride (an input gradient's stride-s phase)
override WG_X: u32 = 16u;
override WG_Y: u32 = 16u;
override TM: u32 = 8u;
override TN: u32 = 8u;
override BK: u32 = 8u;
// WARP_TILED and SWIZZLE: matmul.wgsl's, for the big "w" tiles (see its notes). WARP_TILED maps threads to
// (tx, ty) in 8 x 4 blocks of 32 (fewer shared-memory wavefronts per fragment read); SWIZZLE XORs the vec4
// column of row k of both workgroup tiles with swz(k), so that the scalar stores of a piece running along k
// (A always; B with WGRAD) do not collide in banks. conv_gemm.py checks WG_X, WG_Y, BM4, BN4 % 8 == 0.
override WARP_TILED: bool = false;
override SWIZZLE: bool = false;
// Workgroup buffers: 2 (double-buffered, one barrier per K step) or 1 (matmul.wgsl's NBUF: a deeper BK
// in the same memory, two barriers per step, as the multiply must finish before the next stash).
override NBUF: u32 = 2u;
override PH_O: u32 = 1u;         // PHASED: dY's channels (the weight's O)

override NT: u32 = WG_X * WG_Y;
override BM4: u32 = WG_Y * TM / 4u;
override BN4: u32 = WG_X * TN / 4u;
override BK4: u32 = BK / 4u;
override TM4: u32 = TM / 4u;
override TN4: u32 = TN / 4u;
override LA: u32 = BK * BM4 / NT;  // pieces (4 elements) of the A tile per thread, 1..4
override LB: u32 = BK * BN4 / NT;

// The workgroup tiles As[buffer][k][m / 4] and Bs[buffer][k][n / 4]. Their sizes are constants the host splices
// in for each configuration (conv_gemm.py's tile_declarations: TILE_STAGES = NBUF, TILE_BK = BK, TILE_BM4 =
// BM4, TILE_BN4 = BN4), not the overrides, so that the multiply indexes them with a constant k: WebGPU's
// robustness clamps every dynamic index into a workgroup array (naga and Tint alike), and a flat array indexed
// by base + k * BM4 took a clamp and an add per fragment read, which the driver cannot fold into the load; here
// k's clamp folds away once compute's calls are inlined and the column's (the same every K step) is hoisted.
// H200, ResNet-18 at batch 128 (bench replay --each): its implicit-GEMM convolutions (all BK = 16,
// NBUF = 1) ran 5-10% faster (conv_gemm_v4 197 -> 183 us for the 256-position weight gradient, conv_phased4
// 260 -> 248). matmul.wgsl's alike change ran its BK = 8, NBUF = 2 tiles slower (4096^3 as 128x128w 37.4 ->
// 22.7 TFLOP/s) and was left out there.
//! splice TILES
var<workgroup> As: array<array<array<vec4<f32>, TILE_BM4>, TILE_BK>, TILE_STAGES>;
var<workgroup> Bs: array<array<array<vec4<f32>, TILE_BN4>, TILE_BK>, TILE_STAGES>;

// c<r><h>: row r (0..7) of the thread's block, columns 4h..4h+3 (h = 0, 1)
var<private> c00: vec4<f32>; var<private> c01: vec4<f32>;
var<private> c10: vec4<f32>; var<private> c11: vec4<f32>;
var<private> c20: vec4<f32>; var<private> c21: vec4<f32>;
var<private> c30: vec4<f32>; var<private> c31: vec4<f32>;
var<private> c40: vec4<f32>; var<private> c41: vec4<f32>;
var<private> c50: vec4<f32>; var<private> c51: vec4<f32>;
var<private> c60: vec4<f32>; var<private> c61: vec4<f32>;
var<private> c70: vec4<f32>; var<private> c71: vec4<f32>;
var<private> pa0: vec4<f32>; var<private> pa1: vec4<f32>; var<private> pa2: vec4<f32>; var<private> pa3: vec4<f32>;
var<private> pb0: vec4<f32>; var<private> pb1: vec4<f32>; var<private> pb2: vec4<f32>; var<private> pb3: vec4<f32>;
var<private> tid: u32;
var<private> tx: u32;
var<private> ty: u32;
var<private> row0: u32;
var<private> col0: u32;
var<private> split: u32;

// ---- A: pieces of 4 consecutive k of one row m
fn a_index(m: u32, k: u32) -> u32 {
    if (A_BLK == 0u) { return P.a_off + m * P.lda + k; }
    // max(): a division by an override constant of 0 is rejected at pipeline creation (Tint), even
    // in a branch that never runs
    let blk = max(A_BLK, 1u);
    return P.a_off + (k / blk) * P.a_bs + m * P.lda + k % blk;
}

fn a_mk(l: u32, kt: u32) -> vec2<u32> {
    let idx = tid + l * NT;
    return vec2<u32>(row0 + idx / BK4, kt * BK + (idx % BK4) * 4u);
}

fn a_vec(l: u32, kt: u32) -> vec4<f32> {  // A_VEC: the 4 share a block and are 16-byte aligned
    let mk = a_mk(l, kt);
    if (mk.x < P.M && mk.y < P.K) { return vec4<f32>(a4[a_index(mk.x, mk.y) / 4u]); }
    return vec4<f32>(0.0);
}

fn a_at(m: u32, k: u32) -> f32 {
    if (m < P.M && k < P.K) { return f32(a1[a_index(m, k)]); }
    return 0.0;
}

fn a_scalar(l: u32, kt: u32) -> vec4<f32> {
    let mk = a_mk(l, kt);
    return vec4<f32>(a_at(mk.x, mk.y), a_at(mk.x, mk.y + 1u), a_at(mk.x, mk.y + 2u), a_at(mk.x, mk.y + 3u));
}

fn fetch_a_vec(kt: u32) {
    pa0 = a_vec(0u, kt);
    if (LA > 1u) { pa1 = a_vec(1u, kt); }
    if (LA > 2u) { pa2 = a_vec(2u, kt); }
    if (LA > 3u) { pa3 = a_vec(3u, kt); }
}

fn fetch_a_scalar(kt: u32) {
    pa0 = a_scalar(0u, kt);
    if (LA > 1u) { pa1 = a_scalar(1u, kt); }
    if (LA > 2u) { pa2 = a_scalar(2u, kt); }
    if (LA > 3u) { pa3 = a_scalar(3u, kt); }
}

// ---- B: the gathered matrix G, 4 consecutive positions of one row r
fn coord(v: i32, size: u32) -> u32 {  // an image coordinate, or size where v is outside [0, size)
    return select(min(u32(v), size), size, v < 0);
}

// The image value at tap offsets (oy, ox) from position (y, x) of plane `plane`; 0 outside.
fn pixel(plane: u32, y: u32, x: u32, oy: i32, ox: i32) -> f32 {
    let h = coord(i32(y * P.sy) + oy, P.ih);
    let w = coord(i32(x * P.sx) + ox, P.iw);
    if (h < P.ih && w < P.iw) { return f32(img[plane + h * P.iw + w]); }
    return 0.0;
}

fn at_q(c: u32, q: u32, oy: i32, ox: i32) -> f32 {  // q < the number of positions
    let n = q / QP;
    let p = q - n * QP;
    let y = p / QW;
    return pixel(P.g_off + (n * P.ch + c) * P.ih * P.iw, y, p - y * QW, oy, ox);
}

fn g_run(r: u32, q0: u32, rows: u32, qs: u32) -> vec4<f32> {  // G[r, q0 .. q0+3], q0 % 4 == 0
    if (r >= rows || q0 >= qs) { return vec4<f32>(0.0); }
    let j = r % KW;
    let t = r / KW;
    let c = t / KH;
    return g_positions(c, i32(t - c * KH) * P.dy + P.py, i32(j) * P.dx + P.px, q0, qs);
}

// G at channel c, tap offsets (oy, ox), positions q0 .. q0+3 (q0 < qs)
fn g_positions(c: u32, oy: i32, ox: i32, q0: u32, qs: u32) -> vec4<f32> {
    var v = vec4<f32>(0.0);
    if (QW % 4u == 0u) {
        // the four positions lie in one row of one image (and qs % 4 == 0: all four exist)
        let n = q0 / QP;
        let p = q0 - n * QP;
        let y = p / QW;
        let x = p - y * QW;
        let h = coord(i32(y * P.sy) + oy, P.ih);
        if (h >= P.ih) { return v; }
        let base = P.g_off + ((n * P.ch + c) * P.ih + h) * P.iw;
        let w0 = coord(i32(x * P.sx) + ox, P.iw);
        let w1 = coord(i32((x + 1u) * P.sx) + ox, P.iw);
        let w2 = coord(i32((x + 2u) * P.sx) + ox, P.iw);
        let w3 = coord(i32((x + 3u) * P.sx) + ox, P.iw);
        if (w0 < P.iw) { v.x = f32(img[base + w0]); }
        if (w1 < P.iw) { v.y = f32(img[base + w1]); }
        if (w2 < P.iw) { v.z = f32(img[base + w2]); }
        if (w3 < P.iw) { v.w = f32(img[base + w3]); }
        return v;
    }
    v.x = at_q(c, q0, oy, ox);
    if (q0 + 1u < qs) { v.y = at_q(c, q0 + 1u, oy, ox); }
    if (q0 + 2u < qs) { v.z = at_q(c, q0 + 2u, oy, ox); }
    if (q0 + 3u < qs) { v.w = at_q(c, q0 + 3u, oy, ox); }
    return v;
}

fn b_piece(l: u32, kt: u32) -> vec4<f32> {
    let idx = tid + l * NT;
    if (WGRAD) {  // B[k, n] = G[n, k]: the piece runs along k
        return g_run(col0 + idx / BK4, kt * BK + (idx % BK4) * 4u, P.N, P.K);
    }
    return g_run(kt * BK + idx / BN4, col0 + (idx % BN4) * 4u, P.K, P.N);  // along n
}

fn fetch_b(kt: u32) {
    pb0 = b_piece(0u, kt);
    if (LB > 1u) { pb1 = b_piece(1u, kt); }
    if (LB > 2u) { pb2 = b_piece(2u, kt); }
    if (LB > 3u) { pb3 = b_piece(3u, kt); }
}

// ---- PHASED's operands (see the header): the phase's K, A's taps and the gather, from setup_ph
var<private> ph_k: u32;
var<private> ph_a: vec4<u32>;   // K, t0, t_row, t_col
var<private> ph_lv: u32;        // log2 of the taps along x
var<private> ph_g: vec4<i32>;   // dy, dx, py, px

fn a_vec_ph(l: u32, kt: u32) -> vec4<f32> {  // four k of one tap: PH_O % 4 == 0
    let mk = a_mk(l, kt);
    if (mk.x >= P.M || mk.y >= ph_k) { return vec4<f32>(0.0); }
    let t = mk.y / PH_O;
    let tap = ph_a.y + (t >> ph_lv) * ph_a.z + (t & ((1u << ph_lv) - 1u)) * ph_a.w;
    return vec4<f32>(a4[(P.a_off + mk.x * P.lda + tap * PH_O + (mk.y - t * PH_O)) / 4u]);
}

fn b_piece_ph(l: u32, kt: u32) -> vec4<f32> {  // r = (tap u, tap v, channel o), along n
    let idx = tid + l * NT;
    let r = kt * BK + idx / BN4;
    let q0 = col0 + (idx % BN4) * 4u;
    if (r >= ph_k || q0 >= P.N) { return vec4<f32>(0.0); }
    let t = r / PH_O;
    let oy = i32(t >> ph_lv) * ph_g.x + ph_g.z;
    let ox = i32(t & ((1u << ph_lv) - 1u)) * ph_g.y + ph_g.w;
    return g_positions(r - t * PH_O, oy, ox, q0, P.N);
}

fn fetch_ph(kt: u32) {
    pa0 = a_vec_ph(0u, kt);
    if (LA > 1u) { pa1 = a_vec_ph(1u, kt); }
    if (LA > 2u) { pa2 = a_vec_ph(2u, kt); }
    if (LA > 3u) { pa3 = a_vec_ph(3u, kt); }
    pb0 = b_piece_ph(0u, kt);
    if (LB > 1u) { pb1 = b_piece_ph(1u, kt); }
    if (LB > 2u) { pb2 = b_piece_ph(2u, kt); }
    if (LB > 3u) { pb3 = b_piece_ph(3u, kt); }
}

// ---- registers -> workgroup buffer `stage`, k-major
// The XOR applied to the vec4 columns of row k of a tile (SWIZZLE; constant over each group of 4 rows):
// BK = 8 gives rows k and k + 4 columns XOR 0 and 4, BK = 16 its four row groups 0, 2, 4, 6.
fn swz(k: u32) -> u32 {
    if (!SWIZZLE) { return 0u; }
    return ((k / 4u) * (8u / BK4)) % 8u;
}

fn put_a(l: u32, stage: u32, v: vec4<f32>) {  // the piece runs along k: one scalar store per k
    let idx = tid + l * NT;
    let m = idx / BK4;
    let k = (idx % BK4) * 4u;
    let i = (m / 4u) ^ swz(k);
    let e = m % 4u;
    As[stage][k][i][e] = v.x;
    As[stage][k + 1u][i][e] = v.y;
    As[stage][k + 2u][i][e] = v.z;
    As[stage][k + 3u][i][e] = v.w;
}

fn put_b(l: u32, stage: u32, v: vec4<f32>) {
    let idx = tid + l * NT;
    if (WGRAD) {  // along k
        let n = idx / BK4;
        let k = (idx % BK4) * 4u;
        let i = (n / 4u) ^ swz(k);
        let e = n % 4u;
        Bs[stage][k][i][e] = v.x;
        Bs[stage][k + 1u][i][e] = v.y;
        Bs[stage][k + 2u][i][e] = v.z;
        Bs[stage][k + 3u][i][e] = v.w;
    } else {      // along n: one vec4 store
        let k = idx / BN4;
        Bs[stage][k][(idx % BN4) ^ swz(k)] = v;
    }
}

fn stash(stage: u32) {
    put_a(0u, stage, pa0);
    if (LA > 1u) { put_a(1u, stage, pa1); }
    if (LA > 2u) { put_a(2u, stage, pa2); }
    if (LA > 3u) { put_a(3u, stage, pa3); }
    put_b(0u, stage, pb0);
    if (LB > 1u) { put_b(1u, stage, pb1); }
    if (LB > 2u) { put_b(2u, stage, pb2); }
    if (LB > 3u) { put_b(3u, stage, pb3); }
}

// ---- the multiply: acc += As[stage] @ Bs[stage], one k (an outer product) at a time; k is a constant once
// the driver inlines compute's calls (see As), ai, bi: the thread's first A and B fragments of row k
fn kstep(stage: u32, k: u32, ai: u32, bi: u32) {
    let a0 = As[stage][k][ai];
    let b0 = Bs[stage][k][bi];
    var a1v = vec4<f32>(0.0);
    var b1v = vec4<f32>(0.0);
    if (TM4 > 1u) { a1v = As[stage][k][ai + WG_Y]; }
    if (TN4 > 1u) { b1v = Bs[stage][k][bi + WG_X]; }
    c00 = fma(vec4<f32>(a0.x), b0, c00);
    c10 = fma(vec4<f32>(a0.y), b0, c10);
    c20 = fma(vec4<f32>(a0.z), b0, c20);
    c30 = fma(vec4<f32>(a0.w), b0, c30);
    if (TN4 > 1u) {
        c01 = fma(vec4<f32>(a0.x), b1v, c01);
        c11 = fma(vec4<f32>(a0.y), b1v, c11);
        c21 = fma(vec4<f32>(a0.z), b1v, c21);
        c31 = fma(vec4<f32>(a0.w), b1v, c31);
    }
    if (TM4 > 1u) {
        c40 = fma(vec4<f32>(a1v.x), b0, c40);
        c50 = fma(vec4<f32>(a1v.y), b0, c50);
        c60 = fma(vec4<f32>(a1v.z), b0, c60);
        c70 = fma(vec4<f32>(a1v.w), b0, c70);
    }
    if (TM4 > 1u && TN4 > 1u) {
        c41 = fma(vec4<f32>(a1v.x), b1v, c41);
        c51 = fma(vec4<f32>(a1v.y), b1v, c51);
        c61 = fma(vec4<f32>(a1v.z), b1v, c61);
        c71 = fma(vec4<f32>(a1v.w), b1v, c71);
    }
}

// Rows k .. k + 3; the second fragments (+ WG_Y, + WG_X) XOR alike: WG_X, WG_Y are multiples of 8 under SWIZZLE
fn kgroup(stage: u32, k: u32) {
    let a0 = ty ^ swz(k);
    let b0 = tx ^ swz(k);
    kstep(stage, k, a0, b0);
    kstep(stage, k + 1u, a0, b0);
    kstep(stage, k + 2u, a0, b0);
    kstep(stage, k + 3u, a0, b0);
}

// BK (a multiple of 4 up to 32) rows written out rather than looped over, so that each row's k is a constant
// (see As) and no loop counter is added (wgpu-native bounds every loop)
fn compute(stage: u32) {
    kgroup(stage, 0u);
    if (BK > 4u) { kgroup(stage, 4u); }
    if (BK > 8u) { kgroup(stage, 8u); kgroup(stage, 12u); }
    if (BK > 16u) { kgroup(stage, 16u); kgroup(stage, 20u); kgroup(stage, 24u); kgroup(stage, 28u); }
}

// ---- main loops (A fetched as vec4s or as scalars): `count` K steps from s0; the counts come from
// Params and the workgroup id only, so the barriers are in uniform control flow.
fn loop_av(s0: u32, count: u32) {
    if (count > 0u) { fetch_a_vec(s0); fetch_b(s0); stash(0u); }
    workgroupBarrier();
    for (var s = 0u; s < count; s++) {
        let more = s + 1u < count;
        if (more) { fetch_a_vec(s0 + s + 1u); fetch_b(s0 + s + 1u); }
        compute(s & (NBUF - 1u));
        if (NBUF == 1u) { workgroupBarrier(); }
        if (more) { stash((s + 1u) & (NBUF - 1u)); }
        workgroupBarrier();
    }
}

fn loop_as(s0: u32, count: u32) {
    if (count > 0u) { fetch_a_scalar(s0); fetch_b(s0); stash(0u); }
    workgroupBarrier();
    for (var s = 0u; s < count; s++) {
        let more = s + 1u < count;
        if (more) { fetch_a_scalar(s0 + s + 1u); fetch_b(s0 + s + 1u); }
        compute(s & (NBUF - 1u));
        if (NBUF == 1u) { workgroupBarrier(); }
        if (more) { stash((s + 1u) & (NBUF - 1u)); }
        workgroupBarrier();
    }
}

fn loop_ph(s0: u32, count: u32) {  // loop_av with PHASED's fetches
    if (count > 0u) { fetch_ph(s0); stash(0u); }
    workgroupBarrier();
    for (var s = 0u; s < count; s++) {
        let more = s + 1u < count;
        if (more) { fetch_ph(s0 + s + 1u); }
        compute(s & (NBUF - 1u));
        if (NBUF == 1u) { workgroupBarrier(); }
        if (more) { stash((s + 1u) & (NBUF - 1u)); }
        workgroupBarrier();
    }
}

// ---- epilogue
fn finish1(x: f32, m: u32) -> f32 {
    var v = x;
    if (HAS_BIAS) { v += f32(bias[P.bias_off + m]); }
    if (RELU) { v = max(v, 0.0); }
    return v;
}

fn finish4(x: vec4<f32>, m: u32) -> vec4<f32> {
    var v = x;
    if (HAS_BIAS) { v += vec4<f32>(f32(bias[P.bias_off + m])); }
    if (RELU) { v = max(v, vec4<f32>(0.0)); }
    return v;
}

// Where element (m, q) of the product goes: the scratch's split slice, a row-major [M, N], or NCHW.
fn out_index(m: u32, q: u32) -> u32 {
    if (SPLIT) { return (split * P.M + m) * P.N + q; }
    if (WGRAD) { return P.o_off + m * P.N + q; }
    let n = q / QP;
    let p = q - n * QP;
    let y = p / QW;
    return P.o_off + (n * P.M + m) * P.o_plane + y * P.o_row + (p - y * QW) * OSX;
}

fn store(x: vec4<f32>, m: u32, q: u32) {
    if (SPLIT) {  // raw partial sums: the reduction applies the epilogue
        out1[out_index(m, q)] = to_OT(x.x);
        if (q + 1u < P.N) { out1[out_index(m, q + 1u)] = to_OT(x.y); }
        if (q + 2u < P.N) { out1[out_index(m, q + 2u)] = to_OT(x.z); }
        if (q + 3u < P.N) { out1[out_index(m, q + 3u)] = to_OT(x.w); }
        return;
    }
    out1[out_index(m, q)] = to_OT(finish1(x.x, m));
    if (q + 1u < P.N) { out1[out_index(m, q + 1u)] = to_OT(finish1(x.y, m)); }
    if (q + 2u < P.N) { out1[out_index(m, q + 2u)] = to_OT(finish1(x.z, m)); }
    if (q + 3u < P.N) { out1[out_index(m, q + 3u)] = to_OT(finish1(x.w, m)); }
}

fn store_vec(x: vec4<f32>, m: u32, q: u32) {  // OUT_VEC: the four columns are one aligned vec4
    if (SPLIT) { out4[out_index(m, q) / 4u] = to_OT4(x); return; }
    out4[out_index(m, q) / 4u] = to_OT4(finish4(x, m));
}

fn tile_row(r: u32) -> u32 { return row0 + ((r / 4u) * WG_Y + ty) * 4u + r % 4u; }
fn tile_col(h: u32) -> u32 { return col0 + (h * WG_X + tx) * 4u; }

fn put1(r: u32, h: u32, x: vec4<f32>) {
    let m = tile_row(r);
    let q = tile_col(h);
    if (m < P.M && q < P.N) { store(x, m, q); }
}

fn put4(r: u32, h: u32, x: vec4<f32>) {
    let m = tile_row(r);
    let q = tile_col(h);
    if (m < P.M && q < P.N) { store_vec(x, m, q); }
}

fn epilogue1() {
    put1(0u, 0u, c00); put1(1u, 0u, c10); put1(2u, 0u, c20); put1(3u, 0u, c30);
    if (TN4 > 1u) { put1(0u, 1u, c01); put1(1u, 1u, c11); put1(2u, 1u, c21); put1(3u, 1u, c31); }
    if (TM4 > 1u) { put1(4u, 0u, c40); put1(5u, 0u, c50); put1(6u, 0u, c60); put1(7u, 0u, c70); }
    if (TM4 > 1u && TN4 > 1u) { put1(4u, 1u, c41); put1(5u, 1u, c51); put1(6u, 1u, c61); put1(7u, 1u, c71); }
}

fn epilogue4() {
    put4(0u, 0u, c00); put4(1u, 0u, c10); put4(2u, 0u, c20); put4(3u, 0u, c30);
    if (TN4 > 1u) { put4(0u, 1u, c01); put4(1u, 1u, c11); put4(2u, 1u, c21); put4(3u, 1u, c31); }
    if (TM4 > 1u) { put4(4u, 0u, c40); put4(5u, 0u, c50); put4(6u, 0u, c60); put4(7u, 0u, c70); }
    if (TM4 > 1u && TN4 > 1u) { put4(4u, 1u, c41); put4(5u, 1u, c51); put4(6u, 1u, c61); put4(7u, 1u, c71); }
}

fn setup(li: u32, wid: vec3<u32>) {
    tid = li;
    tx = li % WG_X;
    ty = li / WG_X;
    if (WARP_TILED) {  // subgroup w of 32 threads covers an 8 x 4 block; the blocks tile WG_X x WG_Y row-major
        let lane = li % 32u;
        let w = li / 32u;
        let across = max(WG_X / 8u, 1u);
        tx = (w % across) * 8u + lane % 8u;
        ty = (w / across) * 4u + lane / 8u;
    }
    col0 = wid.x * BN4 * 4u;
    row0 = wid.y * BM4 * 4u;
    split = wid.z;
}

fn first_step(wid: vec3<u32>) -> u32 { return wid.z * P.split_steps; }
fn step_count(wid: vec3<u32>) -> u32 {
    let s0 = wid.z * P.split_steps;
    return select(0u, min(P.steps - s0, P.split_steps), s0 < P.steps);
}

// Entry points: conv_gemm_<A fetch: v vec4, s scalar><stores: 4 vec4, 1 scalar>
@compute @workgroup_size(WG_X, WG_Y, 1)
fn conv_gemm_v4(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    setup(li, wid); loop_av(first_step(wid), step_count(wid)); epilogue4();
}

@compute @workgroup_size(WG_X, WG_Y, 1)
fn conv_gemm_v1(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    setup(li, wid); loop_av(first_step(wid), step_count(wid)); epilogue1();
}

@compute @workgroup_size(WG_X, WG_Y, 1)
fn conv_gemm_s4(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    setup(li, wid); loop_as(first_step(wid), step_count(wid)); epilogue4();
}

@compute @workgroup_size(WG_X, WG_Y, 1)
fn conv_gemm_s1(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    setup(li, wid); loop_as(first_step(wid), step_count(wid)); epilogue1();
}

// PHASED (SPLIT: the scratch): workgroup z is slice z of the phase table, in z order; the slice's K steps
// come from the uniform table and the workgroup id (uniform, as the loop's barriers need)
fn phase_of(z: u32) -> u32 {
    var p = 0u;
    for (var i = 1u; i < 4u; i++) {
        if (P.ph[i].slices.y > 0u && P.ph[i].slices.x <= z) { p = i; }
    }
    return p;
}

fn setup_ph(li: u32, wid: vec3<u32>) -> vec2<u32> {  // (first K step, K steps)
    setup(li, wid);
    let f = P.ph[phase_of(wid.z)];
    ph_k = f.a.x;
    ph_a = f.a;
    ph_lv = f.taps.x;
    ph_g = f.gather;
    let s0 = (wid.z - f.slices.x) * f.slices.w;
    return vec2<u32>(s0, select(0u, min(f.slices.z - s0, f.slices.w), s0 < f.slices.z));
}

@compute @workgroup_size(WG_X, WG_Y, 1)
fn conv_phased4(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let steps = setup_ph(li, wid); loop_ph(steps.x, steps.y); epilogue4();
}

@compute @workgroup_size(WG_X, WG_Y, 1)
fn conv_phased1(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let steps = setup_ph(li, wid); loop_ph(steps.x, steps.y); epilogue1();
}

// ---- split-K reduction: out(m, q) = epilogue(sum over splits s of scratch[s][m][q]). Binding 0 is
// the scratch. A workgroup covers RED_OUT consecutive elements (or vec4s: N % 4 == 0), RED_LANES threads
// each: lane l sums splits l, l + RED_LANES, ... and lane 0 adds the lanes in order (a fixed order, and
// RED_LANES loads in flight per output where one thread would walk ~100 splits one add at a time).
// 2-D grid past 65535 workgroups.
const RED_OUT: u32 = 32u;
const RED_LANES: u32 = 8u;
var<workgroup> lanes1: array<f32, RED_OUT * RED_LANES>;
var<workgroup> lanes4: array<vec4<f32>, RED_OUT * RED_LANES>;

@compute @workgroup_size(RED_OUT, RED_LANES)
fn conv_reduce1(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(local_invocation_index) li: u32,
                @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let total = P.M * P.N;
    let i = (wid.x + wid.y * nw.x) * RED_OUT + lid.x;
    var s = 0.0;
    if (i < total) {
        for (var k = lid.y; k < P.splits; k += RED_LANES) { s += f32(a1[k * total + i]); }
    }
    lanes1[li] = s;
    workgroupBarrier();
    if (lid.y == 0u && i < total) {
        for (var l = 1u; l < RED_LANES; l++) { s += lanes1[l * RED_OUT + lid.x]; }
        let m = i / P.N;
        out1[out_index(m, i - m * P.N)] = to_OT(finish1(s, m));
    }
}

@compute @workgroup_size(RED_OUT, RED_LANES)
fn conv_reduce4(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(local_invocation_index) li: u32,
                @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let total4 = P.M * P.N / 4u;
    let i = (wid.x + wid.y * nw.x) * RED_OUT + lid.x;
    var s = vec4<f32>(0.0);
    if (i < total4) {
        for (var k = lid.y; k < P.splits; k += RED_LANES) { s += vec4<f32>(a4[k * total4 + i]); }
    }
    lanes4[li] = s;
    workgroupBarrier();
    if (lid.y == 0u && i < total4) {
        for (var l = 1u; l < RED_LANES; l++) { s += lanes4[l * RED_OUT + lid.x]; }
        let m = (4u * i) / P.N;
        out4[out_index(m, 4u * i - m * P.N) / 4u] = to_OT4(finish4(s, m));
    }
}

// ---- PHASED's output: out[o_off + i] for every element i of the [images][M][ih][iw] input gradient
// (its Params: M, N, o_off, ih and iw the input gradient's height and width, sy and sx the stride, splits
// its element count), in order, from the slices of its phase (h % sy, w % sx) at position q = (n, h / sy,
// w / sx) of the QH x QW grid (QP positions per image); conv_unphase4 four at a time (iw % 4 == 0 and
// o_off % 4 == 0: one vec4 store).
fn unphased(i: u32) -> f32 {
    let plane = P.ih * P.iw;
    let nc = i / plane;
    let hw = i - nc * plane;
    let h = hw / P.iw;
    let w = hw - h * P.iw;
    let n = nc / P.M;
    let m = nc - n * P.M;
    let y = h / P.sy;
    let x = w / P.sx;
    let f = P.ph[(h - y * P.sy) * P.sx + (w - x * P.sx)].slices;
    let q = n * QP + y * QW + x;
    var s = 0.0;
    for (var z = f.x; z < f.x + f.y; z++) { s += f32(a1[(z * P.M + m) * P.N + q]); }
    return s;
}

@compute @workgroup_size(256)
fn conv_unphase1(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
                 @builtin(num_workgroups) nw: vec3<u32>) {
    let i = (wid.x + wid.y * nw.x) * 256u + li;
    if (i < P.splits) { out1[P.o_off + i] = to_OT(unphased(i)); }
}

@compute @workgroup_size(256)
fn conv_unphase4(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
                 @builtin(num_workgroups) nw: vec3<u32>) {
    let i = 4u * ((wid.x + wid.y * nw.x) * 256u + li);
    if (i < P.splits) {
        out4[(P.o_off + i) / 4u] = to_OT4(vec4<f32>(unphased(i), unphased(i + 1u), unphased(i + 2u),
                                                    unphased(i + 3u)));
    }
}
