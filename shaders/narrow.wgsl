// bfloat16, int8 and int16 on WebGPU (the Python side is _backends/webgpu/narrow.py). WGSL has none of these
// types, so a tensor of them lives in 32-bit words: bfloat16 as f32 words holding bfloat16 values (the low 16
// bits zero), int8 and int16 as i32 words holding values in their range. Every kernel computes such a tensor
// as float32 or int32; these kernels then narrow each view a kernel wrote, in place, once per kernel.
//
// Entry points (in place, over a strided view of up to 8 dims after merging):
//   round_bf16   f32 words rounded to bfloat16, to nearest even; every NaN becomes torch's bfloat16 NaN
//                (0x7FC0), values beyond bfloat16's largest finite number become inf (as torch's .bfloat16())
//   wrap_i8      i32 words wrapped into [-128, 127] (as torch's int8 arithmetic and casts wrap)
//   wrap_i16     i32 words wrapped into [-32768, 32767]

struct Params {
    n: u32,                          // elements
    rank: u32,                       // dims after merging (0..8)
    offset: i32,
    pad: u32,
    shape: array<vec4<u32>, 2>,      // dim d is shape[d / 4][d % 4]
    stride: array<vec4<i32>, 2>,
}

@group(0) @binding(0) var<storage, read_write> words: array<u32>;
@group(0) @binding(1) var<uniform> p: Params;

// The word of the i-th element of the view, in row-major order.
fn word_of(i: u32) -> i32 {
    var rest = i;
    var off = p.offset;
    for (var d = p.rank; d > 0u; d--) {
        let k = d - 1u;
        let n = p.shape[k / 4u][k % 4u];
        off += i32(rest % n) * p.stride[k / 4u][k % 4u];
        rest /= n;
    }
    return off;
}

fn element(wid: vec3<u32>, lid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return (wid.x + wid.y * groups.x) * 256u + lid.x;
}

@compute @workgroup_size(256)
fn round_bf16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
              @builtin(num_workgroups) groups: vec3<u32>) {
    let i = element(wid, lid, groups);
    if (i >= p.n) { return; }
    let w = word_of(i);
    let bits = words[w];
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        words[w] = 0x7fc00000u;
        return;
    }
    words[w] = (bits + 0x7fffu + ((bits >> 16u) & 1u)) & 0xffff0000u;
}

@compute @workgroup_size(256)
fn wrap_i8(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
           @builtin(num_workgroups) groups: vec3<u32>) {
    let i = element(wid, lid, groups);
    if (i >= p.n) { return; }
    let w = word_of(i);
    words[w] = bitcast<u32>(bitcast<i32>(words[w] << 24u) >> 24u);
}

@compute @workgroup_size(256)
fn wrap_i16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
            @builtin(num_workgroups) groups: vec3<u32>) {
    let i = element(wid, lid, groups);
    if (i >= p.n) { return; }
    let w = word_of(i);
    words[w] = bitcast<u32>(bitcast<i32>(words[w] << 16u) >> 16u);
}
