//! include "common.wgsl"
// Convolution helpers and 2-D pooling over contiguous NCHW float32 images (the Python side is
// _backends/webgpu/conv.py). One thread per output element; the gradient kernels gather (each thread
// sums what reaches its pixel, deterministic) except max_pool2d_backward, whose signature has no
// window geometry: it scatters each gradient to its argmax with atomic adds into a zeroed output.
//
// Geometry: kernel (KH, KW), stride (SH, SW), padding (PH, PW), dilation (DH, DW);
// output pixel (oh, ow) reads input rows oh*SH - PH + i*DH, i < KH (columns likewise).

struct Params {
    n: u32,            // threads' elements: outputs of the kernel
    channels: u32,
    height: u32,
    width: u32,
    out_height: u32,
    out_width: u32,
    kh: u32,
    kw: u32,
    sh: u32,
    sw: u32,
    ph: i32,
    pw: i32,
    dh: u32,
    dw: u32,
    x_offset: u32,
    out_offset: u32,
    index_offset: u32,
    include_pad: u32,  // avg_pool2d: padding cells count in the divisor
    rows_padded: u32,  // im2col_rows: rows per image in out (>= C*KH*KW; the extra rows are zeros)
}

@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> indices: array<i32>;
@group(0) @binding(3) var<storage, read_write> out_atomic: array<atomic<u32>>;
@group(0) @binding(4) var<uniform> p: Params;

const WORKGROUP: u32 = 256u;

// im2col: out [N, C*KH*KW, OH*OW], row (c*KH + i)*KW + j, column oh*OW + ow; 0 outside the image.
@compute @workgroup_size(WORKGROUP)
fn im2col(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let cols = p.out_height * p.out_width;
    let rows = p.channels * p.kh * p.kw;
    for (var q = gid.x; q < p.n; q += groups.x * WORKGROUP) {
        let l = q % cols;
        let r = (q / cols) % rows;
        let image = q / (cols * rows);
        let j = r % p.kw;
        let i = (r / p.kw) % p.kh;
        let c = r / (p.kw * p.kh);
        let h = i32((l / p.out_width) * p.sh + i * p.dh) - p.ph;
        let w = i32((l % p.out_width) * p.sw + j * p.dw) - p.pw;
        var v = 0.0;
        if (h >= 0 && h < i32(p.height) && w >= 0 && w < i32(p.width)) {
            v = x[p.x_offset + ((image * p.channels + c) * p.height + u32(h)) * p.width + u32(w)];
        }
        out[p.out_offset + q] = v;
    }
}

// im2col_rows: the same matrix, one thread per row (image, c, i, j), walking the row's OH x OW columns
// with running counters. For software adapters: im2col's per-element index decoding is 7 integer
// divisions by run-time values, which a CPU does one lane at a time (SwiftShader: ~40 ns an element);
// here a thread decodes once and then only compares, loads and stores. p.n counts rows. Each image
// gets p.rows_padded rows, those past C*KH*KW zero: conv.py pads K to a multiple of 4 so that the
// product reads vec4s (matmul_cpu_vec.wgsl).
@compute @workgroup_size(64)
fn im2col_rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let rows = p.channels * p.kh * p.kw;
    for (var q = gid.x; q < p.n; q += groups.x * 64u) {
        let r = q % p.rows_padded;
        let image = q / p.rows_padded;
        if (r >= rows) {
            let o = p.out_offset + q * p.out_height * p.out_width;
            for (var l = 0u; l < p.out_height * p.out_width; l++) { out[o + l] = 0.0; }
            continue;
        }
        let j = r % p.kw;
        let i = (r / p.kw) % p.kh;
        let c = r / (p.kw * p.kh);
        let plane = p.x_offset + (image * p.channels + c) * p.height * p.width;
        var o = p.out_offset + q * p.out_height * p.out_width;
        var h = i32(i * p.dh) - p.ph;
        for (var oh = 0u; oh < p.out_height; oh++) {
            let inside_h = h >= 0 && h < i32(p.height);
            let row = plane + u32(max(h, 0)) * p.width;
            var w = i32(j * p.dw) - p.pw;
            for (var ow = 0u; ow < p.out_width; ow++) {
                var v = 0.0;
                if (inside_h && w >= 0 && w < i32(p.width)) { v = x[row + u32(w)]; }
                out[o] = v;
                o++;
                w += i32(p.sw);
            }
            h += i32(p.sh);
        }
    }
}

// col2im: out [N, C, H, W] = the sum of the column entries that read each pixel.
@compute @workgroup_size(WORKGROUP)
fn col2im(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let cols = p.out_height * p.out_width;
    let plane = p.height * p.width;
    for (var q = gid.x; q < p.n; q += groups.x * WORKGROUP) {
        let w = i32(q % p.width);
        let h = i32((q / p.width) % p.height);
        let c = (q / plane) % p.channels;
        let image = q / (plane * p.channels);
        var total = 0.0;
        for (var i = 0u; i < p.kh; i++) {
            let th = h + p.ph - i32(i * p.dh);
            if (th < 0 || th % i32(p.sh) != 0 || th / i32(p.sh) >= i32(p.out_height)) { continue; }
            for (var j = 0u; j < p.kw; j++) {
                let tw = w + p.pw - i32(j * p.dw);
                if (tw < 0 || tw % i32(p.sw) != 0 || tw / i32(p.sw) >= i32(p.out_width)) { continue; }
                let row = (image * p.channels + c) * p.kh * p.kw + i * p.kw + j;
                total += x[p.x_offset + row * cols + u32(th / i32(p.sh)) * p.out_width + u32(tw / i32(p.sw))];
            }
        }
        out[p.out_offset + q] = total;
    }
}

// col2im_rows: the same, one thread per image row (n, c, h), walking w with the window's column
// counters instead of decoding every pixel with divisions (software adapters, as im2col_rows; with
// stride 1, the usual case, no division is left). p.n counts rows (N * C * H).
@compute @workgroup_size(64)
fn col2im_rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let cols = p.out_height * p.out_width;
    for (var q = gid.x; q < p.n; q += groups.x * 64u) {
        let h = i32(q % p.height);
        let plane = q / p.height;  // image * C + c
        let rows0 = plane * p.kh * p.kw;  // its first row of cols
        var o = p.out_offset + q * p.width;
        if (p.sh == 1u && p.sw == 1u && p.dh == 1u && p.dw == 1u) {
            // stride 1, no dilation: the window positions reaching (h, w) form a range of i (per row)
            // and of j (per pixel), found without tests inside the loops
            let i0 = max(h + p.ph - i32(p.out_height) + 1, 0);
            let i1 = min(i32(p.kh) - 1, h + p.ph);
            for (var w = 0; w < i32(p.width); w++) {
                let j0 = max(w + p.pw - i32(p.out_width) + 1, 0);
                let j1 = min(i32(p.kw) - 1, w + p.pw);
                var total = 0.0;
                for (var i = i0; i <= i1; i++) {
                    let src = p.x_offset + (rows0 + u32(i) * p.kw) * cols + u32(h + p.ph - i) * p.out_width;
                    for (var j = j0; j <= j1; j++) {
                        total += x[src + u32(j) * cols + u32(w + p.pw - j)];
                    }
                }
                out[o] = total;
                o++;
            }
            continue;
        }
        for (var w = 0; w < i32(p.width); w++) {
            var total = 0.0;
            for (var i = 0u; i < p.kh; i++) {
                let th = h + p.ph - i32(i * p.dh);
                if (th < 0) { break; }  // later i only go further up
                var oh = th;
                if (p.sh != 1u) {
                    if (th % i32(p.sh) != 0) { continue; }
                    oh = th / i32(p.sh);
                }
                if (oh >= i32(p.out_height)) { continue; }
                for (var j = 0u; j < p.kw; j++) {
                    let tw = w + p.pw - i32(j * p.dw);
                    if (tw < 0) { break; }
                    var ow = tw;
                    if (p.sw != 1u) {
                        if (tw % i32(p.sw) != 0) { continue; }
                        ow = tw / i32(p.sw);
                    }
                    if (ow >= i32(p.out_width)) { continue; }
                    total += x[p.x_offset + (rows0 + i * p.kw + j) * cols + u32(oh) * p.out_width + u32(ow)];
                }
            }
            out[o] = total;
            o++;
        }
    }
}

// max_pool2d: out and indices [N, C, OH, OW]; index h*W + w of the first maximum (NaN counts as the
// maximum, as in PyTorch); padding cells never win.
@compute @workgroup_size(WORKGROUP)
fn max_pool2d(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let plane_out = p.out_height * p.out_width;
    for (var q = gid.x; q < p.n; q += groups.x * WORKGROUP) {
        let ow = q % p.out_width;
        let oh = (q / p.out_width) % p.out_height;
        let plane = q / plane_out;
        let m = window_max(p.x_offset + plane * p.height * p.width, oh, i32(ow * p.sw) - p.pw);
        out[p.out_offset + q] = m.value;
        indices[p.index_offset + q] = m.index;
    }
}

// The maximum of output row oh's window whose first column is ws, in the plane at `base`, and its
// index h*W + w (the first one; NaN counts as the maximum, as in PyTorch); padding cells never win:
// a window wholly in the padding gives -inf and index -1.
struct WindowMax { value: f32, index: i32 }

fn window_max(base: u32, oh: u32, ws: i32) -> WindowMax {
    var best = 0.0;
    var best_index = -1;
    for (var i = 0u; i < p.kh; i++) {
        let h = i32(oh * p.sh + i * p.dh) - p.ph;
        if (h < 0 || h >= i32(p.height)) { continue; }
        for (var j = 0u; j < p.kw; j++) {
            let w = ws + i32(j * p.dw);
            if (w < 0 || w >= i32(p.width)) { continue; }
            let k = u32(h) * p.width + u32(w);
            let v = x[base + k];
            if (beats(v, best, best_index)) {
                best = v;
                best_index = i32(k);
            }
        }
    }
    return WindowMax(select(best, -inf_f32(), best_index < 0), best_index);
}

// max_pool2d_backward: out [N, C, H, W] (zeroed by the host) += grad at each window's argmax.
@compute @workgroup_size(WORKGROUP)
fn max_pool2d_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let plane_out = p.out_height * p.out_width;
    for (var q = gid.x; q < p.n; q += groups.x * WORKGROUP) {
        let k = indices[p.index_offset + q];
        if (k < 0) { continue; }
        let dest = p.out_offset + (q / plane_out) * p.height * p.width + u32(k);
        let g = x[p.x_offset + q];
        var old = atomicLoad(&out_atomic[dest]);
        loop {
            let r = atomicCompareExchangeWeak(&out_atomic[dest], old, bitcast<u32>(bitcast<f32>(old) + g));
            if (r.exchanged) { break; }
            old = r.old_value;
        }
    }
}

// max_pool2d_backward_gather: the same when no two windows overlap (stride >= dilated window, e.g. a
// 2x2 pool with stride 2): each pixel lies in at most one window, found by division, so one thread per
// pixel gathers its gradient (0 unless it is that window's argmax) and writes every element: no zero
// fill first and no atomics. x: grad [N, C, OH, OW]; out: [N, C, H, W].
@compute @workgroup_size(WORKGROUP)
fn max_pool2d_backward_gather(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let plane = p.height * p.width;
    for (var q = gid.x; q < p.n; q += groups.x * WORKGROUP) {
        let k = q % plane;
        let oh = (i32(k / p.width) + p.ph) / i32(p.sh);
        let ow = (i32(k % p.width) + p.pw) / i32(p.sw);
        var g = 0.0;
        if (oh < i32(p.out_height) && ow < i32(p.out_width)) {
            let o = (q / plane) * p.out_height * p.out_width + u32(oh) * p.out_width + u32(ow);
            if (indices[p.index_offset + o] == i32(k)) { g = x[p.x_offset + o]; }
        }
        out[p.out_offset + q] = g;
    }
}

// max_pool2d_rows / max_pool2d_backward_gather_rows: the same two kernels with one thread per row (of
// out, and of the image), for software adapters: the per-element index decoding (divisions by run-time
// values, one lane at a time on a CPU) happens once per row. p.n counts rows.
// Whether v beats the running maximum `best` (index best_index, -1: none yet): NaN wins over numbers,
// and among equals the first stays (PyTorch's rule).
fn beats(v: f32, best: f32, best_index: i32) -> bool {
    return best_index < 0 || (is_nan(v) && !is_nan(best)) || (!is_nan(best) && v > best);
}

// MaxPool2d(2): 2 x 2 windows, stride 2, no padding or dilation, all inside the image. Straight-line
// code (no window loops): max_pool2d_rows' commonest case, and max_pool2d_2x2's only one.
// The maximum of the window whose top-left pixel is x[top], index k within its plane.
fn max_2x2(top: u32, k: u32) -> WindowMax {
    let a = x[top];
    let b = x[top + 1u];
    let c = x[top + p.width];
    let d = x[top + p.width + 1u];
    var best = a;
    var best_index = i32(k);
    if (beats(b, best, best_index)) { best = b; best_index = i32(k + 1u); }
    if (beats(c, best, best_index)) { best = c; best_index = i32(k + p.width); }
    if (beats(d, best, best_index)) { best = d; best_index = i32(k + p.width + 1u); }
    return WindowMax(best, best_index);
}

fn max_pool_2x2_row(base: u32, oh: u32, o0: u32) {
    var o = o0;
    let top = base + 2u * oh * p.width;
    for (var ow = 0u; ow < p.out_width; ow++) {
        let m = max_2x2(top + 2u * ow, 2u * oh * p.width + 2u * ow);
        out[p.out_offset + o] = m.value;
        indices[p.index_offset + o] = m.index;
        o++;
    }
}

// max_pool2d_2x2 / max_pool2d_2x2_backward (GPUs): MaxPool2d(2) on planes of even height and width
// (H = 2*OH, W = 2*OW), where every pixel lies in exactly one window: a thread per window, two divisions
// to find it. The general kernels decode an element's indices with six divisions by run-time values,
// which dominated their time (H200, MNIST CNN at batch 1024: 195 of the step's 1,180 us went to pooling).
// Output row r = plane*OH + oh starts input row 2r of the planes laid end to end (H = 2*OH).
@compute @workgroup_size(WORKGROUP)
fn max_pool2d_2x2(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var q = gid.x; q < p.n; q += groups.x * WORKGROUP) {
        let r = q / p.out_width;
        let ow = q - r * p.out_width;
        let m = max_2x2(p.x_offset + 2u * (r * p.width + ow), 2u * ((r % p.out_height) * p.width + ow));
        out[p.out_offset + q] = m.value;
        indices[p.index_offset + q] = m.index;
    }
}

// The backward pass writes each window's four input gradients: the window's gradient at its argmax, 0 at
// the other three (x: grad [N, C, OH, OW]; out: [N, C, H, W]).
@compute @workgroup_size(WORKGROUP)
fn max_pool2d_2x2_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var q = gid.x; q < p.n; q += groups.x * WORKGROUP) {
        let r = q / p.out_width;
        let ow = q - r * p.out_width;
        let g = x[p.x_offset + q];
        // the argmax relative to the window's top-left pixel: 0, 1 (top row), W, W + 1 (bottom row)
        let k = indices[p.index_offset + q] - i32(2u * ((r % p.out_height) * p.width + ow));
        let w = i32(p.width);
        let top = p.out_offset + 2u * (r * p.width + ow);
        out[top] = select(0.0, g, k == 0);
        out[top + 1u] = select(0.0, g, k == 1);
        out[top + p.width] = select(0.0, g, k == w);
        out[top + p.width + 1u] = select(0.0, g, k == w + 1);
    }
}

@compute @workgroup_size(64)
fn max_pool2d_rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let two_by_two = p.kh == 2u && p.kw == 2u && p.sh == 2u && p.sw == 2u && p.ph == 0 && p.pw == 0
        && p.dh == 1u && p.dw == 1u;
    for (var q = gid.x; q < p.n; q += groups.x * 64u) {
        let oh = q % p.out_height;
        let base = p.x_offset + (q / p.out_height) * p.height * p.width;
        if (two_by_two) {
            max_pool_2x2_row(base, oh, q * p.out_width);
            continue;
        }
        var o = q * p.out_width;
        var ws = -p.pw;  // the window's first column
        for (var ow = 0u; ow < p.out_width; ow++) {
            let m = window_max(base, oh, ws);
            out[p.out_offset + o] = m.value;
            indices[p.index_offset + o] = m.index;
            o++;
            ws += i32(p.sw);
        }
    }
}

@compute @workgroup_size(64)
fn max_pool2d_backward_gather_rows(@builtin(global_invocation_id) gid: vec3<u32>,
                                   @builtin(num_workgroups) groups: vec3<u32>) {
    for (var q = gid.x; q < p.n; q += groups.x * 64u) {
        let h = q % p.height;
        let plane = q / p.height;
        let oh = (i32(h) + p.ph) / i32(p.sh);
        let row_ok = oh < i32(p.out_height);
        let o_row = plane * p.out_height * p.out_width + u32(max(oh, 0)) * p.out_width;
        var o = p.out_offset + q * p.width;
        // ow = (w + pw) / sw, kept as a quotient and remainder
        var ow = u32(p.pw) / p.sw;
        var rem = u32(p.pw) % p.sw;
        for (var w = 0u; w < p.width; w++) {
            var g = 0.0;
            if (row_ok && ow < p.out_width) {
                let i = o_row + ow;
                if (indices[p.index_offset + i] == i32(h * p.width + w)) { g = x[p.x_offset + i]; }
            }
            out[o] = g;
            o++;
            rem++;
            if (rem == p.sw) { rem = 0u; ow++; }
        }
    }
}

// The window of output (oh, ow) clipped to the image, and its divisor (PyTorch's avg_pool2d rule:
// the unclipped window is first cut at the padded border).
struct Window { h0: i32, h1: i32, w0: i32, w1: i32, divisor: f32 }

fn avg_window(oh: u32, ow: u32) -> Window {
    let hs = i32(oh * p.sh) - p.ph;
    let ws = i32(ow * p.sw) - p.pw;
    let he = min(hs + i32(p.kh), i32(p.height) + p.ph);
    let we = min(ws + i32(p.kw), i32(p.width) + p.pw);
    let padded = (he - hs) * (we - ws);
    let h0 = max(hs, 0);
    let w0 = max(ws, 0);
    let h1 = min(he, i32(p.height));
    let w1 = min(we, i32(p.width));
    let divisor = select((h1 - h0) * (w1 - w0), padded, p.include_pad != 0u);
    return Window(h0, h1, w0, w1, f32(divisor));
}

@compute @workgroup_size(WORKGROUP)
fn avg_pool2d(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let plane_out = p.out_height * p.out_width;
    for (var q = gid.x; q < p.n; q += groups.x * WORKGROUP) {
        let ow = q % p.out_width;
        let oh = (q / p.out_width) % p.out_height;
        let base = p.x_offset + (q / plane_out) * p.height * p.width;
        let win = avg_window(oh, ow);
        var total = 0.0;
        for (var h = win.h0; h < win.h1; h++) {
            for (var w = win.w0; w < win.w1; w++) {
                total += x[base + u32(h) * p.width + u32(w)];
            }
        }
        out[p.out_offset + q] = total / win.divisor;
    }
}

// avg_pool2d_backward: out [N, C, H, W]; each pixel gathers grad / divisor from the windows holding it.
@compute @workgroup_size(WORKGROUP)
fn avg_pool2d_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let plane = p.height * p.width;
    for (var q = gid.x; q < p.n; q += groups.x * WORKGROUP) {
        let w = i32(q % p.width);
        let h = i32((q / p.width) % p.height);
        let base = p.x_offset + (q / plane) * p.out_height * p.out_width;
        // Windows [oh*SH - PH, oh*SH - PH + KH) that contain h.
        let oh0 = max(0, (h + p.ph - i32(p.kh) + i32(p.sh)) / i32(p.sh));
        let oh1 = min(i32(p.out_height) - 1, (h + p.ph) / i32(p.sh));
        let ow0 = max(0, (w + p.pw - i32(p.kw) + i32(p.sw)) / i32(p.sw));
        let ow1 = min(i32(p.out_width) - 1, (w + p.pw) / i32(p.sw));
        var total = 0.0;
        for (var oh = oh0; oh <= oh1; oh++) {
            for (var ow = ow0; ow <= ow1; ow++) {
                let win = avg_window(u32(oh), u32(ow));
                total += x[base + u32(oh) * p.out_width + u32(ow)] / win.divisor;
            }
        }
        out[p.out_offset + q] = total;
    }
}
