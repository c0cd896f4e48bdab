"""shaders/matmul.wgsl + matmul_plan against NumPy, natively through wgpu-py (lavapipe in CI).

Raw wgpu-py harness (webgrad.bench.kernels.MatmulRunner, explicit bind group layout), so the kernel
is tested on its own, below any runtime. Every case poisons the output buffer with NaN, runs one
dispatch and checks that every output element was written with the right value and nothing
outside the output region was touched. Error bound: |out - ref| <= 1e-4 * (|op(a)| @ |op(b)| + |bias|)
elementwise, i.e. relative 1e-4 of the magnitude of the summed terms (ref in float64).
"""

import numpy as np
import pytest

wgpu = pytest.importorskip("wgpu")

from webgrad._backends.webgpu import matmul_plan  # noqa: E402
from webgrad.bench.kernels import MatmulRunner  # noqa: E402

RTOL = 1e-4


@pytest.fixture(scope="module")
def runner():
    try:
        adapter = wgpu.gpu.request_adapter_sync()
    except Exception as e:  # pragma: no cover - no Vulkan driver
        pytest.skip(f"no WebGPU adapter: {e}")
    if adapter is None:
        pytest.skip("no WebGPU adapter")
    return MatmulRunner(adapter.request_device_sync())


def _storage(device, array):
    return device.create_buffer_with_data(
        data=np.ascontiguousarray(array, np.float32),
        usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)


def unfold(img, geometry, rows, cols):
    """NumPy reference of matmul.wgsl's unfolded4: [items, rows, cols] from images [items, C, H, W]."""
    H, W, OW, kh, kw, sy, sx, dy, dx, py, px = geometry
    r, l = np.arange(rows)[:, None], np.arange(cols)[None, :]
    c, i, j = r // (kh * kw), (r // kw) % kh, r % kw
    h = (l // OW) * sy + i * dy - py
    w = (l % OW) * sx + j * dx - px
    inside = (h >= 0) & (h < H) & (w >= 0) & (w < W)
    return img[:, c, np.clip(h, 0, H - 1), np.clip(w, 0, W - 1)] * inside


def padded_buffers(rng, a, b, bias, a_off, b_off, bias_off, o_off, n_out, tail=4321.0):
    """Each operand (and the float32 output) inside a larger buffer with junk (the operands' dtype) around it: the
    output's surroundings hold 1234.0 before and `tail` after, to see that no write strays."""
    junk = lambda n: rng.standard_normal(n).astype(a.dtype)  # noqa: E731
    out = np.full(o_off + n_out + 7, np.nan, np.float32)
    out[:o_off] = 1234.0
    out[o_off + n_out:] = tail
    return (np.concatenate([junk(a_off), a.ravel(), junk(3)]), np.concatenate([junk(b_off), b.ravel(), junk(5)]),
            np.concatenate([junk(bias_off), bias, junk(1)]), out)


def check(runner, batch, M, N, K, trans_a=False, trans_b=False, bias=False, relu=False,
          a_off=0, b_off=0, o_off=0, bias_off=0, bcast_a=False, bcast_b=False, config=None, seed=0,
          items=1, splits=None, bias_rows=False, gather=None, channels=None, profile="gpu"):
    """Run one product and compare it with NumPy. items > 1: batch-reduce (out[z] sums items
    products); gather: b is [channels, H, W] images unfolded on the fly (geometry as matmul_plan's)."""
    rng = np.random.default_rng(seed)
    na, nb = (1 if bcast_a else batch * items), (1 if bcast_b else batch * items)
    a = rng.standard_normal((na, K, M) if trans_a else (na, M, K)).astype(np.float32)
    if gather is not None:
        b = rng.standard_normal((nb, channels, gather[0], gather[1])).astype(np.float32)
        b_stride = channels * gather[0] * gather[1]
    else:
        b = rng.standard_normal((nb, N, K) if trans_b else (nb, K, N)).astype(np.float32)
        b_stride = K * N
    bv = rng.standard_normal(M if bias_rows else N).astype(np.float32)
    n_out = batch * M * N
    abuf, bbuf, biasbuf, obuf = padded_buffers(rng, a, b, bv, a_off, b_off, bias_off, o_off, n_out)

    dev = runner.device
    ga, gb, gbias, gout = _storage(dev, abuf), _storage(dev, bbuf), _storage(dev, biasbuf), _storage(dev, obuf)
    p = matmul_plan.plan(batch, M, N, K, trans_a, trans_b, bias, relu, a_off, b_off, o_off,
                         bias_off if bias else 0, 0 if bcast_a else M * K, 0 if bcast_b else b_stride,
                         config=config, items=items, splits=splits, bias_rows=bias_rows, gather=gather,
                         profile=profile)
    runner.run(p, ga, gb, gout, gbias if bias else None)
    got = np.frombuffer(dev.queue.read_buffer(gout), np.float32)

    opa = a.transpose(0, 2, 1) if trans_a else a
    if gather is not None:
        cols = unfold(b, gather, N if trans_b else K, K if trans_b else N)
        opb = cols.transpose(0, 2, 1) if trans_b else cols
    else:
        opb = b.transpose(0, 2, 1) if trans_b else b
    opa, opb = (np.broadcast_to(v, (batch * items,) + v.shape[1:]).reshape(batch, items, *v.shape[1:])
                for v in (opa, opb))
    ref = np.matmul(opa.astype(np.float64), opb.astype(np.float64)).sum(1)
    mag = np.matmul(np.abs(opa).astype(np.float64), np.abs(opb).astype(np.float64)).sum(1)
    if bias:
        bb = bv[:, None] if bias_rows else bv
        ref = ref + bb
        mag = mag + np.abs(bb)
    if relu:
        ref = np.maximum(ref, 0.0)

    assert np.all(got[:o_off] == 1234.0), "wrote before the output region"
    assert np.all(got[o_off + n_out:] == 4321.0), "wrote after the output region"
    out = got[o_off:o_off + n_out].reshape(batch, M, N)
    assert not np.isnan(out).any(), f"{np.isnan(out).sum()} outputs not written ({p})"
    err = np.abs(out - ref)
    bad = err > RTOL * mag + 1e-30
    assert not bad.any(), (f"{bad.sum()} wrong outputs, worst {err.max():.3g} at "
                           f"{np.unravel_index(err.argmax(), err.shape)} ({p})")
    return p


TRANS = [(False, False), (True, False), (False, True), (True, True)]


@pytest.mark.parametrize("trans_a,trans_b", TRANS)
@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (3, 5, 7), (127, 33, 65), (1025, 3, 127), (5, 1025, 12),
                                   (17, 9, 1025), (128, 96, 784)])
def test_shapes_and_transposes(runner, M, N, K, trans_a, trans_b):
    check(runner, 1, M, N, K, trans_a, trans_b)


# Every configuration, including experimental ones with TM != TN and a K split: once each, a scalar
# fetch on one side and vec4 on the other (which side, and the transposes, rotate), with edge tiles
# and K spanning several steps of every slice. Pipeline compiles dominate this file's time on
# lavapipe, so each configuration costs one.
EXTRA_CONFIGS = ["8,8,8,4,8,2", "8,8,4,8,16,2"]


@pytest.mark.parametrize("i,config", list(enumerate(sorted(matmul_plan.CONFIGS) + EXTRA_CONFIGS)))
def test_every_config(runner, i, config):
    if "," in config:
        config = matmul_plan.add_config(config)
    offs = dict(a_off=1) if i % 2 else dict(b_off=3)
    p = check(runner, 2, 131, 68, 100, *TRANS[i % 4], config=config, seed=i, splits=1, **offs)
    assert p.entry_point == ("matmul_sv4" if i % 2 else "matmul_vs4")  # N = 68: vec4 stores


def test_entry_point_choice():
    plan = matmul_plan.plan
    assert plan(1, 8, 8, 8, False, False, False, False, 0, 0, 0, 0, 64, 64).entry_point == "matmul_vv4"
    # a's contiguous dimension (K) odd -> scalar a
    assert plan(1, 8, 8, 7, False, False, False, False, 0, 0, 0, 0, 56, 56).entry_point == "matmul_sv4"
    # trans_a: a's contiguous dimension is M
    assert plan(1, 8, 8, 7, True, False, False, False, 0, 0, 0, 0, 56, 56).entry_point == "matmul_vv4"
    # b offset not a multiple of 4 -> scalar b
    assert plan(1, 8, 8, 8, False, False, False, False, 0, 2, 0, 0, 64, 64).entry_point == "matmul_vs4"
    # a batch stride not a multiple of 4 -> scalar a
    assert plan(2, 8, 8, 8, False, False, False, False, 0, 0, 0, 0, 66, 64).entry_point == "matmul_sv4"
    # vec4 stores (suffix 4) need N and the output offset to be multiples of 4 ...
    assert plan(1, 8, 6, 8, False, False, False, False, 0, 0, 0, 0, 64, 48).entry_point == "matmul_vs"
    assert plan(1, 8, 8, 8, False, False, False, False, 0, 0, 2, 0, 64, 64).entry_point == "matmul_vv"
    # ... and a short K (a long-K product runs faster with scalar stores)
    assert plan(1, 64, 64, 4096, False, False, False, False, 0, 0, 0, 0, 0, 0, splits=1).entry_point == "matmul_vv"
    # ... except with split-K, where the product writes a scratch buffer from offset 0
    p = plan(1, 8, 8, 64, False, False, False, False, 0, 0, 2, 0, 512, 512, splits=2)
    assert (p.entry_point, p.reduce.entry_point) == ("matmul_vv4", "matmul_reduce")
    # a gathered b is always scalar
    assert plan(1, 8, 8, 8, False, False, False, False, 0, 0, 0, 0, 64, 64,
                gather=(4, 4, 4, 1, 1, 1, 1, 1, 1, 0, 0)).entry_point == "matmul_vs4"


@pytest.mark.parametrize("bias,relu,trans_a,trans_b,shape", [
    (True, False, False, False, (70, 45, 33)),   # scalar fetches
    (False, True, True, True, (64, 128, 32)),    # vec4 fetches
    (True, True, False, True, (200, 136, 520)),  # a split-K config, several steps per slice
])
def test_bias_relu(runner, bias, relu, trans_a, trans_b, shape):
    check(runner, 1, *shape, trans_a, trans_b, bias=bias, relu=relu, bias_off=3, seed=3)
    check(runner, 2, *shape, trans_a, trans_b, bias=bias, relu=relu, bias_off=1, seed=4, bias_rows=True)


@pytest.mark.parametrize("trans_a,trans_b", TRANS)
def test_batched_broadcast_and_offsets(runner, trans_a, trans_b):
    # batch stride 0 on either side, unaligned offsets (scalar path) and aligned ones (vec4 path)
    check(runner, 3, 19, 21, 23, trans_a, trans_b, bcast_b=True, a_off=5, b_off=3, o_off=1, seed=5)
    check(runner, 4, 20, 24, 28, trans_a, trans_b, bcast_a=True, a_off=8, b_off=12, o_off=4, seed=6)
    check(runner, 3, 1, 1, 1, trans_a, trans_b, bcast_a=True, bcast_b=True, seed=7)


def test_k_zero(runner):
    # an empty sum: out = bias
    check(runner, 2, 5, 6, 0, bias=True)
    check(runner, 2, 5, 6, 0, bias=True, relu=True, items=3, splits=4)


# ---- split-K across workgroups: partial tiles in a scratch buffer, then the reduction dispatch
@pytest.mark.parametrize("trans_a,trans_b", TRANS)
def test_split_k(runner, trans_a, trans_b):
    # odd K, K steps not a multiple of the split, a small M x N (the case split-K is for)
    check(runner, 1, 7, 5, 1001, trans_a, trans_b, splits=3, seed=11)
    # batch > 1 with broadcast a, bias and relu in the reduction, vec4 stores and reduce (N % 4 == 0)
    # (up to 8 splits a thread per vec4, matmul_reduce_few4; more: 8 lanes per vec4, matmul_reduce4)
    for splits, entry in ((5, "matmul_reduce_few4"), (8, "matmul_reduce_few4"), (13, "matmul_reduce4")):
        p = check(runner, 3, 20, 24, 300 * splits // 5, trans_a, trans_b, bias=True, relu=True, bias_off=2,
                  bcast_a=True, splits=splits, seed=12)
        assert p.splits == splits and p.reduce.entry_point == entry and p.entry_point.endswith("4")
    # an unaligned output offset: scalar reduction; row bias
    p = check(runner, 2, 9, 8, 257, trans_a, trans_b, bias=True, bias_rows=True, o_off=3, splits=7, seed=13)
    assert p.reduce.entry_point == "matmul_reduce"


def test_split_k_many_splits_small_output(runner):
    # more splits than the reduction has lanes, a number of them that is no multiple of the lanes,
    # outputs fewer than a reduction workgroup covers (scalar and vec4 reductions)
    check(runner, 1, 3, 5, 3000, splits=45, bias=True, seed=20)
    check(runner, 2, 4, 8, 2000, True, False, splits=37, relu=True, seed=21)


@pytest.mark.parametrize("config", ["32x32", "32x32k4", "16x16k8", "64x64"])
def test_split_k_configs(runner, config):
    # more splits than a slice has steps in some splits (K steps 63 = 7 * 9, KS slices idle at the end)
    check(runner, 1, 33, 17, 1000, config=config, splits=9, relu=True, seed=14)


def test_split_k_chosen_for_small_outputs():
    plan = matmul_plan.plan
    p = plan(1, 32, 144, 25088, True, False, False, False, 0, 0, 0, 0, 0, 0)
    assert p.splits > 1 and p.scratch == p.splits * 32 * 144 and p.reduce is not None
    bm, bn = matmul_plan.config_shape(p.config)
    assert p.workgroups == (-(-144 // bn), -(-32 // bm), p.splits)
    # a big output fills the GPU by itself
    assert plan(1, 2048, 2048, 2048, False, False, False, False, 0, 0, 0, 0, 0, 0).splits == 1
    # the same arguments give the same plan object (the backend memoizes launches on it)
    assert plan(1, 32, 144, 25088, True, False, False, False, 0, 0, 0, 0, 0, 0) is p


# ---- batch-reduce: out[z] sums `items` products (a convolution's weight gradient over images)
@pytest.mark.parametrize("trans_a,trans_b", TRANS)
def test_batch_reduce(runner, trans_a, trans_b):
    # K not a multiple of BK: every item's last K step is zero-padded
    check(runner, 1, 13, 10, 37, trans_a, trans_b, items=6, splits=1, seed=15)
    check(runner, 2, 16, 12, 20, trans_a, trans_b, items=5, splits=4, bias=True, relu=True, seed=16,
          a_off=4, b_off=8)


# ---- gather: op(b) is an image unfolded on the fly (implicit im2col)
GEOMETRIES = [  # C, H, W, kh, kw, stride, padding, dilation
    (3, 9, 7, 3, 3, (1, 1), (1, 1), (1, 1)),
    (2, 11, 10, 3, 2, (2, 1), (0, 1), (1, 2)),
    (1, 28, 28, 3, 3, (1, 1), (1, 1), (1, 1)),
    (4, 8, 9, 1, 1, (1, 1), (0, 0), (1, 1)),
]


def _conv_geometry(g):
    C, H, W, kh, kw, (sh, sw), (ph, pw), (dh, dw) = g
    OH, OW = (H + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (W + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    return C, H, W, kh, kw, OH, OW, (H, W, OW, kh, kw, sh, sw, dh, dw, ph, pw)


@pytest.mark.parametrize("g", GEOMETRIES)
def test_gather_forward_and_weight_grad(runner, g):
    C, H, W, kh, kw, OH, OW, geometry = _conv_geometry(g)
    O, ckk, L = 5, C * kh * kw, OH * OW
    # forward: out[n] = w [O, ckk] (shared) @ cols[n] [ckk, L], bias per output channel (row)
    check(runner, 3, O, L, ckk, bias=True, bias_rows=True, bcast_a=True, gather=geometry, channels=C,
          b_off=2, seed=17)
    # weight gradient: sum over images of dy[n] [O, L] @ cols[n]ᵀ, split across workgroups or not
    for splits in (1, 3):
        check(runner, 1, O, ckk, L, trans_b=True, items=4, gather=geometry, channels=C, splits=splits, seed=18)


@pytest.mark.parametrize("g", [x for x in GEOMETRIES if x[5] == (1, 1)])
def test_gather_input_grad(runner, g):
    # the input gradient of a stride-1 convolution: out[n] [C, H*W] = wᵀ [C, O*kh*kw] @ the output
    # gradient dy[n] (O planes of OH x OW) unfolded with negated dilation and padding
    C, H, W, kh, kw, OH, OW, _ = _conv_geometry(g)
    (dh, dw), (ph, pw) = g[7], g[6]
    O = 6
    geometry = (OH, OW, W, kh, kw, 1, 1, -dh, -dw, -ph, -pw)
    check(runner, 2, C, H * W, O * kh * kw, bcast_a=True, gather=geometry, channels=O, seed=19)


def test_plan_choices_are_valid():
    # every size class maps to a registered configuration whose grid fits one dispatch
    for profile in ("gpu", "cpu"):
        for batch, M, N, K in [(1, 1, 1, 1), (1, 128, 128, 784), (1, 100352, 16, 9), (1, 16, 100352, 9),
                               (1, 32, 144, 25088), (1, 4096, 4096, 4096), (64, 128, 128, 64),
                               (1, 3_000_000, 4, 4), (1, 1000, 1000, 0)]:
            cfg = matmul_plan.choose_config(batch, M, N, K, profile)
            assert cfg in matmul_plan.CONFIGS
            p = matmul_plan.plan(batch, M, N, K, False, False, False, False, 0, 0, 0, 0, M * K, K * N)
            assert max(p.workgroups) <= matmul_plan.MAX_WORKGROUPS_PER_DIM
            bm, bn = matmul_plan.config_shape(p.config)
            assert p.workgroups == (-(-N // bn), -(-M // bm), batch * p.splits)
            assert len(p.params) == 96


# ---- matmul_cpu.wgsl: the kernel of software adapters (matmul_plan's "cpu" profile)
@pytest.mark.parametrize("trans_a,trans_b", TRANS)
@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (3, 5, 7), (16, 16, 16), (33, 20, 9), (128, 96, 784),
                                   (20, 1025, 12), (1025, 4, 3)])
def test_cpu_kernel_shapes_and_transposes(runner, M, N, K, trans_a, trans_b):
    p = check(runner, 1, M, N, K, trans_a, trans_b, profile="cpu")
    assert p.entry_point == "matmul_cpu"
    aligned = all(v % 4 == 0 for v in (M if trans_a else K, K if trans_b else N, N))
    assert p.shader == matmul_plan.CPU_SHADERS[aligned]


@pytest.mark.parametrize("offsets", [(0, 0, 0), (4, 8, 12), (1, 2, 3)])  # aligned (vec4) or not (scalar)
@pytest.mark.parametrize("trans_a,trans_b", TRANS)
def test_cpu_kernel_offsets_bias_relu_batches(runner, offsets, trans_a, trans_b):
    a_off, b_off, o_off = offsets
    for bias_rows in (False, True):
        check(runner, 3, 36, 24, 20, trans_a, trans_b, bias=True, relu=True, a_off=a_off, b_off=b_off,
              o_off=o_off, bias_off=5, bias_rows=bias_rows, seed=int(bias_rows), profile="cpu")
    check(runner, 4, 20, 8, 12, trans_a, trans_b, a_off=a_off, b_off=b_off, o_off=o_off, bcast_a=True, profile="cpu")
    check(runner, 4, 20, 8, 12, trans_a, trans_b, a_off=a_off, b_off=b_off, o_off=o_off, bcast_b=True, profile="cpu")


@pytest.mark.parametrize("items", [2, 7])
@pytest.mark.parametrize("trans_b", [False, True])
def test_cpu_kernel_batch_reduce(runner, items, trans_b):
    # a convolution's weight gradient: sum over images of dY[n] @ cols[n]^T. One 16 x 16 block: the
    # items are split over workgroups, and matmul_reduce adds the partial sums (bias and ReLU there).
    p = check(runner, 1, 16, 9, 196, False, trans_b, items=items, profile="cpu")
    assert p.splits == items and p.reduce is not None
    check(runner, 2, 20, 12, 52, False, trans_b, items=items, bias=True, relu=True, o_off=3, bias_off=2, profile="cpu")
    check(runner, 2, 32, 144, 52, False, trans_b, items=items, profile="cpu")


def test_cpu_kernel_spreads_over_workgroups():
    # MNIST's first layer: 64 blocks of 16 x 16 must still give several workgroups (cores) work
    p = matmul_plan.plan(1, 128, 128, 784, False, True, False, False, 0, 0, 0, 0, 0, 0, profile="cpu")
    assert p.workgroups[0] >= 4 and p.constants["WG"] * p.workgroups[0] * 256 >= 128 * 128
