"""The CPU reference of multinomial: kernels.multinomial's float32 walk, step for step, so the draws are the
WebGPU backend's."""

from .. import kernels
from .arrays import array, lowbias32, np, write

CHUNKS = 256
TINY = 2.0 ** -126  # the smallest normal float32: weights below it count as 0 (a float: NumPy may be absent)
BAD_VALUE = "probability tensor contains either `inf`, `nan` or element < 0"
ZERO_SUM = "invalid multinomial distribution (sum of probabilities <= 0)"


def uniforms(seed, offset, n):
    """kernels.random's uniform at counters offset .. offset + n - 1, in float32 (exact: a 24-bit fraction)."""
    k = lowbias32(np.array([int(seed) & 0xFFFFFFFF], np.uint32))[0]
    c = ((np.arange(n, dtype=np.uint64) + (int(offset) & 0xFFFFFFFF)) & 0xFFFFFFFF).astype(np.uint32)
    return ((lowbias32(lowbias32(c ^ k) + k) >> np.uint32(8)).astype(np.float64) * 2.0 ** -24).astype(np.float32)


def _walk(chunks):
    """(the chunks' running sums, the prefix sums P of their totals) of the weights `chunks` ([CHUNKS, L]
    float32: the row cut into chunks, zero-padded), in float32 and in order."""
    sums = np.cumsum(chunks, axis=1, dtype=np.float32)
    return sums, np.concatenate([np.zeros(1, np.float32), np.cumsum(sums[:, -1], dtype=np.float32)])


def _draw(chunks, sums, prefix, u, drawn):
    """The entry drawn by the uniform u (see kernels.multinomial); `drawn` marks the entries drawn already."""
    thr = np.float32(u * prefix[-1])
    above = np.nonzero(prefix[1:] > thr)[0]
    if above.size == 0:  # the last entry with weight, else the first not drawn yet
        weighted = np.nonzero(chunks.reshape(-1) > 0)[0]
        return int(weighted[-1]) if weighted.size else int(np.nonzero(~drawn)[0][0])
    c = int(above[0])
    walk = (prefix[c] + sums[c]).astype(np.float32)
    return c * chunks.shape[1] + int(np.nonzero(walk > thr)[0][0])


@kernels.multinomial.implement("cpu")
def multinomial(out, probs, seed, offset, replacement):
    w = array(probs).astype(np.float32)
    rows, n = w.shape
    s = out.shape[1]
    if not np.isfinite(w).all() or (w < 0).any():
        raise RuntimeError(BAD_VALUE)
    w = np.where(w < TINY, np.float32(0), w)
    width = -(-n // CHUNKS)
    padded = np.zeros((rows, CHUNKS * width), np.float32)
    padded[:, :n] = w
    u = uniforms(seed, offset, rows * s).reshape(rows, s)
    result = np.empty((rows, s), np.int64)
    for r in range(rows):
        chunks = padded[r].reshape(CHUNKS, width)
        if not (chunks > 0).any():
            raise RuntimeError(ZERO_SUM)
        sums, prefix = _walk(chunks)
        drawn = np.zeros(CHUNKS * width, bool)
        for t in range(s):
            j = result[r, t] = _draw(chunks, sums, prefix, u[r, t], drawn)
            if not replacement:
                chunks[j // width, j % width] = 0
                drawn[j] = True
                sums, prefix = _walk(chunks)
    write(out, result)
