// matmul_cpu.wgsl with f32 loads and stores (see there), for any shape and offsets.
//! include "matmul_io.wgsl"

const VEC: bool = false;

fn a_vec(i: u32) -> vec4<f32> { let j = a_base + i; return vec4<f32>(a1[j], a1[j + 1u], a1[j + 2u], a1[j + 3u]); }
fn b_vec(i: u32) -> vec4<f32> { let j = b_base + i; return vec4<f32>(b1[j], b1[j + 1u], b1[j + 2u], b1[j + 3u]); }
fn a_elem(i: u32) -> f32 { return a1[a_base + i]; }
fn b_elem(i: u32) -> f32 { return b1[b_base + i]; }

// out[o .. o+3] = v, dropping the columns at or past N (o is the element of column n0 + 4j of its row).
fn store_row(o: u32, v: vec4<f32>) {
    let left = P.N - (o - P.o_off) % P.N;  // columns from this one to the end of the row
    out[o] = v.x;
    if (left > 1u) { out[o + 1u] = v.y; }
    if (left > 2u) { out[o + 2u] = v.z; }
    if (left > 3u) { out[o + 3u] = v.w; }
}

//! include "matmul_cpu.wgsl"
