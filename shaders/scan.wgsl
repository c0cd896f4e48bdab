// Inclusive prefix sums (cumsum) along the middle axis of a contiguous [outer, size, inner] tensor. The
// Python side is _backends/webgpu/scan.py, which splices in the element: the sum's type T, the bindings `out`
// and `x`, and load(k) -> T, store(k, T), add(T, T) -> T. float32 and int32 sum as f32 and i32 (int32 wraps, as
// PyTorch's). int64, held as i32 words in the int32 range (webgrad/dtypes.py), sums exactly as a vec2<u32> (low,
// high) with carry: store() writes the low word to `out` and the high word to `hi` (binding 3), and scan.py
// checks that each prefix fits (check.wgsl's check_int64).
// identity() -> T is the scan's neutral element (0 for sums; scans.py splices other scans: products, maxima, ...).
//! splice ELEMENT

struct Params {
    outer: u32,
    size: u32,
    inner: u32,
    x_offset: u32,
    out_offset: u32,
    columns: u32,  // outer * inner
}

@group(0) @binding(2) var<uniform> p: Params;

// One thread per (o, i) column, a sequential sum along size: neighbouring threads read neighbouring i, so
// each step's loads are coalesced. Used where inner > 1, and on software adapters (no barriers) for columns of
// up to scan.py's SOFTWARE_COLUMN_MAX elements: llvmpipe (lavapipe) stops an invocation's loops after about
// 65535 iterations in all, so longer rows take scan_rows there.
@compute @workgroup_size(64)
fn scan_columns(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let c = gid.x + gid.y * nwg.x * 64u;
    if (c >= p.columns) {
        return;
    }
    var at = (c / p.inner) * p.size * p.inner + c % p.inner;
    var acc = identity();
    for (var k = 0u; k < p.size; k++) {
        acc = add(acc, load(p.x_offset + at));
        store(p.out_offset + at, acc);
        at += p.inner;
    }
}

const WG: u32 = 256u;
const TILE: u32 = 4u * WG;  // elements a workgroup scans per round: four consecutive ones a thread
var<workgroup> totals: array<T, 256>;

// inner == 1 on a GPU: one workgroup per row, the row in tiles of TILE. Each thread sums its four, the
// workgroup scans the 256 totals (Hillis-Steele), and each thread writes its four with the totals before it
// and the carry of the earlier tiles.
@compute @workgroup_size(256)
fn scan_rows(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
             @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.outer) {
        return;  // (uniform across the workgroup: every barrier below is reached by all or none)
    }
    let t = lid.x;
    let x_base = p.x_offset + row * p.size;
    let out_base = p.out_offset + row * p.size;
    var carry = identity();
    for (var start = 0u; start < p.size; start += TILE) {
        let k = start + 4u * t;
        var v0 = identity();
        var v1 = identity();
        var v2 = identity();
        var v3 = identity();
        if (k < p.size) { v0 = load(x_base + k); }
        if (k + 1u < p.size) { v1 = load(x_base + k + 1u); }
        if (k + 2u < p.size) { v2 = load(x_base + k + 2u); }
        if (k + 3u < p.size) { v3 = load(x_base + k + 3u); }
        let s1 = add(v0, v1);
        let s2 = add(s1, v2);
        let s3 = add(s2, v3);
        totals[t] = s3;
        workgroupBarrier();
        for (var d = 1u; d < WG; d <<= 1u) {
            var more = identity();
            if (t >= d) {
                more = totals[t - d];
            }
            workgroupBarrier();
            totals[t] = add(totals[t], more);
            workgroupBarrier();
        }
        var before = carry;
        if (t > 0u) {
            before = add(before, totals[t - 1u]);
        }
        if (k < p.size) { store(out_base + k, add(before, v0)); }
        if (k + 1u < p.size) { store(out_base + k + 1u, add(before, s1)); }
        if (k + 2u < p.size) { store(out_base + k + 2u, add(before, s2)); }
        if (k + 3u < p.size) { store(out_base + k + 3u, add(before, s3)); }
        carry = add(carry, totals[WG - 1u]);
        workgroupBarrier();  // every thread has read totals before the next tile writes them
    }
}
