//! include "common.wgsl"
// topk, sort and argsort (kernels.topk): bitonic sorts of (key, index) pairs in workgroup memory. The Python side
// is _backends/webgpu/sorting.py, which chains the entry points:
//   a row of at most TILE_MAX entries   tile_sort from x straight to the outputs (one dispatch);
//   a longer row, k <= TILE_MAX / 2     tile_sort keeps each tile's best k as candidates, then again over the
//                                       candidates until one tile holds them all (each pass halves the row at least);
//   a longer row, a larger k            a bitonic sort of the whole row, padded to a power of two P, in scratch:
//                                       tile_sort (tiles in alternating directions), then per stage `size`
//                                       merge_global for the strides >= TILE_MAX and merge_tile for the rest.
//
// Keys are u32s whose ascending order is the requested order: a float's bits mapped to an unsigned order (NaN
// above everything, -0.0 as 0.0), an integer's with the sign bit flipped, both inverted for `largest`. Ties
// compare the index, so the order is total and equal values keep their order in the row (a stable sort). Padding
// is (SENTINEL, SENTINEL): after every real entry.

const WG: u32 = 256u;
const TILE_MAX: u32 = 1024u;
const SENTINEL: u32 = 0xffffffffu;

override SOURCE: u32 = 0u;        // 0: the entries of x; 1: (key, index) pairs of src
override DEST: u32 = 0u;          // 0: the outputs (values, indices); 1: the tile's best k pairs to dst; 2: the tile back to dst
override GLOBAL_DIR: bool = false;  // bitonic directions from the position in the row (the whole-row sort)

struct Params {
    rows: u32,
    n: u32,              // entries per row of the source
    k: u32,              // entries kept per tile (DEST 1), or the outputs' k (DEST 0)
    tiles: u32,          // tiles per row of the source
    tile: u32,           // entries a workgroup sorts: a power of two, at most TILE_MAX
    x_n: u32,            // entries per row of x
    x_offset: u32,
    values_offset: u32,
    indices_offset: u32,
    flags: u32,          // bit 0: largest first; bit 1: x holds integers (int32 or int64 words)
    size: u32,           // the whole-row sort's stage (merge_global, merge_tile)
    stride: u32,         // merge_global's stride
    padded: u32,         // the whole-row sort's row length in dst (P)
}

@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> values: array<u32>;
@group(0) @binding(2) var<storage, read_write> indices: array<u32>;
@group(0) @binding(3) var<storage, read> src: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read_write> dst: array<vec2<u32>>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> keys: array<u32, TILE_MAX>;
var<workgroup> ids: array<u32, TILE_MAX>;

fn key_of(w: u32) -> u32 {
    var key: u32;
    if ((p.flags & 2u) != 0u) {
        key = w ^ 0x80000000u;
    } else {
        var b = w;
        if (b == 0x80000000u) { b = 0u; }  // -0.0 == 0.0
        if ((b & 0x7fffffffu) > 0x7f800000u) {
            key = SENTINEL;  // NaN: above every number (ties with padding go by index)
        } else if ((b & 0x80000000u) != 0u) {
            key = ~b;
        } else {
            key = b | 0x80000000u;
        }
    }
    if ((p.flags & 1u) != 0u) { key = ~key; }
    return key;
}

// Whether pair (ka, ia) comes before (kb, ib).
fn before(ka: u32, ia: u32, kb: u32, ib: u32) -> bool {
    return ka < kb || (ka == kb && ia < ib);
}

// One step of a bitonic network over the tile: pairs (i, i + stride) sorted ascending where bit `size` of the
// direction index is clear, descending where set.
fn compare_step(t: u32, size: u32, stride: u32, start: u32) {
    for (var q = t; q < p.tile / 2u; q += WG) {
        let i = ((q & ~(stride - 1u)) << 1u) | (q & (stride - 1u));
        let l = i + stride;
        var direction = i;
        if (GLOBAL_DIR) { direction = start + i; }
        let ascending = (direction & size) == 0u;
        let ka = keys[i];
        let kb = keys[l];
        let ia = ids[i];
        let ib = ids[l];
        if (before(kb, ib, ka, ia) == ascending) {
            keys[i] = kb;
            keys[l] = ka;
            ids[i] = ib;
            ids[l] = ia;
        }
    }
}

// The sorted tile out: the first entries to the outputs (positions start + e < k), or pairs to dst.
fn emit(t: u32, row: u32, tile: u32, start: u32) {
    for (var e = t; e < p.tile; e += WG) {
        switch DEST {
            case 0u: {
                let at = start + e;
                if (at < p.k) {
                    let id = ids[e];
                    values[p.values_offset + row * p.k + at] = x[p.x_offset + row * p.x_n + id];
                    indices[p.indices_offset + row * p.k + at] = id;
                }
            }
            case 1u: {
                if (e < p.k) { dst[(row * p.tiles + tile) * p.k + e] = vec2<u32>(keys[e], ids[e]); }
            }
            default: {
                dst[row * p.padded + start + e] = vec2<u32>(keys[e], ids[e]);
            }
        }
    }
}

// One workgroup per (row, tile): load the tile (padded with SENTINEL pairs), sort it, emit it.
@compute @workgroup_size(WG)
fn tile_sort(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
             @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = wid.x + wid.y * nwg.x;
    if (g >= p.rows * p.tiles) {
        return;  // (uniform across the workgroup: every barrier below is reached by all or none)
    }
    let row = g / p.tiles;
    let tile = g % p.tiles;
    let start = tile * p.tile;
    for (var e = lid.x; e < p.tile; e += WG) {
        let at = start + e;
        var key = SENTINEL;
        var id = SENTINEL;
        if (at < p.n) {
            if (SOURCE == 0u) {
                key = key_of(x[p.x_offset + row * p.n + at]);
                id = at;
            } else {
                let pair = src[row * p.n + at];
                key = pair.x;
                id = pair.y;
            }
        }
        keys[e] = key;
        ids[e] = id;
    }
    workgroupBarrier();
    for (var size = 2u; size <= p.tile; size <<= 1u) {
        for (var stride = size >> 1u; stride > 0u; stride >>= 1u) {
            compare_step(lid.x, size, stride, start);
            workgroupBarrier();
        }
    }
    emit(lid.x, row, tile, start);
}

// The whole-row sort's steps of stride >= TILE_MAX: a thread per pair, in place in dst.
@compute @workgroup_size(WG)
fn merge_global(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let q = gid.x + gid.y * nwg.x * WG;
    let half = p.padded >> 1u;
    if (q >= p.rows * half) {
        return;
    }
    let row = q / half;
    let r = q % half;
    let i = ((r & ~(p.stride - 1u)) << 1u) | (r & (p.stride - 1u));
    let l = i + p.stride;
    let ascending = (i & p.size) == 0u;
    let a = dst[row * p.padded + i];
    let b = dst[row * p.padded + l];
    if (before(b.x, b.y, a.x, a.y) == ascending) {
        dst[row * p.padded + i] = b;
        dst[row * p.padded + l] = a;
    }
}

// The whole-row sort's steps of stride < TILE_MAX at stage p.size, a tile per workgroup: back to dst, or, at the
// last stage (size == padded), the first k to the outputs.
@compute @workgroup_size(WG)
fn merge_tile(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
              @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = wid.x + wid.y * nwg.x;
    if (g >= p.rows * p.tiles) {
        return;
    }
    let row = g / p.tiles;
    let tile = g % p.tiles;
    let start = tile * p.tile;
    for (var e = lid.x; e < p.tile; e += WG) {
        let pair = dst[row * p.padded + start + e];
        keys[e] = pair.x;
        ids[e] = pair.y;
    }
    workgroupBarrier();
    for (var stride = p.tile >> 1u; stride > 0u; stride >>= 1u) {
        compare_step(lid.x, p.size, stride, start);
        workgroupBarrier();
    }
    emit(lid.x, row, tile, start);
}
