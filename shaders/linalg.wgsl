// The dense factorizations of torch.linalg (the launchers are _backends/webgpu/linalg.py; the contracts are the
// records of _backends/kernels.py). One workgroup of 64 threads per matrix, which sits in the storage buffers:
// the steps that must be sequential (a pivot search, a Householder vector, a diagonal square root) run on
// thread 0, the row and column updates on every thread, with a barrier between steps. The triangular solve
// and the permutation need no cooperation: a thread per right-hand-side column (per matrix).

struct Params {
    batch: u32,
    m: u32,
    n: u32,
    k: u32,
    flags: u32,  // triangular_solve: 1 upper, 2 unitriangular; eigh: 1 upper; svd: 1 when m < n (a^T is factored)
    off_a: u32,
    off_b: u32,
    off_o0: u32,
    off_o1: u32,
    off_o2: u32,
    off_i0: u32,
    off_i1: u32,
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> o0: array<f32>;
@group(0) @binding(2) var<storage, read_write> o1: array<f32>;
@group(0) @binding(3) var<storage, read_write> o2: array<f32>;
@group(0) @binding(4) var<storage, read_write> i0: array<i32>;
@group(0) @binding(5) var<storage, read_write> i1: array<i32>;
@group(0) @binding(6) var<uniform> p: Params;
@group(0) @binding(7) var<storage, read> iin: array<i32>;
@group(0) @binding(8) var<storage, read> bin: array<f32>;
@group(0) @binding(9) var<storage, read_write> scratch: array<f32>;

const WG: u32 = 64u;
const SWEEPS: u32 = 12u;  // Jacobi sweeps: quadratic convergence leaves float32 exact after a handful

var<workgroup> shared_row: u32;
var<workgroup> shared_ok: u32;

// The tangent of a Jacobi rotation whose angle has cot(2 theta) = tau: the smaller root, 1 / (|tau| + sqrt(1 +
// tau^2)) with tau's sign. WGSL lets implementations assume no infinities (fast math), so tau^2 must never
// overflow: callers rotate only where |tau| <= 1e18 (JACOBI_FAR), beyond which the angle is below float32's
// resolution anyway.
const JACOBI_FAR: f32 = 1e18;

fn jacobi_tangent(tau: f32) -> f32 {
    let a = min(abs(tau), JACOBI_FAR);
    let t = 1.0 / (a + sqrt(1.0 + a * a));
    return select(-t, t, tau >= 0.0);
}

fn sync() {
    storageBarrier();
    workgroupBarrier();
}

fn matrix_id(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}

// ---------------------------------------------------------------------------- LU with partial pivoting
// o0: lu [batch, m, n]; i0: pivots [batch, k]; i1: info [batch].
@compute @workgroup_size(64)
fn lu_factor(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
             @builtin(num_workgroups) nwg: vec3<u32>) {
    let b = matrix_id(wid, nwg);
    if (b >= p.batch) {
        return;  // (uniform across the workgroup)
    }
    let t = lid.x;
    let m = p.m;
    let n = p.n;
    let k = min(m, n);
    let src = p.off_a + b * m * n;
    let w = p.off_o0 + b * m * n;
    for (var i = t; i < m * n; i += WG) {
        o0[w + i] = a[src + i];
    }
    var failed = 0i;
    sync();
    for (var j = 0u; j < k; j++) {
        if (t == 0u) {
            var best = j;
            var value = abs(o0[w + j * n + j]);
            for (var i = j + 1u; i < m; i++) {
                let v = abs(o0[w + i * n + j]);
                if (v > value) {
                    best = i;
                    value = v;
                }
            }
            shared_row = best;
            i0[p.off_i0 + b * k + j] = i32(best + 1u);
            if (value == 0.0 && failed == 0i) {
                failed = i32(j + 1u);
            }
        }
        sync();
        let r = shared_row;
        if (r != j) {
            for (var c = t; c < n; c += WG) {
                let x = o0[w + j * n + c];
                o0[w + j * n + c] = o0[w + r * n + c];
                o0[w + r * n + c] = x;
            }
        }
        sync();
        let d = o0[w + j * n + j];
        for (var i = j + 1u + t; i < m; i += WG) {
            var l = o0[w + i * n + j];
            if (d != 0.0) {  // (a zero pivot has a zero column below it)
                l = l / d;
                o0[w + i * n + j] = l;
            }
            for (var c = j + 1u; c < n; c++) {
                o0[w + i * n + c] -= l * o0[w + j * n + c];
            }
        }
        sync();
    }
    if (t == 0u) {
        i1[p.off_i1 + b] = failed;
    }
}

// i0: perm [batch, m] from iin: pivots [batch, k]. A thread per matrix.
@compute @workgroup_size(64)
fn lu_permutation(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let b = gid.x + gid.y * nwg.x * WG;
    if (b >= p.batch) {
        return;
    }
    let out = p.off_i0 + b * p.m;
    for (var i = 0u; i < p.m; i++) {
        i0[out + i] = i32(i);
    }
    for (var j = 0u; j < p.k; j++) {
        let q = min(u32(max(iin[p.off_i1 + b * p.k + j] - 1i, 0i)), p.m - 1u);
        let x = i0[out + j];
        i0[out + j] = i0[out + q];
        i0[out + q] = x;
    }
}

// ---------------------------------------------------------------------------- Cholesky
// o0: l [batch, n, n]; i1: info [batch]. Right-looking: column j is final once the columns before it updated it.
@compute @workgroup_size(64)
fn cholesky(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
            @builtin(num_workgroups) nwg: vec3<u32>) {
    let b = matrix_id(wid, nwg);
    if (b >= p.batch) {
        return;
    }
    let t = lid.x;
    let n = p.n;
    let src = p.off_a + b * n * n;
    let w = p.off_o0 + b * n * n;
    for (var i = t; i < n * n; i += WG) {
        o0[w + i] = select(0.0, a[src + i], i % n <= i / n);
    }
    var failed = 0i;
    sync();
    for (var j = 0u; j < n; j++) {
        if (t == 0u) {
            let d = o0[w + j * n + j];
            if (failed == 0i && !(d > 0.0)) {
                failed = i32(j + 1u);
            }
            if (failed == 0i) {
                o0[w + j * n + j] = sqrt(d);
            }
            shared_ok = select(0u, 1u, failed == 0i);
        }
        sync();
        let ok = shared_ok == 1u;
        if (ok) {
            let d = o0[w + j * n + j];
            for (var i = j + 1u + t; i < n; i += WG) {
                o0[w + i * n + j] /= d;
            }
        }
        sync();
        if (ok) {
            for (var i = j + 1u + t; i < n; i += WG) {
                let l = o0[w + i * n + j];
                for (var c = j + 1u; c <= i; c++) {
                    o0[w + i * n + c] -= l * o0[w + c * n + j];
                }
            }
        }
        sync();
    }
    if (t == 0u) {
        i1[p.off_i1 + b] = failed;
    }
}

// ---------------------------------------------------------------------------- triangular solve
// o0: x [batch, n, k] = a^-1 bin, a [batch, n, n]; a thread per column of a matrix's right-hand side.
@compute @workgroup_size(64)
fn triangular_solve(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
                    @builtin(num_workgroups) nwg: vec3<u32>) {
    let blocks = (p.k + WG - 1u) / WG;
    let g = matrix_id(wid, nwg);
    let b = g / blocks;
    let c = (g % blocks) * WG + lid.x;
    if (b >= p.batch || c >= p.k) {
        return;
    }
    let n = p.n;
    let k = p.k;
    let upper = (p.flags & 1u) != 0u;
    let unit = (p.flags & 2u) != 0u;
    let am = p.off_a + b * n * n;
    let bm = p.off_b + b * n * k;
    let x = p.off_o0 + b * n * k;
    for (var step = 0u; step < n; step++) {
        let i = select(step, n - 1u - step, upper);
        var s = bin[bm + i * k + c];
        if (upper) {
            for (var j = i + 1u; j < n; j++) {
                s -= a[am + i * n + j] * o0[x + j * k + c];
            }
        } else {
            for (var j = 0u; j < i; j++) {
                s -= a[am + i * n + j] * o0[x + j * k + c];
            }
        }
        if (!unit) {
            s = s / a[am + i * n + i];
        }
        o0[x + i * k + c] = s;
    }
}

// ---------------------------------------------------------------------------- Householder QR
// o0: q [batch, m, k]; o1: r [batch, k, n] (k: p.k, m or min(m, n)); scratch: the reflectors [m, n] and their
// taus [min(m, n)] per matrix. LAPACK's signs: a reflector maps its column to beta = -sign(alpha) |column|.
@compute @workgroup_size(64)
fn qr(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
      @builtin(num_workgroups) nwg: vec3<u32>) {
    let b = matrix_id(wid, nwg);
    if (b >= p.batch) {
        return;
    }
    let t = lid.x;
    let m = p.m;
    let n = p.n;
    let kk = min(m, n);
    let kc = p.k;
    let src = p.off_a + b * m * n;
    let w = b * (m * n + kk);
    let taus = w + m * n;
    for (var i = t; i < m * n; i += WG) {
        scratch[w + i] = a[src + i];
    }
    sync();
    for (var j = 0u; j < kk; j++) {
        if (t == 0u) {
            let alpha = scratch[w + j * n + j];
            var xnorm2 = 0.0;
            for (var i = j + 1u; i < m; i++) {
                let v = scratch[w + i * n + j];
                xnorm2 += v * v;
            }
            var tau = 0.0;
            if (xnorm2 != 0.0) {
                let size = sqrt(alpha * alpha + xnorm2);
                let beta = select(-size, size, alpha < 0.0);
                tau = (beta - alpha) / beta;
                let scale = 1.0 / (alpha - beta);
                for (var i = j + 1u; i < m; i++) {
                    scratch[w + i * n + j] *= scale;
                }
                scratch[w + j * n + j] = beta;
            }
            scratch[taus + j] = tau;
        }
        sync();
        let tau = scratch[taus + j];
        for (var c = j + 1u + t; c < n; c += WG) {
            var dot = scratch[w + j * n + c];
            for (var i = j + 1u; i < m; i++) {
                dot += scratch[w + i * n + j] * scratch[w + i * n + c];
            }
            dot *= tau;
            scratch[w + j * n + c] -= dot;
            for (var i = j + 1u; i < m; i++) {
                scratch[w + i * n + c] -= dot * scratch[w + i * n + j];
            }
        }
        sync();
    }
    let r = p.off_o1 + b * kc * n;
    for (var e = t; e < kc * n; e += WG) {
        let i = e / n;
        let c = e % n;
        o1[r + e] = select(0.0, scratch[w + i * n + c], c >= i && i < kk);
    }
    // Q = H_0 H_1 ... applied to the first kc columns of the identity, a thread per column
    let q = p.off_o0 + b * m * kc;
    for (var c = t; c < kc; c += WG) {
        for (var i = 0u; i < m; i++) {
            o0[q + i * kc + c] = select(0.0, 1.0, i == c);
        }
        for (var step = 0u; step < kk; step++) {
            let j = kk - 1u - step;
            let tau = scratch[taus + j];
            var dot = o0[q + j * kc + c];
            for (var i = j + 1u; i < m; i++) {
                dot += scratch[w + i * n + j] * o0[q + i * kc + c];
            }
            dot *= tau;
            o0[q + j * kc + c] -= dot;
            for (var i = j + 1u; i < m; i++) {
                o0[q + i * kc + c] -= dot * scratch[w + i * n + j];
            }
        }
    }
}

// The pair of indices a thread rotates in round r of a sweep (the circle method: every pair of 0..count-1 meets
// once in count - 1 rounds, count even, and the pairs of a round are disjoint).
fn round_pair(pair: u32, r: u32, count: u32) -> vec2<u32> {
    let last = count - 1u;
    if (pair == 0u) {
        return vec2<u32>(r % last, last);
    }
    let x = (r + pair) % last;
    let y = (r + last - pair) % last;
    return vec2<u32>(min(x, y), max(x, y));
}

// ---------------------------------------------------------------------------- symmetric eigen-decomposition
// Cyclic two-sided Jacobi, the rotations of a round at once. o0: values [batch, n] ascending; o1: vectors
// [batch, n, n]; scratch per matrix: the rotated matrix [n, n], the vectors [n, n], (c, s) per pair.
@compute @workgroup_size(64)
fn eigh(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let b = matrix_id(wid, nwg);
    if (b >= p.batch) {
        return;
    }
    let t = lid.x;
    let n = p.n;
    let count = n + (n & 1u);
    let pairs = count / 2u;
    let src = p.off_a + b * n * n;
    let w = b * (2u * n * n + count);
    let v = w + n * n;
    let cs = v + n * n;
    for (var e = t; e < n * n; e += WG) {
        let i = e / n;
        let c = e % n;
        // the lower triangle (the upper one when flags & 1), mirrored
        scratch[w + e] = select(a[src + max(i, c) * n + min(i, c)], a[src + min(i, c) * n + max(i, c)],
                                (p.flags & 1u) != 0u);
        scratch[v + e] = select(0.0, 1.0, i == c);
    }
    sync();
    for (var sweep = 0u; sweep < SWEEPS; sweep++) {
        for (var r = 0u; r + 1u < count; r++) {
            for (var pr = t; pr < pairs; pr += WG) {
                let pq = round_pair(pr, r, count);
                var c = 1.0;
                var s = 0.0;
                if (pq.y < n) {
                    let apq = scratch[w + pq.x * n + pq.y];
                    let gap = scratch[w + pq.y * n + pq.y] - scratch[w + pq.x * n + pq.x];
                    if (apq != 0.0 && abs(gap) <= 2.0 * JACOBI_FAR * abs(apq)) {
                        let tt = jacobi_tangent(gap / (2.0 * apq));
                        c = 1.0 / sqrt(1.0 + tt * tt);
                        s = tt * c;
                    }
                }
                scratch[cs + 2u * pr] = c;
                scratch[cs + 2u * pr + 1u] = s;
            }
            sync();
            for (var pr = t; pr < pairs; pr += WG) {  // A J and V J: the pair's two columns
                let pq = round_pair(pr, r, count);
                let c = scratch[cs + 2u * pr];
                let s = scratch[cs + 2u * pr + 1u];
                if (pq.y < n && s != 0.0) {
                    for (var i = 0u; i < n; i++) {
                        let x = scratch[w + i * n + pq.x];
                        let y = scratch[w + i * n + pq.y];
                        scratch[w + i * n + pq.x] = c * x - s * y;
                        scratch[w + i * n + pq.y] = s * x + c * y;
                        let vx = scratch[v + i * n + pq.x];
                        let vy = scratch[v + i * n + pq.y];
                        scratch[v + i * n + pq.x] = c * vx - s * vy;
                        scratch[v + i * n + pq.y] = s * vx + c * vy;
                    }
                }
            }
            sync();
            for (var pr = t; pr < pairs; pr += WG) {  // J^T (A J): the pair's two rows
                let pq = round_pair(pr, r, count);
                let c = scratch[cs + 2u * pr];
                let s = scratch[cs + 2u * pr + 1u];
                if (pq.y < n && s != 0.0) {
                    for (var i = 0u; i < n; i++) {
                        let x = scratch[w + pq.x * n + i];
                        let y = scratch[w + pq.y * n + i];
                        scratch[w + pq.x * n + i] = c * x - s * y;
                        scratch[w + pq.y * n + i] = s * x + c * y;
                    }
                }
            }
            sync();
        }
    }
    // ascending order: each value goes to its rank (ties by index)
    for (var j = t; j < n; j += WG) {
        let value = scratch[w + j * n + j];
        var rank = 0u;
        for (var i = 0u; i < n; i++) {
            let other = scratch[w + i * n + i];
            if (other < value || (other == value && i < j)) {
                rank++;
            }
        }
        o0[p.off_o0 + b * n + rank] = value;
        for (var i = 0u; i < n; i++) {
            o1[p.off_o1 + b * n * n + i * n + rank] = scratch[v + i * n + j];
        }
    }
}

// ---------------------------------------------------------------------------- SVD
// One-sided Jacobi on the columns of G = a (m >= n) or a^T (flags & 1), a thread per pair of columns in each
// round. o0: u [batch, m, k]; o1: s [batch, k] descending; o2: vh [batch, k, n]; scratch per matrix: G [rows,
// k] and V [k, k] (rows = max(m, n), k = min(m, n)).
@compute @workgroup_size(64)
fn svd(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
       @builtin(num_workgroups) nwg: vec3<u32>) {
    let b = matrix_id(wid, nwg);
    if (b >= p.batch) {
        return;
    }
    let t = lid.x;
    let m = p.m;
    let n = p.n;
    let wide = (p.flags & 1u) != 0u;
    let rows = max(m, n);
    let k = min(m, n);
    let count = k + (k & 1u);
    let pairs = count / 2u;
    let src = p.off_a + b * m * n;
    let g = b * (rows * k + k * k);
    let v = g + rows * k;
    for (var e = t; e < rows * k; e += WG) {
        let i = e / k;
        let j = e % k;
        scratch[g + e] = select(a[src + i * n + j], a[src + j * n + i], wide);
    }
    for (var e = t; e < k * k; e += WG) {
        scratch[v + e] = select(0.0, 1.0, e / k == e % k);
    }
    sync();
    for (var sweep = 0u; sweep < SWEEPS; sweep++) {
        for (var r = 0u; r + 1u < count; r++) {
            for (var pr = t; pr < pairs; pr += WG) {
                let pq = round_pair(pr, r, count);
                if (pq.y >= k) {
                    continue;
                }
                var alpha = 0.0;
                var beta = 0.0;
                var gamma = 0.0;
                for (var i = 0u; i < rows; i++) {
                    let x = scratch[g + i * k + pq.x];
                    let y = scratch[g + i * k + pq.y];
                    alpha += x * x;
                    beta += y * y;
                    gamma += x * y;
                }
                // columns orthogonal to float32's precision are left alone (a rotation by rounding noise only
                // spreads it), and so are angles beyond JACOBI_FAR
                if (gamma == 0.0 || abs(gamma) <= 1e-7 * sqrt(alpha * beta) ||
                        abs(beta - alpha) > 2.0 * JACOBI_FAR * abs(gamma)) {
                    continue;
                }
                let tt = jacobi_tangent((beta - alpha) / (2.0 * gamma));
                let c = 1.0 / sqrt(1.0 + tt * tt);
                let s = c * tt;
                for (var i = 0u; i < rows; i++) {
                    let x = scratch[g + i * k + pq.x];
                    let y = scratch[g + i * k + pq.y];
                    scratch[g + i * k + pq.x] = c * x - s * y;
                    scratch[g + i * k + pq.y] = s * x + c * y;
                }
                for (var i = 0u; i < k; i++) {
                    let x = scratch[v + i * k + pq.x];
                    let y = scratch[v + i * k + pq.y];
                    scratch[v + i * k + pq.x] = c * x - s * y;
                    scratch[v + i * k + pq.y] = s * x + c * y;
                }
            }
            sync();
        }
    }
    // descending order: column j goes to its rank (ties by index); G's columns over their norms are the left
    // vectors of G (a zero column stays zero), V's columns the right ones
    for (var j = t; j < k; j += WG) {
        var size2 = 0.0;
        for (var i = 0u; i < rows; i++) {
            let x = scratch[g + i * k + j];
            size2 += x * x;
        }
        var rank = 0u;
        for (var other = 0u; other < k; other++) {
            var o2sum = 0.0;
            for (var i = 0u; i < rows; i++) {
                let x = scratch[g + i * k + other];
                o2sum += x * x;
            }
            if (o2sum > size2 || (o2sum == size2 && other < j)) {
                rank++;
            }
        }
        let size = sqrt(size2);
        let inverse = select(0.0, 1.0 / size, size > 0.0);
        o1[p.off_o1 + b * k + rank] = size;
        let u = p.off_o0 + b * m * k;
        let vh = p.off_o2 + b * k * n;
        if (!wide) {  // a = G: u = G / s (m x k), vh[rank] = V[:, j]
            for (var i = 0u; i < m; i++) {
                o0[u + i * k + rank] = scratch[g + i * k + j] * inverse;
            }
            for (var i = 0u; i < n; i++) {
                o2[vh + rank * n + i] = scratch[v + i * k + j];
            }
        } else {  // a^T = G: u = V (m = k), vh[rank] = (G / s)[:, j]
            for (var i = 0u; i < m; i++) {
                o0[u + i * k + rank] = scratch[v + i * k + j];
            }
            for (var i = 0u; i < n; i++) {
                o2[vh + rank * n + i] = scratch[g + i * k + j] * inverse;
            }
        }
    }
}
