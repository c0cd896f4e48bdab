// Batched matrix product with fused bias and ReLU:
//     out[z] = relu?( sum over r < items of op(a[z*items + r]) @ op(b[z*items + r]) + bias? )
// out contiguous [batch, M, N]; items = 1 is a plain batched product, items > 1 a "batch-reduce"
// product (a convolution's weight gradient sums over images). op(a) is a ([M, K] row-major) or, with
// TRANS_A, the transpose of a stored [K, M]; b likewise [K, N], or [N, K] with TRANS_B; with B_GATHER,
// op(b) is an image unfolded on the fly (implicit im2col, see unfolded4). a, b, out and the bias are
// float32, or float16 (matmul_io.wgsl's element types: halves are read into registers as they are, turned
// into f32 where they are staged into the f32 workgroup tiles, so the multiply is the float32 kernel's,
// and the f32 result is rounded once at the store); offsets and batch strides are in elements (a batch
// stride of 0 reuses one matrix for every z). The bias is per column (n), or per row (m) with BIAS_ROWS
// (a convolution's bias over output channels).
//
// The host side is package/webgrad/backends/webgpu/matmul_plan.py: it picks the entry point, the tile
// configuration (override constants), the K split and packs Params. Bindings (group 0): 0 a, 1 b,
// 2 out, 3 bias (any buffer when HAS_BIAS is false), 4 Params.
//
// Design (classic register-blocked SGEMM):
//   * A workgroup of WG_X x WG_Y threads computes a BM x BN tile of out (BM = WG_Y*TM, BN = WG_X*TN).
//   * K is walked in steps of BK. Each step the workgroup stages op(a)[BM, BK] and op(b)[BK, BN] in
//     workgroup memory, both stored k-major ([BK][BM] and [BK][BN], as vec4 along M / N), so the inner
//     loop reads a thread's A and B fragments with vec4 loads.
//   * Each thread keeps a TM x TN block of accumulators in registers. Its rows are TM/4 groups of 4,
//     strided by 4*WG_Y (likewise columns by 4*WG_X): neighbouring threads read neighbouring vec4s of
//     workgroup memory (no bank conflicts) and the per-k work is TM*TN/4 vec4 FMAs for TM/4 + TN/4
//     vec4 loads.
//   * Workgroup memory is double-buffered with a register prefetch: the next K step is loaded from
//     global memory into registers before the current step's FMAs, then stored into the other buffer;
//     one barrier per K step. NBUF = 1: one buffer of a deeper BK in the same memory, two barriers.
//   * WARP_TILED and SWIZZLE (the big "w" configurations) change only where things sit: threads in
//     8 x 4 blocks per subgroup of 32 (fewer shared-memory wavefronts per fragment read) and the vec4
//     columns of each tile row XORed with swz(k) (conflict-free scalar stores of a transposed piece).
//   * The K steps of a tile are numbered g = r * ntiles + kt over the reduce items r (ntiles K steps
//     each, the last one zero-padded), so a batch-reduce product is one long K loop.
//   * KS > 1 splits K inside the workgroup: KS slices of WG_X x WG_Y threads (workgroup size
//     WG_X x WG_Y x KS), each with its own double buffer, take every KS-th K step of the same tile,
//     then add their partial sums through workgroup memory. For small outputs with a long K
//     (128x128 @ 128x784: 16 tiles of 32x32 leave a 132-SM GPU idle), where it is up to 3x faster.
//   * splits > 1 splits K across workgroups (split-K): workgroup z = out batch * splits + split takes
//     the split's contiguous range of K steps and writes its raw partial tile to a scratch buffer
//     (bound as out, laid out [splits][batch][M][N]); a second dispatch, matmul_reduce, adds the
//     partials in split order (deterministic: no atomics) and applies bias and ReLU. For outputs too
//     small to fill the GPU even with KS (32x144 @ K = 25088: five 32x32 tiles).
//   * Global loads are vec4 when the plan proves alignment (the matrix's contiguous dimension, its
//     offset and batch stride all multiples of 4: then a vec4 never straddles the matrix edge) and
//     scalar with per-element bounds checks otherwise. a/b are declared twice (scalar and vec4 views of
//     the same binding), out too; each entry point uses only one view of each, which WGSL allows.
//     Entry points: matmul_<a><b>[4]: a, b each v (vec4) or s (scalar, always valid); the suffix 4
//     stores vec4s (N and the output offset multiples of 4; the plan takes it for short K only, where
//     stores dominate: it slowed a long-K product's main loop by 13%), else scalar stores.
//   * Epilogue: bias, ReLU, bounds-checked stores, and the spliced activation's (EPILOGUE: GELU into a
//     second output, for a captured linear -> gelu).
//
// Register code is written out by hand (named accumulators, explicit k steps, branches on override
// constants that fold away): naga guards every loop with a bounding counter and drivers did not
// unroll them, so an array indexed by a loop counter lived in slow local memory. The loop version
// of this kernel ran 1.8 TFLOP/s on an H100 at 4096^3, this one 34.
//
// Limits the plan respects (matmul_plan.check_config): TM, TN in {4, 8}; BK a multiple of 4; tile
// loads (BK*BM/4 and BK*BN/4 vec4s) a multiple of WG_X*WG_Y, at most 4 per thread; KS*WG_X*WG_Y <= 256;
// workgroup memory KS*NBUF*BK*(BM+BN)*4 bytes <= 16 KiB (a browser's default limit: the kernel declares
// no other workgroup variable); with KS > 1, As must hold a tile of partial sums; WARP_TILED and SWIZZLE
// need WG_X, WG_Y multiples of 8 (WARP_TILED: WG_Y of 4).

override TRANS_A: bool = false;
override TRANS_B: bool = false;
override HAS_BIAS: bool = false;
override RELU: bool = false;
override BIAS_ROWS: bool = false;  // bias indexed by the row m (else by the column n)
override B_GATHER: bool = false;   // op(b) is an unfolded image (scalar-b entry points only)
// items > 1 or splits > 1: K steps are located per step (locate). Off, a product compiles to the plain
// loop with fixed operand bases.
override SPLIT_K: bool = false;
// The gather's window and output row width: constants, so that the divisions decoding a row and a
// column of the unfolded matrix compile to multiplications (a division by a run-time value is ~20
// instructions, and unfolded4 does three of them per piece of B).
override G_KH: u32 = 1u;
override G_KW: u32 = 1u;
override G_OW: u32 = 1u;
override WG_X: u32 = 16u;
override WG_Y: u32 = 16u;
override TM: u32 = 8u;
override TN: u32 = 8u;
override BK: u32 = 8u;
override KS: u32 = 1u;   // K split inside the workgroup: KS slices of WG_X x WG_Y threads
// Workgroup buffers per slice: 2 (double-buffered: one barrier per K step) or 1 (a deeper BK in the same
// memory, two barriers per step: the multiply must finish before the prefetch overwrites the buffer).
override NBUF: u32 = 2u;
// WARP_TILED: threads map to (tx, ty) in 8 x 4 blocks of 32 (a subgroup on NVIDIA) instead of rows of
// WG_X, so one subgroup's fragment reads in the multiply are 8 vec4s of B (128 bytes: one shared-memory
// wavefront) and 4 of A, where a row of 16 threads read 16 + 2 (three wavefronts per k pair, not two).
// Only the speed depends on the subgroup size; any mapping is correct (needs WG_X % 8 == 0, WG_Y % 4 == 0).
override WARP_TILED: bool = false;
// SWIZZLE: the vec4 column of row k of a workgroup tile is XORed with swz(k), so that the four scalar
// stores of a K-contiguous piece (an operand transposed into the k-major tile: a in NN/NT, b in NT/TT)
// from the threads of one subgroup land in distinct banks (without it, k and k + 4 collide: two-way
// conflicts) while costing no memory (padding the rows would push 128x128 over 16 KiB). Needs tile rows
// of a multiple of 8 vec4s (BM4, BN4) and WG_X, WG_Y multiples of 8 with TM4/TN4 > 1.
override SWIZZLE: bool = false;

// CAUSAL: the products of causal attention (ops/attention_chunked.py), whose weights are lower-triangular, walk
// only the K steps that can add anything (k_range): 1, only out[m, n] with n <= m is wanted, so a tile wholly
// above the diagonal runs no K step (and stores zeros); 2, op(a) is lower-triangular (op(a)[m, k] = 0 for k > m):
// a tile's K steps end at its last row; 3, op(a) is upper-triangular (op(a)[m, k] = 0 for k < m): they start at
// the step holding its first row. The steps kept whole at either end only add true zeros. Not with split-K or
// batch-reduce items (the plan leaves them out).
override CAUSAL: u32 = 0u;

override NT: u32 = WG_X * WG_Y;      // threads per slice
override BM4: u32 = WG_Y * TM / 4u;  // tile rows, in vec4s
override BN4: u32 = WG_X * TN / 4u;  // tile columns, in vec4s
override BK4: u32 = BK / 4u;
override TM4: u32 = TM / 4u;
override TN4: u32 = TN / 4u;
override LA: u32 = BK * BM4 / NT;    // vec4s of the A tile each thread loads
override LB: u32 = BK * BN4 / NT;

//! include "matmul_io.wgsl"

// The activation epilogue (matmul.py's epilogue_text): act_store(o, y) and act_store4(i, y) get each stored
// output y (element o of out, or vec4 i of out4). Plain products: they do nothing (and fold away). GELU
// (a captured step's linear -> gelu, fused by fusion.py): they write gelu(y) at the same place of a second
// output, binding 5, while out keeps the pre-activation y that gelu's backward reads.
//! splice EPILOGUE

var<workgroup> As: array<vec4<f32>, KS * NBUF * BK * BM4>;  // [KS slices][NBUF buffers][BK][BM/4]
var<workgroup> Bs: array<vec4<f32>, KS * NBUF * BK * BN4>;  // [KS slices][NBUF buffers][BK][BN/4]

// Accumulators: c<r><h> holds row r (0..7) of this thread's block, columns 4h..4h+3 (h = 0, 1).
// Row r is tile row ((r / 4) * WG_Y + ty) * 4 + r % 4; column group h is tile columns (h * WG_X + tx) * 4 + 0..3.
// With TM = 4 only rows 0..3 are used, with TN = 4 only h = 0 (the other branches fold away).
var<private> c00: vec4<f32>; var<private> c01: vec4<f32>;
var<private> c10: vec4<f32>; var<private> c11: vec4<f32>;
var<private> c20: vec4<f32>; var<private> c21: vec4<f32>;
var<private> c30: vec4<f32>; var<private> c31: vec4<f32>;
var<private> c40: vec4<f32>; var<private> c41: vec4<f32>;
var<private> c50: vec4<f32>; var<private> c51: vec4<f32>;
var<private> c60: vec4<f32>; var<private> c61: vec4<f32>;
var<private> c70: vec4<f32>; var<private> c71: vec4<f32>;
// Prefetched pieces of the next A and B tiles (LA, LB of them, at most 4), in the operands' own types (a
// float16 piece takes half the registers; put_a and put_b convert it to f32).
var<private> pa0: vec4<AT>; var<private> pa1: vec4<AT>; var<private> pa2: vec4<AT>; var<private> pa3: vec4<AT>;
var<private> pb0: vec4<BT>; var<private> pb1: vec4<BT>; var<private> pb2: vec4<BT>; var<private> pb3: vec4<BT>;
var<private> tid: u32;    // index within the slice
var<private> slice: u32;
var<private> stage0: u32;  // this slice's first workgroup buffer: a "stage" is slice * 2 + buffer
var<private> tx: u32;
var<private> ty: u32;
var<private> row0: u32;
var<private> col0: u32;
var<private> batch: u32;   // output matrix
var<private> split: u32;   // K split (0 without split-K)
var<private> step0: u32;   // this workgroup's K steps: [step0, step1) of items * ntiles
var<private> step1: u32;
var<private> a_base: u32;  // the current reduce item's a and b
var<private> b_base: u32;

fn setup(li: u32, wid: vec3<u32>) {
    tid = li % NT;
    slice = li / NT;
    stage0 = slice * NBUF;
    tx = tid % WG_X;
    ty = tid / WG_X;
    if (WARP_TILED) {  // subgroup w of 32 threads covers an 8 x 4 block; the blocks tile WG_X x WG_Y row-major
        let lane = tid % 32u;
        let w = tid / 32u;
        let across = max(WG_X / 8u, 1u);  // blocks per row (max: Tint folds the division where WG_X < 8 too)
        tx = (w % across) * 8u + lane % 8u;
        ty = (w / across) * 4u + lane / 8u;
    }
    col0 = wid.x * BN4 * 4u;
    row0 = wid.y * BM4 * 4u;
    batch = wid.z;
    split = 0u;
    if (SPLIT_K) {
        batch = wid.z / P.splits;
        split = wid.z % P.splits;
    }
    let steps = k_range(wid);
    step0 = steps.x;
    step1 = steps.y;
    a_base = P.a_off + batch * P.items * P.a_bs;
    b_base = P.b_off + batch * P.items * P.b_bs;
}

// Point a_base / b_base at K step g's reduce item and return its K tile. A step past the
// workgroup's range returns tile ntiles, whose k are all >= K: it loads zeros. Without SPLIT_K the
// step is the tile (steps past ntiles load zeros by the same bounds checks) and the bases stay.
fn locate(g: u32) -> u32 {
    if (!SPLIT_K) { return g; }
    if (g >= step1) { return P.ntiles; }
    var r = 0u;
    var kt = g;
    if (P.items > 1u) {
        r = g / P.ntiles;
        kt = g - r * P.ntiles;
    }
    let item = batch * P.items + r;
    a_base = P.a_off + item * P.a_bs;
    b_base = P.b_off + item * P.b_bs;
    return kt;
}

// ---- global -> registers
// Piece l of this thread covers 4 consecutive elements along a's contiguous dimension: along m when
// TRANS_A (a stored [K, M]), else along k (a stored [M, K]). a_piece gives (m, k) of its first element.
fn a_piece(l: u32, kt: u32) -> vec2<u32> {
    let idx = tid + l * NT;
    if (TRANS_A) {
        return vec2<u32>(row0 + (idx % BM4) * 4u, kt * BK + idx / BM4);
    }
    return vec2<u32>(row0 + idx / BK4, kt * BK + (idx % BK4) * 4u);
}

fn load_a_vec4(l: u32, kt: u32) -> vec4<AT> {
    let mk = a_piece(l, kt);
    if (mk.x < P.M && mk.y < P.K) {
        if (TRANS_A) { return a4[(a_base + mk.y * P.lda + mk.x) / 4u]; }
        return a4[(a_base + mk.x * P.lda + mk.y) / 4u];
    }
    return vec4<AT>(0.0);
}

fn a_at(m: u32, k: u32) -> AT {
    if (m < P.M && k < P.K) {
        if (TRANS_A) { return a1[a_base + k * P.lda + m]; }
        return a1[a_base + m * P.lda + k];
    }
    return 0.0;
}

fn load_a_scalar(l: u32, kt: u32) -> vec4<AT> {
    let mk = a_piece(l, kt);
    if (TRANS_A) {
        return vec4<AT>(a_at(mk.x, mk.y), a_at(mk.x + 1u, mk.y), a_at(mk.x + 2u, mk.y), a_at(mk.x + 3u, mk.y));
    }
    return vec4<AT>(a_at(mk.x, mk.y), a_at(mk.x, mk.y + 1u), a_at(mk.x, mk.y + 2u), a_at(mk.x, mk.y + 3u));
}

// B pieces run along b's contiguous dimension: n when b is stored [K, N], k when TRANS_B ([N, K]).
// b_piece gives (k, n) of the first element.
fn b_piece(l: u32, kt: u32) -> vec2<u32> {
    let idx = tid + l * NT;
    if (TRANS_B) {
        return vec2<u32>(kt * BK + (idx % BK4) * 4u, col0 + idx / BK4);
    }
    return vec2<u32>(kt * BK + idx / BN4, col0 + (idx % BN4) * 4u);
}

fn load_b_vec4(l: u32, kt: u32) -> vec4<BT> {
    let kn = b_piece(l, kt);
    if (kn.x < P.K && kn.y < P.N) {
        if (TRANS_B) { return b4[(b_base + kn.y * P.ldb + kn.x) / 4u]; }
        return b4[(b_base + kn.x * P.ldb + kn.y) / 4u];
    }
    return vec4<BT>(0.0);
}

fn b_at(k: u32, n: u32) -> BT {
    if (k < P.K && n < P.N) {
        if (TRANS_B) { return b1[b_base + n * P.ldb + k]; }
        return b1[b_base + k * P.ldb + n];
    }
    return 0.0;
}

// ---- B_GATHER: op(b) is an unfolded image (implicit im2col), never stored. Row r = (c*G_KH + i)*G_KW + j
// and column l = y*G_OW + x of the unfolded matrix read image plane c (at b_base + c*g_h*g_w) at
//     (y*g_sy + i*g_dy - g_py, x*g_sx + j*g_dx - g_px), 0 outside the g_h x g_w plane.
// A convolution's input as [C*kh*kw, OH*OW] is exactly im2col's matrix; op(b) = cols (forward) or,
// with TRANS_B, colsᵀ (weight gradient). A piece of B runs along l in both cases (along n, or along k
// with TRANS_B), so unfolded4 takes four consecutive columns of one row: r's window position and
// plane are decoded once, x steps through the row.
fn pixel(plane: u32, y: u32, x: u32, dh: i32, dw: i32) -> BT {
    let h = i32(y * P.g_sy) + dh;
    let w = i32(x * P.g_sx) + dw;
    if (h < 0 || h >= i32(P.g_h) || w < 0 || w >= i32(P.g_w)) { return 0.0; }
    return b1[plane + u32(h) * P.g_w + u32(w)];
}

// Columns l0 .. l0+3 of row r of the unfolded matrix, which has `rows` rows and `cols` columns.
fn unfolded4(r: u32, l0: u32, rows: u32, cols: u32) -> vec4<BT> {
    var v = vec4<BT>(0.0);
    if (r >= rows) { return v; }
    let j = r % G_KW;
    let t = r / G_KW;
    let i = t % G_KH;
    let plane = b_base + (t / G_KH) * P.g_h * P.g_w;
    let dh = i32(i) * P.g_dy - P.g_py;
    let dw = i32(j) * P.g_dx - P.g_px;
    var y = l0 / G_OW;
    var x = l0 - y * G_OW;
    if (l0 < cols) { v.x = pixel(plane, y, x, dh, dw); }
    x += 1u; if (x == G_OW) { x = 0u; y += 1u; }
    if (l0 + 1u < cols) { v.y = pixel(plane, y, x, dh, dw); }
    x += 1u; if (x == G_OW) { x = 0u; y += 1u; }
    if (l0 + 2u < cols) { v.z = pixel(plane, y, x, dh, dw); }
    x += 1u; if (x == G_OW) { x = 0u; y += 1u; }
    if (l0 + 3u < cols) { v.w = pixel(plane, y, x, dh, dw); }
    return v;
}

fn load_b_scalar(l: u32, kt: u32) -> vec4<BT> {
    let kn = b_piece(l, kt);
    if (B_GATHER) {
        if (TRANS_B) { return unfolded4(kn.y, kn.x, P.N, P.K); }  // op(b)[k, n] = cols[n, k]
        return unfolded4(kn.x, kn.y, P.K, P.N);                   // op(b)[k, n] = cols[k, n]
    }
    if (TRANS_B) {
        return vec4<BT>(b_at(kn.x, kn.y), b_at(kn.x + 1u, kn.y), b_at(kn.x + 2u, kn.y), b_at(kn.x + 3u, kn.y));
    }
    return vec4<BT>(b_at(kn.x, kn.y), b_at(kn.x, kn.y + 1u), b_at(kn.x, kn.y + 2u), b_at(kn.x, kn.y + 3u));
}

fn fetch_a_vec4(kt: u32) {
    pa0 = load_a_vec4(0u, kt);
    if (LA > 1u) { pa1 = load_a_vec4(1u, kt); }
    if (LA > 2u) { pa2 = load_a_vec4(2u, kt); }
    if (LA > 3u) { pa3 = load_a_vec4(3u, kt); }
}

fn fetch_a_scalar(kt: u32) {
    pa0 = load_a_scalar(0u, kt);
    if (LA > 1u) { pa1 = load_a_scalar(1u, kt); }
    if (LA > 2u) { pa2 = load_a_scalar(2u, kt); }
    if (LA > 3u) { pa3 = load_a_scalar(3u, kt); }
}

fn fetch_b_vec4(kt: u32) {
    pb0 = load_b_vec4(0u, kt);
    if (LB > 1u) { pb1 = load_b_vec4(1u, kt); }
    if (LB > 2u) { pb2 = load_b_vec4(2u, kt); }
    if (LB > 3u) { pb3 = load_b_vec4(3u, kt); }
}

fn fetch_b_scalar(kt: u32) {
    pb0 = load_b_scalar(0u, kt);
    if (LB > 1u) { pb1 = load_b_scalar(1u, kt); }
    if (LB > 2u) { pb2 = load_b_scalar(2u, kt); }
    if (LB > 3u) { pb3 = load_b_scalar(3u, kt); }
}

// ---- registers -> workgroup buffer `stage`, k-major
// The XOR applied to the vec4 columns of row k (0 <= k < BK) of a tile (see SWIZZLE): rows k and k + 4
// (BK = 8) get 0 and 4, so the 16 columns of one subgroup's piece stores fall in bank halves 0-15 and
// 16-31; with BK = 16 the four row groups get 0, 2, 4, 6. Constant over each group of 4 rows.
fn swz(k: u32) -> u32 {
    if (!SWIZZLE) { return 0u; }
    return ((k / 4u) * (8u / BK4)) % 8u;
}

fn put_a(l: u32, stage: u32, piece: vec4<AT>) {
    let v = from_AT4(piece);  // (float16 operands: the conversion into the f32 tile; f32h: rounded through f16)
    let idx = tid + l * NT;
    if (TRANS_A) {  // the piece runs along m: one vec4 store
        let k = idx / BM4;
        As[(stage * BK + k) * BM4 + ((idx % BM4) ^ swz(k))] = v;
    } else {        // the piece runs along k: four scalar stores, one per k row
        let m = idx / BK4;
        let k = (idx % BK4) * 4u;
        let i = (stage * BK + k) * BM4 + ((m / 4u) ^ swz(k));
        let c = m % 4u;
        As[i][c] = v.x;
        As[i + BM4][c] = v.y;
        As[i + 2u * BM4][c] = v.z;
        As[i + 3u * BM4][c] = v.w;
    }
}

fn put_b(l: u32, stage: u32, piece: vec4<BT>) {
    let v = from_BT4(piece);
    let idx = tid + l * NT;
    if (TRANS_B) {  // the piece runs along k
        let n = idx / BK4;
        let k = (idx % BK4) * 4u;
        let i = (stage * BK + k) * BN4 + ((n / 4u) ^ swz(k));
        let c = n % 4u;
        Bs[i][c] = v.x;
        Bs[i + BN4][c] = v.y;
        Bs[i + 2u * BN4][c] = v.z;
        Bs[i + 3u * BN4][c] = v.w;
    } else {        // the piece runs along n
        let k = idx / BN4;
        Bs[(stage * BK + k) * BN4 + ((idx % BN4) ^ swz(k))] = v;
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

// ---- the multiply: one k of the outer product, a column of A's tile times a row of B's tile
// ai, bi: the thread's first A and B fragments; ai2, bi2: the second ones (TM = 8, TN = 8)
fn kstep(ai: u32, ai2: u32, bi: u32, bi2: u32) {
    let a0 = As[ai];
    let b0 = Bs[bi];
    var a1 = vec4<f32>(0.0);
    var b1 = vec4<f32>(0.0);
    if (TM4 > 1u) { a1 = As[ai2]; }
    if (TN4 > 1u) { b1 = Bs[bi2]; }
    c00 = fma(vec4<f32>(a0.x), b0, c00);
    c10 = fma(vec4<f32>(a0.y), b0, c10);
    c20 = fma(vec4<f32>(a0.z), b0, c20);
    c30 = fma(vec4<f32>(a0.w), b0, c30);
    if (TN4 > 1u) {
        c01 = fma(vec4<f32>(a0.x), b1, c01);
        c11 = fma(vec4<f32>(a0.y), b1, c11);
        c21 = fma(vec4<f32>(a0.z), b1, c21);
        c31 = fma(vec4<f32>(a0.w), b1, c31);
    }
    if (TM4 > 1u) {
        c40 = fma(vec4<f32>(a1.x), b0, c40);
        c50 = fma(vec4<f32>(a1.y), b0, c50);
        c60 = fma(vec4<f32>(a1.z), b0, c60);
        c70 = fma(vec4<f32>(a1.w), b0, c70);
    }
    if (TM4 > 1u && TN4 > 1u) {
        c41 = fma(vec4<f32>(a1.x), b1, c41);
        c51 = fma(vec4<f32>(a1.y), b1, c51);
        c61 = fma(vec4<f32>(a1.z), b1, c61);
        c71 = fma(vec4<f32>(a1.w), b1, c71);
    }
}

// acc += As[stage] @ Bs[stage], four k at a time (BK is a multiple of 4).
fn compute(stage: u32) {
    var ai = stage * BK * BM4;
    var bi = stage * BK * BN4;
    for (var k = 0u; k < BK; k += 4u) {
        let s = swz(k);  // the same for these 4 rows
        let a0 = ai + (ty ^ s);
        let a1 = ai + ((ty + WG_Y) ^ s);
        let b0 = bi + (tx ^ s);
        let b1 = bi + ((tx + WG_X) ^ s);
        kstep(a0, a1, b0, b1);
        kstep(a0 + BM4, a1 + BM4, b0 + BN4, b1 + BN4);
        kstep(a0 + 2u * BM4, a1 + 2u * BM4, b0 + 2u * BN4, b1 + 2u * BN4);
        kstep(a0 + 3u * BM4, a1 + 3u * BM4, b0 + 3u * BN4, b1 + 3u * BN4);
        ai += 4u * BM4;
        bi += 4u * BN4;
    }
}

// ---- epilogue: bias, relu, bounds-checked stores (scalar, or vec4 in the entry points ending in 4), the
// activation's (act_store).
// With splits > 1, out is the scratch buffer of partial tiles (the plan turns bias and ReLU off: the
// reduction applies them). m, n: the output element's row and column.
fn finish1(x: f32, m: u32, n: u32) -> f32 {
    var v = x;
    if (HAS_BIAS) { v += f32(bias[P.bias_off + select(n, m, BIAS_ROWS)]); }
    if (RELU) { v = max(v, 0.0); }
    return v;
}

fn finish4(x: vec4<f32>, m: u32, n: u32) -> vec4<f32> {  // columns n .. n+3 of row m, all < N
    var v = x;
    if (HAS_BIAS) {
        if (BIAS_ROWS) {
            v += vec4<f32>(f32(bias[P.bias_off + m]));
        } else {
            let o = P.bias_off + n;
            v += vec4<f32>(vec4<CT>(bias[o], bias[o + 1u], bias[o + 2u], bias[o + 3u]));
        }
    }
    if (RELU) { v = max(v, vec4<f32>(0.0)); }
    return v;
}

fn tile_row(r: u32) -> u32 { return row0 + ((r / 4u) * WG_Y + ty) * 4u + r % 4u; }
fn tile_col(h: u32) -> u32 { return col0 + (h * WG_X + tx) * 4u; }
fn out_index(m: u32, n: u32) -> u32 { return P.o_off + ((split * P.batch + batch) * P.M + m) * P.N + n; }

fn store1(o: u32, x: f32) {
    let y = to_OT(x);
    out[o] = y;
    act_store(o, y);
}

fn store4(r: u32, h: u32, v: vec4<f32>) {
    let m = tile_row(r);
    if (m < P.M) {
        let n = tile_col(h);
        let o = out_index(m, n);
        if (n < P.N) { store1(o, finish1(v.x, m, n)); }
        if (n + 1u < P.N) { store1(o + 1u, finish1(v.y, m, n + 1u)); }
        if (n + 2u < P.N) { store1(o + 2u, finish1(v.z, m, n + 2u)); }
        if (n + 3u < P.N) { store1(o + 3u, finish1(v.w, m, n + 3u)); }
    }
}

// N % 4 == 0 and o_off % 4 == 0: the 4 columns are all in bounds together and 16-byte aligned.
fn store4v(r: u32, h: u32, v: vec4<f32>) {
    let m = tile_row(r);
    let n = tile_col(h);
    if (m < P.M && n < P.N) {
        let i = out_index(m, n) / 4u;
        let y = to_OT4(finish4(v, m, n));
        out4[i] = y;
        act_store4(i, y);
    }
}

fn epilogue() {
    store4(0u, 0u, c00); store4(1u, 0u, c10); store4(2u, 0u, c20); store4(3u, 0u, c30);
    if (TN4 > 1u) { store4(0u, 1u, c01); store4(1u, 1u, c11); store4(2u, 1u, c21); store4(3u, 1u, c31); }
    if (TM4 > 1u) { store4(4u, 0u, c40); store4(5u, 0u, c50); store4(6u, 0u, c60); store4(7u, 0u, c70); }
    if (TM4 > 1u && TN4 > 1u) { store4(4u, 1u, c41); store4(5u, 1u, c51); store4(6u, 1u, c61); store4(7u, 1u, c71); }
}

fn epilogue4() {
    store4v(0u, 0u, c00); store4v(1u, 0u, c10); store4v(2u, 0u, c20); store4v(3u, 0u, c30);
    if (TN4 > 1u) { store4v(0u, 1u, c01); store4v(1u, 1u, c11); store4v(2u, 1u, c21); store4v(3u, 1u, c31); }
    if (TM4 > 1u) { store4v(4u, 0u, c40); store4v(5u, 0u, c50); store4v(6u, 0u, c60); store4v(7u, 0u, c70); }
    if (TM4 > 1u && TN4 > 1u) { store4v(4u, 1u, c41); store4v(5u, 1u, c51); store4v(6u, 1u, c61); store4v(7u, 1u, c71); }
}

// ---- K split inside the workgroup (KS > 1): slices 1..KS-1 hand their partial sums to slice 0, one
// at a time, through As (the plan checks that As holds NT * TM * TN / 4 vec4s), then slice 0 runs the
// epilogue.
// Accumulator c<r><h> goes to slot r * TN4 + h (slots 0 .. TM * TN4 - 1), at As[slot * NT + tid].
fn park() {
    As[0u * TN4 * NT + tid] = c00; As[1u * TN4 * NT + tid] = c10;
    As[2u * TN4 * NT + tid] = c20; As[3u * TN4 * NT + tid] = c30;
    if (TN4 > 1u) {
        As[1u * NT + tid] = c01; As[3u * NT + tid] = c11; As[5u * NT + tid] = c21; As[7u * NT + tid] = c31;
    }
    if (TM4 > 1u) {
        As[4u * TN4 * NT + tid] = c40; As[5u * TN4 * NT + tid] = c50;
        As[6u * TN4 * NT + tid] = c60; As[7u * TN4 * NT + tid] = c70;
    }
    if (TM4 > 1u && TN4 > 1u) {
        As[9u * NT + tid] = c41; As[11u * NT + tid] = c51; As[13u * NT + tid] = c61; As[15u * NT + tid] = c71;
    }
}

fn gather() {
    c00 += As[0u * TN4 * NT + tid]; c10 += As[1u * TN4 * NT + tid];
    c20 += As[2u * TN4 * NT + tid]; c30 += As[3u * TN4 * NT + tid];
    if (TN4 > 1u) {
        c01 += As[1u * NT + tid]; c11 += As[3u * NT + tid]; c21 += As[5u * NT + tid]; c31 += As[7u * NT + tid];
    }
    if (TM4 > 1u) {
        c40 += As[4u * TN4 * NT + tid]; c50 += As[5u * TN4 * NT + tid];
        c60 += As[6u * TN4 * NT + tid]; c70 += As[7u * TN4 * NT + tid];
    }
    if (TM4 > 1u && TN4 > 1u) {
        c41 += As[9u * NT + tid]; c51 += As[11u * NT + tid]; c61 += As[13u * NT + tid]; c71 += As[15u * NT + tid];
    }
}

fn combine_slices() {
    for (var s = 1u; s < KS; s++) {
        if (slice == s) { park(); }
        workgroupBarrier();
        if (slice == 0u) { gather(); }
        workgroupBarrier();
    }
}

// Main loops, one per fetch variant (vec4 or scalar, for a then b): per slice, prefetch the slice's
// next K step into registers, multiply the current one out of workgroup memory, then store the
// prefetch into the slice's other buffer; one barrier per step (two with NBUF = 1: the multiply reads
// the buffer the prefetch goes to). Slice s takes the workgroup's K steps step0 + s, step0 + s + KS,
// ...; steps past step1 load as zeros, so every slice runs the same number of iterations.
//
// That count must be workgroup-uniform for the barriers (a browser's uniformity analysis, Tint, rejects
// a loop bound read from a private variable such as step0), so it is computed again here from the
// workgroup id and the uniform Params, which the analysis knows to be uniform. (Publishing it through a
// workgroup variable, as before, cost 16 bytes of workgroup memory: 128x128 tiles then needed 16,400
// bytes, over the 16,384 a browser grants by default.)
fn iterations(wid: vec3<u32>) -> u32 {
    let steps = k_range(wid);
    return (steps.y - steps.x + KS - 1u) / KS;
}

// The K steps [first, last) of workgroup wid: its split's (SPLIT_K), cut to the triangle where CAUSAL says.
fn k_range(wid: vec3<u32>) -> vec2<u32> {
    var first = 0u;
    var last = P.ntiles;
    if (SPLIT_K) {
        first = (wid.z % P.splits) * P.split_steps;
        last = min(P.items * P.ntiles, first + P.split_steps);
    }
    let r0 = wid.y * BM4 * 4u;  // the tile's first row
    if (CAUSAL == 1u && wid.x * BN4 * 4u >= r0 + BM4 * 4u) { last = first; }
    if (CAUSAL == 2u) { last = min(last, (r0 + BM4 * 4u + BK - 1u) / BK); }
    if (CAUSAL == 3u) { first = max(first, r0 / BK); }
    return vec2<u32>(first, max(last, first));
}

fn buffer(s: u32) -> u32 { return stage0 + s % NBUF; }  // the workgroup buffer of this slice's s-th step

fn loop_vv(wid: vec3<u32>) {
    let n = iterations(wid);
    if (n > 0u) { let kt = locate(step0 + slice); fetch_a_vec4(kt); fetch_b_vec4(kt); stash(stage0); }
    workgroupBarrier();
    for (var s = 0u; s < n; s++) {
        let more = s + 1u < n;
        if (more) { let kt = locate(step0 + (s + 1u) * KS + slice); fetch_a_vec4(kt); fetch_b_vec4(kt); }
        compute(buffer(s));
        if (NBUF == 1u) { workgroupBarrier(); }
        if (more) { stash(buffer(s + 1u)); }
        workgroupBarrier();
    }
}

fn loop_vs(wid: vec3<u32>) {
    let n = iterations(wid);
    if (n > 0u) { let kt = locate(step0 + slice); fetch_a_vec4(kt); fetch_b_scalar(kt); stash(stage0); }
    workgroupBarrier();
    for (var s = 0u; s < n; s++) {
        let more = s + 1u < n;
        if (more) { let kt = locate(step0 + (s + 1u) * KS + slice); fetch_a_vec4(kt); fetch_b_scalar(kt); }
        compute(buffer(s));
        if (NBUF == 1u) { workgroupBarrier(); }
        if (more) { stash(buffer(s + 1u)); }
        workgroupBarrier();
    }
}

fn loop_sv(wid: vec3<u32>) {
    let n = iterations(wid);
    if (n > 0u) { let kt = locate(step0 + slice); fetch_a_scalar(kt); fetch_b_vec4(kt); stash(stage0); }
    workgroupBarrier();
    for (var s = 0u; s < n; s++) {
        let more = s + 1u < n;
        if (more) { let kt = locate(step0 + (s + 1u) * KS + slice); fetch_a_scalar(kt); fetch_b_vec4(kt); }
        compute(buffer(s));
        if (NBUF == 1u) { workgroupBarrier(); }
        if (more) { stash(buffer(s + 1u)); }
        workgroupBarrier();
    }
}

fn loop_ss(wid: vec3<u32>) {
    let n = iterations(wid);
    if (n > 0u) { let kt = locate(step0 + slice); fetch_a_scalar(kt); fetch_b_scalar(kt); stash(stage0); }
    workgroupBarrier();
    for (var s = 0u; s < n; s++) {
        let more = s + 1u < n;
        if (more) { let kt = locate(step0 + (s + 1u) * KS + slice); fetch_a_scalar(kt); fetch_b_scalar(kt); }
        compute(buffer(s));
        if (NBUF == 1u) { workgroupBarrier(); }
        if (more) { stash(buffer(s + 1u)); }
        workgroupBarrier();
    }
}

@compute @workgroup_size(WG_X, WG_Y, KS)
fn matmul_vv(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    setup(li, wid); loop_vv(wid); combine_slices(); if (slice == 0u) { epilogue(); }
}

@compute @workgroup_size(WG_X, WG_Y, KS)
fn matmul_vs(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    setup(li, wid); loop_vs(wid); combine_slices(); if (slice == 0u) { epilogue(); }
}

@compute @workgroup_size(WG_X, WG_Y, KS)
fn matmul_sv(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    setup(li, wid); loop_sv(wid); combine_slices(); if (slice == 0u) { epilogue(); }
}

@compute @workgroup_size(WG_X, WG_Y, KS)
fn matmul_ss(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    setup(li, wid); loop_ss(wid); combine_slices(); if (slice == 0u) { epilogue(); }
}

@compute @workgroup_size(WG_X, WG_Y, KS)
fn matmul_vv4(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    setup(li, wid); loop_vv(wid); combine_slices(); if (slice == 0u) { epilogue4(); }
}

@compute @workgroup_size(WG_X, WG_Y, KS)
fn matmul_vs4(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    setup(li, wid); loop_vs(wid); combine_slices(); if (slice == 0u) { epilogue4(); }
}

@compute @workgroup_size(WG_X, WG_Y, KS)
fn matmul_sv4(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    setup(li, wid); loop_sv(wid); combine_slices(); if (slice == 0u) { epilogue4(); }
}

@compute @workgroup_size(WG_X, WG_Y, KS)
fn matmul_ss4(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    setup(li, wid); loop_ss(wid); combine_slices(); if (slice == 0u) { epilogue4(); }
}

// ---- split-K reduction, the second dispatch: out = finish(sum of the splits' partial products).
// Binding 0 holds the partials [splits][batch][M][N] from offset 0 (the first dispatch's out); out, bias
// and Params as for the product (same layout, so one bind group layout serves both). A workgroup
// covers REDUCE_OUTPUTS consecutive outputs (matmul_reduce) or vec4s of 4 consecutive outputs
// (matmul_reduce4: N % 4 == 0 and o_off % 4 == 0, so the 4 share a row and are 16-byte aligned);
// REDUCE_LANES threads share each one, lane l summing splits l, l + LANES, ..., and lane 0 adds the
// lanes' sums in lane order: a fixed order (deterministic) with LANES loads in flight per output, where
// one thread per output would walk a few hundred splits of a small output one dependent add at a time.
// 2-D grid past 65535 workgroups.
const REDUCE_OUTPUTS: u32 = 32u;
const REDUCE_LANES: u32 = 8u;
const REDUCE_FEW_THREADS: u32 = 256u;
var<workgroup> lanes1: array<f32, REDUCE_OUTPUTS * REDUCE_LANES>;
var<workgroup> lanes4: array<vec4<f32>, REDUCE_OUTPUTS * REDUCE_LANES>;

@compute @workgroup_size(REDUCE_OUTPUTS, REDUCE_LANES)
fn matmul_reduce(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(local_invocation_index) li: u32,
                 @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let total = P.batch * P.M * P.N;
    let i = (wid.x + wid.y * nw.x) * REDUCE_OUTPUTS + lid.x;
    var s = 0.0;
    if (i < total) {
        for (var k = lid.y; k < P.splits; k += REDUCE_LANES) { s += f32(a1[k * total + i]); }
    }
    lanes1[li] = s;
    workgroupBarrier();
    if (lid.y == 0u && i < total) {
        for (var l = 1u; l < REDUCE_LANES; l++) { s += lanes1[l * REDUCE_OUTPUTS + lid.x]; }
        store1(P.o_off + i, finish1(s, (i / P.N) % P.M, i % P.N));
    }
}

@compute @workgroup_size(REDUCE_OUTPUTS, REDUCE_LANES)
fn matmul_reduce4(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(local_invocation_index) li: u32,
                  @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let total4 = P.batch * P.M * P.N / 4u;
    let i = (wid.x + wid.y * nw.x) * REDUCE_OUTPUTS + lid.x;
    var s = vec4<f32>(0.0);
    if (i < total4) {
        for (var k = lid.y; k < P.splits; k += REDUCE_LANES) { s += vec4<f32>(a4[k * total4 + i]); }
    }
    lanes4[li] = s;
    workgroupBarrier();
    if (lid.y == 0u && i < total4) {
        for (var l = 1u; l < REDUCE_LANES; l++) { s += lanes4[l * REDUCE_OUTPUTS + lid.x]; }
        let e = 4u * i;
        let y = to_OT4(finish4(s, (e / P.N) % P.M, e % P.N));
        out4[P.o_off / 4u + i] = y;
        act_store4(P.o_off / 4u + i, y);
    }
}

// matmul_reduce4 for at most REDUCE_LANES splits (a middle-size product split a few ways): one thread per vec4 of
// outputs, adding the splits in order as lane 0 of matmul_reduce4 does (the same bits), four loads in flight.
// No workgroup memory and no barrier: matmul_reduce4 left half its lanes idle at 4 splits and paid a barrier per
// 32 outputs (on an H200 a GPT's 4096 x 384 outputs of 4 splits took 18 us, twice their memory traffic's time).
@compute @workgroup_size(REDUCE_FEW_THREADS)
fn matmul_reduce_few4(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
                      @builtin(num_workgroups) nw: vec3<u32>) {
    let total4 = P.batch * P.M * P.N / 4u;
    let i = (wid.x + wid.y * nw.x) * REDUCE_FEW_THREADS + li;
    if (i >= total4) { return; }
    var s = vec4<f32>(a4[i]);
    var k = 1u;
    for (; k + 3u < P.splits; k += 4u) {
        let x1 = vec4<f32>(a4[k * total4 + i]);
        let x2 = vec4<f32>(a4[(k + 1u) * total4 + i]);
        let x3 = vec4<f32>(a4[(k + 2u) * total4 + i]);
        let x4 = vec4<f32>(a4[(k + 3u) * total4 + i]);
        s = (((s + x1) + x2) + x3) + x4;
    }
    for (; k < P.splits; k++) { s += vec4<f32>(a4[k * total4 + i]); }
    let e = 4u * i;
    let y = to_OT4(finish4(s, (e / P.N) % P.M, e % P.N));
    out4[P.o_off / 4u + i] = y;
    act_store4(P.o_off / 4u + i, y);
}
