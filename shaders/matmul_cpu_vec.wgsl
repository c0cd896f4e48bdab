// matmul_cpu.wgsl with vec4 loads and stores (see there): every vec4 lies inside one row of its
// matrix, which matmul_plan.py checks before it picks this file.
//! include "matmul_io.wgsl"

const VEC: bool = true;

fn a_vec(i: u32) -> vec4<f32> { return a4[(a_base + i) / 4u]; }
fn b_vec(i: u32) -> vec4<f32> { return b4[(b_base + i) / 4u]; }
// One element, through the vec4 view (the only view of a this entry point may use).
fn a_elem(i: u32) -> f32 { let j = a_base + i; return a4[j / 4u][j % 4u]; }
fn b_elem(i: u32) -> f32 { let j = b_base + i; return b4[j / 4u][j % 4u]; }
fn store_row(o: u32, v: vec4<f32>) { out4[o / 4u] = v; }  // N % 4 == 0: a quad is all in or all out

//! include "matmul_cpu.wgsl"
