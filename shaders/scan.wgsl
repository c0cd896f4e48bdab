// Inclusive prefix sums (cumsum) along the middle axis of a contiguous [outer, size, inner] tensor. The
// Python side is _backends/webgpu/scan.py, which splices the element type (f32 or i32) in as T.
//! splice ELEMENT

struct Params {
    outer: u32,
    size: u32,
    inner: u32,
    x_offset: u32,
    out_offset: u32,
    columns: u32,  // outer * inner
}

@group(0) @binding(0) var<storage, read_write> out: array<T>;
@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<uniform> p: Params;

// One thread per (o, i) column, a sequential sum along size: neighbouring threads read neighbouring i, so
// each step's loads are coalesced. Used where inner > 1, and for every shape on software adapters (no barriers).
@compute @workgroup_size(64)
fn scan_columns(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let c = gid.x + gid.y * nwg.x * 64u;
    if (c >= p.columns) {
        return;
    }
    var at = (c / p.inner) * p.size * p.inner + c % p.inner;
    var acc = T(0);
    for (var k = 0u; k < p.size; k++) {
        acc += x[p.x_offset + at];
        out[p.out_offset + at] = acc;
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
    var carry = T(0);
    for (var start = 0u; start < p.size; start += TILE) {
        let k = start + 4u * t;
        var v0 = T(0);
        var v1 = T(0);
        var v2 = T(0);
        var v3 = T(0);
        if (k < p.size) { v0 = x[x_base + k]; }
        if (k + 1u < p.size) { v1 = x[x_base + k + 1u]; }
        if (k + 2u < p.size) { v2 = x[x_base + k + 2u]; }
        if (k + 3u < p.size) { v3 = x[x_base + k + 3u]; }
        let s1 = v0 + v1;
        let s2 = s1 + v2;
        let s3 = s2 + v3;
        totals[t] = s3;
        workgroupBarrier();
        for (var d = 1u; d < WG; d <<= 1u) {
            var add = T(0);
            if (t >= d) {
                add = totals[t - d];
            }
            workgroupBarrier();
            totals[t] += add;
            workgroupBarrier();
        }
        var before = carry;
        if (t > 0u) {
            before += totals[t - 1u];
        }
        if (k < p.size) { out[out_base + k] = before + v0; }
        if (k + 1u < p.size) { out[out_base + k + 1u] = before + s1; }
        if (k + 2u < p.size) { out[out_base + k + 2u] = before + s2; }
        if (k + 3u < p.size) { out[out_base + k + 3u] = before + s3; }
        carry += totals[WG - 1u];
        workgroupBarrier();  // every thread has read totals before the next tile writes them
    }
}
