"""The direct convolutions of GPU adapters for narrow products (shaders/conv_direct.wgsl, conv_direct.py)
against torch and the CPU backend: the forward product and the stride-1 input gradient with every number
of rows up to 32 (1 to 8 vec4 accumulators), one or two positions per thread, the staged weight in one
piece or several; the weight gradient with several threads per 4x4 block, two blocks per thread, one chunk
or many with a ragged last one; strides, dilations, rectangular windows, offset operands, the bias and
ReLU epilogue; and conv.py's routing. The runtime is told it runs on a GPU, so lavapipe takes these
kernels (test_conv_pool_parity's "gpu-per-image" profile keeps matmul.wgsl's per-image products tested)."""

import pytest

from helpers import CONV_PASSES, DEVICES, record_calls
from test_conv_gemm import check_conv, check_offset_operands

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")


@pytest.fixture
def direct(monkeypatch):
    """conv_direct with its plans' caches cleared, forced parameters reset, and a record of what ran."""
    from webgrad._backends.webgpu import conv_direct
    from webgrad._backends.webgpu.runtime import default_runtime

    monkeypatch.setattr(default_runtime(), "software", False)
    monkeypatch.setattr(conv_direct, "FORCED", {"off": False, "ppt": None, "chunks": None})
    monkeypatch.setattr(conv_direct, "MIN_POSITIONS", 0)  # these small test images too
    for f in (conv_direct.plan, conv_direct.plan_wgrad):
        f.cache_clear()
    ran = record_calls(monkeypatch, conv_direct)
    conv_direct.ran = ran
    yield conv_direct
    for f in (conv_direct.plan, conv_direct.plan_wgrad):
        f.cache_clear()


ALL = list(CONV_PASSES)
# (x shape, weight shape, conv2d kwargs, the products that run here)
CASES = [
    ((3, 1, 10, 10), (16, 1, 3, 3), dict(padding=1), ALL),                        # MNIST conv1; 21 lanes per block
    ((3, 16, 7, 7), (32, 16, 3, 3), dict(padding=1), ALL[:2]),                    # MNIST conv2; dW: 288 blocks
    ((2, 3, 9, 9), (48, 3, 3, 3), dict(padding=1), ALL[1:]),                      # 84 blocks, 3 lanes each
    ((2, 5, 9, 8), (7, 5, 3, 2), dict(padding=(1, 0), stride=(2, 1)), ["forward", "backward_weight"]),
    ((2, 4, 11, 11), (30, 4, 5, 5), dict(padding=2, dilation=2), ALL),            # 200 blocks, one lane each
    ((2, 40, 6, 6), (20, 40, 3, 3), dict(padding=1), ["forward"]),                # weights staged in two pieces
    ((2, 6, 7, 9), (3, 6, 1, 1), dict(), ALL),                                    # 1x1, one vec4 of rows
    ((2, 2, 5, 6), (1, 2, 3, 3), dict(padding=1), ALL),                           # one row; Wᵀ as one block
]


@pytest.mark.parametrize("x,w,kwargs,products", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
@pytest.mark.parametrize("ppt", [1, 2])
def test_direct_parity(direct, x, w, kwargs, products, ppt):
    direct.FORCED["ppt"] = ppt
    check_conv(x, w, bias=True, seed=len(direct.ran), **kwargs)
    assert sorted(direct.ran) == sorted(products)


@pytest.mark.parametrize("chunks", [1, 3, 7, 50])
def test_weight_gradient_chunks(direct, chunks):
    # the partials of 1 to 50 chunks of positions (the last one ragged: 392 positions) summed by conv_reduce
    direct.FORCED["chunks"] = chunks
    check_conv((2, 3, 14, 14), (16, 3, 3, 3), padding=1, seed=chunks)
    p = direct.plan_wgrad(16, 27, 0, 0, 3, 14, 14, 14, 14, (3, 3), (1, 1, 1, 1, -1, -1), 2)
    qt = dict(p.constants)["QT"]
    assert qt == 64  # 7 tiles of 64 positions, the last one 8; chunks of 7, 3 (3, 3, 1 tiles), 1 tile
    assert p.workgroups[0] == {1: 1, 3: 3, 7: 7, 50: 7}[chunks]
    assert p.scratch == p.workgroups[0] * 16 * 27
    assert "backward_weight" in direct.ran


def test_wgrad_plan_shapes(direct):
    # lanes per 4x4 block, two blocks per thread, the tile's positions and the chunking
    p = direct.plan_wgrad(16, 9, 0, 0, 1, 28, 28, 28, 28, (3, 3), (1, 1, 1, 1, -1, -1), 1024)
    c = dict(p.constants)
    assert (c["UNITS"], c["LANES"], c["QT"]) == (12, 21, 64)
    assert p.workgroups[0] * p.scratch // p.workgroups[0] == p.scratch == p.workgroups[0] * 16 * 9
    assert 500 <= p.workgroups[0] <= direct.TARGET_CHUNKS
    p = direct.plan_wgrad(32, 64, 0, 0, 16, 14, 14, 14, 14, (2, 2), (1, 1, 1, 1, 0, 0), 1024)
    c = dict(p.constants)
    assert (c["UNITS"], c["LANES"], c["QT"]) == (128, 2, 16)
    with pytest.raises(ValueError, match="4x4 blocks"):
        direct.plan_wgrad(64, 256, 0, 0, 1, 8, 8, 8, 8, (16, 16), (1, 1, 1, 1, 0, 0), 1)
    with pytest.raises(ValueError, match="at most 32 rows"):
        direct.plan(33, 9, 0, 9, 9, 0, 0, 1, 8, 8, 8, 8, (3, 3), (1, 1, 1, 1, -1, -1), 0)


def test_only_products_that_fill_the_gpu(direct, monkeypatch):
    # from MIN_POSITIONS positions: the MNIST CNN's conv 16->32 at batch 1024 (200,704), not at batch 128
    monkeypatch.undo()
    from webgrad._backends.webgpu import conv_direct

    assert conv_direct.MIN_POSITIONS == 2 * 132 * 512
    assert conv_direct.suits(32, 1024 * 196) and not conv_direct.suits(32, 128 * 196)
    assert not conv_direct.suits(33, 1024 * 196)


def test_routing(direct, monkeypatch):
    # conv.py: conv_gemm's gradients from conv_gemm.MIN_CHANNELS output channels, and its forward past 32;
    # below, conv_direct for at most 32 rows (forward: output channels; stride-1 input gradient: input
    # channels; MIN_POSITIONS is 0 here) and weight gradients of at most 256 4x4 blocks; per-image products
    # otherwise, and for all of them when conv_direct is off
    from webgrad._backends.webgpu import conv_gemm

    gemm = record_calls(monkeypatch, conv_gemm)
    check_conv((2, 33, 5, 5), (64, 33, 3, 3), padding=1)       # 64 rows; dW 16 x 75 blocks
    assert direct.ran == [] and sorted(gemm) == sorted(ALL)
    check_conv((2, 16, 6, 6), (32, 16, 3, 3), stride=2, padding=1)  # strided input gradient; 288 blocks
    assert direct.ran == ["forward"]
    direct.ran.clear()
    direct.FORCED["off"] = True
    check_conv((2, 16, 6, 6), (32, 16, 3, 3), padding=1)
    assert direct.ran == []


def test_offset_operands_and_relu_epilogue(direct):
    # views at odd offsets of larger storages (the scalar index paths) and conv.conv2d(relu=True)
    check_offset_operands((2, 3, 7, 6), (10, 3, 3, 3), (1,), seed=5)
    assert sorted(direct.ran) == sorted(ALL)
