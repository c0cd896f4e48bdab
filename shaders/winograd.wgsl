// Winograd F(2x2, 3x3) for 3x3 stride-1 convolutions on GPUs (Lavin and Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2015): each 2x2 block of output pixels (a tile) takes 16 products per
// (output, input) channel pair instead of 36, in three steps around one batched matrix product:
//     V[xi] [C, T] = B^T d B        wino_input: the 4x4 input patch d of each channel c and tile t
//     U[xi] [R, S] = G g G^T        wino_weight: the 3x3 filter g of each channel pair
//     M[xi] [O, T] = U[xi] @ V[xi]  the 16 products, matmul.wgsl (matmul_plan.plan, batch 16)
//     Y = A^T m A (+ bias, ReLU)    wino_output: the 4x4 m of each output channel o and tile t
// with xi = 4 * a + b the position (a, b) in the 4x4 transformed patch, and
//     B^T = [1  0 -1  0]    G = [1    0    0  ]    A^T = [1  1  1  0]
//           [0  1  1  0]        [1/2  1/2  1/2]          [0  1 -1 -1]
//           [0 -1  1  0]        [1/2 -1/2  1/2]
//           [0  1  0 -1]        [0    0    1  ]
// Tile t = (n * TP + ty * TW + tx) covers output rows 2ty, 2ty + 1 and columns 2tx, 2tx + 1 of image n, and
// reads the input rows 2ty - py .. 2ty - py + 3 (zero outside the plane), columns likewise.
// V and M are [16][channels][T] so that every step reads and writes along t (coalesced) and the product's
// operands are plain row-major matrices. The host side is package/webgrad/_backends/webgpu/winograd.py.
// The input gradient of a stride-1 convolution is the same convolution of dY with the filter flipped and
// its channel dims swapped (FLIP in wino_weight), padding 2 - p.
// The weight gradient runs the three steps backwards (the transposes of the output and weight transforms):
//     V[xi] [C, T] = B^T d B        wino_input, as in the forward
//     D[xi] [O, T] = A dy A^T       wino_grad_output: the 2x2 dY block of each output channel and tile
//     dU[xi] [O, C] = D[xi] @ V[xi]^T   matmul.wgsl, one [16][O][C] per chunk of images
//     dW = G^T (sum over chunks of dU) G    wino_grad_weight
// A thread past its count returns. Image reads are checked against the plane (the padding reads zeros); U, V,
// M and the chunks' dU sit at offset 0 of scratches the host sizes for every thread of the count, so their
// indices stay in range by construction.

struct Params {
    C: u32, H: u32, W: u32, T: u32,              // wino_input: channels, input plane, tiles
    py: i32, px: i32, x_off: u32, O: u32,       // padding, the image's element offset; wino_output: channels,
    OH: u32, OW: u32, out_off: u32, bias_off: u32,  // output plane, offsets
    R: u32, S: u32, w_off: u32, count: u32,     // wino_weight: U [16][R][S]; count: threads with work
    chunks: u32, _pad0: u32, _pad1: u32, _pad2: u32,  // wino_grad_weight: the chunks' dU to sum
}

// Element types: winograd.py splices ELEMENT_TYPES below (typed.py element_types): the aliases ST (src), DT
// (dst) and BT (bias), f32 or f16 (autocast's float16 images, filters and gradients in and out; U, V, M and
// every sum stay f32), and to_DT, the f32 -> DT rounding of a store.
//! splice ELEMENT_TYPES

@group(0) @binding(0) var<storage, read> src: array<ST>;
@group(0) @binding(1) var<storage, read> bias: array<BT>;
@group(0) @binding(2) var<storage, read_write> dst: array<DT>;
@group(0) @binding(4) var<uniform> P: Params;

fn put(i: u32, v: f32) {
    dst[i] = to_DT(v);
}

override TW: u32 = 1u;   // tiles per row of a plane
override TP: u32 = 1u;   // tiles per plane
override FLIP: bool = false;     // wino_weight: the input gradient's filter (see above)
override HAS_BIAS: bool = false;
override RELU: bool = false;
const THREADS: u32 = 256u;

fn thread_id(li: u32, wid: vec3<u32>, nw: vec3<u32>) -> u32 {
    return (wid.x + wid.y * nw.x) * THREADS + li;
}

// Tile t's image n and the row and column of its first output: (n, 2ty, 2tx)
fn block(t: u32) -> vec3<u32> {
    let n = t / TP;
    let r = t - n * TP;
    let ty = r / TW;
    return vec3<u32>(n, 2u * ty, 2u * (r - ty * TW));
}

// The input transforms' thread g = c * T + t: channel c, tile t, c's image plane of t's image, the block's origin
struct Patch { c: u32, t: u32, plane: u32, y: i32, x: i32 }

fn patch_of(g: u32) -> Patch {
    let c = g / P.T;
    let t = g - c * P.T;
    let b = block(t);
    return Patch(c, t, P.x_off + (b.x * P.C + c) * P.H * P.W, i32(b.y), i32(b.z));
}

// A transformed 4x4 patch (rows v0..v3) into dst at i, i + step, ..., i + 15 * step (xi = 0..15)
fn put16(i0: u32, step: u32, v0: vec4<f32>, v1: vec4<f32>, v2: vec4<f32>, v3: vec4<f32>) {
    var i = i0;
    put(i, v0.x); i += step; put(i, v0.y); i += step; put(i, v0.z); i += step; put(i, v0.w); i += step;
    put(i, v1.x); i += step; put(i, v1.y); i += step; put(i, v1.z); i += step; put(i, v1.w); i += step;
    put(i, v2.x); i += step; put(i, v2.y); i += step; put(i, v2.z); i += step; put(i, v2.w); i += step;
    put(i, v3.x); i += step; put(i, v3.y); i += step; put(i, v3.z); i += step; put(i, v3.w);
}

// ---- wino_input: one thread per (c, t)
fn pixel(plane: u32, y: i32, x: i32) -> f32 {
    if (y < 0 || y >= i32(P.H) || x < 0 || x >= i32(P.W)) { return 0.0; }
    return f32(src[plane + u32(y) * P.W + u32(x)]);
}

// B^T applied to 4 values along one axis
fn bt(d: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(d.x - d.z, d.y + d.z, d.z - d.y, d.y - d.w);
}

// One row of the input patch, B applied along it
fn row_bt(plane: u32, y: i32, x0: i32) -> vec4<f32> {
    return bt(vec4<f32>(pixel(plane, y, x0), pixel(plane, y, x0 + 1), pixel(plane, y, x0 + 2),
                        pixel(plane, y, x0 + 3)));
}

@compute @workgroup_size(256)
fn wino_input(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
              @builtin(num_workgroups) nw: vec3<u32>) {
    let g = thread_id(li, wid, nw);
    if (g >= P.count) { return; }
    let p = patch_of(g);
    let y0 = p.y - P.py;
    let x0 = p.x - P.px;
    // rows of d with B applied along x: e_i = (d B)[i, :]; then B^T along y: V[a, :] = sum_i B^T[a, i] e_i
    let e0 = row_bt(p.plane, y0, x0);
    let e1 = row_bt(p.plane, y0 + 1, x0);
    let e2 = row_bt(p.plane, y0 + 2, x0);
    let e3 = row_bt(p.plane, y0 + 3, x0);
    put16(p.c * P.T + p.t, P.C * P.T, e0 - e2, e1 + e2, e2 - e1, e1 - e3);
}

// ---- wino_weight: one thread per (r, s) of U [16][R][S]
// G applied to 3 values along one axis
fn gt(g: vec3<f32>) -> vec4<f32> {
    return vec4<f32>(g.x, 0.5 * (g.x + g.y + g.z), 0.5 * (g.x - g.y + g.z), g.z);
}

// Filter tap (i, j) of U's (r, s): W [O, C, 3, 3]; with FLIP, r is an input channel and s an output one
// and the window is reversed (the input gradient's filter)
fn tap(r: u32, s: u32, i: u32, j: u32) -> f32 {
    if (FLIP) { return f32(src[P.w_off + (s * P.R + r) * 9u + (2u - i) * 3u + (2u - j)]); }
    return f32(src[P.w_off + (r * P.S + s) * 9u + i * 3u + j]);
}

fn filter_row(r: u32, s: u32, i: u32) -> vec4<f32> {
    return gt(vec3<f32>(tap(r, s, i, 0u), tap(r, s, i, 1u), tap(r, s, i, 2u)));
}

@compute @workgroup_size(256)
fn wino_weight(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nw: vec3<u32>) {
    let g = thread_id(li, wid, nw);
    if (g >= P.count) { return; }
    let r = g / P.S;
    let s = g - r * P.S;
    let h0 = filter_row(r, s, 0u);
    let h1 = filter_row(r, s, 1u);
    let h2 = filter_row(r, s, 2u);
    put16(g, P.R * P.S, h0, 0.5 * (h0 + h1 + h2), 0.5 * (h0 - h1 + h2), h2);  // then G along the rows
}

// ---- wino_output: one thread per (o, t)
// A^T applied to 4 values along one axis
fn at(m: vec4<f32>) -> vec2<f32> {
    return vec2<f32>(m.x + m.y + m.z, m.y - m.z - m.w);
}

fn store(plane: u32, y: u32, x: u32, v: f32, b: f32) {
    if (y >= P.OH || x >= P.OW) { return; }
    var r = v + b;
    if (RELU) { r = max(r, 0.0); }
    put(plane + y * P.OW + x, r);
}

@compute @workgroup_size(256)
fn wino_output(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nw: vec3<u32>) {
    let g = thread_id(li, wid, nw);
    if (g >= P.count) { return; }
    let o = g / P.T;
    let t = g - o * P.T;
    let step = P.O * P.T;
    var i = g;  // = o * T + t: M[xi][o][t]
    // rows of m, A applied along b: f_a = (m A)[a, :]
    var m = vec4<f32>(f32(src[i]), f32(src[i + step]), f32(src[i + 2u * step]), f32(src[i + 3u * step]));
    let f0 = at(m);
    i += 4u * step;
    m = vec4<f32>(f32(src[i]), f32(src[i + step]), f32(src[i + 2u * step]), f32(src[i + 3u * step]));
    let f1 = at(m);
    i += 4u * step;
    m = vec4<f32>(f32(src[i]), f32(src[i + step]), f32(src[i + 2u * step]), f32(src[i + 3u * step]));
    let f2 = at(m);
    i += 4u * step;
    m = vec4<f32>(f32(src[i]), f32(src[i + step]), f32(src[i + 2u * step]), f32(src[i + 3u * step]));
    let f3 = at(m);
    let y0 = f0 + f1 + f2;  // A^T along a
    let y1 = f1 - f2 - f3;
    var b = 0.0;
    if (HAS_BIAS) { b = f32(bias[P.bias_off + o]); }
    let k = block(t);
    let plane = P.out_off + (k.x * P.O + o) * P.OH * P.OW;
    store(plane, k.y, k.z, y0.x, b);
    store(plane, k.y, k.z + 1u, y0.y, b);
    store(plane, k.y + 1u, k.z, y1.x, b);
    store(plane, k.y + 1u, k.z + 1u, y1.y, b);
}

// ---- wino_grad_output: one thread per (c, t) of dY's C channels (Params as wino_input's, H x W = dY's plane)
// A applied to the 2 values along one axis
fn a2(p: f32, q: f32) -> vec4<f32> {
    return vec4<f32>(p, p + q, p - q, -q);
}

@compute @workgroup_size(256)
fn wino_grad_output(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
                    @builtin(num_workgroups) nw: vec3<u32>) {
    let g = thread_id(li, wid, nw);
    if (g >= P.count) { return; }
    let p = patch_of(g);
    let e0 = a2(pixel(p.plane, p.y, p.x), pixel(p.plane, p.y, p.x + 1));  // rows of dy, A applied along x
    let e1 = a2(pixel(p.plane, p.y + 1, p.x), pixel(p.plane, p.y + 1, p.x + 1));
    put16(p.c * P.T + p.t, P.C * P.T, e0, e0 + e1, e0 - e1, -e1);  // then A along y
}

// ---- wino_grad_weight: one thread per (r, s) = (o, c): dW [O, C, 3, 3] at w_off from the chunks' dU
// [chunks][16][R][S]
// G^T applied to the 4 values along one axis
fn g3(u: vec4<f32>) -> vec3<f32> {
    return vec3<f32>(u.x + 0.5 * (u.y + u.z), 0.5 * (u.y - u.z), 0.5 * (u.y + u.z) + u.w);
}

fn du(g: u32, xi: u32) -> f32 {
    let step = P.R * P.S;
    var s = 0.0;
    for (var k = 0u; k < P.chunks; k++) {
        s += f32(src[(k * 16u + xi) * step + g]);
    }
    return s;
}

fn du_row(g: u32, a: u32) -> vec3<f32> {
    return g3(vec4<f32>(du(g, 4u * a), du(g, 4u * a + 1u), du(g, 4u * a + 2u), du(g, 4u * a + 3u)));
}

@compute @workgroup_size(256)
fn wino_grad_weight(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
                    @builtin(num_workgroups) nw: vec3<u32>) {
    let g = thread_id(li, wid, nw);
    if (g >= P.count) { return; }
    let h0 = du_row(g, 0u);  // rows a of dU, G^T applied along b
    let h1 = du_row(g, 1u);
    let h2 = du_row(g, 2u);
    let h3 = du_row(g, 3u);
    let w0 = h0 + 0.5 * (h1 + h2);  // then G^T along a
    let w1 = 0.5 * (h1 - h2);
    let w2 = 0.5 * (h1 + h2) + h3;
    let o = P.w_off + g * 9u;
    put(o, w0.x); put(o + 1u, w0.y); put(o + 2u, w0.z);
    put(o + 3u, w1.x); put(o + 4u, w1.y); put(o + 5u, w1.z);
    put(o + 6u, w2.x); put(o + 7u, w2.y); put(o + 8u, w2.z);
}
