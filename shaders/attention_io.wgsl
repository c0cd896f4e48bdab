//! include "common.wgsl"
//! include "random_stream.wgsl"
// What the fused attention kernels share (attention.wgsl, attention_tiled.wgsl, attention_tiled_backward.wgsl):
// the parameters ops/attention.py packs (_backends/webgpu/attention.py's _pack), the operands' bindings, and
// the first dropout counter of a row. A module splices in its ELEMENT_TYPES (T), MASK_BINDING and DROPOUT_BINDING.

struct Params {
    L: u32, S: u32, H: u32, unused0: u32,
    q_off: u32, q_sb: u32, q_sh: u32, q_sl: u32,     // q, k, v and grad (of out) in vec4s: offset, strides of
    k_off: u32, k_sb: u32, k_sh: u32, k_sl: u32,     // batch, head, row
    v_off: u32, v_sb: u32, v_sh: u32, v_sl: u32,
    g_off: u32, g_sb: u32, g_sh: u32, g_sl: u32,
    o_off: u32, o_sb: u32, o_sh: u32, o_sl: u32,     // out / grad_q / grad_k, and the forward's out
    o2_off: u32, o2_sb: u32, o2_sh: u32, o2_sl: u32, // (attention_dq) / grad_v, likewise in vec4s
    lse_off: u32, d_off: u32, m_off: u32, m_sb: u32, // lse and D (contiguous [B, H, L]); the mask, in elements
    m_sh: u32, m_si: u32, m_sj: u32, seed: u32,
    offset: u32, seed_slot: u32, offset_slot: u32, scale: f32,
    p_drop: f32, drop_scale: f32, unused1: u32, unused2: u32,
}

@group(0) @binding(0) var<storage, read> qb: array<vec4<T>>;
@group(0) @binding(1) var<storage, read> kb: array<vec4<T>>;
@group(0) @binding(2) var<storage, read> vb: array<vec4<T>>;
@group(0) @binding(3) var<storage, read_write> ob: array<vec4<T>>;   // out / grad_q / grad_k
@group(0) @binding(4) var<storage, read_write> ob2: array<vec4<T>>;  // grad_v
@group(0) @binding(5) var<storage, read> gb: array<vec4<T>>;         // grad of out
@group(0) @binding(6) var<storage, read> oin: array<vec4<T>>;        // the forward's out (attention_dq)
@group(0) @binding(7) var<storage, read_write> stat_w: array<f32>;     // forward: lse; attention_dq: D
@group(0) @binding(8) var<storage, read> lse_r: array<f32>;
@group(0) @binding(9) var<storage, read> d_r: array<f32>;
@group(0) @binding(12) var<uniform> p: Params;
//! splice MASK_BINDING
//! splice DROPOUT_BINDING

const LOWEST: f32 = -3.4028234663852886e38;  // the running max before any key (finite: see attention_forward)

// The counters of a row's draws start at offset + (bh * L + i) * S (u32 arithmetic, wrapping).
fn first_counter(bh: u32, i: u32) -> u32 { return drop_offset() + (bh * p.L + i) * p.S; }
