"""bfloat16, int8 and int16 on WebGPU (_backends/webgpu/narrow.py): torch's values and bytes, the CPU backend's
numerics (float32 computation, one rounding per kernel output), training, autocast and a replayed step."""

import io

import numpy as np
import pytest

pytest.importorskip("wgpu")
torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

import webgrad as wg  # noqa: E402
import webgrad.nn as nn  # noqa: E402
import webgrad.webgpu as webgpu  # noqa: E402

GPU = "webgpu"


@pytest.fixture(scope="module", autouse=True)
def gpu():
    if not webgpu.is_available():  # pragma: no cover - no Vulkan driver on this machine
        pytest.skip("no WebGPU adapter")


def _bits(t):
    """A bfloat16 tensor's canonical bits (torch's or webgrad's), as a list of ints."""
    if isinstance(t, torch.Tensor):
        return t.view(torch.int16).tolist()
    return np.frombuffer(t.cpu().float().numpy().tobytes(), "<u2")[1::2].astype(np.int16).tolist()


def test_bfloat16_uploads_arithmetic_and_read_backs_match_torch():
    values = [1.0, 2.5, 3.14159, -1e-3, 300.7, 3.0e38, float("inf"), float("nan"), 1e-40, -0.0]
    ref = torch.tensor(values, dtype=torch.bfloat16)
    x = wg.tensor(values, dtype=wg.bfloat16, device=GPU)
    assert x.dtype is wg.bfloat16 and x.element_size() == 2 and x.nbytes == 20
    assert _bits(x) == _bits(ref)
    assert str(x.tolist()) == str(ref.tolist())
    assert _bits(x * 3 + 1) == _bits(ref * 3 + 1)  # each op rounds once, as torch's
    assert _bits((x[:7] * 3).exp()) == _bits((ref[:7] * 3).exp())  # (NaN payloads aside)
    # strided views read back and cast exactly; a float32 result rounds to bfloat16 on the way in
    assert _bits(x[::3]) == _bits(ref[::3]) and _bits(x[1::2].float().bfloat16()) == _bits(ref[1::2])
    f = torch.linspace(-3, 3, 11) ** 3
    assert _bits(wg.tensor(f.numpy(), device=GPU).bfloat16()) == _bits(f.bfloat16())
    assert _bits(wg.tensor(f.numpy(), device=GPU).half().bfloat16()) == _bits(f.half().bfloat16())
    assert (x.half().dtype, x.int().tolist()[:3]) == (wg.float16, [1, 2, 3])
    assert (x[:2] + wg.ones(2, dtype=wg.float16, device=GPU)).dtype is wg.float32  # promotion as the CPU's
    assert str(x[:3]) == "tensor([1.0000, 2.5000, 3.1406], device='webgpu', dtype=webgrad.bfloat16)"


def test_bfloat16_products_and_reductions_accumulate_in_float32_then_round_once_as_the_cpu():
    g = np.random.default_rng(0)
    a, b = g.standard_normal((7, 33)).astype(np.float32), g.standard_normal((33, 5)).astype(np.float32)
    for device in ("cpu", GPU):
        wa, wb = wg.tensor(a, device=device).bfloat16(), wg.tensor(b, device=device).bfloat16()
        got = {name: _bits(t) for name, t in (("mm", wa @ wb), ("sum", wa.sum(1)), ("mean", wa.mean()),
                                              ("softmax", wa.softmax(-1)))}
        if device == "cpu":
            cpu = got
    assert got == cpu
    ta, tb = torch.from_numpy(a).bfloat16(), torch.from_numpy(b).bfloat16()
    diff = ((wg.tensor(a, device=GPU).bfloat16() @ wg.tensor(b, device=GPU).bfloat16()).float().cpu().numpy()
            - (ta @ tb).float().numpy())
    assert np.abs(diff).max() <= 2 ** -7 * np.abs((ta @ tb).float().numpy()).max()


def test_int8_and_int16_wrap_as_torch():
    ints = [200, -200, 5, 40000, -32769, 127, -128]
    for wd, td in ((wg.int8, torch.int8), (wg.int16, torch.int16)):
        ref = torch.tensor(ints).to(td)
        x = wg.tensor(ints, device=GPU).to(wd)
        assert x.dtype is wd and x.element_size() == ref.element_size() and x.tolist() == ref.tolist()
        assert (x * 100).tolist() == (ref * 100).tolist() and (x + x).tolist() == (ref + ref).tolist()
        assert (-x).tolist() == (-ref).tolist() and x.sum().tolist() == ref.sum().tolist()  # sum: int64, no wrap
        assert (x.float() / 4).tolist() == (ref.float() / 4).tolist()
        assert wg.tensor([300.7, -129.5], device=GPU).to(wd).tolist() == torch.tensor([300.7, -129.5]).to(td).tolist()
        assert (x + wg.tensor([1], dtype=wg.uint8, device=GPU)).dtype is (wg.int16 if wd is wg.int8 else wd)
        assert wg.tensor(ref.numpy(), device=GPU).tolist() == ref.tolist()  # NumPy uploads keep the dtype
        buf = io.BytesIO()
        wg.save({"t": x[1::2]}, buf)
        assert safetensors_torch.load(buf.getvalue())["t"].tolist() == ref[1::2].tolist()  # (wg.save: safetensors)


def _mlp(device):
    wg.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to(device).bfloat16()
    return model, wg.optim.SGD(model.parameters(), lr=0.1)


def _batch(device, i):
    g = np.random.default_rng(i)
    return (wg.tensor(g.standard_normal((12, 8)).astype(np.float32), device=device).bfloat16(),
            wg.tensor(g.integers(0, 3, 12), device=device))


def test_a_bfloat16_mlp_trains_on_webgpu_as_on_the_cpu_eagerly_and_replayed():
    losses = {}
    for device in ("cpu", GPU):
        model, opt = _mlp(device)

        def step(x, y):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        replayed = wg.replayable(step) if device == GPU else step
        losses[device] = [replayed(*_batch(device, i)).item() for i in range(5)]
        assert model[0].weight.dtype is wg.bfloat16 and model[0].weight.grad.dtype is wg.bfloat16
        if device == GPU:
            assert replayed.replays >= 1
    assert losses[GPU][-1] < losses[GPU][0]
    np.testing.assert_allclose(losses[GPU], losses["cpu"], rtol=2 ** -6, atol=1e-3)


def test_a_captured_bfloat16_step_replays_the_values_of_eager_runs_on_new_inputs():
    from webgrad import devices
    backend = devices.device(GPU).backend
    x = wg.tensor(np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6), device=GPU).bfloat16()
    w = wg.tensor(np.linspace(1, -1, 18, dtype=np.float32).reshape(6, 3), device=GPU).bfloat16()
    with backend.capture() as graph:
        out = ((x @ w).tanh() * 1.7).sum(0)
    new = torch.linspace(3, -1, 24).reshape(4, 6).bfloat16()
    backend.write(x._view.storage, new.view(torch.uint8).numpy().tobytes())  # a new input, canonical bytes
    graph.replay()
    assert x.tolist() == new.tolist()
    assert _bits(out) == _bits(((x @ w).tanh() * 1.7).sum(0))


def test_autocast_to_bfloat16_on_webgpu_lowers_products_as_torch():
    lin = nn.Linear(4, 3).to(GPU)
    x = wg.ones(2, 4, device=GPU)
    for device_type in ("webgpu", "cuda"):
        with wg.autocast(device_type, dtype=wg.bfloat16):
            y = lin(x)
            assert y.dtype is wg.bfloat16 and y.softmax(-1).dtype is wg.float32
    y.float().sum().backward()
    assert lin.weight.grad.dtype is wg.float32
    wg.set_autocast_dtype("cuda", wg.bfloat16)  # the switches scripts set instead of a region
    try:
        wg.set_autocast_enabled("cuda", True)
        assert lin(x).dtype is wg.bfloat16
    finally:
        wg.set_autocast_enabled("cuda", False)
        wg.set_autocast_dtype("cuda", wg.float16)
    ref = torch.nn.functional.linear(torch.ones(2, 4).bfloat16(), torch.from_numpy(lin.weight.detach().cpu().numpy())
                                     .bfloat16(), torch.from_numpy(lin.bias.detach().cpu().numpy()).bfloat16())
    assert y.tolist() == ref.tolist()
