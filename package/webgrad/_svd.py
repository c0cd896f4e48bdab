"""Singular values on the host, for the matrix norms that need them (linalg.matrix_norm and torch.norm with
ord 'nuc', 2 or -2): one-sided Jacobi rotations in pure Python (a read-back on WebGPU; matrices of the sizes
norms are taken of), and the gradient from the singular vectors, as torch's."""

import math

from ._autograd import record


def singular_norm(A, ord, d0, d1, keepdim):
    """'nuc' (sum of the singular values), 2 (the largest) or -2 (the smallest) over dims d0, d1, with the
    gradient U V^T (nuc) or u v^T of the singular value picked."""
    moved = A.movedim((d0, d1), (-2, -1))
    batch, (m, n) = tuple(moved.shape[:-2]), tuple(moved.shape[-2:])
    matrices = moved.detach().reshape(-1, m, n).tolist() if m and n else [[[0.0] * n for _ in range(m)]] * \
        _count(batch)
    values, grads = [], []
    for a in matrices:
        s, u, v = _svd(a, m, n)
        k = len(s)
        if ord == "nuc":
            values.append(sum(s))
            picks, share = range(k), 1.0
        else:  # the largest (smallest) singular value; tied ones share its gradient, as torch's amax (amin)
            value = (s[0] if ord == 2 else s[-1]) if k else 0.0
            values.append(value)
            picks = [j for j in range(k) if s[j] == value]
            share = 1.0 / len(picks) if picks else 0.0
        grads.append([[share * sum(u[i][j] * v[c][j] for j in picks) for c in range(n)] for i in range(m)])
    out = A.new_tensor(values).reshape(batch)  # (made through A: this module sits below the Tensor)
    direction = A.new_tensor(grads).reshape(batch + (m, n)) if m * n and grads else A.new_zeros(batch + (m, n))

    def backward(g):
        ga = g.reshape(batch + (1, 1)) * direction
        return (ga.movedim((-2, -1), (d0, d1)),)
    out = record(out, "LinalgMatrixNorm", (A,), backward)
    if keepdim:
        for d in sorted((d0, d1)):
            out = out.unsqueeze(d)
    return out


def _count(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _svd(a, m, n):
    """Singular values (descending) and vectors of the m x n matrix a (lists of rows) by one-sided Jacobi
    rotations: (s, u, v) with u m x k, v n x k, k = min(m, n), a = u diag(s) v^T."""
    if m < n:  # work on the transpose, which has fewer columns
        s, u, v = _svd([list(col) for col in zip(*a)], n, m)
        return s, v, u
    cols = [[a[i][j] for i in range(m)] for j in range(n)]  # a's columns, rotated into orthogonal ones
    vcols = [[1.0 if i == j else 0.0 for i in range(n)] for j in range(n)]
    for _ in range(60):
        rotated = False
        for p in range(n - 1):
            for q in range(p + 1, n):
                x, y = cols[p], cols[q]
                alpha = sum(t * t for t in x)
                beta = sum(t * t for t in y)
                gamma = sum(s * t for s, t in zip(x, y))
                if gamma == 0.0 or abs(gamma) <= 1e-15 * math.sqrt(alpha * beta):
                    continue
                rotated = True
                zeta = (beta - alpha) / (2.0 * gamma)
                t = math.copysign(1.0, zeta) / (abs(zeta) + math.sqrt(1.0 + zeta * zeta))
                c = 1.0 / math.sqrt(1.0 + t * t)
                s = c * t
                cols[p], cols[q] = [c * i - s * j for i, j in zip(x, y)], [s * i + c * j for i, j in zip(x, y)]
                vp, vq = vcols[p], vcols[q]
                vcols[p], vcols[q] = [c * i - s * j for i, j in zip(vp, vq)], [s * i + c * j for i, j in zip(vp, vq)]
        if not rotated:
            break
    norms = [math.sqrt(sum(t * t for t in col)) for col in cols]
    order = sorted(range(n), key=lambda j: -norms[j])
    s = [norms[j] for j in order]
    ucols = [[t / norms[j] for t in cols[j]] if norms[j] else None for j in order]
    # a zero singular value has no left vector of its own: complete u with the unit vectors, orthogonalised
    # (the zero matrix then has u = v = I, the subgradient LAPACK's SVD gives torch)
    basis = iter(range(m))
    for j, col in enumerate(ucols):
        while col is None:
            k = next(basis)
            e = [1.0 if i == k else 0.0 for i in range(m)]
            for other in ucols:
                if other is not None:
                    d = sum(a * b for a, b in zip(e, other))
                    e = [a - d * b for a, b in zip(e, other)]
            size = math.sqrt(sum(t * t for t in e))
            col = [t / size for t in e] if size > 1e-6 else None
        ucols[j] = col
    u = [[ucols[j][i] for j in range(n)] for i in range(m)]
    v = [[vcols[j][i] for j in order] for i in range(n)]
    return s, u, v
