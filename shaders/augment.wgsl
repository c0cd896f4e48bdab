//! include "common.wgsl"
//! include "random_stream.wgsl"
// Data augmentation on image batches [N, C, H, W] (the Python side is _backends/webgpu/augment.py; the
// semantics, and the CPU reference, are in _backends/kernels.py and _backends/cpu/augment.py):
//   crop_flip   a random crop of the padded image, then a random horizontal flip, drawn per sample
//   affine      out = x * scale[c] + shift[c] in float32, from uint8 or float32, NCHW or NHWC
// Random parameters come from the counter-based stream of random.wgsl (same hash, same counters), so a
// sample's crop and flip are the CPU backend's, and seed/offset may be dynamic scalars: a replayed step
// draws new augmentations each time.

override X_DTYPE: u32 = DT_F32;  // also out's dtype for crop_flip (uint8 is written four bytes a word)

const NO_SLOT: u32 = 0xffffffffu;
const WORKGROUP: u32 = 256u;
const TWO_POW_M24: f32 = 5.9604644775390625e-8;
// padding modes, the order of AUGMENT_PAD_MODES (backends/interface.py)
const PAD_CONSTANT: u32 = 0u;
const PAD_EDGE: u32 = 1u;
const PAD_REFLECT: u32 = 2u;

@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read> scalars: array<u32>;

// ------------------------------------------------------------------ crop_flip
struct CropParams {
    n: u32,          // output elements
    words: u32,      // output words (n, or ceil(n / 4) for uint8)
    c: u32,
    h: u32,
    w: u32,
    oh: u32,
    ow: u32,
    pad_top: u32,
    pad_left: u32,
    span_i: u32,     // PH - OH + 1: the crop's possible top rows
    span_j: u32,
    x_offset: u32,   // elements
    out_offset: u32, // elements (a multiple of 4 for uint8)
    seed: u32,
    offset: u32,
    seed_slot: u32,
    offset_slot: u32,
    mode: u32,
    fill: f32,
    flip_p: f32,
}

@group(0) @binding(3) var<uniform> cp: CropParams;

// The image row (or column) at padded-relative coordinate t (0..size-1 is the image); -1: the fill value.
fn pad_index(t: i32, size: i32) -> i32 {
    if (t >= 0 && t < size) { return t; }
    switch cp.mode {
        case PAD_CONSTANT: { return -1; }
        case PAD_EDGE: { return clamp(t, 0, size - 1); }
        case PAD_REFLECT: { return select(2 * size - 2 - t, -t, t < 0); }
        default: { return select(2 * size - 1 - t, -t - 1, t < 0); }  // symmetric
    }
}

// One output row's draw: which image row it reads (-1: fill), from which column, flipped or not.
struct CropRow {
    src_row: i32,
    plane: u32,      // n * C + c
    j: u32,
    flipped: bool,
}

fn crop_row(row: u32, k: u32, offset: u32) -> CropRow {
    let y = row % cp.oh;
    let plane = row / cp.oh;
    let c0 = offset + 3u * (plane / cp.c);
    let i = scale24(bits(c0, k) >> 8u, cp.span_i);
    let j = scale24(bits(c0 + 1u, k) >> 8u, cp.span_j);
    let flipped = f32(bits(c0 + 2u, k) >> 8u) * TWO_POW_M24 < cp.flip_p;
    return CropRow(pad_index(i32(i + y) - i32(cp.pad_top), i32(cp.h)), plane, j, flipped);
}

// Column v of a row: its value as a word of X_DTYPE (a uint8 value in the low byte).
fn crop_pick(r: CropRow, v: u32) -> u32 {
    let col = select(v, cp.ow - 1u - v, r.flipped);
    let s = pad_index(i32(r.j + col) - i32(cp.pad_left), i32(cp.w));
    if (r.src_row < 0 || s < 0) {
        if (X_DTYPE == DT_U8) { return u32(cp.fill) & 0xffu; }
        return encode_f32(cp.fill, X_DTYPE);
    }
    let src = cp.x_offset + (r.plane * cp.h + u32(r.src_row)) * cp.w + u32(s);
    let word = x[word_index(src, X_DTYPE)];
    if (X_DTYPE == DT_U8) { return (word >> ((src & 3u) * 8u)) & 0xffu; }
    return word;
}

// A thread per output row: the draw is made once per row, not per element. A uint8 row writes the words
// that start in it (a word reaching into the next row takes that row's draw for those bytes).
@compute @workgroup_size(WORKGROUP)
fn crop_flip(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    var seed = cp.seed;
    if (cp.seed_slot != NO_SLOT) { seed = scalars[cp.seed_slot]; }
    var offset = cp.offset;
    if (cp.offset_slot != NO_SLOT) { offset = scalars[cp.offset_slot]; }
    let k = lowbias32(seed);
    let rows = cp.n / cp.ow;
    for (var row = gid.x; row < rows; row += groups.x * WORKGROUP) {
        let r = crop_row(row, k, offset);
        let start = row * cp.ow;
        let end = start + cp.ow;
        if (X_DTYPE != DT_U8) {
            for (var v = 0u; v < cp.ow; v++) {
                out[cp.out_offset + start + v] = crop_pick(r, v);
            }
            continue;
        }
        // the words wholly inside the row, then the one reaching past its end (none when OW % 4 == 0): two
        // loops, so that a software adapter's SIMD lanes never evaluate the slow path of the second
        for (var w = (start + 3u) / 4u; 4u * w + 3u < end; w++) {
            var word = 0u;
            for (var b = 0u; b < 4u; b++) {
                word |= crop_pick(r, 4u * w + b - start) << (8u * b);
            }
            out[(cp.out_offset >> 2u) + w] = word;
        }
        let last = end / 4u;
        if (end % 4u != 0u && 4u * last >= start) {
            let dst = (cp.out_offset >> 2u) + last;
            var word = 0u;
            for (var b = 0u; b < 4u; b++) {
                let e = 4u * last + b;
                if (e >= cp.n) {  // past the view: keep the byte
                    word |= out[dst] & (0xffu << (8u * b));
                } else if (e < end) {
                    word |= crop_pick(r, e - start) << (8u * b);
                } else {
                    word |= crop_pick(crop_row(e / cp.ow, k, offset), e % cp.ow) << (8u * b);
                }
            }
            out[dst] = word;
        }
    }
}

// ------------------------------------------------------------------ affine
struct AffineParams {
    n: u32,              // output elements
    c: u32,
    hw: u32,             // H * W
    channels_last: u32,  // 1: x is [N, H, W, C]
    x_offset: u32,
    out_offset: u32,
    pad0: u32,
    pad1: u32,
    coef: array<vec4<f32>, 8>,  // scale[0..15], then shift[0..15]
}

@group(0) @binding(4) var<uniform> ap: AffineParams;  // its own binding: one entry point each

fn coefficient(i: u32) -> f32 { return ap.coef[i >> 2u][i & 3u]; }

// Four elements per thread: the four bytes of a uint8 word are loaded once.
@compute @workgroup_size(WORKGROUP)
fn affine(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var q4 = gid.x; 4u * q4 < ap.n; q4 += groups.x * WORKGROUP) {
        var loaded = 0xffffffffu;
        var word = 0u;
        for (var q = 4u * q4; q < min(4u * q4 + 4u, ap.n); q++) {
            let s = q % ap.hw;
            let plane = q / ap.hw;
            let c = plane % ap.c;
            var src = q;
            if (ap.channels_last != 0u) { src = ((plane - c) * ap.hw + s * ap.c) + c; }
            src += ap.x_offset;
            let wi = word_index(src, X_DTYPE);
            if (wi != loaded) {
                word = x[wi];
                loaded = wi;
            }
            let v = decode_f32(word, src, X_DTYPE);
            out[ap.out_offset + q] = bitcast<u32>(v * coefficient(c) + coefficient(16u + c));
        }
    }
}

// The common case (channels first, H * W, offsets and size multiples of 4) four elements to a vec4: one
// load of a uint8 word or of 4 floats, one 16-byte store, one channel's coefficients.
@group(0) @binding(7) var<storage, read_write> out4: array<vec4<u32>>;
@group(0) @binding(8) var<storage, read> x4: array<vec4<u32>>;

@compute @workgroup_size(WORKGROUP)
fn affine4(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var q4 = gid.x; q4 < ap.n / 4u; q4 += groups.x * WORKGROUP) {
        let q = 4u * q4;
        let c = (q / ap.hw) % ap.c;
        var v: vec4<f32>;
        if (X_DTYPE == DT_U8) {
            let w = x[(ap.x_offset + q) >> 2u];
            v = vec4<f32>(f32(w & 0xffu), f32((w >> 8u) & 0xffu), f32((w >> 16u) & 0xffu), f32(w >> 24u));
        } else {
            v = bitcast<vec4<f32>>(x4[(ap.x_offset + q) >> 2u]);
        }
        out4[(ap.out_offset >> 2u) + q4] = bitcast<vec4<u32>>(v * coefficient(c) + coefficient(16u + c));
    }
}

// ------------------------------------------------------------------ color (ColorJitter without hue)
// One workgroup per image. Contrast blends with the mean gray level of the image as the adjustments
// before it left it: every thread replays those on its pixels, the workgroup sums the grays, then every
// thread applies the whole chain. uint8 images (H * W a multiple of 4) take a word of 4 pixels per thread.
struct ColorParams {
    n: u32,           // images
    c: u32,           // 1 or 3
    hw: u32,
    x_offset: u32,
    out_offset: u32,
    seed: u32,
    offset: u32,
    seed_slot: u32,
    offset_slot: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
    lo: vec4<f32>,    // brightness, contrast, saturation lower factors
    hi: vec4<f32>,
}

@group(0) @binding(5) var<uniform> cc: ColorParams;

const COLOR_WORKGROUP: u32 = 64u;
var<workgroup> partial: array<f32, 64>;

fn color_bound() -> f32 { return select(1.0, 255.0, X_DTYPE == DT_U8); }

// torchvision's _blend: clamp(f * a + (1 - f) * b) to the dtype's range, truncated for uint8.
fn blend(a: f32, b: f32, f: f32) -> f32 {
    let v = clamp(f * a + (1.0 - f) * b, 0.0, color_bound());
    return select(v, floor(v), X_DTYPE == DT_U8);
}

fn gray(p: vec3<f32>) -> f32 {
    let g = 0.2989 * p.x + 0.587 * p.y + 0.114 * p.z;
    return select(select(g, floor(g), X_DTYPE == DT_U8), p.x, cc.c == 1u);
}

// Adjustment `op` (0 brightness, 1 contrast, 2 saturation) with factor f on one pixel: each is a blend with
// 0, the mean or the pixel's gray, chosen with selects rather than branches (SIMD lanes of a software
// adapter would run every branch). Saturation on one channel uses f = 1, which leaves the pixel as it is.
fn adjust(op: u32, p: vec3<f32>, f: f32, mean: f32) -> vec3<f32> {
    let other = select(select(gray(p), mean, op == 1u), 0.0, op == 0u);
    let g = select(f, 1.0, op == 2u && cc.c == 1u);
    return vec3<f32>(blend(p.x, other, g), blend(p.y, other, g), blend(p.z, other, g));
}

// The order of the adjustments, AUGMENT_COLOR_ORDERS[k] (backends/interface.py), as three 2-bit fields.
fn order_op(k: u32, s: u32) -> u32 {
    var orders = array<u32, 6>(0x06u, 0x09u, 0x12u, 0x18u, 0x21u, 0x24u);  // op of step s at bits 4-2s
    return (orders[k] >> (4u - 2u * s)) & 3u;
}

fn load_pixel(image: u32, p: u32) -> vec3<f32> {
    var v = vec3<f32>(0.0);
    for (var ch = 0u; ch < cc.c; ch++) {
        let src = cc.x_offset + (image * cc.c + ch) * cc.hw + p;
        v[ch] = decode_f32(x[word_index(src, X_DTYPE)], src, X_DTYPE);
    }
    return v;
}

@compute @workgroup_size(COLOR_WORKGROUP)
fn color(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
         @builtin(num_workgroups) groups: vec3<u32>) {
    let image = wid.x + wid.y * groups.x;
    if (image >= cc.n) { return; }  // uniform for the whole workgroup: barriers below stay uniform
    var seed = cc.seed;
    if (cc.seed_slot != NO_SLOT) { seed = scalars[cc.seed_slot]; }
    var offset = cc.offset;
    if (cc.offset_slot != NO_SLOT) { offset = scalars[cc.offset_slot]; }
    let k = lowbias32(seed);
    let c0 = offset + 4u * image;
    let order = scale24(bits(c0, k) >> 8u, 6u);
    var factor = vec3<f32>(0.0);
    for (var a = 0u; a < 3u; a++) {
        let u = f32(bits(c0 + 1u + a, k) >> 8u) * TWO_POW_M24;
        factor[a] = cc.lo[a] + (cc.hi[a] - cc.lo[a]) * u;
    }
    var before = 0u;  // adjustments applied before the contrast one
    for (var s = 0u; s < 3u; s++) {
        if (order_op(order, s) == 1u) { before = s; }
    }
    var sum = 0.0;
    for (var p = lid; p < cc.hw; p += COLOR_WORKGROUP) {
        var v = load_pixel(image, p);
        for (var s = 0u; s < before; s++) {
            let op = order_op(order, s);
            v = adjust(op, v, factor[op], 0.0);
        }
        sum += gray(v);
    }
    partial[lid] = sum;
    workgroupBarrier();
    for (var width = COLOR_WORKGROUP / 2u; width > 0u; width >>= 1u) {
        if (lid < width) { partial[lid] += partial[lid + width]; }
        workgroupBarrier();
    }
    let mean = partial[0] / f32(cc.hw);
    let per_thread = select(1u, 4u, X_DTYPE == DT_U8);
    for (var q = lid; q * per_thread < cc.hw; q += COLOR_WORKGROUP) {
        var words = array<u32, 3>(0u, 0u, 0u);
        for (var b = 0u; b < per_thread; b++) {
            let p = q * per_thread + b;
            var v = load_pixel(image, p);
            for (var s = 0u; s < 3u; s++) {
                let op = order_op(order, s);
                v = adjust(op, v, factor[op], mean);
            }
            for (var ch = 0u; ch < cc.c; ch++) {
                if (X_DTYPE == DT_U8) {
                    words[ch] |= (u32(v[ch]) & 0xffu) << (8u * b);
                } else {
                    words[ch] = encode_f32(v[ch], X_DTYPE);
                }
            }
        }
        for (var ch = 0u; ch < cc.c; ch++) {
            let dst = cc.out_offset + (image * cc.c + ch) * cc.hw + q * per_thread;
            out[select(dst, dst >> 2u, X_DTYPE == DT_U8)] = words[ch];
        }
    }
}

// ------------------------------------------------------------------ erase (RandomErasing)
struct EraseParams {
    n: u32,          // elements
    words: u32,      // output words (n, or ceil(n / 4) for uint8)
    c: u32,
    h: u32,
    w: u32,
    x_offset: u32,
    out_offset: u32,
    seed: u32,
    offset: u32,
    seed_slot: u32,
    offset_slot: u32,
    pad0: u32,
    p: f32,
    scale_lo: f32,
    scale_hi: f32,
    log_ratio_lo: f32,
    log_ratio_hi: f32,
    value: f32,
}

@group(0) @binding(6) var<uniform> ep: EraseParams;

const ERASE_ATTEMPTS: u32 = 10u;
const ERASE_DRAWS: u32 = 41u;  // 1 + 4 per attempt

fn uniform01(c: u32, k: u32) -> f32 { return f32(bits(c, k) >> 8u) * TWO_POW_M24; }

// Image `image`'s rectangle (top, left, height, width); height 0 when it is not erased.
fn erase_box(image: u32, k: u32, offset: u32) -> vec4<u32> {
    let c0 = offset + ERASE_DRAWS * image;
    if (!(uniform01(c0, k) < ep.p)) { return vec4<u32>(0u); }
    let area = f32(ep.h * ep.w);
    for (var a = 0u; a < ERASE_ATTEMPTS; a++) {
        let c = c0 + 1u + 4u * a;
        let erase_area = area * (ep.scale_lo + (ep.scale_hi - ep.scale_lo) * uniform01(c, k));
        let aspect = exp(ep.log_ratio_lo + (ep.log_ratio_hi - ep.log_ratio_lo) * uniform01(c + 1u, k));
        let h = u32(round(sqrt(erase_area * aspect)));
        let w = u32(round(sqrt(erase_area / aspect)));
        if (h < ep.h && w < ep.w) {
            let i = scale24(bits(c + 2u, k) >> 8u, ep.h - h + 1u);
            let j = scale24(bits(c + 3u, k) >> 8u, ep.w - w + 1u);
            return vec4<u32>(i, j, h, w);
        }
    }
    return vec4<u32>(0u);
}

fn erase_pick(box: vec4<u32>, row: u32, col: u32, e: u32) -> u32 {
    let inside = row >= box.x && row < box.x + box.z && col >= box.y && col < box.y + box.w;
    if (inside) {
        if (X_DTYPE == DT_U8) { return u32(ep.value) & 0xffu; }
        return encode_f32(ep.value, X_DTYPE);
    }
    let src = ep.x_offset + e;
    let word = x[word_index(src, X_DTYPE)];
    if (X_DTYPE == DT_U8) { return (word >> ((src & 3u) * 8u)) & 0xffu; }
    return word;
}

// A thread per image row (the rectangle is searched once per row), uint8 words as in crop_flip.
@compute @workgroup_size(WORKGROUP)
fn erase(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    var seed = ep.seed;
    if (ep.seed_slot != NO_SLOT) { seed = scalars[ep.seed_slot]; }
    var offset = ep.offset;
    if (ep.offset_slot != NO_SLOT) { offset = scalars[ep.offset_slot]; }
    let k = lowbias32(seed);
    let rows = ep.n / ep.w;
    for (var row = gid.x; row < rows; row += groups.x * WORKGROUP) {
        let box = erase_box(row / (ep.h * ep.c), k, offset);
        let y = row % ep.h;
        let start = row * ep.w;
        let end = start + ep.w;
        if (X_DTYPE != DT_U8) {
            for (var v = 0u; v < ep.w; v++) {
                out[ep.out_offset + start + v] = erase_pick(box, y, v, start + v);
            }
            continue;
        }
        for (var w = (start + 3u) / 4u; 4u * w + 3u < end; w++) {
            var word = 0u;
            for (var b = 0u; b < 4u; b++) {
                word |= erase_pick(box, y, 4u * w + b - start, 4u * w + b) << (8u * b);
            }
            out[(ep.out_offset >> 2u) + w] = word;
        }
        let last = end / 4u;
        if (end % 4u != 0u && 4u * last >= start) {
            let dst = (ep.out_offset >> 2u) + last;
            var word = 0u;
            for (var b = 0u; b < 4u; b++) {
                let e = 4u * last + b;
                if (e >= ep.n) {
                    word |= out[dst] & (0xffu << (8u * b));
                } else if (e < end) {
                    word |= erase_pick(box, y, e - start, e) << (8u * b);
                } else {
                    let next = e / ep.w;
                    word |= erase_pick(erase_box(next / (ep.h * ep.c), k, offset), next % ep.h, e % ep.w, e) << (8u * b);
                }
            }
            out[dst] = word;
        }
    }
}
