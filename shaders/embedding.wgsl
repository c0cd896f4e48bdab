// The backward of index_select (an embedding's gradient): out[o, j, i] = the sum of grad[o, k, i] over the k with
// index[k] == j, every element of out written. The Python side is _backends/webgpu/embedding.py.
//   link       a thread per index k: k joins the list of its row j (heads[j], the host filled with -1, becomes k,
//              next[k] the head before it: one integer atomic exchange per index, no float atomics)
//   sum_rows   a thread per element (sum_rows4: per vec4) of out: the sum of its row's list, 0 for a row no index
//              names (so out needs no zero fill of its own: a vocabulary of 50,257 x 768 is written once)
// Before, the gradient was scattered with a float compare-and-swap loop per element of grad, onto a zero-filled
// out: the rows a batch names often (a language's common tokens) serialised their threads on those atomics.
// Summation order follows the lists' order, which the atomics decide: the last bits may vary between runs, as
// with the atomic scatter.

override INT_MATH: bool = false;  // integer sums (int32; int64 held in int32 words wraps alike)

struct Params {
    k: u32,          // indices
    size: u32,       // rows of out
    inner: u32,      // elements of a row (sum_rows4: vec4s)
    n: u32,          // threads of sum_rows / sum_rows4: outer * size * inner
    grad_off: u32,   // (sum_rows4: in vec4s)
    index_off: u32,
    out_off: u32,    // (sum_rows4: in vec4s)
}

@group(0) @binding(0) var<storage, read_write> heads: array<atomic<i32>>;
@group(0) @binding(0) var<storage, read> heads_r: array<i32>;
@group(0) @binding(1) var<storage, read> index: array<i32>;
@group(0) @binding(2) var<storage, read_write> next_w: array<i32>;
@group(0) @binding(2) var<storage, read> next_r: array<i32>;
@group(0) @binding(3) var<storage, read> grad: array<u32>;
@group(0) @binding(3) var<storage, read> grad4: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> out: array<u32>;
@group(0) @binding(4) var<storage, read_write> out4: array<vec4<u32>>;
@group(0) @binding(5) var<uniform> p: Params;

const WORKGROUP: u32 = 256u;

@compute @workgroup_size(WORKGROUP)
fn link(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var k = gid.x; k < p.k; k += groups.x * WORKGROUP) {
        let j = index[p.index_off + k];
        if (j >= 0 && u32(j) < p.size) {  // (a bad index was reported by the forward)
            next_w[k] = atomicExchange(&heads[j], i32(k));
        }
    }
}

@compute @workgroup_size(WORKGROUP)
fn sum_rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var q = gid.x + gid.y * groups.x * WORKGROUP; q < p.n; q += groups.x * groups.y * WORKGROUP) {
        let i = q % p.inner;
        let rest = q / p.inner;
        let j = rest % p.size;
        let o = rest / p.size;
        var k = heads_r[j];
        var f = 0.0;
        var s = 0;
        for (var steps = 0u; k >= 0 && steps < p.k; steps++) {
            let w = grad[p.grad_off + (o * p.k + u32(k)) * p.inner + i];
            if (INT_MATH) { s += bitcast<i32>(w); } else { f += bitcast<f32>(w); }
            k = next_r[k];
        }
        out[p.out_off + q] = select(bitcast<u32>(f), bitcast<u32>(s), INT_MATH);
    }
}

@compute @workgroup_size(WORKGROUP)
fn sum_rows4(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var q = gid.x + gid.y * groups.x * WORKGROUP; q < p.n; q += groups.x * groups.y * WORKGROUP) {
        let i = q % p.inner;
        let rest = q / p.inner;
        let j = rest % p.size;
        let o = rest / p.size;
        var k = heads_r[j];
        var f = vec4<f32>();
        var s = vec4<i32>();
        for (var steps = 0u; k >= 0 && steps < p.k; steps++) {
            let w = grad4[p.grad_off + (o * p.k + u32(k)) * p.inner + i];
            if (INT_MATH) { s += bitcast<vec4<i32>>(w); } else { f += bitcast<vec4<f32>>(w); }
            k = next_r[k];
        }
        out4[p.out_off + q] = select(bitcast<vec4<u32>>(f), bitcast<vec4<u32>>(s), INT_MATH);
    }
}
