// The counter-based random stream every random kernel draws from (random.wgsl, augment.wgsl), and that
// the CPU backend reproduces bit for bit: bits(j) = h(h(j ^ k) + k), h = lowbias32, k = h(seed).

fn lowbias32(v: u32) -> u32 {
    var x = v;
    x ^= x >> 16u;
    x *= 0x7feb352du;
    x ^= x >> 15u;
    x *= 0x846ca68bu;
    x ^= x >> 16u;
    return x;
}

fn bits(j: u32, k: u32) -> u32 { return lowbias32(lowbias32(j ^ k) + k); }

// floor(m * span / 2^24) exactly, for m < 2^24: the high bits of a 32 x 32 -> 64-bit product.
fn scale24(m: u32, span: u32) -> u32 {
    let m0 = m & 0xffffu;
    let m1 = m >> 16u;
    let s0 = span & 0xffffu;
    let s1 = span >> 16u;
    let low = m0 * s0;
    let mid = (low >> 16u) + ((m0 * s1) & 0xffffu) + ((m1 * s0) & 0xffffu);
    let hi = m1 * s1 + ((m0 * s1) >> 16u) + ((m1 * s0) >> 16u) + (mid >> 16u);
    let lo = (low & 0xffffu) | (mid << 16u);
    return (hi << 8u) | (lo >> 24u);
}
