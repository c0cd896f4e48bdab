// float16 kernels (the Python side is backends/webgpu/f16.py, which puts `enable f16;` in front: the
// module needs the adapter's optional shader-f16 feature). Storage is array<f16>: two bytes an element,
// each element addressable on its own (a u32-packed store would need atomics to write one half).
//
// Entry points:
//   h_from_f, f_from_h, h_from_h   out = in over strided views of one shape (casts and copies)
//   matmul_h                       (not used by default: f16.py NATIVE_MATMUL says why)
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
@group(0) @binding(1) var<storage, read> in_h: array<f16>;
@group(0) @binding(1) var<storage, read> in_f: array<f32>;
@group(0) @binding(2) var<uniform> cp: CastParams;

const F16_MAX_ROUNDED: f32 = 65520.0;  // |x| at or beyond this rounds to inf in float16 (65504 is the largest)

// f32 -> f16 with IEEE results where WGSL leaves the conversion indeterminate: beyond the range it gives
// inf (by overflowing a half product at run time: a rounding toward zero would otherwise give 65504).
// NaN converts as Vulkan's OpFConvert does (to a NaN).
fn to_f16(x: f32) -> f16 {
    if ((bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u) { return f16(x); }
    let c = f16(clamp(x, -65504.0, 65504.0));
    if (abs(x) >= F16_MAX_ROUNDED) { return c * 2.0h; }
    return c;
}

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

// ------------------------------------------------------------------ matmul
// A workgroup of 16 x 16 threads computes a 128 x 128 tile of out, each thread 8 x 8 outputs (rows
// ly + 16 i, columns lx + 16 j: neighbouring threads read neighbouring words of workgroup memory and store
// neighbouring outputs). K is staged through workgroup memory BK = 8 at a time, converted to f32 on the
// way in: global traffic is half of the f32 kernel's, the arithmetic the same f32 FMA.

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
var<workgroup> tile_a: array<array<f32, 128>, 8>;  // [k][m]
var<workgroup> tile_b: array<array<f32, 128>, 8>;  // [k][n]

fn load_a(base: u32, m: u32, k: u32) -> f32 {
    if (m >= mp.M || k >= mp.K) { return 0.0; }
    if (TRANS_A) { return f32(mat_a[base + k * mp.M + m]); }
    return f32(mat_a[base + m * mp.K + k]);
}

fn load_b(base: u32, k: u32, n: u32) -> f32 {
    if (k >= mp.K || n >= mp.N) { return 0.0; }
    if (TRANS_B) { return f32(mat_b[base + n * mp.K + k]); }
    return f32(mat_b[base + k * mp.N + n]);
}

@compute @workgroup_size(16, 16)
fn matmul_h(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let z = wid.z;
    let row0 = wid.y * TILE;
    let col0 = wid.x * TILE;
    let a_base = mp.a_offset + z * mp.a_batch_stride;
    let b_base = mp.b_offset + z * mp.b_batch_stride;
    let t = lid.y * 16u + lid.x;  // 0..255: each thread stages 4 of the 1024 values of each tile
    var acc: array<array<f32, 8>, 8>;
    var av: array<f32, 8>;
    var bv: array<f32, 8>;
    for (var k0 = 0u; k0 < mp.K; k0 += BK) {
        for (var r = 0u; r < 4u; r++) {
            let e = t + r * 256u;
            // consecutive threads walk the stored rows' contiguous dim (coalesced loads)
            var am: u32; var ak: u32;
            if (TRANS_A) { am = e % TILE; ak = e / TILE; } else { ak = e % BK; am = e / BK; }
            tile_a[ak][am] = load_a(a_base, row0 + am, k0 + ak);
            var bn: u32; var bk: u32;
            if (TRANS_B) { bk = e % BK; bn = e / BK; } else { bn = e % TILE; bk = e / TILE; }
            tile_b[bk][bn] = load_b(b_base, k0 + bk, col0 + bn);
        }
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk++) {
            for (var i = 0u; i < 8u; i++) {
                av[i] = tile_a[kk][lid.y + 16u * i];
                bv[i] = tile_b[kk][lid.x + 16u * i];
            }
            for (var i = 0u; i < 8u; i++) {
                for (var j = 0u; j < 8u; j++) {
                    acc[i][j] = fma(av[i], bv[j], acc[i][j]);
                }
            }
        }
        workgroupBarrier();
    }
    let out_base = mp.out_offset + z * mp.M * mp.N;
    for (var i = 0u; i < 8u; i++) {
        let m = row0 + lid.y + 16u * i;
        if (m >= mp.M) { break; }
        for (var j = 0u; j < 8u; j++) {
            let n = col0 + lid.x + 16u * j;
            if (n >= mp.N) { continue; }
            var v = acc[i][j];
            if (HAS_BIAS) { v += f32(mat_bias[mp.bias_offset + n]); }
            if (RELU) { v = max(v, 0.0); }
            mat_out[out_base + m * mp.N + n] = to_f16(v);
        }
    }
}
