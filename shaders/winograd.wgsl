// Winograd convolutions F(2x2, 3x3) and F(4x4, 3x3) for 3x3 stride-1 convolutions on GPUs (Lavin and Gray,
// "Fast Algorithms for Convolutional Neural Networks", 2015): each TILE x TILE block of output pixels (a tile)
// takes ALPHA^2 products per (output, input) channel pair instead of 9 TILE^2 (ALPHA = TILE + 2: 16 for 4
// outputs, 36 for 16), in three steps around one batched matrix product:
//     V[xi] [C, T] = B^T d B        wino_input: the ALPHA x ALPHA input patch d of each channel c and tile t
//     U[xi] [R, S] = G g G^T        wino_weight: the 3x3 filter g of each channel pair
//     M[xi] [O, T] = U[xi] @ V[xi]  the ALPHA^2 products, matmul.wgsl (matmul_plan.plan, batch ALPHA^2)
//     Y = A^T m A (+ bias, ReLU)    wino_output: the ALPHA x ALPHA m of each output channel o and tile t
// with xi = ALPHA * a + b the position (a, b) in the transformed patch. Each entry's transform, X -> M X M^T
// with the tile size's matrix M, is spliced in as straight-line code (package/webgrad/_backends/webgpu/
// winograd_transforms.py writes it out from the matrices, which it lists): it reads X through the loader named
// below, then stores each entry of the result.
// Tile t = (n * TP + ty * TW + tx) covers output rows TILE ty .. TILE ty + TILE - 1 of image n, columns
// likewise, and reads the input rows TILE ty - py .. TILE ty - py + ALPHA - 1 (zero outside the plane).
// V and M are [ALPHA^2][channels][T] so that every step reads and writes along t (coalesced) and the product's
// operands are plain row-major matrices. The host side is package/webgrad/_backends/webgpu/winograd.py.
// The input gradient of a stride-1 convolution is the same convolution of dY with the filter flipped and
// its channel dims swapped (FLIP in wino_weight), padding 2 - p.
// The weight gradient runs the three steps backwards (the transposes of the output and weight transforms):
//     V[xi] [C, T] = B^T d B        wino_input, as in the forward
//     D[xi] [O, T] = A dy A^T       wino_grad_output: the TILE x TILE dY block of each output channel and tile
//     dU[xi] [O, C] = D[xi] @ V[xi]^T   matmul.wgsl, one [ALPHA^2][O][C] per chunk of images
//     dW = G^T (sum over chunks of dU) G    wino_grad_weight
// A thread past its count returns. Image reads are checked against the plane (the padding reads zeros); U, V,
// M and the chunks' dU sit at offset 0 of scratches the host sizes for every thread of the count, so their
// indices stay in range by construction.

struct Params {
    C: u32, H: u32, W: u32, T: u32,              // wino_input: channels, input plane, tiles
    py: i32, px: i32, x_off: u32, O: u32,       // padding, the image's element offset; wino_output: channels,
    OH: u32, OW: u32, out_off: u32, bias_off: u32,  // output plane, offsets
    R: u32, S: u32, w_off: u32, count: u32,     // wino_weight: U [ALPHA^2][R][S]; count: threads with work
    chunks: u32, _pad0: u32, _pad1: u32, _pad2: u32,  // wino_grad_weight: the chunks' dU to sum
}

// Element types: winograd.py splices ELEMENT_TYPES below (typed.py element_types): the aliases ST (src), DT
// (dst) and BT (bias), f32 or f16 (autocast's float16 images, filters and gradients in and out; U, V, M and
// every sum stay f32), and to_DT, the f32 -> DT rounding of a store.
//! splice ELEMENT_TYPES

// The tile size's constants TILE and ALPHA (winograd_transforms.py splices)
//! splice TILE

@group(0) @binding(0) var<storage, read> src: array<ST>;
@group(0) @binding(1) var<storage, read> bias: array<BT>;
@group(0) @binding(2) var<storage, read_write> dst: array<DT>;
@group(0) @binding(4) var<uniform> P: Params;
// The same bindings as vec4s: the row variants' transforms (winograd_transforms.py) read the image or dY, or
// write the output, through these (an entry point uses one view of each binding)
@group(0) @binding(0) var<storage, read> src4: array<vec4<ST>>;
@group(0) @binding(2) var<storage, read_write> dst4: array<vec4<DT>>;

override TW: u32 = 1u;   // tiles per row of a plane
override TP: u32 = 1u;   // tiles per plane
override FLIP: bool = false;     // wino_weight: the input gradient's filter (see above)
override HAS_BIAS: bool = false;
override RELU: bool = false;
// wino_output: each value where y > 0, else 0: ReLU's backward fused into an input gradient's output transform in
// a captured step (fusion.py). y (binding 3; the row variant reads it as vec4s) is the ReLU's output, laid out as
// the gradient, its value for the output at P.out_off + j at P.bias_off + j.
override MASK: bool = false;
@group(0) @binding(3) var<storage, read> mask_y: array<DT>;
@group(0) @binding(3) var<storage, read> mask_y4: array<vec4<DT>>;
const THREADS: u32 = 256u;
const XI: u32 = ALPHA * ALPHA;

fn put(i: u32, v: f32) {
    dst[i] = to_DT(v);
}

fn thread_id(li: u32, wid: vec3<u32>, nw: vec3<u32>) -> u32 {
    return (wid.x + wid.y * nw.x) * THREADS + li;
}

// Tile t's image n and the row and column of its first output: (n, TILE ty, TILE tx)
fn block(t: u32) -> vec3<u32> {
    let n = t / TP;
    let r = t - n * TP;
    let ty = r / TW;
    return vec3<u32>(n, TILE * ty, TILE * (r - ty * TW));
}

// The input transforms' thread g = c * T + t (channel c, tile t; its results go to g + xi * C * T): c's image
// plane of t's image and the block's origin
struct Patch { plane: u32, y: i32, x: i32 }

fn patch_of(g: u32) -> Patch {
    let c = g / P.T;
    let b = block(g - c * P.T);
    return Patch(P.x_off + (b.x * P.C + c) * P.H * P.W, i32(b.y), i32(b.z));
}

fn pixel(plane: u32, y: i32, x: i32) -> f32 {
    if (y < 0 || y >= i32(P.H) || x < 0 || x >= i32(P.W)) { return 0.0; }
    return f32(src[plane + u32(y) * P.W + u32(x)]);
}

// Pixels x .. x + 3 of row y (zeros outside the plane's rows): the row variants' loads, where x and the plane's
// row starts are multiples of 4 and x + 3 < W (winograd.py takes those variants only then)
fn row4(plane: u32, y: i32, x: i32) -> vec4<f32> {
    if (y < 0 || y >= i32(P.H)) { return vec4<f32>(0.0); }
    return vec4<f32>(src4[(plane + u32(y) * P.W + u32(x)) / 4u]);
}

// pixel, read through the vec4 view (an entry point reads its binding through one view only)
fn pixel4(plane: u32, y: i32, x: i32) -> f32 {
    if (y < 0 || y >= i32(P.H) || x < 0 || x >= i32(P.W)) { return 0.0; }
    let i = plane + u32(y) * P.W + u32(x);
    return f32(src4[i / 4u][i % 4u]);
}

// ---- wino_input: one thread per (c, t); X = the input patch d, M = B^T, stored at V[xi][c][t]
@compute @workgroup_size(THREADS)
fn wino_input(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
              @builtin(num_workgroups) nw: vec3<u32>) {
    let g = thread_id(li, wid, nw);
    if (g >= P.count) { return; }
    let p = patch_of(g);
    let y0 = p.y - P.py;
    let x0 = p.x - P.px;
    let step = P.C * P.T;
//! splice INPUT
}

// ---- wino_weight: one thread per (r, s) of U [ALPHA^2][R][S]; X = the filter g (tap), M = G
// Filter tap (i, j) of U's (r, s): W [O, C, 3, 3]; with FLIP, r is an input channel and s an output one
// and the window is reversed (the input gradient's filter)
fn tap(r: u32, s: u32, i: u32, j: u32) -> f32 {
    if (FLIP) { return f32(src[P.w_off + (s * P.R + r) * 9u + (2u - i) * 3u + (2u - j)]); }
    return f32(src[P.w_off + (r * P.S + s) * 9u + i * 3u + j]);
}

@compute @workgroup_size(THREADS)
fn wino_weight(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nw: vec3<u32>) {
    let g = thread_id(li, wid, nw);
    if (g >= P.count) { return; }
    let r = g / P.S;
    let s = g - r * P.S;
    let step = P.R * P.S;
//! splice WEIGHT
}

// ---- wino_output: one thread per (o, t); X = M[.][o][t], M = A^T, stored (+ bias, ReLU) at the tile's outputs
fn store(plane: u32, y: u32, x: u32, v: f32, b: f32) {
    if (y >= P.OH || x >= P.OW) { return; }
    let i = plane + y * P.OW + x;
    var r = v + b;
    if (RELU) { r = max(r, 0.0); }
    if (MASK) { r = select(0.0, r, f32(mask_y[P.bias_off + i - P.out_off]) > 0.0); }
    put(i, r);
}

// A tile's row of 4 outputs x .. x + 3 in one store (the row variant of F(4x4): output rows of a multiple of 4)
fn store4(plane: u32, y: u32, x: u32, v: vec4<f32>, b: f32) {
    if (y >= P.OH) { return; }
    let i = plane + y * P.OW + x;
    var r = v + vec4<f32>(b);
    if (RELU) { r = max(r, vec4<f32>(0.0)); }
    if (MASK) {
        r = select(vec4<f32>(0.0), r, vec4<f32>(mask_y4[(P.bias_off + i - P.out_off) / 4u]) > vec4<f32>(0.0));
    }
    dst4[i / 4u] = to_DT4(r);
}

// The output transforms' thread g = o * T + t (M[xi][o][t] at g + xi * step): its tile and output plane
struct Block { k: vec3<u32>, plane: u32, bias: f32 }

fn block_of(g: u32) -> Block {
    let o = g / P.T;
    let k = block(g - o * P.T);
    var b = 0.0;
    if (HAS_BIAS) { b = f32(bias[P.bias_off + o]); }
    return Block(k, P.out_off + (k.x * P.O + o) * P.OH * P.OW, b);
}

@compute @workgroup_size(THREADS)
fn wino_output(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nw: vec3<u32>) {
    let g = thread_id(li, wid, nw);
    if (g >= P.count) { return; }
    let step = P.O * P.T;
    let b = block_of(g);
    let k = b.k;
    let plane = b.plane;
    let bias_o = b.bias;
//! splice OUTPUT
}

// ---- wino_grad_output: one thread per (c, t) of dY's C channels (Params as wino_input's, H x W = dY's plane);
// X = the TILE x TILE block of dY, M = A (the transpose of A^T), stored at D[xi][c][t]
@compute @workgroup_size(THREADS)
fn wino_grad_output(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
                    @builtin(num_workgroups) nw: vec3<u32>) {
    let g = thread_id(li, wid, nw);
    if (g >= P.count) { return; }
    let p = patch_of(g);
    let step = P.C * P.T;
//! splice GRAD_OUTPUT
}

// ---- wino_grad_weight: ALPHA threads per (r, s) = (o, c), one per row of X: dW [O, C, 3, 3] at w_off from the
// slabs' dU [chunks][ALPHA^2][R][S]; X = the sum of the slabs' dU[.][r][s], M = G^T, stored at dW[o][c]. A
// workgroup takes PW pairs; its thread li works on row li / PW of pair li % PW, so that a row's loads are
// coalesced along the pairs. Each thread sums its row over the slabs in one loop with an accumulator per point
// (each step's loads independent), puts its row of X M^T in workgroup memory, and rows 0 to 2 finish the pair's
// 3x3. H200, ResNet-18's 13 weight gradients (bench replay --each): 243 us;
// one thread per pair summing all ALPHA^2 points, 195 us over the chunks' reduced dU, 331 over all the slabs.
const PW: u32 = THREADS / ALPHA;
var<workgroup> grad_rows: array<f32, 3u * ALPHA * PW>;  // [ALPHA rows][3][PW pairs]

@compute @workgroup_size(THREADS)
fn wino_grad_weight(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
                    @builtin(num_workgroups) nw: vec3<u32>) {
    let row = li / PW;
    let j = li - row * PW;
    let g = (wid.x + wid.y * nw.x) * PW + j;
    let live = row < ALPHA && g < P.count;  // (no early return: every thread reaches the barrier)
    let o = P.w_off + g * 9u;
    let step = P.R * P.S;
//! splice GRAD_WEIGHT
}
