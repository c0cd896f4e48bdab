// Batched matrix product for software WebGPU adapters (SwiftShader in Chromium, lavapipe): the same
// contract as matmul.wgsl (out[z] = relu?(sum over r < items of op(a[z*items + r]) @ op(b[z*items + r])
// + bias?), bindings and Params of matmul_io.wgsl, packed by matmul_plan.py), built for a CPU.
//
// Why a second kernel: a software adapter runs each group of 4 invocations as SIMD lanes of one CPU
// thread. There, measured on SwiftShader (bench/kernels.py on its Vulkan driver), every storage load
// costs ~40-50 ns per 4 lanes, f32 or vec4 alike, while arithmetic is nearly free; a workgroupBarrier
// switches coroutines for every 4 lanes; and a product with fewer workgroups than cores leaves cores
// idle. matmul.wgsl's shared-memory tiles (barriers every K step, a 128x128 output in one workgroup)
// ran MNIST's 128x128x784 product at 1.3 GFLOP/s on SwiftShader; this kernel runs it at ~4.5.
//
// Design: no workgroup memory, no barriers. Each invocation owns a 16 x 16 block of out and keeps it
// in registers as 4 x 4 quads (c<i><j>: mat4x4, column r = row 4i + r of the quad row, as a vec4 over
// the quad's 4 columns). K is walked 4 at a time; per step it loads a 16 x 4 piece of op(a) (4 quads
// a0..a3, column r = row r's 4 k values) and a 4 x 16 piece of op(b) (b0..b3, column kk = the 4
// columns' values at k kk): 32 vec4 loads for 1024 multiply-adds, c<i><j> += b<j> * a<i>. Whichever
// way an operand is stored, a piece is 4 vec4 loads along its contiguous dimension (transposed in
// registers when that dimension is the other one: free, as SwiftShader keeps each component in a
// register of its own). Rows and columns past the edge are clamped (loaded, never stored); the last
// K % 4 values of k are a scalar tail. A batch-reduce product with few blocks (a convolution's weight
// gradient: one 16 x 9 block summed over 128 images) splits its reduce items over `splits` workgroup
// rows: each writes its partial sums to a scratch buffer [splits][batch][M][N] (bias and ReLU off),
// and matmul.wgsl's matmul_reduce adds them up, as for split-K on a GPU.
//
// This file is the kernel's body; it is compiled through one of two files that define how memory is
// reached (WGSL lets an entry point use only one view of a binding, f32 or vec4):
//   matmul_cpu_vec.wgsl     vec4 loads and stores: a's and b's contiguous dimensions, offsets and batch
//                           strides, and N and out's offset, all multiples of 4 (a vec4 never
//                           straddles a row, nor the end of a buffer)
//   matmul_cpu_scalar.wgsl  f32 loads and stores, for any shape
// They define VEC and the access functions a_vec(i), a_elem(i), b_vec(i), b_elem(i) (4 values, or one,
// at element a_base + i / b_base + i) and store_row(o, v) (out[o .. o+3] = v, the columns past N
// dropped). Entry point matmul_cpu: invocations are numbered along x over the blocks of one output
// matrix (WG per workgroup), z is output matrix * splits + split.

override TRANS_A: bool = false;
override TRANS_B: bool = false;
override HAS_BIAS: bool = false;
override RELU: bool = false;
override BIAS_ROWS: bool = false;  // bias indexed by the row m (else by the column n)
override WG: u32 = 16u;            // invocations per workgroup

const BLOCK: u32 = 16u;            // rows and columns of out per invocation

var<private> m0: u32;              // this invocation's first row and column
var<private> n0: u32;
var<private> z: u32;               // output matrix
var<private> split: u32;           // which range of reduce items (splits > 1: out is a scratch buffer)
var<private> a_base: u32;          // the current reduce item's a and b
var<private> b_base: u32;

// ---- op(a)[m, k] and op(b)[k, n] pieces. Rows m and columns n are clamped into the matrix.
fn a_at(m: u32, k: u32) -> f32 {
    let mm = min(m, P.M - 1u);
    if (TRANS_A) { return a_elem(k * P.lda + mm); }
    return a_elem(mm * P.lda + k);
}

fn b_at(k: u32, n: u32) -> f32 {
    let nn = min(n, P.N - 1u);
    if (TRANS_B) { return b_elem(nn * P.ldb + k); }
    return b_elem(k * P.ldb + nn);
}

// Quad row i's piece of op(a) at k .. k+3 (all < K): column r = row m0 + 4i + r's values at k .. k+3.
fn a_piece(i: u32, k: u32) -> mat4x4<f32> {
    let m = m0 + 4u * i;
    if (TRANS_A) {  // stored [K, M]: vec4s run along m (M % 4 == 0 for vec loads: a quad is all in or all out)
        var mq = min(m, P.M - 1u);
        if (VEC) { mq = min(m, P.M - 4u); }
        if (VEC || m + 3u < P.M) {
            return transpose(mat4x4<f32>(a_vec(k * P.lda + mq), a_vec((k + 1u) * P.lda + mq),
                                         a_vec((k + 2u) * P.lda + mq), a_vec((k + 3u) * P.lda + mq)));
        }
        return transpose(mat4x4<f32>(vec4<f32>(a_at(m, k), a_at(m + 1u, k), a_at(m + 2u, k), a_at(m + 3u, k)),
                                     vec4<f32>(a_at(m, k + 1u), a_at(m + 1u, k + 1u), a_at(m + 2u, k + 1u), a_at(m + 3u, k + 1u)),
                                     vec4<f32>(a_at(m, k + 2u), a_at(m + 1u, k + 2u), a_at(m + 2u, k + 2u), a_at(m + 3u, k + 2u)),
                                     vec4<f32>(a_at(m, k + 3u), a_at(m + 1u, k + 3u), a_at(m + 2u, k + 3u), a_at(m + 3u, k + 3u))));
    }
    // stored [M, K]: vec4s run along k
    let last = P.M - 1u;
    return mat4x4<f32>(a_vec(min(m, last) * P.lda + k), a_vec(min(m + 1u, last) * P.lda + k),
                       a_vec(min(m + 2u, last) * P.lda + k), a_vec(min(m + 3u, last) * P.lda + k));
}

// Quad column j's piece of op(b) at k .. k+3: column kk = columns n0 + 4j .. +3 at k + kk.
fn b_piece(j: u32, k: u32) -> mat4x4<f32> {
    let n = n0 + 4u * j;
    if (TRANS_B) {  // stored [N, K]: vec4s run along k
        let last = P.N - 1u;
        return transpose(mat4x4<f32>(b_vec(min(n, last) * P.ldb + k), b_vec(min(n + 1u, last) * P.ldb + k),
                                     b_vec(min(n + 2u, last) * P.ldb + k), b_vec(min(n + 3u, last) * P.ldb + k)));
    }
    // stored [K, N]: vec4s run along n
    var nq = min(n, P.N - 1u);
    if (VEC) { nq = min(n, P.N - 4u); }
    if (VEC || n + 3u < P.N) {
        return mat4x4<f32>(b_vec(k * P.ldb + nq), b_vec((k + 1u) * P.ldb + nq),
                           b_vec((k + 2u) * P.ldb + nq), b_vec((k + 3u) * P.ldb + nq));
    }
    return mat4x4<f32>(vec4<f32>(b_at(k, n), b_at(k, n + 1u), b_at(k, n + 2u), b_at(k, n + 3u)),
                       vec4<f32>(b_at(k + 1u, n), b_at(k + 1u, n + 1u), b_at(k + 1u, n + 2u), b_at(k + 1u, n + 3u)),
                       vec4<f32>(b_at(k + 2u, n), b_at(k + 2u, n + 1u), b_at(k + 2u, n + 2u), b_at(k + 2u, n + 3u)),
                       vec4<f32>(b_at(k + 3u, n), b_at(k + 3u, n + 1u), b_at(k + 3u, n + 2u), b_at(k + 3u, n + 3u)));
}

// One k of the tail: the rank-1 update as a 4 x 4 quad piece (only column 0 of a's / row of b's used).
fn a_col(i: u32, k: u32) -> vec4<f32> {
    let m = m0 + 4u * i;
    return vec4<f32>(a_at(m, k), a_at(m + 1u, k), a_at(m + 2u, k), a_at(m + 3u, k));
}

fn b_row(j: u32, k: u32) -> vec4<f32> {
    let n = n0 + 4u * j;
    return vec4<f32>(b_at(k, n), b_at(k, n + 1u), b_at(k, n + 2u), b_at(k, n + 3u));
}

fn outer(b: vec4<f32>, a: vec4<f32>) -> mat4x4<f32> {
    return mat4x4<f32>(b * a.x, b * a.y, b * a.z, b * a.w);
}

// ---- epilogue: quad (i, j) through bias and ReLU into out, bounds-checked.
fn store_quad(i: u32, j: u32, c: mat4x4<f32>) {
    let n = n0 + 4u * j;
    if (n >= P.N) { return; }
    for (var r = 0u; r < 4u; r++) {
        let m = m0 + 4u * i + r;
        if (m >= P.M) { return; }
        var v = c[r];
        if (HAS_BIAS) {
            if (BIAS_ROWS) {
                v += vec4<f32>(bias[P.bias_off + m]);
            } else {
                let o = P.bias_off + min(n, P.N - 1u);
                v += vec4<f32>(bias[o], bias[min(o + 1u, P.bias_off + P.N - 1u)],
                               bias[min(o + 2u, P.bias_off + P.N - 1u)], bias[min(o + 3u, P.bias_off + P.N - 1u)]);
            }
        }
        if (RELU) { v = max(v, vec4<f32>(0.0)); }
        store_row(P.o_off + ((split * P.batch + z) * P.M + m) * P.N + n, v);
    }
}

// ---- the product. Invocations past the last block just leave (there are no barriers).
fn product(lid: u32, wid: vec3<u32>) {
    let blocks_n = (P.N + BLOCK - 1u) / BLOCK;
    let block = wid.x * WG + lid;
    if (block >= blocks_n * ((P.M + BLOCK - 1u) / BLOCK)) { return; }
    m0 = (block / blocks_n) * BLOCK;
    n0 = (block % blocks_n) * BLOCK;
    z = wid.z / P.splits;
    split = wid.z % P.splits;

    var c00 = mat4x4<f32>(); var c01 = mat4x4<f32>(); var c02 = mat4x4<f32>(); var c03 = mat4x4<f32>();
    var c10 = mat4x4<f32>(); var c11 = mat4x4<f32>(); var c12 = mat4x4<f32>(); var c13 = mat4x4<f32>();
    var c20 = mat4x4<f32>(); var c21 = mat4x4<f32>(); var c22 = mat4x4<f32>(); var c23 = mat4x4<f32>();
    var c30 = mat4x4<f32>(); var c31 = mat4x4<f32>(); var c32 = mat4x4<f32>(); var c33 = mat4x4<f32>();
    let k4 = P.K & ~3u;
    for (var r = split * P.split_steps; r < min(P.items, (split + 1u) * P.split_steps); r++) {
        let item = z * P.items + r;
        a_base = P.a_off + item * P.a_bs;
        b_base = P.b_off + item * P.b_bs;
        for (var k = 0u; k < k4; k += 4u) {
            let a0 = a_piece(0u, k); let a1 = a_piece(1u, k);
            let a2 = a_piece(2u, k); let a3 = a_piece(3u, k);
            let b0 = b_piece(0u, k); let b1 = b_piece(1u, k);
            let b2 = b_piece(2u, k); let b3 = b_piece(3u, k);
            c00 += b0 * a0; c01 += b1 * a0; c02 += b2 * a0; c03 += b3 * a0;
            c10 += b0 * a1; c11 += b1 * a1; c12 += b2 * a1; c13 += b3 * a1;
            c20 += b0 * a2; c21 += b1 * a2; c22 += b2 * a2; c23 += b3 * a2;
            c30 += b0 * a3; c31 += b1 * a3; c32 += b2 * a3; c33 += b3 * a3;
        }
        for (var k = k4; k < P.K; k++) {
            let a0 = a_col(0u, k); let a1 = a_col(1u, k); let a2 = a_col(2u, k); let a3 = a_col(3u, k);
            let b0 = b_row(0u, k); let b1 = b_row(1u, k); let b2 = b_row(2u, k); let b3 = b_row(3u, k);
            c00 += outer(b0, a0); c01 += outer(b1, a0); c02 += outer(b2, a0); c03 += outer(b3, a0);
            c10 += outer(b0, a1); c11 += outer(b1, a1); c12 += outer(b2, a1); c13 += outer(b3, a1);
            c20 += outer(b0, a2); c21 += outer(b1, a2); c22 += outer(b2, a2); c23 += outer(b3, a2);
            c30 += outer(b0, a3); c31 += outer(b1, a3); c32 += outer(b2, a3); c33 += outer(b3, a3);
        }
    }
    store_quad(0u, 0u, c00); store_quad(0u, 1u, c01); store_quad(0u, 2u, c02); store_quad(0u, 3u, c03);
    store_quad(1u, 0u, c10); store_quad(1u, 1u, c11); store_quad(1u, 2u, c12); store_quad(1u, 3u, c13);
    store_quad(2u, 0u, c20); store_quad(2u, 1u, c21); store_quad(2u, 2u, c22); store_quad(2u, 3u, c23);
    store_quad(3u, 0u, c30); store_quad(3u, 1u, c31); store_quad(3u, 2u, c32); store_quad(3u, 3u, c33);
}

@compute @workgroup_size(WG)
fn matmul_cpu(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    product(li, wid);
}
