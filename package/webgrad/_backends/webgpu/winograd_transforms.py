"""The Winograd transforms' matrices, and the straight-line WGSL that applies them (spliced into
shaders/winograd.wgsl by winograd.py).

F(m x m, 3x3) computes an m x m block of a 3x3 convolution's outputs from an (m + 2) x (m + 2) input patch d
and the filter g as Y = A^T [(G g G^T) * (B^T d B)] A (Lavin and Gray, "Fast Algorithms for Convolutional
Neural Networks", 2015). Every step of the shader is such a product X -> M X M^T with one matrix M (B^T, G,
A^T, or for the weight gradient A and G^T) on both sides: `sandwich` writes it out as WGSL `let` lines, each
a sum of at most a row's nonzero terms. Written out, the transforms live in registers; the same steps as loops
over function-local arrays ran 1.2-2.4x slower on the H200 (bench replay --each).
"""

import functools
from fractions import Fraction

_ = Fraction
# tile m: (B^T, G, A^T)
MATRICES = {
    # F(2x2, 3x3): every coefficient 0, +-1 or +-1/2, so the transforms are exact in binary
    2: ([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
        [[1, 0, 0], [_(1, 2), _(1, 2), _(1, 2)], [_(1, 2), _(-1, 2), _(1, 2)], [0, 0, 1]],
        [[1, 1, 1, 0], [0, 1, -1, -1]]),
    # F(4x4, 3x3), interpolation points 0, +-1, +-2 and infinity: 36 products for 16 outputs against F(2x2)'s
    # 16 for 4, but sixths and twenty-fourths round and coefficients up to 8 grow the sums' rounding
    4: ([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
         [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]],
        [[_(1, 4), 0, 0], [_(-1, 6), _(-1, 6), _(-1, 6)], [_(-1, 6), _(1, 6), _(-1, 6)],
         [_(1, 24), _(1, 12), _(1, 6)], [_(1, 24), _(-1, 12), _(1, 6)], [0, 0, 1]],
        [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]),
}


def _transpose(m):
    return [list(col) for col in zip(*m)]


def _combine(coefficients, names):
    """The WGSL sum of coefficient * name over the nonzero coefficients."""
    text = ""
    for c, x in zip(coefficients, names):
        c = Fraction(c)
        if c == 0:
            continue
        magnitude = abs(c)
        term = x if magnitude == 1 else (f"{magnitude.numerator}.0 * {x}" if magnitude.denominator == 1 else
                                         f"({magnitude.numerator}.0 / {magnitude.denominator}.0) * {x}")
        text += (" - " if c < 0 else " + ") + term if text else ("-" if c < 0 else "") + term
    return text


def sandwich(m, load, store, prefix):
    """WGSL lines for Y = M X M^T with X[i][j] = load(i, j) (an n x n grid of expressions, n = M's columns):
    X's values, then M along each row of X, then along each column, then store(a, b, name) for each entry of
    Y (p x p, p = M's rows; an empty store is left out: a vec4 store takes a row's entries at its last one)."""
    p, n = len(m), len(m[0])
    lines = [f"let {prefix}x{i}_{j} = {load(i, j)};" for i in range(n) for j in range(n)]
    for i in range(n):  # (X M^T)[i][b] = sum_j M[b][j] X[i][j]
        lines += [f"let {prefix}r{i}_{b} = {_combine(m[b], [f'{prefix}x{i}_{j}' for j in range(n)])};"
                  for b in range(p)]
    for a in range(p):  # (M X M^T)[a][b] = sum_i M[a][i] (X M^T)[i][b]
        for b in range(p):
            lines.append(f"let {prefix}y{a}_{b} = {_combine(m[a], [f'{prefix}r{i}_{b}' for i in range(n)])};")
            stored = store(a, b, f"{prefix}y{a}_{b}")
            if stored:
                lines.append(stored)
    return "\n".join("    " + line for line in lines) + "\n"


@functools.lru_cache(maxsize=None)
def splices(tile, rows=False):
    """winograd.wgsl's splices for F(tile x tile, 3x3): the constants TILE and ALPHA, and the body of each
    entry point's transform (the names each uses are the ones its entry point defines before the splice).
    rows: F(4x4)'s row variant (see _row_splices) for the transforms of the image, of the output and of dY."""
    bt, g, at = MATRICES[tile]
    alpha = tile + 2

    def put(a, b, v):  # point xi = alpha * a + b of thread g's result, `step` apart (V, U, D)
        return f"put(g + {a * alpha + b}u * step, {v});"

    text = {
        "TILE": f"const TILE: u32 = {tile}u;\nconst ALPHA: u32 = {alpha}u;\n",
        "INPUT": sandwich(bt, lambda i, j: f"pixel(p.plane, y0 + {i}, x0 + {j})", put, "d"),
        "WEIGHT": sandwich(g, lambda i, j: f"tap(r, s, {i}u, {j}u)", put, "g"),
        "OUTPUT": sandwich(at, lambda i, j: f"f32(src[g + {i * alpha + j}u * step])",
                           lambda a, b, v: f"store(plane, k.y + {a}u, k.z + {b}u, {v}, bias_o);", "m"),
        "GRAD_OUTPUT": sandwich(_transpose(at), lambda i, j: f"pixel(p.plane, p.y + {i}, p.x + {j})", put, "q"),
        "GRAD_WEIGHT": _grad_weight(_transpose(g), alpha),
    }
    if rows:
        if tile != 4:
            raise ValueError("the row variant is F(4x4)'s: F(2x2)'s blocks are 2 wide")
        text.update(_row_splices(put))
    return tuple(text.items())


def _grad_weight(m, alpha):
    """wino_grad_weight's body, dW = M X M^T (M = G^T, 3 x alpha) with X the sum of the slabs' dU, a thread per
    row of X: that row's sums over the slabs (in slab order, an accumulator per point: each step's loads
    independent), then the row's part of X M^T into workgroup memory, then rows 0 to 2 of the workgroup's pairs
    each finish a row of the 3x3 result from the alpha rows there. The sums as the one-thread-per-pair sandwich
    wrote them (the same terms in the same order)."""
    lines = [f"var us{b} = 0.0;" for b in range(alpha)]
    lines += ["if (live) {", "    for (var k = 0u; k < P.chunks; k++) {",
              "        let base = k * XI * step + row * ALPHA * step + g;"]
    lines += [f"        us{b} += f32(src[base + {b}u * step]);" for b in range(alpha)]
    lines += ["    }", "}", "if (row < ALPHA) {"]
    lines += [f"    grad_rows[(row * 3u + {b}u) * PW + j] = {_combine(m[b], [f'us{x}' for x in range(alpha)])};"
              for b in range(3)]
    lines += ["}", "workgroupBarrier();"]
    for a in range(3):
        lines.append(f"if (live && row == {a}u) {{")
        for b in range(3):
            terms = [f"grad_rows[{i * 3 + b}u * PW + j]" for i in range(alpha)]
            lines.append(f"    put(o + {3 * a + b}u, {_combine(m[a], terms)});")
        lines.append("}")
    return "".join(f"    {line}\n" for line in lines)


def _row_splices(put):
    """F(4x4)'s transforms of the image, the output and dY through whole image rows (winograd.py takes them where
    rows are multiples of 4 wide): an image row's 4 aligned pixels in one load (row4) and a tile's row of 4 outputs
    in one store (store4). The input patch is 6 wide at x0 = 4 tx - 1: its middle 4 pixels are one vec4."""
    bt, _, at = MATRICES[4]
    lanes = "xyzw"
    rows = "".join(f"    let dv{i} = row4(p.plane, y0 + {i}, x0 + 1);\n" for i in range(6))
    inp = rows + sandwich(bt, lambda i, j: f"dv{i}.{lanes[j - 1]}" if 1 <= j <= 4 else
                          f"pixel4(p.plane, y0 + {i}, x0 + {j})", put, "d")
    out = sandwich(at, lambda i, j: f"f32(src[g + {i * 6 + j}u * step])",
                   lambda a, b, v: "" if b < 3 else
                   f"store4(plane, k.y + {a}u, k.z, vec4<f32>(my{a}_0, my{a}_1, my{a}_2, my{a}_3), bias_o);", "m")
    rows = "".join(f"    let qv{i} = row4(p.plane, p.y + {i}, p.x);\n" for i in range(4))
    grad = rows + sandwich(_transpose(at), lambda i, j: f"qv{i}.{lanes[j]}", put, "q")
    return {"INPUT": inp, "OUTPUT": out, "GRAD_OUTPUT": grad}
