// float16 kernels (the Python side is _backends/webgpu/f16.py, which puts `enable f16;` in front: the
// module needs the adapter's optional shader-f16 feature). Storage is array<f16>: two bytes an element,
// each element addressable on its own (a u32-packed store would need atomics to write one half).
//
// Entry points:
//   h_from_f, f_from_h, h_from_h   out = in over strided views of one shape (casts and copies)
//   h_from_f4, f_from_h4, h_from_h4  the same where both are contiguous, with offsets and size multiples of
//                                  4: four elements a thread through vec4 views (a weight's cast under
//                                  autocast, its gradient's back to f32)
//   matmul_h                       (off by default: slower than the f32 kernel on copies, f16.py NATIVE_MATMUL)
//                                  out[z] = op(a[z]) @ op(b[z]) (+ bias) (then relu), f16 in and out,
//                                  products and sums in f32 (the product of two halves is exact in f32),
//                                  rounded once at the store, as cuBLAS does for half GEMMs

// ------------------------------------------------------------------ conversions

struct CastParams {
    n: u32,                          // elements
    rank: u32,                       // dims after merging (0..8)
    out_offset: i32,
    in_offset: i32,
    shape: array<vec4<u32>, 2>,      // dim d is shape[d / 4][d % 4]
    out_stride: array<vec4<i32>, 2>,
    in_stride: array<vec4<i32>, 2>,
}

@group(0) @binding(0) var<storage, read_write> out_h: array<f16>;
@group(0) @binding(0) var<storage, read_write> out_f: array<f32>;
@group(0) @binding(0) var<storage, read_write> out_h4: array<vec4<f16>>;
@group(0) @binding(0) var<storage, read_write> out_f4: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> in_h: array<f16>;
@group(0) @binding(1) var<storage, read> in_f: array<f32>;
@group(0) @binding(1) var<storage, read> in_h4: array<vec4<f16>>;
@group(0) @binding(1) var<storage, read> in_f4: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> cp: CastParams;

//! include "f16_round.wgsl"

// (out, in) element offsets of the i-th element in row-major order.
fn cast_offsets(i: u32) -> vec2<i32> {
    var rest = i;
    var off = vec2<i32>(cp.out_offset, cp.in_offset);
    for (var d = cp.rank; d > 0u; d--) {
        let k = d - 1u;
        let n = cp.shape[k / 4u][k % 4u];
        let j = i32(rest % n);
        off += j * vec2<i32>(cp.out_stride[k / 4u][k % 4u], cp.in_stride[k / 4u][k % 4u]);
        rest /= n;
    }
    return off;
}

fn linear_id(wid: vec3<u32>, lid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return (wid.x + wid.y * groups.x) * 256u + lid.x;
}

@compute @workgroup_size(256)
fn h_from_f(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
            @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_id(wid, lid, groups);
    if (i >= cp.n) { return; }
    let o = cast_offsets(i);
    out_h[o.x] = to_f16(in_f[o.y]);
}

@compute @workgroup_size(256)
fn f_from_h(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
            @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_id(wid, lid, groups);
    if (i >= cp.n) { return; }
    let o = cast_offsets(i);
    out_f[o.x] = f32(in_h[o.y]);
}

@compute @workgroup_size(256)
fn h_from_h(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
            @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_id(wid, lid, groups);
    if (i >= cp.n) { return; }
    let o = cast_offsets(i);
    out_h[o.x] = in_h[o.y];
}

// Contiguous casts: thread i converts elements 4i .. 4i+3 of cp.n (a multiple of 4) from cp.in_offset to
// cp.out_offset (multiples of 4 too, so that a vec4 view's element j is elements 4j .. 4j+3). (An entry point
// may use only one of the views declared at a binding: naga rejects two, so there is no scalar tail.)
@compute @workgroup_size(256)
fn h_from_f4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
             @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_id(wid, lid, groups);
    if (4u * i >= cp.n) { return; }
    let v = in_f4[cp.in_offset / 4 + i32(i)];
    out_h4[cp.out_offset / 4 + i32(i)] = vec4<f16>(to_f16(v.x), to_f16(v.y), to_f16(v.z), to_f16(v.w));
}

@compute @workgroup_size(256)
fn f_from_h4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
             @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_id(wid, lid, groups);
    if (4u * i >= cp.n) { return; }
    out_f4[cp.out_offset / 4 + i32(i)] = vec4<f32>(in_h4[cp.in_offset / 4 + i32(i)]);
}

@compute @workgroup_size(256)
fn h_from_h4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
             @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_id(wid, lid, groups);
    if (4u * i >= cp.n) { return; }
    out_h4[cp.out_offset / 4 + i32(i)] = in_h4[cp.in_offset / 4 + i32(i)];
}

// ------------------------------------------------------------------ matmul
// A workgroup of 16 x 16 threads computes a 128 x 128 tile of out; thread (x, y) owns rows 4y..4y+3 and
// 64+4y..64+4y+3 and columns 4x..4x+3 and 64+4x..64+4x+3 of it, sixteen vec4 accumulators. K is staged
// through workgroup memory BK = 8 at a time, converted to f32 on the way in (global traffic is half of
// the f32 kernel's, the arithmetic the same f32 FMA). As in matmul.wgsl the register code is written out
// (named accumulators, no loop over them): naga guards loops with counters that drivers do not unroll,
// and an accumulator array indexed by a loop counter lives in local memory (this kernel's first, loop
// version ran 0.71 TFLOP/s on an H200 at 4096^3).

override TRANS_A: bool = false;   // a stored [K, M] (else [M, K]), row-major
override TRANS_B: bool = false;   // b stored [N, K] (else [K, N])
override HAS_BIAS: bool = false;  // one bias per column
override RELU: bool = false;

struct MatmulParams {
    M: u32,
    N: u32,
    K: u32,
    a_offset: u32,
    b_offset: u32,
    out_offset: u32,
    bias_offset: u32,
    a_batch_stride: u32,             // 0: one matrix for every batch entry
    b_batch_stride: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<storage, read> mat_a: array<f16>;
@group(0) @binding(1) var<storage, read> mat_b: array<f16>;
@group(0) @binding(2) var<storage, read_write> mat_out: array<f16>;
@group(0) @binding(3) var<storage, read> mat_bias: array<f16>;
@group(0) @binding(4) var<uniform> mp: MatmulParams;

const TILE: u32 = 128u;
const BK: u32 = 8u;
var<workgroup> tile_a: array<vec4<f32>, 256>;  // [k][m / 4]: 8 x 32
var<workgroup> tile_b: array<vec4<f32>, 256>;  // [k][n / 4]: 8 x 32
var<private> c00: vec4<f32>;
var<private> c01: vec4<f32>;
var<private> c10: vec4<f32>;
var<private> c11: vec4<f32>;
var<private> c20: vec4<f32>;
var<private> c21: vec4<f32>;
var<private> c30: vec4<f32>;
var<private> c31: vec4<f32>;
var<private> c40: vec4<f32>;
var<private> c41: vec4<f32>;
var<private> c50: vec4<f32>;
var<private> c51: vec4<f32>;
var<private> c60: vec4<f32>;
var<private> c61: vec4<f32>;
var<private> c70: vec4<f32>;
var<private> c71: vec4<f32>;
var<private> row0: u32;
var<private> col0: u32;
var<private> out_base: u32;

fn a_at(base: u32, m: u32, k: u32) -> f32 {
    if (m >= mp.M || k >= mp.K) { return 0.0; }
    if (TRANS_A) { return f32(mat_a[base + k * mp.M + m]); }
    return f32(mat_a[base + m * mp.K + k]);
}

fn b_at(base: u32, k: u32, n: u32) -> f32 {
    if (k >= mp.K || n >= mp.N) { return 0.0; }
    if (TRANS_B) { return f32(mat_b[base + n * mp.K + k]); }
    return f32(mat_b[base + k * mp.N + n]);
}

// one k of the outer product: a column of A's tile (two vec4 of rows) times a row of B's (two vec4 of columns)
fn kstep(ai: u32, bi: u32) {
    let a0 = tile_a[ai];
    let a1 = tile_a[ai + 16u];
    let b0 = tile_b[bi];
    let b1 = tile_b[bi + 16u];
    c00 = fma(vec4<f32>(a0.x), b0, c00);
    c01 = fma(vec4<f32>(a0.x), b1, c01);
    c10 = fma(vec4<f32>(a0.y), b0, c10);
    c11 = fma(vec4<f32>(a0.y), b1, c11);
    c20 = fma(vec4<f32>(a0.z), b0, c20);
    c21 = fma(vec4<f32>(a0.z), b1, c21);
    c30 = fma(vec4<f32>(a0.w), b0, c30);
    c31 = fma(vec4<f32>(a0.w), b1, c31);
    c40 = fma(vec4<f32>(a1.x), b0, c40);
    c41 = fma(vec4<f32>(a1.x), b1, c41);
    c50 = fma(vec4<f32>(a1.y), b0, c50);
    c51 = fma(vec4<f32>(a1.y), b1, c51);
    c60 = fma(vec4<f32>(a1.z), b0, c60);
    c61 = fma(vec4<f32>(a1.z), b1, c61);
    c70 = fma(vec4<f32>(a1.w), b0, c70);
    c71 = fma(vec4<f32>(a1.w), b1, c71);
}

fn finish(v: f32, n: u32) -> f16 {
    var x = v;
    if (HAS_BIAS) { x += f32(mat_bias[mp.bias_offset + n]); }
    if (RELU) { x = max(x, 0.0); }
    return to_f16(x);
}

// columns n .. n+3 of tile row r (bounds-checked)
fn store4(r: u32, c: u32, v: vec4<f32>) {
    let m = row0 + r;
    let n = col0 + c;
    if (m >= mp.M) { return; }
    let o = out_base + m * mp.N + n;
    if (n < mp.N) { mat_out[o] = finish(v.x, n); }
    if (n + 1u < mp.N) { mat_out[o + 1u] = finish(v.y, n + 1u); }
    if (n + 2u < mp.N) { mat_out[o + 2u] = finish(v.z, n + 2u); }
    if (n + 3u < mp.N) { mat_out[o + 3u] = finish(v.w, n + 3u); }
}

@compute @workgroup_size(16, 16)
fn matmul_h(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let z = wid.z;
    row0 = wid.y * TILE;
    col0 = wid.x * TILE;
    out_base = mp.out_offset + z * mp.M * mp.N;
    let a_base = mp.a_offset + z * mp.a_batch_stride;
    let b_base = mp.b_offset + z * mp.b_batch_stride;
    let t = lid.y * 16u + lid.x;  // 0..255: each thread stages one vec4 of each tile
    // which vec4 this thread stages: consecutive threads walk the stored rows' contiguous dim
    var ak: u32; var am4: u32; var bk: u32; var bn4: u32;
    if (TRANS_A) { am4 = t % 32u; ak = t / 32u; } else { ak = t % BK; am4 = t / BK; }
    if (TRANS_B) { bk = t % BK; bn4 = t / BK; } else { bn4 = t % 32u; bk = t / 32u; }
    for (var k0 = 0u; k0 < mp.K; k0 += BK) {
        let m = row0 + am4 * 4u;
        tile_a[ak * 32u + am4] = vec4<f32>(a_at(a_base, m, k0 + ak), a_at(a_base, m + 1u, k0 + ak),
                                           a_at(a_base, m + 2u, k0 + ak), a_at(a_base, m + 3u, k0 + ak));
        let n = col0 + bn4 * 4u;
        tile_b[bk * 32u + bn4] = vec4<f32>(b_at(b_base, k0 + bk, n), b_at(b_base, k0 + bk, n + 1u),
                                           b_at(b_base, k0 + bk, n + 2u), b_at(b_base, k0 + bk, n + 3u));
        workgroupBarrier();
        kstep(lid.y, lid.x);
        kstep(32u + lid.y, 32u + lid.x);
        kstep(64u + lid.y, 64u + lid.x);
        kstep(96u + lid.y, 96u + lid.x);
        kstep(128u + lid.y, 128u + lid.x);
        kstep(160u + lid.y, 160u + lid.x);
        kstep(192u + lid.y, 192u + lid.x);
        kstep(224u + lid.y, 224u + lid.x);
        workgroupBarrier();
    }
    store4(0u + lid.y * 4u + 0u, 0u + lid.x * 4u, c00);
    store4(0u + lid.y * 4u + 0u, 64u + lid.x * 4u, c01);
    store4(0u + lid.y * 4u + 1u, 0u + lid.x * 4u, c10);
    store4(0u + lid.y * 4u + 1u, 64u + lid.x * 4u, c11);
    store4(0u + lid.y * 4u + 2u, 0u + lid.x * 4u, c20);
    store4(0u + lid.y * 4u + 2u, 64u + lid.x * 4u, c21);
    store4(0u + lid.y * 4u + 3u, 0u + lid.x * 4u, c30);
    store4(0u + lid.y * 4u + 3u, 64u + lid.x * 4u, c31);
    store4(64u + lid.y * 4u + 0u, 0u + lid.x * 4u, c40);
    store4(64u + lid.y * 4u + 0u, 64u + lid.x * 4u, c41);
    store4(64u + lid.y * 4u + 1u, 0u + lid.x * 4u, c50);
    store4(64u + lid.y * 4u + 1u, 64u + lid.x * 4u, c51);
    store4(64u + lid.y * 4u + 2u, 0u + lid.x * 4u, c60);
    store4(64u + lid.y * 4u + 2u, 64u + lid.x * 4u, c61);
    store4(64u + lid.y * 4u + 3u, 0u + lid.x * 4u, c70);
    store4(64u + lid.y * 4u + 3u, 64u + lid.x * 4u, c71);
}
