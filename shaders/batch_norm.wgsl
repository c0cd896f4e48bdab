//! include "common.wgsl"
// Batch normalisation, forward and backward (the Python side is _backends/webgpu/batch_norm.py).
//
// x, out, grad are contiguous [N, C, S] (S the spatial positions) of element type XT, float32 or float16
// (batch_norm.py splices ELEMENT_TYPES: typed.py element_types): float16 activations are read into f32 and
// the results rounded once into XT (cuDNN's batch norm under autocast); statistics, weight, bias, save
// and the partial sums are float32 either way; a channel's M = N * S values
// are N runs of S consecutive words, C * S apart. The per-channel work (statistics, gradient sums) is
// split into `chunks` chunks of `chunk` values of the channel's flattened (n, s) range.
//
// Forward, training:
//   stats        a workgroup per (chunk, channel): each thread sums x - shift and (x - shift)^2 over its
//                share (shift = its own first value, so the sums stay small: shifted sums), turns
//                them into (count, mean - origin, M2) (origin = the channel's first value: means kept
//                relative to it lose nothing to float32's rounding of a large mean, 1000 + N(0, 0.01)
//                say, when merged), and the workgroup merges those with Chan et al.'s pairwise
//                formula; with one chunk it finishes the channel at once, else it writes a partial;
//                stats4 the same on vec4s (S and the offset multiples of 4)
//   stats_rows   the same with one thread per (chunk, channel), a plain loop over blocks of BLOCK values
//                merged the same way (software adapters)
//   finish       a thread per channel merges the partials (Chan again) and finishes: save = (mean,
//                invstd), running statistics updated with the unbiased variance
//   normalize    out = (x - mean) * invstd * weight + bias, each thread `per_thread` consecutive values;
//                normalize4 one vec4 a thread (S and the offsets multiples of 4: a vec4 stays in one channel);
//                normalize4_act the same (training, float32), then + r, then ReLU: what a captured step's
//                normalize4, residual add and ReLU become (package/webgrad/_backends/webgpu/fusion.py)
// normalize also counts the batch in BatchNorm's num_batches_tracked (after the statistics read it).
// Forward, eval: normalize alone, reading the running statistics (and writing them into save).
// Backward: grad_sums(/4/_rows) and grad_finish fold sum(g) and sum(g * xhat) per channel the same way
// (plain sums; they also give grad_bias and grad_weight), then grad_input is one elementwise pass (grad_input4
// its vec4 twin, as normalize4).

//! splice ELEMENT_TYPES

const WORKGROUP: u32 = 256u;
const ROW_WORKGROUP: u32 = 64u;
const BLOCK: u32 = 64u;  // the *_rows kernels' blocks (below)

// flags
const HAS_W: u32 = 1u;
const HAS_B: u32 = 2u;
const TRAINING: u32 = 4u;
const RUNNING: u32 = 8u;      // update running_mean / running_var
const COUNT: u32 = 16u;       // momentum = 1 / the count after its increment (a cumulative average)
const GRAD_W: u32 = 32u;
const GRAD_B: u32 = 64u;
const SAVE: u32 = 128u;       // eval: normalize copies (running mean, invstd) into save
const INCREMENT: u32 = 256u;  // normalize adds 1 to cnt[cnt_off] (BatchNorm's num_batches_tracked)
const RESIDUAL: u32 = 512u;   // normalize4_act adds r (at p.unused) to the normalised values
const RELU: u32 = 1024u;      // normalize4_act: then ReLU
const RESIDUAL_IN_Y: u32 = 2048u;  // normalize4_act: r is read where each value goes, in y (its buffer is y's)
const FOLD: u32 = 4096u;      // stats(4), grad_sums(4) with chunks > 1: the last chunk's workgroup merges (below)

struct Params {
    n: u32,
    c: u32,
    s: u32,
    m: u32,            // values per channel, N * S
    chunks: u32,       // chunks per channel
    chunk: u32,        // values of a channel per chunk
    dn: u32,           // a stride of WORKGROUP values in the (n, s) range: dn runs and ds values more
    ds: u32,
    total: u32,        // N * C * S
    per_thread: u32,   // elementwise kernels: consecutive values per thread
    flags: u32,
    unused: u32,       // normalize4_act: r's offset
    x_off: u32,
    y_off: u32,        // out (forward) or grad_input (backward)
    g_off: u32,
    w_off: u32,
    b_off: u32,
    rm_off: u32,
    rv_off: u32,
    cnt_off: u32,
    save_off: u32,     // save: [2, C] (mean, invstd)
    part_off: u32,     // where the partials begin in part; the finished sums follow them (2 * C words)
    gw_off: u32,
    gb_off: u32,
    momentum: f32,
    eps: f32,
}

@group(0) @binding(0) var<storage, read> x: array<XT>;
@group(0) @binding(1) var<storage, read_write> y: array<XT>;
@group(0) @binding(2) var<storage, read> g: array<XT>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read> b: array<f32>;
@group(0) @binding(5) var<storage, read_write> rm: array<f32>;
@group(0) @binding(6) var<storage, read_write> rv: array<f32>;
@group(0) @binding(7) var<storage, read_write> cnt: array<i32>;
@group(0) @binding(8) var<storage, read_write> save: array<f32>;
@group(0) @binding(9) var<storage, read_write> part: array<f32>;
@group(0) @binding(10) var<storage, read_write> gw: array<f32>;
@group(0) @binding(11) var<storage, read_write> gb: array<f32>;
@group(0) @binding(12) var<uniform> p: Params;
@group(0) @binding(13) var<storage, read> r4: array<vec4<XT>>;  // normalize4_act's residual
// FOLD: a ticket counter per channel and the chunks' partials (stats, stats4, grad_sums, grad_sums4; see FOLD below)
@group(0) @binding(14) var<storage, read_write> tickets: array<atomic<u32>>;  // Runtime.tickets
// The vec4 entries' views of x, y and g (stats4, normalize4, grad_sums4, grad_input4): p's offsets are then
// multiples of 4, divided by 4
@group(0) @binding(0) var<storage, read> x4: array<vec4<XT>>;
@group(0) @binding(1) var<storage, read_write> y4: array<vec4<XT>>;
@group(0) @binding(2) var<storage, read> g4: array<vec4<XT>>;

fn has(flag: u32) -> bool { return (p.flags & flag) != 0u; }

// ------------------------------------------------------------------ statistics: (count, mean, M2)

struct Moments { n: f32, mean: f32, m2: f32 }

// Chan, Golub and LeVeque's pairwise merge of two sets' moments.
fn merge(a: Moments, b: Moments) -> Moments {
    if (b.n == 0.0) { return a; }
    if (a.n == 0.0) { return b; }
    let n = a.n + b.n;
    let delta = b.mean - a.mean;
    let fb = b.n / n;
    return Moments(n, a.mean + delta * fb, a.m2 + b.m2 + delta * delta * a.n * fb);
}

// Moments of `count` values from their sums shifted by `shift`.
fn from_sums(count: f32, shift: f32, sum: f32, sum_sq: f32) -> Moments {
    if (count == 0.0) { return Moments(0.0, 0.0, 0.0); }
    return Moments(count, shift + sum / count, max(sum_sq - sum * sum / count, 0.0));
}

// The channel's statistics are known (mo.mean relative to origin): save (mean, invstd) and update the
// running statistics.
fn finish_channel(c: u32, mo: Moments, origin: f32) {
    let var_biased = mo.m2 / mo.n;
    let mean = origin + mo.mean;
    save[p.save_off + c] = mean;
    save[p.save_off + p.c + c] = 1.0 / sqrt(var_biased + p.eps);
    if (has(RUNNING)) {
        var momentum = p.momentum;
        if (has(COUNT)) { momentum = 1.0 / f32(cnt[p.cnt_off] + 1); }  // normalize increments it later
        let unbiased = mo.m2 / (mo.n - 1.0);
        rm[p.rm_off + c] = (1.0 - momentum) * rm[p.rm_off + c] + momentum * mean;
        rv[p.rv_off + c] = (1.0 - momentum) * rv[p.rv_off + c] + momentum * unbiased;
    }
}

// Position of value j of channel c's (n, s) range in x (and grad).
fn at(c: u32, n: u32, s: u32) -> u32 { return (n * p.c + c) * p.s + s; }

// Partial q of the statistics: (count, mean - origin, M2, origin).
fn write_partial(q: u32, mo: Moments, origin: f32) {
    let k = p.part_off + 4u * q;
    part[k] = mo.n;
    part[k + 1u] = mo.mean;
    part[k + 2u] = mo.m2;
    part[k + 3u] = origin;
}

// ---- FOLD: merging a channel's chunks in the dispatch that computes them (batch_norm.py sets the flag where
// the binding vouches for device-scope storageBarrier: natively, as reduce.wgsl's STAGE 3, which says why).
// Each chunk's workgroup stores its partial in `tickets` (`words` words per chunk after the TICKET_COUNTERS
// counter words: runtime.py's constant), then takes a ticket from its channel's counter (word c); the
// workgroup drawing the channel's last ticket reads the partials back, finishes the channel and sets the
// counter back to zero for the next batch norm. Without it a second dispatch (finish, grad_finish) merges
// them: ResNet-18's replayed step has 30 fewer dispatches with it, though its GPU span barely moves (H200:
// 10,031 -> 10,004 us); an eager step saves their host time.
// The last workgroup's threads load the chunks' partials into workgroup memory side by side
// (a round of WORKGROUP chunks at a time), and thread 0 merges them from there in chunk order: the same sums
// as one thread loading each in turn, whose dependent chain of device-scope loads kept the whole workgroup
// waiting (H200, ResNet-18: stats4 cost 203 us of the step's span merged that way, 155 us plus 97 us of
// finish dispatches merged by a second dispatch; grad_sums4 255, against 202 plus 62).
var<workgroup> last_ticket: u32;

fn put_partial(c: u32, chunk: u32, words: u32, i: u32, v: f32) {
    atomicStore(&tickets[TICKET_COUNTERS + (c * p.chunks + chunk) * words + i], bitcast<u32>(v));
}

fn partial_word(c: u32, chunk: u32, words: u32, i: u32) -> f32 {
    return bitcast<f32>(atomicLoad(&tickets[TICKET_COUNTERS + (c * p.chunks + chunk) * words + i]));
}

// After the workgroup's thread 0 stored its partial: whether this workgroup drew channel c's last ticket
// (workgroup-uniform; every partial of the channel is then visible to its thread 0).
fn drew_last_ticket(lid: u32, c: u32) -> bool {
    storageBarrier();  // the partial is visible device-wide before this workgroup's ticket is taken
    if (lid == 0u) { last_ticket = select(0u, 1u, atomicAdd(&tickets[c], 1u) == p.chunks - 1u); }
    let last = workgroupUniformLoad(&last_ticket) == 1u;
    if (last) { storageBarrier(); }  // every partial, stored before its ticket, is seen after the last one
    return last;
}

var<workgroup> tree_n: array<f32, WORKGROUP>;
var<workgroup> tree_mean: array<f32, WORKGROUP>;
var<workgroup> tree_m2: array<f32, WORKGROUP>;

// FOLD's merge, a round of WORKGROUP chunks from chunk k0: the last workgroup's threads put the partials of
// channel c (`words` words a chunk: 3 for the statistics, 2 for the gradient sums) into tree_n, tree_mean (and
// tree_m2), chunk k0 + i at i, once every thread is past the tree's or the previous round's reads; returns how
// many the round holds.
fn gather_round(lid: u32, c: u32, k0: u32, words: u32) -> u32 {
    workgroupBarrier();
    let k = k0 + lid;
    if (k < p.chunks) {
        tree_n[lid] = partial_word(c, k, words, 0u);
        tree_mean[lid] = partial_word(c, k, words, 1u);
        if (words == 3u) { tree_m2[lid] = partial_word(c, k, words, 2u); }
    }
    workgroupBarrier();
    return min(WORKGROUP, p.chunks - k0);
}

// A thread's walk through chunk `chunk` of channel c's (n, s) range, in units of `width` values (1, or 4 for
// the vec4 entries: S and the offsets multiples of 4, chunks of whole vec4s, p.dn and p.ds in vec4s): its
// position j up to the chunk's end, and (n, s) with sw units a plane
struct Sweep { j: u32, end: u32, n: u32, s: u32, sw: u32, c: u32 }

fn sweep_start(chunk: u32, c: u32, lid: u32, width: u32) -> Sweep {
    let sw = p.s / width;
    let j = chunk * p.chunk / width + lid;
    let n = j / sw;
    return Sweep(j, min((chunk + 1u) * p.chunk, p.m) / width, n, j - n * sw, sw, c);
}

// The unit's index in x (and g), from their offsets
fn sweep_index(w: Sweep) -> u32 { return (w.n * p.c + w.c) * w.sw + w.s; }

fn sweep_next(w: ptr<function, Sweep>) {
    (*w).j += WORKGROUP;
    (*w).s += p.ds;
    (*w).n += p.dn;
    if ((*w).s >= (*w).sw) { (*w).s -= (*w).sw; (*w).n += 1u; }
}

@compute @workgroup_size(WORKGROUP)
fn stats(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let first = sweep_start(wid.x, wid.y, lid, 1u);
    // Shifted by the thread's own first value, so the sums stay near the spread of the data.
    let shift = select(0.0, f32(x[p.x_off + sweep_index(first)]), first.j < first.end);
    let origin = f32(x[p.x_off + at(wid.y, 0u, 0u)]);
    var count = 0.0;
    var sum = 0.0;
    var sum_sq = 0.0;
    for (var w = first; w.j < w.end; sweep_next(&w)) {
        let d = f32(x[p.x_off + sweep_index(w)]) - shift;
        sum += d;
        sum_sq += d * d;
        count += 1.0;
    }
    stats_tree(lid, wid.y, wid.x, from_sums(count, shift - origin, sum, sum_sq), origin);
}

// stats4: stats on vec4s (see Sweep)
@compute @workgroup_size(WORKGROUP)
fn stats4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let base = p.x_off / 4u;
    let first = sweep_start(wid.x, wid.y, lid, 4u);
    let shift = select(0.0, f32(x4[base + sweep_index(first)].x), first.j < first.end);
    let origin = f32(x4[base + wid.y * first.sw].x);  // x[at(c, 0, 0)] (x itself is not bound beside x4)
    var count = 0.0;
    var sum = vec4<f32>(0.0);
    var sum_sq = vec4<f32>(0.0);
    for (var w = first; w.j < w.end; sweep_next(&w)) {
        let d = vec4<f32>(x4[base + sweep_index(w)]) - shift;
        sum += d;
        sum_sq += d * d;
        count += 4.0;
    }
    let ones = vec4<f32>(1.0);
    stats_tree(lid, wid.y, wid.x, from_sums(count, shift - origin, dot(sum, ones), dot(sum_sq, ones)), origin);
}

// The workgroup's merge of its threads' moments, then channel c's statistics (one chunk) or partial `chunk`
fn stats_tree(lid: u32, c: u32, chunk: u32, mine: Moments, origin: f32) {
    tree_n[lid] = mine.n;
    tree_mean[lid] = mine.mean;
    tree_m2[lid] = mine.m2;
    workgroupBarrier();
    for (var stride = WORKGROUP / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            let r = merge(Moments(tree_n[lid], tree_mean[lid], tree_m2[lid]),
                          Moments(tree_n[lid + stride], tree_mean[lid + stride], tree_m2[lid + stride]));
            tree_n[lid] = r.n;
            tree_mean[lid] = r.mean;
            tree_m2[lid] = r.m2;
        }
        workgroupBarrier();
    }
    let fold = p.chunks > 1u && has(FOLD);
    if (lid == 0u) {
        let total = Moments(tree_n[0], tree_mean[0], tree_m2[0]);
        if (p.chunks == 1u) {
            finish_channel(c, total, origin);
        } else if (fold) {
            put_partial(c, chunk, 3u, 0u, total.n);
            put_partial(c, chunk, 3u, 1u, total.mean);
            put_partial(c, chunk, 3u, 2u, total.m2);
        } else {
            write_partial(c * p.chunks + chunk, total, origin);
        }
    }
    if (fold && drew_last_ticket(lid, c)) {  // finish's merge, in chunk order (see FOLD above)
        var all = Moments(0.0, 0.0, 0.0);
        for (var k0 = 0u; k0 < p.chunks; k0 += WORKGROUP) {
            let n = gather_round(lid, c, k0, 3u);
            if (lid == 0u) {
                for (var i = 0u; i < n; i++) { all = merge(all, Moments(tree_n[i], tree_mean[i], tree_m2[i])); }
            }
        }
        if (lid == 0u) {
            finish_channel(c, all, origin);  // every chunk's origin is the channel's first value
            atomicStore(&tickets[c], 0u);
        }
    }
}

@compute @workgroup_size(ROW_WORKGROUP)
fn stats_rows(@builtin(global_invocation_id) gid: vec3<u32>) {
    let q = gid.x;
    if (q >= p.c * p.chunks) { return; }
    let c = q / p.chunks;
    let chunk = q % p.chunks;
    let origin = f32(x[p.x_off + at(c, 0u, 0u)]);
    let start = chunk * p.chunk;
    let end = min(start + p.chunk, p.m);
    var n = start / p.s;
    var s = start - n * p.s;
    // Blocks of BLOCK values, each summed shifted by its first value and merged into the total (Chan):
    // one long f32 sum shifted by a single value lost 1e-5 of the normalised output at M = 512.
    var total = Moments(0.0, 0.0, 0.0);
    for (var j = start; j < end;) {
        let block_end = min(j + BLOCK, end);
        let shift = f32(x[p.x_off + at(c, n, s)]);
        var sum = 0.0;
        var sum_sq = 0.0;
        let count = f32(block_end - j);
        for (; j < block_end; j++) {
            let d = f32(x[p.x_off + at(c, n, s)]) - shift;
            sum += d;
            sum_sq += d * d;
            s += 1u;
            if (s == p.s) { s = 0u; n += 1u; }
        }
        total = merge(total, from_sums(count, shift - origin, sum, sum_sq));
    }
    if (p.chunks == 1u) {
        finish_channel(c, total, origin);
    } else {
        write_partial(q, total, origin);
    }
}

@compute @workgroup_size(ROW_WORKGROUP)
fn finish(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    if (c >= p.c) { return; }
    var total = Moments(0.0, 0.0, 0.0);
    for (var k = 0u; k < p.chunks; k++) {
        let i = p.part_off + 4u * (c * p.chunks + k);
        total = merge(total, Moments(part[i], part[i + 1u], part[i + 2u]));
    }
    finish_channel(c, total, part[p.part_off + 4u * c * p.chunks + 3u]);
}

// ------------------------------------------------------------------ normalisation

// Channel c's (mean, invstd): the batch's (from save) in training, else the running statistics.
fn channel_stats(c: u32) -> vec2<f32> {
    if (has(TRAINING)) { return vec2<f32>(save[p.save_off + c], save[p.save_off + p.c + c]); }
    return vec2<f32>(rm[p.rm_off + c], 1.0 / sqrt(rv[p.rv_off + c] + p.eps));
}

fn weight_of(c: u32) -> f32 { return select(1.0, w[p.w_off + c], has(HAS_W)); }

// The batch count's increment and eval's copy of the running statistics into save (normalize's first threads)
fn normalize_extras(thread: u32) {
    if (has(INCREMENT) && thread == 0u) { cnt[p.cnt_off] += 1; }
    if (has(SAVE) && thread < p.c) {
        let st = channel_stats(thread);
        save[p.save_off + thread] = st.x;
        save[p.save_off + p.c + thread] = st.y;
    }
}

// Value i's channel
fn channel_of(i: u32) -> u32 { return (i / p.s) % p.c; }

@compute @workgroup_size(WORKGROUP)
fn normalize4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let thread = (wid.x + wid.y * nwg.x) * WORKGROUP + lid;
    normalize_extras(thread);
    if (thread >= p.total / 4u) { return; }
    let c = channel_of(4u * thread);
    y4[p.y_off / 4u + thread] = to_XT4(normalized4(thread, c, channel_stats(c)));
}

// The thread's vec4 of x normalised with its channel c's statistics st (mean, invstd), weight and bias
fn normalized4(thread: u32, c: u32, st: vec2<f32>) -> vec4<f32> {
    let scale = st.y * weight_of(c);
    let shift = select(0.0, b[p.b_off + c], has(HAS_B));
    return (vec4<f32>(x4[p.x_off / 4u + thread]) - st.x) * scale + shift;
}

// normalize4, then + r (RESIDUAL), then ReLU (RELU) as elementwise.wgsl's relu: NaN kept, max(v, 0) otherwise.
// Each step rounds as the separate passes did (float32: the normalised value, the sum), so a fused step
// computes what the passes computed.
@compute @workgroup_size(WORKGROUP)
fn normalize4_act(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let thread = (wid.x + wid.y * nwg.x) * WORKGROUP + lid;
    if (has(INCREMENT) && thread == 0u) { cnt[p.cnt_off] += 1; }  // (training: the statistics are in save)
    if (thread >= p.total / 4u) { return; }
    let c = channel_of(4u * thread);
    var v = vec4<f32>(to_XT4(normalized4(thread, c, vec2<f32>(save[p.save_off + c], save[p.save_off + p.c + c]))));
    if (has(RESIDUAL_IN_Y)) {
        v = v + vec4<f32>(y4[p.y_off / 4u + thread]);
    } else if (has(RESIDUAL)) {
        v = v + vec4<f32>(r4[p.unused / 4u + thread]);
    }
    if (has(RELU)) {
        let nan = (bitcast<vec4<u32>>(v) & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u);
        v = select(max(v, vec4<f32>(0.0)), v, nan);
    }
    y4[p.y_off / 4u + thread] = to_XT4(v);
}

@compute @workgroup_size(WORKGROUP)
fn normalize(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let thread = (wid.x + wid.y * nwg.x) * WORKGROUP + lid;
    normalize_extras(thread);
    var i = thread * p.per_thread;
    if (i >= p.total) { return; }
    let end = min(i + p.per_thread, p.total);
    let row = i / p.s;
    var s = i - row * p.s;
    var c = row % p.c;
    var st = channel_stats(c);
    var scale = st.y * weight_of(c);
    var shift = select(0.0, b[p.b_off + c], has(HAS_B));
    for (; i < end; i++) {
        y[p.y_off + i] = to_XT((f32(x[p.x_off + i]) - st.x) * scale + shift);
        s += 1u;
        if (s == p.s && i + 1u < end) {
            s = 0u;
            c = select(c + 1u, 0u, c + 1u == p.c);
            st = channel_stats(c);
            scale = st.y * weight_of(c);
            shift = select(0.0, b[p.b_off + c], has(HAS_B));
        }
    }
}

// ------------------------------------------------------------------ backward

var<workgroup> tree_g: array<f32, WORKGROUP>;
var<workgroup> tree_gx: array<f32, WORKGROUP>;

// The finished sums (sum g, sum g * xhat) of channel c: kept for grad_input, and the parameter gradients.
fn finish_sums(c: u32, sum_g: f32, sum_gx: f32) {
    let k = p.part_off + 2u * p.c * p.chunks + 2u * c;
    part[k] = sum_g;
    part[k + 1u] = sum_gx;
    if (has(GRAD_B)) { gb[p.gb_off + c] = sum_g; }
    if (has(GRAD_W)) { gw[p.gw_off + c] = sum_gx; }
}

fn finished_or_partial(c: u32, chunk: u32, sum_g: f32, sum_gx: f32) {
    if (p.chunks == 1u) {
        finish_sums(c, sum_g, sum_gx);
    } else {
        let k = p.part_off + 2u * (c * p.chunks + chunk);
        part[k] = sum_g;
        part[k + 1u] = sum_gx;
    }
}

@compute @workgroup_size(WORKGROUP)
fn grad_sums(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let c = wid.y;
    let mean = save[p.save_off + c];
    var sum_g = 0.0;
    var sum_gx = 0.0;
    for (var w = sweep_start(wid.x, c, lid, 1u); w.j < w.end; sweep_next(&w)) {
        let k = sweep_index(w);
        let gv = f32(g[p.g_off + k]);
        sum_g += gv;
        sum_gx += gv * (f32(x[p.x_off + k]) - mean);
    }
    sums_tree(lid, c, wid.x, sum_g, sum_gx * save[p.save_off + p.c + c]);
}

// grad_sums4: grad_sums on vec4s (see Sweep; g's offset a multiple of 4 too)
@compute @workgroup_size(WORKGROUP)
fn grad_sums4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let c = wid.y;
    let mean = save[p.save_off + c];
    var sum_g = vec4<f32>(0.0);
    var sum_gx = vec4<f32>(0.0);
    for (var w = sweep_start(wid.x, c, lid, 4u); w.j < w.end; sweep_next(&w)) {
        let k = sweep_index(w);
        let gv = vec4<f32>(g4[p.g_off / 4u + k]);
        sum_g += gv;
        sum_gx += gv * (vec4<f32>(x4[p.x_off / 4u + k]) - mean);
    }
    let ones = vec4<f32>(1.0);
    sums_tree(lid, c, wid.x, dot(sum_g, ones), dot(sum_gx, ones) * save[p.save_off + p.c + c]);
}

// The workgroup's sums of its threads' (sum g, sum g * xhat), then channel c's or chunk `chunk`'s
fn sums_tree(lid: u32, c: u32, chunk: u32, sum_g: f32, sum_gx: f32) {
    tree_g[lid] = sum_g;
    tree_gx[lid] = sum_gx;
    workgroupBarrier();
    for (var stride = WORKGROUP / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            tree_g[lid] += tree_g[lid + stride];
            tree_gx[lid] += tree_gx[lid + stride];
        }
        workgroupBarrier();
    }
    let fold = p.chunks > 1u && has(FOLD);
    if (lid == 0u) {
        if (fold) {
            put_partial(c, chunk, 2u, 0u, tree_g[0]);
            put_partial(c, chunk, 2u, 1u, tree_gx[0]);
        } else {
            finished_or_partial(c, chunk, tree_g[0], tree_gx[0]);
        }
    }
    if (fold && drew_last_ticket(lid, c)) {  // grad_finish's sums, in chunk order (see FOLD above)
        var sum_g = 0.0;
        var sum_gx = 0.0;
        for (var k0 = 0u; k0 < p.chunks; k0 += WORKGROUP) {
            let n = gather_round(lid, c, k0, 2u);
            if (lid == 0u) {
                for (var i = 0u; i < n; i++) {
                    sum_g += tree_n[i];  // (gather_round's arrays: the sums' words 0 and 1)
                    sum_gx += tree_mean[i];
                }
            }
        }
        if (lid == 0u) {
            finish_sums(c, sum_g, sum_gx);
            atomicStore(&tickets[c], 0u);
        }
    }
}

@compute @workgroup_size(ROW_WORKGROUP)
fn grad_sums_rows(@builtin(global_invocation_id) gid: vec3<u32>) {
    let q = gid.x;
    if (q >= p.c * p.chunks) { return; }
    let c = q / p.chunks;
    let chunk = q % p.chunks;
    let mean = save[p.save_off + c];
    let start = chunk * p.chunk;
    let end = min(start + p.chunk, p.m);
    var n = start / p.s;
    var s = start - n * p.s;
    var sum_g = 0.0;
    var sum_gx = 0.0;
    for (var j = start; j < end;) {  // blocks of BLOCK values, summed apart: a shorter chain of roundings
        let block_end = min(j + BLOCK, end);
        var block_g = 0.0;
        var block_gx = 0.0;
        for (; j < block_end; j++) {
            let k = at(c, n, s);
            let gv = f32(g[p.g_off + k]);
            block_g += gv;
            block_gx += gv * (f32(x[p.x_off + k]) - mean);
            s += 1u;
            if (s == p.s) { s = 0u; n += 1u; }
        }
        sum_g += block_g;
        sum_gx += block_gx;
    }
    finished_or_partial(c, chunk, sum_g, sum_gx * save[p.save_off + p.c + c]);
}

@compute @workgroup_size(ROW_WORKGROUP)
fn grad_finish(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    if (c >= p.c) { return; }
    var sum_g = 0.0;
    var sum_gx = 0.0;
    for (var k = 0u; k < p.chunks; k++) {
        let i = p.part_off + 2u * (c * p.chunks + k);
        sum_g += part[i];
        sum_gx += part[i + 1u];
    }
    finish_sums(c, sum_g, sum_gx);
}

// grad_input = k1 * g + k2 * (x - mean) + k3, per channel: k1 = weight * invstd; training also
// k2 = -k1 * invstd * sum(g * xhat) / M and k3 = -k1 * sum(g) / M.
fn input_coefficients(c: u32) -> vec4<f32> {
    let mean = save[p.save_off + c];
    let invstd = save[p.save_off + p.c + c];
    let k1 = weight_of(c) * invstd;
    if (!has(TRAINING)) { return vec4<f32>(k1, 0.0, 0.0, mean); }
    let k = p.part_off + 2u * p.c * p.chunks + 2u * c;
    let inv_m = 1.0 / f32(p.m);
    return vec4<f32>(k1, -k1 * invstd * part[k + 1u] * inv_m, -k1 * part[k] * inv_m, mean);
}

@compute @workgroup_size(WORKGROUP)
fn grad_input4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let thread = (wid.x + wid.y * nwg.x) * WORKGROUP + lid;
    if (thread >= p.total / 4u) { return; }
    let k = input_coefficients(channel_of(4u * thread));
    let gv = vec4<f32>(g4[p.g_off / 4u + thread]);
    y4[p.y_off / 4u + thread] = to_XT4(k.x * gv + k.y * (vec4<f32>(x4[p.x_off / 4u + thread]) - k.w) + k.z);
}

@compute @workgroup_size(WORKGROUP)
fn grad_input(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    var i = ((wid.x + wid.y * nwg.x) * WORKGROUP + lid) * p.per_thread;
    if (i >= p.total) { return; }
    let end = min(i + p.per_thread, p.total);
    let row = i / p.s;
    var s = i - row * p.s;
    var c = row % p.c;
    var k = input_coefficients(c);
    for (; i < end; i++) {
        y[p.y_off + i] = to_XT(k.x * f32(g[p.g_off + i]) + k.y * (f32(x[p.x_off + i]) - k.w) + k.z);
        s += 1u;
        if (s == p.s && i + 1u < end) {
            s = 0u;
            c = select(c + 1u, 0u, c + 1u == p.c);
            k = input_coefficients(c);
        }
    }
}
