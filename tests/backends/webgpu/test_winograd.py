"""Winograd F(2x2, 3x3) and F(4x4, 3x3) convolutions of GPU adapters (shaders/winograd.wgsl, winograd.py) against torch and the
CPU backend: the forward product (bias and ReLU in its output transform) and the stride-1 input gradient,
on ResNet-18's 3x3 stride-1 shapes at a small batch, odd planes (tiles past the edge), padding 0 and 2,
offset operands, F(4x4)'s row variant (rows of a multiple of 4), and a batch in chunks of images; the routing (what runs here and what does not) and the
transforms' algebra on their own. The runtime is told it runs on a GPU, so lavapipe takes these kernels; every
test of the `wino` fixture runs once per tile size."""

import numpy as np
import pytest

import webgrad as wg
import webgrad.nn.functional as F

from helpers import CONV_PASSES, DEVICES, record_calls
from test_conv_gemm import check_conv, check_offset_operands

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")


@pytest.fixture(params=[2, 4], ids=["F2", "F4"])
def wino(monkeypatch, request):
    """winograd.py taking every channel count with tiles of request.param, its plans' cache cleared, and a
    record of what ran."""
    from webgrad._backends.webgpu import winograd
    from webgrad._backends.webgpu.runtime import default_runtime

    monkeypatch.setattr(default_runtime(), "software", False)
    monkeypatch.setitem(winograd.FORCED, "off", False)
    monkeypatch.setattr(winograd, "MIN_CHANNELS", 1)
    monkeypatch.setitem(winograd.TILE, "size", request.param)
    winograd.plan.cache_clear(), winograd.plan_wgrad.cache_clear()
    ran = record_calls(monkeypatch, winograd)
    winograd.ran = ran
    yield winograd
    winograd.plan.cache_clear(), winograd.plan_wgrad.cache_clear()


ALL = list(CONV_PASSES)
# (x shape, weight shape, conv2d kwargs)
CASES = [
    ((2, 64, 8, 8), (64, 64, 3, 3), dict(padding=1)),      # ResNet-18's layer1 shape on a smaller map
    ((2, 128, 4, 4), (128, 128, 3, 3), dict(padding=1)),   # layer4's map: 4 tiles per image in F(2x2), 1 in F(4x4)
    ((2, 128, 16, 16), (128, 128, 3, 3), dict(padding=1)), # 128 tiles: the products on 128x128w16 (BIG_PRODUCT)
    ((3, 5, 7, 9), (6, 5, 3, 3), dict(padding=1)),         # odd planes: the last tiles hang over the edge
    ((2, 4, 9, 7), (3, 4, 3, 3), dict()),                  # padding 0 (the input gradient pads by 2)
    ((2, 3, 5, 6), (4, 3, 3, 3), dict(padding=2)),         # padding 2 (the input gradient pads by 0)
    ((1, 2, 1, 1), (3, 2, 3, 3), dict(padding=1)),         # a 1x1 plane
    ((2, 6, 6, 5), (5, 6, 3, 3), dict(padding=(1, 2))),    # rectangular padding
    ((2, 8, 6, 8), (8, 8, 3, 3), dict(padding=1)),         # F(4x4)'s row variant, the last tile row past the edge
]
ROW_ENTRIES = {"wino_input", "wino_output", "wino_grad_output"}


def test_row_variant(wino, monkeypatch):
    # rows of a multiple of 4 pixels, padding 1: F(4x4) reads and writes whole rows of 4 in every transform of
    # the image or dY (ResNet-18's maps); F(2x2) and rows of other widths keep the transforms as written
    from webgrad._backends.webgpu.runtime import default_runtime

    rt = default_runtime()
    by_rows, record = set(), rt.record
    row_shaders = {wino._kernel(e, "f32", "f32", 4, True).shader for e in ROW_ENTRIES}
    monkeypatch.setattr(rt, "record", lambda d, storages: (by_rows.add(d.kernel.entry)
                                                           if d.kernel.shader in row_shaders else None)
                        or record(d, storages))
    check_conv((2, 8, 6, 8), (8, 8, 3, 3), bias=True, padding=1)
    assert by_rows == (ROW_ENTRIES if wino.TILE["size"] == 4 else set())
    by_rows.clear()
    check_conv((2, 8, 6, 6), (8, 8, 3, 3), bias=True, padding=1)
    assert not by_rows


@pytest.mark.parametrize("x,w,kwargs", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CASES])
def test_winograd_parity(wino, x, w, kwargs):
    check_conv(x, w, bias=True, seed=len(wino.ran), **kwargs)
    assert sorted(wino.ran) == sorted(ALL)


@pytest.mark.parametrize("offset,chunks", [(0, 1), (1, 1), (3, 5)])
def test_offsets_chunks_and_relu_store(wino, monkeypatch, offset, chunks):
    # operands at offsets of larger storages (no multiple of 4: the product's scalar paths stay out of it, the
    # transforms read and write at the offsets); a workspace of one image's V + M: 5 chunks of one image,
    # one after another through the same two buffers; relu (an argument of conv.conv2d only, as Conv2d +
    # ReLU fuse) in the output transform, after the bias
    tile = wino.TILE["size"]
    one_image = wino.points(tile) * 8 * (8 // tile) ** 2  # floats of an image's V: [points, 8 channels, tiles]
    if chunks > 1:
        monkeypatch.setattr(wino, "WORKSPACE", one_image * 4)
    p = wino.plan(5, 8, 8, 8, 6, 8, 8, (1, 1), 0, 0, 0, tile=tile)
    assert len(p.chunks) == chunks and p.in_size == one_image * 5 // chunks
    check_offset_operands((5, 8, 8, 8), (6, 8, 3, 3), (offset,), seed=offset, dw_atol=1e-3)
    assert sorted(wino.ran) == sorted(ALL)


@pytest.mark.parametrize("chunks", [1, 3])
def test_weight_gradient_slabs_in_the_split_k_scratch(wino, monkeypatch, chunks):
    # weight-gradient products that split their K: no reduction runs; chunk after chunk writes its partial slabs
    # into the split-K scratch (an unsplit last chunk its one slab), and wino_grad_weight sums them all
    monkeypatch.setattr(wino, "WGRAD_CONFIGS", ((None, "64x128"),))
    monkeypatch.setattr(wino, "WGRAD_SPLIT_K", {"64x128": 16})
    tile = wino.TILE["size"]
    tp = (16 // tile) ** 2
    if chunks > 1:  # two images a chunk: 2, 2, 1
        monkeypatch.setattr(wino, "WORKSPACE", wino.points(tile) * 8 * tp * 2 * 4)
    p = wino.plan_wgrad(5, 8, 16, 16, 6, 16, 16, (1, 1), 0, 0, 0, tile=tile)
    splits = [product.splits for _, _, product in p.chunks]
    assert p.split_k and splits == ([5 * tp // 16] if chunks == 1 else [2 * tp // 16] * 2 + [tp // 16])
    assert all(product.reduce is None for _, _, product in p.chunks)
    assert p.u_size == sum(splits) * wino.points(tile) * 6 * 8
    check_conv((5, 8, 16, 16), (6, 8, 3, 3), bias=True, padding=1, seed=chunks)
    assert sorted(wino.ran) == sorted(ALL)


@pytest.mark.parametrize("kwargs", [dict(stride=2, padding=1), dict(padding=1, dilation=2), dict(padding=3)])
def test_other_geometries_do_not_run_here(wino, kwargs):
    check_conv((2, 4, 9, 9), (5, 4, 3, 3), seed=6, **kwargs)
    assert wino.ran == []


def test_routing_by_channels(monkeypatch):
    # MIN_CHANNELS on both sides: ResNet's 64-channel 3x3 convolutions take Winograd (F(4x4, 3x3) on 4x4 planes
    # and larger, F(2x2, 3x3) below), the stem (3 input channels) and 1x1 or 5x5 windows do not, and
    # WEBGRAD_WINOGRAD=0 (FORCED["off"]) turns it off
    from webgrad._backends.webgpu import winograd

    geom = ((1, 1), (1, 1), (1, 1))
    monkeypatch.setitem(winograd.FORCED, "off", False)
    assert winograd.suits(64, 64, (3, 3), geom) and winograd.suits(512, 512, (3, 3), geom)
    monkeypatch.setitem(winograd.TILE, "size", None)
    assert [winograd.tile_for(*plane) for plane in ((32, 32), (8, 8), (4, 4), (4, 3), (2, 2))] == [4, 4, 4, 2, 2]
    assert not winograd.suits(3, 64, (3, 3), geom)
    assert not winograd.suits(64, 32, (3, 3), geom)
    assert not winograd.suits(64, 64, (1, 1), ((1, 1), (0, 0), (1, 1)))
    assert not winograd.suits(64, 64, (5, 5), ((1, 1), (2, 2), (1, 1)))
    assert not winograd.suits(64, 64, (3, 3), ((2, 2), (1, 1), (1, 1)))
    monkeypatch.setitem(winograd.FORCED, "off", True)
    assert not winograd.suits(64, 64, (3, 3), geom)


@pytest.mark.parametrize("tile", [2, 4])
def test_transform_matrices(tile):
    # The B^T, G and A^T that winograd_transforms.py writes out as WGSL compute a 1-D correlation of tile + 2
    # inputs with a 3-tap filter: y = A^T [(G g) * (B^T d)], the identity the kernels rely on (Lavin and Gray,
    # F(m, 3)); the kernels themselves are checked against torch above
    from webgrad._backends.webgpu.winograd_transforms import MATRICES

    bt, g, at = (np.array(m, float) for m in MATRICES[tile])
    m = at.shape[0]
    rng = np.random.default_rng(7)
    d, f = rng.standard_normal(m + 2), rng.standard_normal(3)
    want = np.array([d[i:i + 3] @ f for i in range(m)])
    np.testing.assert_allclose(at @ ((g @ f) * (bt @ d)), want, rtol=1e-12)


def test_scratches_of_a_recorded_step_are_the_graphs(wino):
    # While replay.py records a step (capture(plannable=True)), U, V and M are storages of the graph's, one set
    # per convolution, freed when it returns (a recorded step's memory plan places them: memory_plan.py; before,
    # the runtime's kept scratches, sized for the largest convolution, were held beside the graph: 96 MiB at
    # ResNet-18's batch 128); the runtime's kept ones are given back. A replay of two convolutions matches torch.
    from webgrad._backends.webgpu.runtime import default_runtime

    rt = default_runtime()
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 8, 6, 6)).astype(np.float32)
    w1 = rng.standard_normal((12, 8, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((4, 12, 3, 3)).astype(np.float32)
    tx, tw1, tw2 = (wg.tensor(a, device="webgpu") for a in (x, w1, w2))
    F.conv2d(F.conv2d(tx, tw1, padding=1), tw2, padding=1)  # eager: in the runtime's kept scratches
    names = ("winograd-u", "winograd-in", "winograd-out")
    assert all(rt._kept_scratch[k].pool is rt.pool for k in names)
    with rt.capture(plannable=True) as graph:
        h = F.conv2d(tx, tw1, padding=1)
        y = F.conv2d(h, tw2, padding=1)
    assert not any(k in rt._kept_scratch for k in names)
    assert graph.idle_bytes > 0  # the convolutions' scratches, freed into the graph's pool
    graph.replay()
    want = torch.nn.functional.conv2d(torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w1), padding=1),
                                      torch.tensor(w2), padding=1)
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-4, atol=1e-3)
    graph.release()
    assert wino.ran == ["forward"] * 4


@pytest.mark.parametrize("chunks", [1, 3])
def test_float16_operands(wino, monkeypatch, chunks):
    # autocast's convolutions: half images, filters and gradients in and out, f32 transforms, products and sums,
    # one rounding per result; against torch in float32 over the same half operands, rounded to half once
    # (test_conv_gemm_f16's tolerance)
    from test_conv_gemm_f16 import _close_half, _has_f16
    from webgrad._backends.webgpu import conv_gemm

    if not _has_f16():
        pytest.skip("needs a WebGPU adapter with shader-f16")
    monkeypatch.setattr(conv_gemm, "MIN_CHANNELS", 1)  # f16.py's native convolutions from conv_gemm's channels
    tile = wino.TILE["size"]
    if chunks > 1:  # an image's M: [points, 8 channels, tiles of a 7x8 plane]
        monkeypatch.setattr(wino, "WORKSPACE", wino.points(tile) * 8 * -(-7 // tile) * -(-8 // tile) * 4)
    kernels = []
    from webgrad._backends.webgpu.runtime import default_runtime

    rt = default_runtime()
    record = rt.record
    monkeypatch.setattr(rt, "record", lambda d, storages: kernels.append(d.kernel) or record(d, storages))
    rng = np.random.default_rng(chunks)
    x = rng.standard_normal((3, 6, 7, 8)).astype(np.float16)
    w = rng.standard_normal((8, 6, 3, 3)).astype(np.float16)
    b = rng.standard_normal(8).astype(np.float16)
    g = rng.standard_normal((3, 8, 7, 8)).astype(np.float16)
    tx, tw = (torch.tensor(v.astype(np.float32), requires_grad=True) for v in (x, w))
    ty = torch.nn.functional.conv2d(tx, tw, torch.tensor(b.astype(np.float32)), padding=1)
    ty.backward(torch.tensor(g.astype(np.float32)))
    want = [t.detach().half().numpy() for t in (ty, tx.grad, tw.grad)]
    ox, ow = (wg.tensor(v, device="webgpu", requires_grad=True) for v in (x, w))
    oy = F.conv2d(ox, ow, wg.tensor(b, device="webgpu"), padding=1)
    oy.backward(wg.tensor(g, device="webgpu"))
    assert all(t.dtype is wg.float16 for t in (oy, ox.grad, ow.grad))
    for name, got, e, k in zip(("out", "x.grad", "weight.grad"), (oy, ox.grad, ow.grad), want, (54, 72, 168)):
        try:
            _close_half(got.detach().to("cpu").numpy(), e, k)
        except AssertionError as err:
            raise AssertionError(f"{name}: {err}") from None
    assert sorted(wino.ran) == sorted(ALL)
    rows = wino.rows(tile, 8, 0)  # 8-wide planes: F(4x4)'s row variant of the transforms
    half = [wino._kernel("wino_input", "f16", "f32", tile, rows), wino._kernel("wino_weight", "f16", "f32", tile),
            wino._kernel("wino_output", "f32", "f16", tile, rows),
            wino._kernel("wino_grad_output", "f16", "f32", tile, rows),
            wino._kernel("wino_grad_weight", "f32", "f16", tile)]
    assert all(k in kernels for k in half), "not the float16 kernels"


def test_big_products_take_64x128_tiles_past_a_wave_and_below_three_quarters_of_one():
    """BIG_PRODUCT_MIN_FILL: ResNet-18's last stage at batch 128 (512 channels, 4x4 planes) in F(4x4) is one tile
    an image, 36 products [512, 512] @ [512, 128]: 144 workgroups of 128x128, 0.55 of a wave, take 64x128w16; in
    F(2x2), 16 of [512, 512] @ [512, 512], 256 workgroups, keep 128x128w16; the third stage's F(4x4) products at
    batch 128 ([256, 256] @ [256, 512]: over a wave) take 64x128w16."""
    from webgrad._backends.webgpu import winograd

    assert winograd._product(512, 512, 128, 36, "gpu").config == "64x128w16"
    assert winograd._product(512, 512, 512, 16, "gpu").config == "128x128w16"
    assert winograd.product_fill(winograd._product(512, 512, 512, 16, "gpu")) > winograd.BIG_PRODUCT_MIN_FILL
    assert winograd._product(256, 256, 512, 36, "gpu").config == "64x128w16"
