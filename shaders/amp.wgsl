// GradScaler's unscale (the Python side is backends/webgpu/amp.py): grad *= inv_scale in place, and the
// found-inf flag (a float32 0-d tensor, 0 or 1) set where any gradient element, before unscaling, is inf
// or NaN, as PyTorch's _amp_foreach_non_finite_check_and_unscale_. One dispatch per gradient; the flag is
// written with an atomic max of 1.0's bits (the float32 0/1 read back as is).

struct Params {
    n: u32,
    grad_offset: u32,
    inv_offset: u32,
    flag_offset: u32,
}

@group(0) @binding(0) var<storage, read_write> grad: array<f32>;
@group(0) @binding(1) var<storage, read> inv_scale: array<f32>;
@group(0) @binding(2) var<storage, read_write> flag: array<atomic<u32>>;
@group(0) @binding(3) var<uniform> p: Params;

const ONE_BITS: u32 = 0x3f800000u;  // 1.0f

@compute @workgroup_size(256)
fn unscale_check(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
                 @builtin(num_workgroups) groups: vec3<u32>) {
    let i = (wid.x + wid.y * groups.x) * 256u + lid.x;
    if (i >= p.n) { return; }
    let v = grad[p.grad_offset + i];
    if ((bitcast<u32>(v) & 0x7fffffffu) >= 0x7f800000u) {
        atomicMax(&flag[p.flag_offset], ONE_BITS);
    }
    grad[p.grad_offset + i] = v * inv_scale[p.inv_offset];
}

// restore_if (GradScaler's undo of a step taken on inf/NaN gradients, without a read-back): out = saved
// where found (a float32 sum of found-inf flags) is above 0, words copied as they are; else nothing is
// read or written past the flag, so a clean step costs one small dispatch per tensor. Params: n words,
// out at grad_offset, saved at inv_offset, found at flag_offset.
@group(0) @binding(0) var<storage, read_write> out_words: array<u32>;
@group(0) @binding(1) var<storage, read> saved_words: array<u32>;
@group(0) @binding(2) var<storage, read> found: array<f32>;

@compute @workgroup_size(256)
fn restore_if(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
              @builtin(num_workgroups) groups: vec3<u32>) {
    if (!(found[p.flag_offset] > 0.0)) { return; }
    let i = (wid.x + wid.y * groups.x) * 256u + lid.x;
    if (i >= p.n) { return; }
    out_words[p.grad_offset + i] = saved_words[p.inv_offset + i];
}
