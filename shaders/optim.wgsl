// Fused optimizer updates, in place, one thread per element (PyTorch's single-tensor SGD, Adam/AdamW
// and RMSprop, as backends/device.py specifies). The Python side is backends/webgpu/optim.py.
//
// Every hyperparameter is read from the dynamic-scalar buffer (`scalars`) at a slot the uniform
// names: values that change between steps (lr, step, SGD's first-step flag) can then be updated
// with a 4-byte write, and a replayed graph sees the new values. Choices that do not change between
// steps (momentum on/off, nesterov, amsgrad, ...) are override constants.

override MAXIMIZE: bool = false;
override WEIGHT_DECAY: bool = false;   // weight_decay != 0
override DECOUPLED: bool = false;      // AdamW: decay the parameter, not the gradient
override MOMENTUM: bool = false;       // SGD / RMSprop with a momentum buffer
override NESTEROV: bool = false;
override AMSGRAD: bool = false;
override CENTERED: bool = false;

struct Params {
    n: u32,
    param_offset: u32,
    grad_offset: u32,
    state_offset: vec3<u32>,   // state buffers 1..3 (their meaning depends on the optimizer)
    slot: array<vec4<u32>, 3>, // where each hyperparameter lives in `scalars` (optim.py lists them)
}

@group(0) @binding(0) var<storage, read_write> param: array<f32>;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<storage, read_write> state1: array<f32>;
@group(0) @binding(3) var<storage, read_write> state2: array<f32>;
@group(0) @binding(4) var<storage, read_write> state3: array<f32>;
@group(0) @binding(5) var<storage, read> scalars: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

const WORKGROUP: u32 = 256u;

fn hyper(k: u32) -> f32 { return scalars[p.slot[k / 4u][k % 4u]]; }

// e^x - 1 without cancellation for small |x| (bias corrections 1 - beta^t at small t).
fn expm1_f32(x: f32) -> f32 {
    if (abs(x) >= 0.5) { return exp(x) - 1.0; }
    var s = 1.0 / 362880.0;
    s = s * x + 1.0 / 40320.0;
    s = s * x + 1.0 / 5040.0;
    s = s * x + 1.0 / 720.0;
    s = s * x + 1.0 / 120.0;
    s = s * x + 1.0 / 24.0;
    s = s * x + 1.0 / 6.0;
    s = s * x + 0.5;
    s = s * x + 1.0;
    return s * x;
}

// The gradient an update uses: negated for maximize, plus weight_decay * param (unless decoupled).
fn effective_grad(i: u32, weight_decay: f32) -> f32 {
    var g = grad[p.grad_offset + i];
    if (MAXIMIZE) { g = -g; }
    if (WEIGHT_DECAY && !DECOUPLED) { g += weight_decay * param[p.param_offset + i]; }
    return g;
}

// Hyperparameter slots: 0 lr, 1 momentum, 2 1 - dampening, 3 weight_decay, 4 first step (1 or 0).
// state1 = momentum buffer.
@compute @workgroup_size(WORKGROUP)
fn sgd(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let lr = hyper(0u);
    let momentum = hyper(1u);
    let undampened = hyper(2u);
    let weight_decay = hyper(3u);
    let first = hyper(4u) != 0.0;
    for (var i = gid.x; i < p.n; i += groups.x * WORKGROUP) {
        var g = effective_grad(i, weight_decay);
        if (MOMENTUM) {
            let k = p.state_offset.x + i;
            var buf = g;
            if (!first) { buf = momentum * state1[k] + undampened * g; }
            state1[k] = buf;
            g = select(buf, g + momentum * buf, NESTEROV);
        }
        param[p.param_offset + i] -= lr * g;
    }
}

// Hyperparameter slots: 0 lr, 1 step, 2 beta1, 3 1 - beta1, 4 beta2, 5 1 - beta2, 6 ln beta1,
// 7 ln beta2, 8 eps, 9 weight_decay. state1 = exp_avg, state2 = exp_avg_sq, state3 = max_exp_avg_sq.
@compute @workgroup_size(WORKGROUP)
fn adam(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let lr = hyper(0u);
    let step = hyper(1u);
    let beta1 = hyper(2u);
    let beta2 = hyper(4u);
    let eps = hyper(8u);
    let weight_decay = hyper(9u);
    // 1 - beta^t = -expm1(t ln beta), accurate also when it is tiny (t = 1, beta2 = 0.999).
    let step_size = lr / -expm1_f32(step * hyper(6u));
    let inv_sqrt_bc2 = inverseSqrt(-expm1_f32(step * hyper(7u)));
    for (var i = gid.x; i < p.n; i += groups.x * WORKGROUP) {
        let g = effective_grad(i, weight_decay);
        let k = p.param_offset + i;
        var w = param[k];
        if (WEIGHT_DECAY && DECOUPLED) { w *= 1.0 - lr * weight_decay; }
        let m = beta1 * state1[p.state_offset.x + i] + hyper(3u) * g;
        var v = beta2 * state2[p.state_offset.y + i] + hyper(5u) * g * g;
        state1[p.state_offset.x + i] = m;
        state2[p.state_offset.y + i] = v;
        if (AMSGRAD) {
            v = max(state3[p.state_offset.z + i], v);
            state3[p.state_offset.z + i] = v;
        }
        param[k] = w - step_size * m / (sqrt(v) * inv_sqrt_bc2 + eps);
    }
}

// Hyperparameter slots: 0 lr, 1 alpha, 2 1 - alpha, 3 eps, 4 weight_decay, 5 momentum.
// state1 = square_avg, state2 = momentum buffer, state3 = grad_avg (centered).
@compute @workgroup_size(WORKGROUP)
fn rmsprop(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let lr = hyper(0u);
    let alpha = hyper(1u);
    let eps = hyper(3u);
    let momentum = hyper(5u);
    for (var i = gid.x; i < p.n; i += groups.x * WORKGROUP) {
        let g = effective_grad(i, hyper(4u));
        let sq = alpha * state1[p.state_offset.x + i] + hyper(2u) * g * g;
        state1[p.state_offset.x + i] = sq;
        var avg: f32;
        if (CENTERED) {
            let ga = alpha * state3[p.state_offset.z + i] + hyper(2u) * g;
            state3[p.state_offset.z + i] = ga;
            avg = sqrt(sq - ga * ga) + eps;
        } else {
            avg = sqrt(sq) + eps;
        }
        let k = p.param_offset + i;
        if (MOMENTUM) {
            let buf = momentum * state2[p.state_offset.y + i] + g / avg;
            state2[p.state_offset.y + i] = buf;
            param[k] -= lr * buf;
        } else {
            param[k] -= lr * g / avg;
        }
    }
}
