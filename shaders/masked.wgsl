//! include "elementwise.wgsl"
// masked_fill: out = mask ? a : in0, over strided views of one shape (in1 the bool mask; the value is the
// scalar a, inline or a dynamic scalar). It shares elementwise.wgsl's walker, operands and Params, so that
// elementwise.py's launcher serves it: one pass, whatever the broadcast of the mask (the Python side is
// _backends/webgpu/masked.py).

@compute @workgroup_size(WORKGROUP)
fn masked_fill(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var i = gid.x; i < p.n; i += groups.x * WORKGROUP) {
        let o = offsets(i);
        let masked = load1_i(o.z) != 0;
        if (INT_MATH) {
            out[o.x] = encode_i32(select(load0_i(o.y), scalar_ai(), masked), OUT_DTYPE);
        } else {
            out[o.x] = encode_f32(select(load0_f(o.y), scalar_a(), masked), OUT_DTYPE);
        }
    }
}
