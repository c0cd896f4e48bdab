//! include "common.wgsl"
//! include "errors.wgsl"
//! include "random_stream.wgsl"
// multinomial (kernels.multinomial): one workgroup per row of weights, the row cut into CHUNKS chunks, one per
// thread. The float32 sums are added in exactly the order the record specifies (each chunk from its start, then
// the chunk totals from the first), so the CPU reference, which adds in that order too, draws the same
// categories. The Python side is _backends/webgpu/sampling.py.
//   with replacement     the sums once, then the draws in parallel (thread t takes draws t, t + CHUNKS, ...)
//   without replacement  draws one after the other: a drawn entry is marked (-1) in `scratch` (the row's copy of
//                        the weights, where it then weighs 0) and its chunk's sum and the prefix sums are added
//                        up again

const CHUNKS: u32 = 256u;
const NO_SLOT: u32 = 0xffffffffu;
const TWO_POW_M24: f32 = 5.9604644775390625e-8;
const TINY: f32 = 1.1754943508222875e-38;  // 2^-126: weights below count as 0

struct Params {
    rows: u32,
    n: u32,              // categories
    s: u32,              // draws per row
    width: u32,          // entries per chunk: ceil(n / CHUNKS)
    probs_offset: u32,
    out_offset: u32,
    seed: u32,
    offset: u32,
    seed_slot: u32,      // dynamic scalar slots, or NO_SLOT to use the inline values
    offset_slot: u32,
    replacement: u32,
    code_bad: u32,       // error codes (Runtime.error_code): an entry < 0, inf or NaN
    code_zero: u32,      // a row summing to 0
}

@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> probs: array<f32>;
@group(0) @binding(2) var<storage, read> scalars: array<u32>;
@group(0) @binding(3) var<storage, read_write> scratch: array<f32>;
@group(0) @binding(4) var<storage, read_write> errors: array<atomic<u32>>;  // errors.wgsl
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> sums: array<f32, CHUNKS>;
var<workgroup> prefix: array<f32, 257>;
var<workgroup> picked: u32;

// Entry j's weight as the walk reads it: from the row's copy without replacement (drawn ones are -1 there).
fn weight(row: u32, j: u32) -> f32 {
    if (p.replacement == 0u) {
        return max(scratch[row * p.n + j], 0.0);
    }
    let w = probs[p.probs_offset + row * p.n + j];
    if (is_nan(w) || is_inf(w) || w < TINY) {
        return 0.0;
    }
    return w;
}

fn chunk_sum(row: u32, c: u32) -> f32 {
    let lo = c * p.width;
    let hi = min(p.n, lo + p.width);
    var s = 0.0;
    for (var j = lo; j < hi; j++) {
        s = s + weight(row, j);
    }
    return s;
}

fn add_up_prefix() {
    prefix[0] = 0.0;
    for (var c = 0u; c < CHUNKS; c++) {
        prefix[c + 1u] = prefix[c] + sums[c];
    }
}

// The entry that uniform u draws (the record's walk).
fn draw(row: u32, u: f32) -> u32 {
    let thr = u * prefix[CHUNKS];
    var lo = 0u;
    var hi = CHUNKS;
    while (lo < hi) {  // the first chunk c with prefix[c + 1] > thr (prefix never decreases)
        let mid = (lo + hi) >> 1u;
        if (prefix[mid + 1u] > thr) { hi = mid; } else { lo = mid + 1u; }
    }
    if (lo == CHUNKS) {  // the last entry with weight, else the first not drawn yet
        for (var j = p.n; j > 0u; j--) {
            if (weight(row, j - 1u) > 0.0) { return j - 1u; }
        }
        if (p.replacement == 0u) {
            for (var j = 0u; j < p.n; j++) {
                if (scratch[row * p.n + j] >= 0.0) { return j; }
            }
        }
        return 0u;
    }
    let start = lo * p.width;
    let end = min(p.n, start + p.width);
    let base = prefix[lo];
    var acc = 0.0;
    for (var j = start; j < end; j++) {
        acc = acc + weight(row, j);
        if (base + acc > thr) { return j; }
    }
    return end - 1u;  // (not reached: base + the chunk's sum is prefix[lo + 1] > thr)
}

@compute @workgroup_size(CHUNKS)
fn multinomial(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.rows) {
        return;  // (uniform across the workgroup)
    }
    let c = lid.x;
    var seed = p.seed;
    if (p.seed_slot != NO_SLOT) { seed = scalars[p.seed_slot]; }
    var offset = p.offset;
    if (p.offset_slot != NO_SLOT) { offset = scalars[p.offset_slot]; }
    let key = lowbias32(seed);

    // Check the weights, copy them where draws zero them, and sum each chunk.
    let lo = c * p.width;
    let hi = min(p.n, lo + p.width);
    var s = 0.0;
    for (var j = lo; j < hi; j++) {
        var w = probs[p.probs_offset + row * p.n + j];
        if (is_nan(w) || is_inf(w) || w < 0.0) {
            report_error(p.code_bad, 0, 0u);
            w = 0.0;
        }
        if (w < TINY) { w = 0.0; }
        if (p.replacement == 0u) { scratch[row * p.n + j] = w; }
        s = s + w;
    }
    sums[c] = s;
    storageBarrier();
    workgroupBarrier();
    if (c == 0u) {
        add_up_prefix();
        if (!(prefix[CHUNKS] > 0.0)) {
            report_error(p.code_zero, 0, 0u);
        }
    }
    workgroupBarrier();

    let first = offset + row * p.s;
    if (p.replacement != 0u) {
        for (var t = c; t < p.s; t += CHUNKS) {
            let u = f32(bits(first + t, key) >> 8u) * TWO_POW_M24;
            out[p.out_offset + row * p.s + t] = draw(row, u);
        }
        return;
    }
    for (var t = 0u; t < p.s; t++) {
        if (c == 0u) {
            let u = f32(bits(first + t, key) >> 8u) * TWO_POW_M24;
            let j = draw(row, u);
            out[p.out_offset + row * p.s + t] = j;
            scratch[row * p.n + j] = -1.0;
            picked = j;
        }
        storageBarrier();
        workgroupBarrier();
        let chunk = picked / p.width;
        if (c == chunk) {
            sums[c] = chunk_sum(row, c);
        }
        workgroupBarrier();
        if (c == 0u) {
            add_up_prefix();
        }
        workgroupBarrier();
    }
}
