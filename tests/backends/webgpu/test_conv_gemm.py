"""The implicit-GEMM convolutions of GPU adapters (shaders/conv_gemm.wgsl, conv_gemm.py) against torch and
the CPU backend: forward, input gradient and weight gradient for ResNet-18's shapes at a small batch and
for odd shapes (channels that are no multiple of a tile, 7x7 maps, strided odd sizes, strides whose
phases get no taps), every tile configuration, split-K and its reductions, offset operands (scalar loads
and stores), and the bias + ReLU epilogue. The runtime is told it runs on a GPU, so lavapipe takes the
GPU kernels too, and every width of convolution takes them (the software adapters' path and the
per-image products of narrow convolutions are test_conv_pool_parity's "cpu" and "gpu-per-image"
profiles; conv_direct.py's narrow kernels are test_conv_direct's)."""

import numpy as np
import pytest

import webgrad as wg
import webgrad.nn.functional as F
from helpers import DEVICES, read_view, record_calls, stored_view

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")


@pytest.fixture
def gpu_kernels(monkeypatch):
    from webgrad._backends.webgpu import conv_direct, conv_gemm, winograd
    from webgrad._backends.webgpu.runtime import default_runtime

    monkeypatch.setattr(default_runtime(), "software", False)
    monkeypatch.setattr(conv_gemm, "FORCED", {"config": None, "splits": None})
    monkeypatch.setitem(winograd.FORCED, "off", True)  # ResNet's 3x3 stride-1 shapes here too
    monkeypatch.setitem(conv_direct.FORCED, "off", True)  # narrow convolutions here too (else conv_direct's,
    monkeypatch.setattr(conv_gemm, "MIN_CHANNELS", 1)      # or matmul.wgsl's)
    monkeypatch.setattr(conv_gemm, "MIN_FORWARD_CHANNELS", 1)
    return conv_gemm


def _torch_conv(x, w, b, g, kwargs):
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True) if b is not None else None
    y = torch.nn.functional.conv2d(tx, tw, tb, **kwargs)
    y.backward(torch.tensor(g))
    return [t.detach().numpy() for t in (y, tx.grad, tw.grad) + ((tb.grad,) if b is not None else ())]


def _webgrad_conv(device, x, w, b, g, kwargs):
    tx = wg.tensor(x, device=device, requires_grad=True)
    tw = wg.tensor(w, device=device, requires_grad=True)
    tb = wg.tensor(b, device=device, requires_grad=True) if b is not None else None
    y = F.conv2d(tx, tw, tb, **kwargs)
    y.backward(wg.tensor(g, device=device))
    return [t.detach().numpy() for t in (y, tx.grad, tw.grad) + ((tb.grad,) if b is not None else ())]


def check_conv(x_shape, w_shape, bias=False, seed=0, **kwargs):
    """conv2d's output and its three gradients on webgpu and on the CPU backend, against torch."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32) if bias else None
    y_shape = torch.nn.functional.conv2d(torch.zeros(x_shape), torch.zeros(w_shape), **kwargs).shape
    g = rng.standard_normal(tuple(y_shape)).astype(np.float32)
    want = _torch_conv(x, w, b, g, kwargs)
    for device in ("webgpu", "cpu"):
        got = _webgrad_conv(device, x, w, b, g, kwargs)
        for name, a, e in zip(("out", "x.grad", "weight.grad", "bias.grad"), got, want):
            scale = np.abs(e).max() + 1
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5 * scale, err_msg=f"{device} {name}")


# (C_in, C_out, map, kernel, stride, padding): every convolution of ResNet-18 (CIFAR variant)
RESNET18 = [
    (3, 64, 32, 3, 1, 1),                                              # stem
    (64, 64, 32, 3, 1, 1),                                             # layer1
    (64, 128, 32, 3, 2, 1), (64, 128, 32, 1, 2, 0), (128, 128, 16, 3, 1, 1),   # layer2
    (128, 256, 16, 3, 2, 1), (128, 256, 16, 1, 2, 0), (256, 256, 8, 3, 1, 1),  # layer3
    (256, 512, 8, 3, 2, 1), (256, 512, 8, 1, 2, 0), (512, 512, 4, 3, 1, 1),    # layer4
]


@pytest.mark.parametrize("c,o,hw,k,s,p", RESNET18,
                         ids=[f"{c}-{o}-{hw}x{hw}-k{k}s{s}" for c, o, hw, k, s, p in RESNET18])
def test_resnet18_shapes(gpu_kernels, c, o, hw, k, s, p):
    check_conv((2, c, hw, hw), (o, c, k, k), stride=s, padding=p)


@pytest.mark.parametrize("x,w,kwargs", [
    ((3, 5, 7, 7), (7, 5, 3, 3), {"padding": 1}),                        # odd channels, 7x7 maps
    ((2, 6, 9, 9), (10, 6, 3, 3), {"stride": 2, "padding": 1}),         # stride 2, odd size
    ((2, 3, 7, 7), (5, 3, 1, 1), {"stride": 2}),                        # 1x1 stride 2, odd size
    ((2, 9, 6, 6), (20, 9, 3, 3), {"stride": 2, "padding": 1}),         # even map, odd channels
    ((2, 3, 11, 10), (4, 3, 3, 2), {"stride": (3, 2), "padding": (1, 0), "dilation": (2, 1)}),
    ((2, 3, 5, 5), (2, 3, 1, 1), {"stride": 4}),                        # phases that get no taps
    ((1, 4, 5, 5), (3, 4, 5, 5), {"padding": 2, "dilation": 1}),        # a window as large as the map
    ((2, 3, 3, 3), (4, 3, 3, 3), {}),                                   # 1x1 output
    ((1, 6, 9, 15), (6, 2, 3, 3), {"padding": "same", "groups": 3}),     # groups: one product per group
], ids=["odd-7x7", "s2-odd", "1x1-s2-odd", "odd-channels", "rect-s3-dilated", "empty-phases",
        "full-window", "1x1-out", "grouped"])
def test_odd_shapes(gpu_kernels, x, w, kwargs):
    check_conv(x, w, bias=True, **kwargs)


def _planned(monkeypatch, module):
    """A list to which every plan module.run records is appended (the call goes on)."""
    plans, run = [], module.run
    monkeypatch.setattr(module, "run", lambda rt, p, *a: plans.append(p) or run(rt, p, *a))
    return plans


@pytest.mark.parametrize("x,w,kwargs,splits", [
    ((2, 9, 6, 6), (20, 9, 3, 3), {"stride": 2, "padding": 1}, None),    # odd channels, scalar scratch stores
    ((3, 8, 8, 8), (12, 8, 3, 3), {"stride": 2, "padding": 1}, 3),       # K slices (balanced: 1, 2, 2, 3 steps)
    ((2, 5, 8, 6), (8, 5, 1, 1), {"stride": 2}, None),                   # three phases without taps
    ((2, 4, 12, 8), (8, 4, 3, 2), {"stride": (2, 1), "padding": (1, 0), "dilation": (2, 1)}, None),
    ((2, 4, 8, 8), (8, 4, 2, 2), {"stride": 2}, 2),                      # one tap each
    ((1, 6, 4, 8), (16, 6, 4, 4), {"stride": 2, "padding": 1}, None),    # 2 x 2 taps in every phase
], ids=["odd-channels", "splits", "1x1", "s2x1-dilated", "2x2", "4x4"])
def test_strided_input_gradient_in_one_dispatch(gpu_kernels, monkeypatch, x, w, kwargs, splits):
    # PHASED (conv_gemm.wgsl): every phase of a strided input gradient in one dispatch, then conv_unphase
    # writing the input gradient in order; against torch and the CPU backend
    plans = _planned(monkeypatch, gpu_kernels)
    gpu_kernels.FORCED.update(splits=splits)
    check_conv(x, w, **kwargs)
    phased = [p for p in plans if p.entry.startswith("conv_phased")]
    assert len(phased) == 1 and phased[0].reduce.entry == "conv_unphase" + ("4" if x[3] % 4 == 0 else "1"), plans
    if splits:
        assert phased[0].workgroups[2] > 2, phased[0]


def test_strided_input_gradient_that_phased_cannot_take(gpu_kernels, monkeypatch):
    # odd sizes (phases of unequal grids), three taps along x, more phases than the table holds, output
    # channels no multiple of 4: one product per phase, as before PHASED
    plans = _planned(monkeypatch, gpu_kernels)
    check_conv((2, 6, 9, 9), (10, 6, 3, 3), stride=2, padding=1)
    check_conv((2, 3, 8, 8), (4, 3, 5, 5), stride=2, padding=2)
    check_conv((2, 3, 9, 9), (4, 3, 3, 3), stride=3)
    check_conv((2, 3, 8, 8), (6, 3, 3, 3), stride=2, padding=1)
    assert plans and not any(p.entry.startswith("conv_phased") for p in plans)


def test_phase_slices_balance_the_taps():
    # ResNet-18's 256->512 stride-2 input gradient at batch 128: the phases' tiles (64) leave the GPU short,
    # so each phase's K is cut in proportion to its taps (1, 2, 2, 4), every slice the same 32 steps
    from webgrad._backends.webgpu import conv_gemm

    table = conv_gemm.phase_table(3, 3, (2, 2), (1, 1), (1, 1), 8, 8)
    p = conv_gemm.plan_phased(table, 256, 128, 512, 9, 3, 0, 0, 4, 4, 0, 8, 8, (2, 2))
    assert p.entry == "conv_phased4" and p.workgroups == (32, 2, 1 + 2 + 2 + 4)
    rows = [conv_gemm._PHASE.unpack_from(p.params, conv_gemm._PARAMS.size + i * conv_gemm._PHASE.size)
            for i in range(4)]
    assert [r[:4] for r in rows] == [(0, 1, 32, 32), (1, 2, 64, 32), (3, 2, 64, 32), (5, 4, 128, 32)]
    # a smaller batch: more slices in the same proportion, each of at least MIN_SPLIT_STEPS (16) steps
    p = conv_gemm.plan_phased(table, 256, 32, 512, 9, 3, 0, 0, 4, 4, 0, 8, 8, (2, 2))
    assert p.workgroups == (8, 2, 2 * (1 + 2 + 2 + 4))
    assert p.scratch <= conv_gemm.MAX_SCRATCH
    # the 64->128 one fills the GPU unsplit: a slice per phase, the scratch the input gradient's size
    table = conv_gemm.phase_table(3, 3, (2, 2), (1, 1), (1, 1), 32, 32)
    p = conv_gemm.plan_phased(table, 64, 128, 128, 9, 3, 0, 0, 16, 16, 0, 32, 32, (2, 2))
    assert p.workgroups[2] == 4 and p.scratch == 128 * 64 * 32 * 32


def test_every_tile_configuration(gpu_kernels):
    # each configuration's load pattern and register block, split-K (conv_reduce4, and conv_reduce1 for
    # the weight gradient's 7 x 54 output) and unsplit; the sizes keep the compiled pipelines few
    for i, name in enumerate(gpu_kernels.CONFIGS):
        gpu_kernels.FORCED.update(config=name, splits=3 if i % 2 else 1)
        check_conv((2, 6, 4, 4), (7, 6, 3, 3), seed=i, padding=1)  # no bias: fwd and dgrad share a pipeline


def check_offset_operands(x_shape, w_shape, offsets, seed, dw_atol=1e-4):
    """conv.py's conv2d (bias, then ReLU in the store; relu is an argument of conv.conv2d only, not of the
    device interface), input gradient and weight gradient, padding 1, on views at `offset` + 0..3 of larger
    storages for each of `offsets`, against torch."""
    from webgrad._backends.webgpu import conv, create_backend

    be = create_backend()
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    g = rng.standard_normal((x_shape[0], w_shape[0]) + x_shape[2:]).astype(np.float32)

    def stored(a, offset):
        return stored_view(be, a, offset)

    def read(v):
        return read_view(be, v)

    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    y = torch.nn.functional.conv2d(tx, tw, torch.tensor(b), padding=1)
    y.backward(torch.tensor(g))
    for off in offsets:
        out, dx, dw = stored(np.zeros(y.shape, np.float32), off + 2), stored(0 * x, off + 3), stored(0 * w, off)
        conv.conv2d(be.runtime, out, stored(x, off), stored(w, off + 1), stored(b, off), 1, 1, 1, relu=True)
        conv.conv2d_backward_input(be.runtime, dx, stored(g, off + 1), stored(w, off + 2), 1, 1, 1)
        conv.conv2d_backward_weight(be.runtime, dw, stored(g, off + 1), stored(x, off + 2), 1, 1, 1)
        np.testing.assert_allclose(read(out), torch.relu(y).detach().numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(read(dx), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(read(dw), tw.grad.numpy(), rtol=1e-4, atol=dw_atol)


def test_offset_operands_and_relu_epilogue(gpu_kernels):
    # views at offsets that are no multiple of 4 take the scalar loads and stores; relu in the store, after
    # the bias
    check_offset_operands((2, 4, 8, 8), (8, 4, 3, 3), (1, 3), seed=3)


def test_narrow_convolutions_take_conv_gemm_forward_only(monkeypatch):
    # Without conv_direct (conv_direct.py takes these first), the MNIST CNN's convolutions (16 and 32 output
    # channels) on a GPU adapter: the forward product on conv_gemm (from MIN_FORWARD_CHANNELS), both
    # gradients on matmul.wgsl's per-image products (below MIN_CHANNELS); the mixed paths against torch.
    # 8 channels: all three per image.
    from webgrad._backends.webgpu import conv_direct, conv_gemm
    from webgrad._backends.webgpu.runtime import default_runtime

    monkeypatch.setattr(default_runtime(), "software", False)
    monkeypatch.setitem(conv_direct.FORCED, "off", True)
    ran = record_calls(monkeypatch, conv_gemm)
    check_conv((3, 1, 10, 10), (16, 1, 3, 3), bias=True, padding=1, seed=11)
    check_conv((3, 16, 7, 7), (32, 16, 3, 3), bias=True, padding=1, seed=12)
    assert ran == ["forward", "forward"]
    check_conv((3, 4, 7, 7), (8, 4, 3, 3), bias=True, padding=1, seed=13)
    assert ran == ["forward", "forward"]



@pytest.mark.parametrize("path", ["software", "narrow"])
def test_relu_epilogue_on_the_other_paths(gpu_kernels, monkeypatch, path):
    # conv.conv2d(relu=True) also on a software adapter (im2col + matmul_cpu) and for narrow
    # convolutions on a GPU (matmul.wgsl's per-image products)
    from webgrad._backends.webgpu import conv, create_backend

    be = create_backend()
    monkeypatch.setattr(be.runtime, "software", path == "software")
    monkeypatch.setattr(gpu_kernels, "MIN_CHANNELS", 64)
    monkeypatch.setattr(gpu_kernels, "MIN_FORWARD_CHANNELS", 16)
    rng = np.random.default_rng(4)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 6, 6), (5, 3, 3, 3), (5,)))

    def stored(a):
        return stored_view(be, a)

    out = stored(np.zeros((2, 5, 6, 6), np.float32))
    conv.conv2d(be.runtime, out, stored(x), stored(w), stored(b), 1, 1, 1, relu=True)
    want = torch.relu(torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), padding=1))
    got = np.frombuffer(be.to_bytes(out), np.float32).reshape(out.shape)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4)


def test_resnet18_training_step_on_the_gpu_kernels(gpu_kernels, monkeypatch):
    # test_scale_models' ResNet-18 step against PyTorch (forward, every gradient, the SGD update), with the
    # convolutions on these kernels (on lavapipe that test alone runs the software adapters' path)
    import test_scale_models

    products = []
    run = gpu_kernels.run
    monkeypatch.setattr(gpu_kernels, "run", lambda *a: products.append(a[1]) or run(*a))
    test_scale_models.test_resnet18_training_step_matches_torch("webgpu")
    assert len(products) >= 20 * 3 - 1  # 20 convolutions, 3 products each (the stem's input gradient aside)


@pytest.mark.parametrize("name", ["128x128w", "64x128w", "128x64w", "128x128w16", "64x128w16", "128x64w16"])
def test_warp_tiled_swizzled_configurations_on_full_tiles(gpu_kernels, name):
    # the "w" twins move threads (WARP_TILED) and workgroup-tile columns (SWIZZLE), the "w16" ones in one
    # buffer of BK = 16 (NBUF=1): 128 output channels and
    # 2 x 8 x 8 positions fill whole 128-row and 128-column tiles, so a misplaced row or column shows
    gpu_kernels.FORCED.update(config=name, splits=None)
    check_conv((2, 16, 8, 8), (128, 16, 3, 3), padding=1)
    gpu_kernels.FORCED.update(config=name, splits=2)
    check_conv((2, 128, 8, 8), (16, 128, 3, 3), seed=1, padding=1)


def test_planner_takes_the_measured_big_tile():
    # conv_gemm.choose_config's H200 rule (tools/conv_sweep.py): 128x128w16 where 128 x 128 tiles fit and K
    # is long; 64-channel products and short K keep 64x128. (M, N, K) of ResNet-18's products at batch 128.
    from webgrad._backends.webgpu import conv_gemm

    assert conv_gemm.choose_config(64, 131072, 576) == "64x128"        # layer1 forward / input gradient
    assert conv_gemm.choose_config(64, 576, 131072) == "64x128"        # layer1 weight gradient
    assert conv_gemm.choose_config(128, 32768, 1152) == "128x128w16"   # layer2 forward / input gradient
    assert conv_gemm.choose_config(512, 4608, 2048) == "128x128w16"    # layer4 weight gradient
    assert conv_gemm.choose_config(128, 576, 32768) == "128x128w16"    # 64->128 weight gradient (N in 640)
    assert conv_gemm.choose_config(128, 32768, 64) == "64x128"         # 1x1 shortcut forward: short K
    for M, N, K in ((128, 32768, 1152), (512, 2048, 4608), (256, 2304, 8192)):
        c = conv_gemm.CONFIGS[conv_gemm.choose_config(M, N, K)]
        splits = conv_gemm.choose_splits(conv_gemm.choose_config(M, N, K), M, N, -(-K // c["BK"]))
        assert 1 <= splits <= conv_gemm.MAX_SPLITS and splits * M * N <= conv_gemm.MAX_SCRATCH


def _resnet18_products(batch):
    """(wgrad, M, N, K) of every product conv_gemm runs for RESNET18's convolutions at `batch`."""
    from webgrad._backends.webgpu.conv_gemm import phase_taps

    products = []
    for c, o, hw, k, s, p in RESNET18:
        q = (hw + 2 * p - k) // s + 1
        products += [(False, o, batch * q * q, c * k * k), (True, o, c * k * k, batch * q * q)]
        for r in range(s):  # the input gradient: one product per output phase with taps (one at stride 1)
            for t in range(s):
                (_, nu, *_), (_, nv, *_) = phase_taps(k, s, p, 1, r), phase_taps(k, s, p, 1, t)
                if nu * nv:
                    qh, qw = -(-(hw - r) // s), -(-(hw - t) // s)
                    products.append((False, c, batch * qh * qw, o * nu * nv))
    return products


def test_resnet18_split_scratch_stays_within_its_bound():
    # One scratch serves every split product (Runtime.split_k_scratch), so the step's peak holds the
    # largest product's: 36 MiB with the 128x128w16 rule (the 512->512 weight gradient, 4 splits of
    # [512, 4608]), in a 40 MiB buffer of ResNet-18's 892.9 MiB at batch 128 (bench scale, GPU kernels).
    # A planner change that splits more shows here before it shows in that peak.
    from webgrad._backends.webgpu import conv_gemm

    scratch = [conv_gemm.plan(w, M, N, K, 0, K, K, 0, 0, 1, 1, 1, 1, N, (1, 1), (1, 1, 1, 1, 0, 0), 0).scratch
               for w, M, N, K in _resnet18_products(128)]
    assert sum(1 for s in scratch if s) >= 10  # many split products, one scratch
    assert max(scratch) <= 4 * 512 * 4608, f"split-K scratch of {max(scratch) * 4 / 2**20:.1f} MiB"


def test_split_products_scratch_while_recording_is_the_graphs(gpu_kernels):
    # Eagerly the split products share the runtime's one kept scratch; while a step is recorded each takes a
    # storage of the graph's, freed when it returns, which the recorded step's memory plan places
    # (memory_plan.py; Runtime.kept_scratch). Two split products of two sizes replay as torch computes.
    from webgrad._backends.webgpu.runtime import default_runtime

    rt = default_runtime()
    gpu_kernels.FORCED.update(config="32x32", splits=3)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 16, 8, 8)).astype(np.float32)
    w1 = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((24, 32, 3, 3)).astype(np.float32)
    tx, tw1, tw2 = (wg.tensor(a, device="webgpu") for a in (x, w1, w2))
    F.conv2d(tx, tw1, padding=1)  # eager: the kept scratch
    assert rt._kept_scratch["split-k"].pool is rt.pool
    with rt.capture(plannable=True) as graph:
        h = F.conv2d(tx, tw1, padding=1)
        y = F.conv2d(h, tw2, padding=1)  # two split products, two scratch sizes
    assert "split-k" not in rt._kept_scratch
    assert graph.idle_bytes > 0  # the products' scratches, freed into the graph's pool
    graph.replay()
    want = torch.nn.functional.conv2d(torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w1), padding=1),
                                      torch.tensor(w2), padding=1)
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-4, atol=1e-3)
    graph.release()
