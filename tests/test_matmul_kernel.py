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

from webgrad.backends.webgpu import matmul_plan  # noqa: E402
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


def check(runner, batch, M, N, K, trans_a=False, trans_b=False, bias=False, relu=False,
          a_off=0, b_off=0, o_off=0, bias_off=0, bcast_a=False, bcast_b=False, config=None, seed=0):
    rng = np.random.default_rng(seed)
    na, nb = (1 if bcast_a else batch), (1 if bcast_b else batch)
    a = rng.standard_normal((na, K, M) if trans_a else (na, M, K)).astype(np.float32)
    b = rng.standard_normal((nb, N, K) if trans_b else (nb, K, N)).astype(np.float32)
    bv = rng.standard_normal(N).astype(np.float32)
    # Each operand sits at an offset inside a larger buffer with junk around it.
    junk = lambda n: rng.standard_normal(n).astype(np.float32)  # noqa: E731
    abuf = np.concatenate([junk(a_off), a.ravel(), junk(3)])
    bbuf = np.concatenate([junk(b_off), b.ravel(), junk(5)])
    biasbuf = np.concatenate([junk(bias_off), bv, junk(1)])
    n_out = batch * M * N
    obuf = np.full(o_off + n_out + 7, np.nan, np.float32)
    obuf[:o_off] = 1234.0
    obuf[o_off + n_out:] = 4321.0

    dev = runner.device
    ga, gb, gbias, gout = _storage(dev, abuf), _storage(dev, bbuf), _storage(dev, biasbuf), _storage(dev, obuf)
    p = matmul_plan.plan(batch, M, N, K, trans_a, trans_b, bias, relu, a_off, b_off, o_off,
                         bias_off if bias else 0, 0 if bcast_a else M * K, 0 if bcast_b else K * N,
                         config=config)
    runner.run(p, ga, gb, gout, gbias if bias else None)
    got = np.frombuffer(dev.queue.read_buffer(gout), np.float32)

    opa = a.transpose(0, 2, 1) if trans_a else a
    opb = b.transpose(0, 2, 1) if trans_b else b
    ref = np.matmul(opa.astype(np.float64), opb.astype(np.float64))
    mag = np.matmul(np.abs(opa).astype(np.float64), np.abs(opb).astype(np.float64))
    if bias:
        ref = ref + bv
        mag = mag + np.abs(bv)
    if relu:
        ref = np.maximum(ref, 0.0)
    ref = np.broadcast_to(ref, (batch, M, N))
    mag = np.broadcast_to(mag, (batch, M, N))

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
    p = check(runner, 2, 131, 68, 100, *TRANS[i % 4], config=config, seed=i, **offs)
    assert p.entry_point == ("matmul_sv" if i % 2 else "matmul_vs")


def test_entry_point_choice():
    plan = matmul_plan.plan
    assert plan(1, 8, 8, 8, False, False, False, False, 0, 0, 0, 0, 64, 64).entry_point == "matmul_vv"
    # a's contiguous dimension (K) odd -> scalar a
    assert plan(1, 8, 8, 7, False, False, False, False, 0, 0, 0, 0, 56, 56).entry_point == "matmul_sv"
    # trans_a: a's contiguous dimension is M
    assert plan(1, 8, 8, 7, True, False, False, False, 0, 0, 0, 0, 56, 56).entry_point == "matmul_vv"
    # b offset not a multiple of 4 -> scalar b
    assert plan(1, 8, 8, 8, False, False, False, False, 0, 2, 0, 0, 64, 64).entry_point == "matmul_vs"
    # a batch stride not a multiple of 4 -> scalar a
    assert plan(2, 8, 8, 8, False, False, False, False, 0, 0, 0, 0, 66, 64).entry_point == "matmul_sv"


@pytest.mark.parametrize("bias,relu,trans_a,trans_b,shape", [
    (True, False, False, False, (70, 45, 33)),   # scalar fetches
    (False, True, True, True, (64, 128, 32)),    # vec4 fetches
    (True, True, False, True, (200, 136, 520)),  # a split-K config, several steps per slice
])
def test_bias_relu(runner, bias, relu, trans_a, trans_b, shape):
    check(runner, 1, *shape, trans_a, trans_b, bias=bias, relu=relu, bias_off=3, seed=3)


@pytest.mark.parametrize("trans_a,trans_b", TRANS)
def test_batched_broadcast_and_offsets(runner, trans_a, trans_b):
    # batch stride 0 on either side, unaligned offsets (scalar path) and aligned ones (vec4 path)
    check(runner, 3, 19, 21, 23, trans_a, trans_b, bcast_b=True, a_off=5, b_off=3, o_off=1, seed=5)
    check(runner, 4, 20, 24, 28, trans_a, trans_b, bcast_a=True, a_off=8, b_off=12, o_off=4, seed=6)
    check(runner, 3, 1, 1, 1, trans_a, trans_b, bcast_a=True, bcast_b=True, seed=7)


def test_k_zero(runner):
    # an empty sum: out = bias
    check(runner, 2, 5, 6, 0, bias=True)


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
            assert p.workgroups == (-(-N // bn), -(-M // bm), batch)
            assert len(p.params) == 48
