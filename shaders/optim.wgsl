// Fused optimizer updates, in place (PyTorch's single-tensor SGD, Adam/AdamW and RMSprop, as
// _backends/kernels.py specifies). The Python side is _backends/webgpu/optim.py.
//
// Every hyperparameter is read from the dynamic-scalar buffer (`scalars`) at a slot the uniform
// names: values that change between steps (lr, step, SGD's first-step flag) can then be updated
// with a 4-byte write, and a replayed graph sees the new values. Choices that do not change between
// steps (momentum on/off, nesterov, amsgrad, ...) are override constants.
//
// Each optimizer has two entry points over the same update (the *_update functions, written on
// vec4s so both share them):
// * `sgd4`, `adam4`, `rmsprop4`: when the parameter, gradient and state offsets are all multiples of
//   4 (the usual case: every tensor of its own storage starts at 0). A thread updates whole vec4s
//   through the vec4 views of the buffers. When n % 4 != 0 the last vec4 is partial: it is loaded
//   whole (in bounds: storage buffers are multiples of 16 bytes), and its components past the
//   parameter are stored back as they were loaded (no other thread of the dispatch touches them).
// * `sgd`, `adam`, `rmsprop`: one element per loop step through the f32 views, for any offsets.
// Why vec4: on SwiftShader (Subzero JIT, 4-wide SIMD; what headless Chromium uses without a GPU)
// every storage load or store costs ~40-50 ns per group of 4 invocations, f32 or vec4 alike (a vec4
// access is only ~1.3x an f32 one) while arithmetic is nearly free, so Adam's 7 accesses per element
// become 7 per 4 elements (measured: the f32 kernel takes ~1.6x as long at the same elements per
// thread; with the grid of optim.py, Adam over 100k elements went from 6.8 ms to ~1.1-1.7 ms). On a
// GPU (H100, Vulkan) the vec4 kernels measured as fast as the f32 ones for Adam and 10-20% faster
// for SGD and RMSprop at 10M elements.
// The partial vec4 is handled in the loop rather than by a separate block for one thread because
// SwiftShader runs every block of a shader for every group of 4 invocations, with the inactive
// lanes masked off: a block taken by one thread costs all threads about as much as a loop step.
// For the same reason a thread's fixed cost (its ~10 hyperparameter reads, each a storage load) is
// high there; optim.py sizes the grid so that a thread updates many vec4s on a CPU adapter.

override MAXIMIZE: bool = false;
override WEIGHT_DECAY: bool = false;   // weight_decay != 0
override DECOUPLED: bool = false;      // AdamW: decay the parameter, not the gradient
override MOMENTUM: bool = false;       // SGD / RMSprop with a momentum buffer
override NESTEROV: bool = false;
override AMSGRAD: bool = false;
override CENTERED: bool = false;
// SKIP_IF: the update changes nothing where skip_flag[p.skip_offset] > 0 (GradScaler's step on a gradient
// that held inf or NaN, decided on the device: a replayed step cannot read the flag back; see
// amp/grad_scaler.py). Without it skip_flag is a spare buffer, never read.
override SKIP_IF: bool = false;
// COUNT_SKIPS (with SKIP_IF; Adam, RMSprop): a skipped update counts itself in skipped_steps (counted_skip)
override COUNT_SKIPS: bool = false;

struct Params {
    n: u32,
    param_offset: u32,
    grad_offset: u32,
    skip_offset: u32,
    state_offset: vec3<u32>,   // state buffers 1..3 (their meaning depends on the optimizer)
    skipped_offset: u32,       // COUNT_SKIPS: where the parameter's skipped-step count is in skipped_steps
    slot: array<vec4<u32>, 3>, // where each hyperparameter lives in `scalars` (optim.py lists them)
}

// Each binding has an f32 and a vec4 view; an entry point uses only one of the two.
@group(0) @binding(0) var<storage, read_write> param: array<f32>;
@group(0) @binding(0) var<storage, read_write> param4: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(1) var<storage, read> grad4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> state1: array<f32>;
@group(0) @binding(2) var<storage, read_write> state14: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> state2: array<f32>;
@group(0) @binding(3) var<storage, read_write> state24: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> state3: array<f32>;
@group(0) @binding(4) var<storage, read_write> state34: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> scalars: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;
@group(0) @binding(7) var<storage, read> skip_flag: array<f32>;
// COUNT_SKIPS (Adam, RMSprop): the parameter's count of skipped steps (see counted_skip); else a spare, unused.
@group(0) @binding(8) var<storage, read_write> skipped_steps: array<f32>;

// 256, or 64 for small parameters (optim.py): on SwiftShader every group of 4 invocations of a
// workgroup pays a thread's fixed cost, with work or without.
override WORKGROUP: u32 = 256u;

fn hyper(k: u32) -> f32 { return scalars[p.slot[k / 4u][k % 4u]]; }

fn skipped() -> bool { return SKIP_IF && skip_flag[p.skip_offset] > 0.0; }

// skipped(), counting the skip in the parameter's skipped_steps word (Adam and RMSprop, which keep a step count).
// The host's step count (Adam's slot 1; RMSprop's only in its state dict) counts the replayed steps the flag
// skipped too, which the host cannot see; Adam's bias corrections use the difference, the steps taken, as
// PyTorch's fused Adam subtracts found_inf from its step count (optim/optimizer.py's state_dict() subtracts it
// too). A skipped update's first thread adds one to the word; no thread of that dispatch reads it (all of them
// return at once), and an update that is not skipped only reads it, so the word needs no barrier.
fn counted_skip(gid: vec3<u32>) -> bool {
    if (!skipped()) { return false; }
    if (COUNT_SKIPS && gid.x == 0u) { skipped_steps[p.skipped_offset] += 1.0; }
    return true;
}

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
fn effective_grad(g: vec4<f32>, w: vec4<f32>, weight_decay: f32) -> vec4<f32> {
    var e = select(g, -g, MAXIMIZE);
    if (WEIGHT_DECAY && !DECOUPLED) { e += weight_decay * w; }
    return e;
}

// The vec4s a thread updates: j = start, start + stride, ... < end (j counts vec4s from each buffer's
// offset / 4; the last one may be partial).
struct Vec4Range { start: u32, end: u32, stride: u32 }

fn vec4_range(gid: vec3<u32>, groups: vec3<u32>) -> Vec4Range {
    return Vec4Range(gid.x, (p.n + 3u) / 4u, groups.x * WORKGROUP);
}

// Which components of vec4 j are the parameter's (all but in a partial last vec4).
fn owned(j: u32) -> vec4<bool> {
    return vec4<u32>(4u * j) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(p.n);
}

// ------------------------------------------------------------------------------------------- SGD
// Hyperparameter slots: 0 lr, 1 momentum, 2 1 - dampening, 3 weight_decay, 4 first step (1 or 0).
// state1 = momentum buffer.

struct SgdHyper { lr: f32, momentum: f32, undampened: f32, weight_decay: f32, first: bool }

fn sgd_hyper() -> SgdHyper {
    return SgdHyper(hyper(0u), hyper(1u), hyper(2u), hyper(3u), hyper(4u) != 0.0);
}

// (new param, new momentum buffer) from the gradient, the parameter and the momentum buffer.
struct SgdOut { w: vec4<f32>, buf: vec4<f32> }

fn sgd_update(h: SgdHyper, g0: vec4<f32>, w: vec4<f32>, buf0: vec4<f32>) -> SgdOut {
    var g = effective_grad(g0, w, h.weight_decay);
    var buf = g;
    if (MOMENTUM) {
        if (!h.first) { buf = h.momentum * buf0 + h.undampened * g; }
        g = select(buf, g + h.momentum * buf, NESTEROV);
    }
    return SgdOut(w - h.lr * g, buf);
}

@compute @workgroup_size(WORKGROUP)
fn sgd(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    if (skipped()) { return; }
    let h = sgd_hyper();
    let n = p.n;
    for (var i = gid.x; i < n; i += groups.x * WORKGROUP) {
        let k = p.param_offset + i;
        let s = p.state_offset.x + i;
        var buf0 = vec4<f32>();
        if (MOMENTUM && !h.first) { buf0 = vec4<f32>(state1[s]); }
        let r = sgd_update(h, vec4<f32>(grad[p.grad_offset + i]), vec4<f32>(param[k]), buf0);
        if (MOMENTUM) { state1[s] = r.buf.x; }
        param[k] = r.w.x;
    }
}

@compute @workgroup_size(WORKGROUP)
fn sgd4(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    if (skipped()) { return; }
    let h = sgd_hyper();
    let range = vec4_range(gid, groups);
    let po = p.param_offset / 4u;
    let go = p.grad_offset / 4u;
    let so = p.state_offset.x / 4u;
    for (var j = range.start; j < range.end; j += range.stride) {
        let own = owned(j);
        let w = param4[po + j];
        // Loaded also at the first step (when the update ignores it): a partial vec4 stores it back.
        var buf0 = vec4<f32>();
        if (MOMENTUM) { buf0 = state14[so + j]; }
        let r = sgd_update(h, grad4[go + j], w, buf0);
        if (MOMENTUM) { state14[so + j] = select(buf0, r.buf, own); }
        param4[po + j] = select(w, r.w, own);
    }
}

// ------------------------------------------------------------------------------------------ Adam
// Hyperparameter slots: 0 lr, 1 step, 2 beta1, 3 1 - beta1, 4 beta2, 5 1 - beta2, 6 ln beta1,
// 7 ln beta2, 8 eps, 9 weight_decay. state1 = exp_avg, state2 = exp_avg_sq, state3 = max_exp_avg_sq.

struct AdamHyper {
    lr: f32, beta1: f32, one_minus_beta1: f32, beta2: f32, one_minus_beta2: f32, eps: f32,
    weight_decay: f32, step_size: f32, inv_sqrt_bc2: f32,
}

fn adam_hyper() -> AdamHyper {
    let lr = hyper(0u);
    var step = hyper(1u);
    if (COUNT_SKIPS) { step -= skipped_steps[p.skipped_offset]; }
    // 1 - beta^t = -expm1(t ln beta), accurate also when it is tiny (t = 1, beta2 = 0.999).
    let step_size = lr / -expm1_f32(step * hyper(6u));
    let inv_sqrt_bc2 = inverseSqrt(-expm1_f32(step * hyper(7u)));
    return AdamHyper(lr, hyper(2u), hyper(3u), hyper(4u), hyper(5u), hyper(8u), hyper(9u), step_size, inv_sqrt_bc2);
}

// New (param, exp_avg, exp_avg_sq, max_exp_avg_sq) from the gradient and the old ones.
struct AdamOut { w: vec4<f32>, m: vec4<f32>, v: vec4<f32>, vmax: vec4<f32> }

fn adam_update(h: AdamHyper, g0: vec4<f32>, w0: vec4<f32>, m0: vec4<f32>, v0: vec4<f32>, vmax0: vec4<f32>) -> AdamOut {
    let g = effective_grad(g0, w0, h.weight_decay);
    var w = w0;
    if (WEIGHT_DECAY && DECOUPLED) { w *= 1.0 - h.lr * h.weight_decay; }
    let m = h.beta1 * m0 + h.one_minus_beta1 * g;
    let v = h.beta2 * v0 + h.one_minus_beta2 * g * g;
    var d = v;   // the second moment the step divides by
    if (AMSGRAD) { d = max(vmax0, v); }
    return AdamOut(w - h.step_size * m / (sqrt(d) * h.inv_sqrt_bc2 + h.eps), m, v, d);
}

@compute @workgroup_size(WORKGROUP)
fn adam(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    if (counted_skip(gid)) { return; }
    let h = adam_hyper();
    let n = p.n;
    for (var i = gid.x; i < n; i += groups.x * WORKGROUP) {
        let k = p.param_offset + i;
        let s = p.state_offset + i;
        var vmax0 = vec4<f32>();
        if (AMSGRAD) { vmax0 = vec4<f32>(state3[s.z]); }
        let r = adam_update(h, vec4<f32>(grad[p.grad_offset + i]), vec4<f32>(param[k]),
                            vec4<f32>(state1[s.x]), vec4<f32>(state2[s.y]), vmax0);
        state1[s.x] = r.m.x;
        state2[s.y] = r.v.x;
        if (AMSGRAD) { state3[s.z] = r.vmax.x; }
        param[k] = r.w.x;
    }
}

@compute @workgroup_size(WORKGROUP)
fn adam4(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    if (counted_skip(gid)) { return; }
    let h = adam_hyper();
    let range = vec4_range(gid, groups);
    let po = p.param_offset / 4u;
    let go = p.grad_offset / 4u;
    let so = p.state_offset / 4u;
    for (var j = range.start; j < range.end; j += range.stride) {
        let own = owned(j);
        let w = param4[po + j];
        let m = state14[so.x + j];
        let v = state24[so.y + j];
        var vmax = vec4<f32>();
        if (AMSGRAD) { vmax = state34[so.z + j]; }
        let r = adam_update(h, grad4[go + j], w, m, v, vmax);
        state14[so.x + j] = select(m, r.m, own);
        state24[so.y + j] = select(v, r.v, own);
        if (AMSGRAD) { state34[so.z + j] = select(vmax, r.vmax, own); }
        param4[po + j] = select(w, r.w, own);
    }
}

// --------------------------------------------------------------------------------------- RMSprop
// Hyperparameter slots: 0 lr, 1 alpha, 2 1 - alpha, 3 eps, 4 weight_decay, 5 momentum.
// state1 = square_avg, state2 = momentum buffer, state3 = grad_avg (centered).

struct RmspropHyper { lr: f32, alpha: f32, one_minus_alpha: f32, eps: f32, weight_decay: f32, momentum: f32 }

fn rmsprop_hyper() -> RmspropHyper {
    return RmspropHyper(hyper(0u), hyper(1u), hyper(2u), hyper(3u), hyper(4u), hyper(5u));
}

// New (param, square_avg, momentum buffer, grad_avg) from the gradient and the old ones.
struct RmspropOut { w: vec4<f32>, sq: vec4<f32>, buf: vec4<f32>, ga: vec4<f32> }

fn rmsprop_update(h: RmspropHyper, g0: vec4<f32>, w: vec4<f32>, sq0: vec4<f32>, buf0: vec4<f32>, ga0: vec4<f32>) -> RmspropOut {
    let g = effective_grad(g0, w, h.weight_decay);
    let sq = h.alpha * sq0 + h.one_minus_alpha * g * g;
    var ga = ga0;
    var avg: vec4<f32>;
    if (CENTERED) {
        ga = h.alpha * ga0 + h.one_minus_alpha * g;
        avg = sqrt(sq - ga * ga) + h.eps;
    } else {
        avg = sqrt(sq) + h.eps;
    }
    if (MOMENTUM) {
        let buf = h.momentum * buf0 + g / avg;
        return RmspropOut(w - h.lr * buf, sq, buf, ga);
    }
    return RmspropOut(w - h.lr * g / avg, sq, buf0, ga);
}

@compute @workgroup_size(WORKGROUP)
fn rmsprop(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    if (counted_skip(gid)) { return; }
    let h = rmsprop_hyper();
    let n = p.n;
    for (var i = gid.x; i < n; i += groups.x * WORKGROUP) {
        let k = p.param_offset + i;
        let s = p.state_offset + i;
        var buf0 = vec4<f32>();
        var ga0 = vec4<f32>();
        if (MOMENTUM) { buf0 = vec4<f32>(state2[s.y]); }
        if (CENTERED) { ga0 = vec4<f32>(state3[s.z]); }
        let r = rmsprop_update(h, vec4<f32>(grad[p.grad_offset + i]), vec4<f32>(param[k]),
                               vec4<f32>(state1[s.x]), buf0, ga0);
        state1[s.x] = r.sq.x;
        if (MOMENTUM) { state2[s.y] = r.buf.x; }
        if (CENTERED) { state3[s.z] = r.ga.x; }
        param[k] = r.w.x;
    }
}

@compute @workgroup_size(WORKGROUP)
fn rmsprop4(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    if (counted_skip(gid)) { return; }
    let h = rmsprop_hyper();
    let range = vec4_range(gid, groups);
    let po = p.param_offset / 4u;
    let go = p.grad_offset / 4u;
    let so = p.state_offset / 4u;
    for (var j = range.start; j < range.end; j += range.stride) {
        let own = owned(j);
        let w = param4[po + j];
        let sq = state14[so.x + j];
        var buf = vec4<f32>();
        var ga = vec4<f32>();
        if (MOMENTUM) { buf = state24[so.y + j]; }
        if (CENTERED) { ga = state34[so.z + j]; }
        let r = rmsprop_update(h, grad4[go + j], w, sq, buf, ga);
        state14[so.x + j] = select(sq, r.sq, own);
        if (MOMENTUM) { state24[so.y + j] = select(buf, r.buf, own); }
        if (CENTERED) { state34[so.z + j] = select(ga, r.ga, own); }
        param4[po + j] = select(w, r.w, own);
    }
}
