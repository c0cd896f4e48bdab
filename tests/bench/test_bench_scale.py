"""`python -m webgrad.bench scale` on the CI adapter, as a smoke test: one tiny row (the transformer block at
batch 1, one timed step) prints the table with webgrad's and PyTorch's columns. Figures are printed, never
asserted on beyond being there (a shared machine's timings vary); the peak memory must cover the model's
parameters, gradients and momentum at least. Also: the transformer block trains as PyTorch's does, from the
same weights, and has PyTorch's state_dict layout."""

import re

import numpy as np
import pytest

pytest.importorskip("wgpu")
torch = pytest.importorskip("torch")

import webgrad as wg  # noqa: E402
from webgrad.bench import scale  # noqa: E402
from webgrad.examples.models import INPUT_SHAPES, benchmark_optimizer, training_step, transformer  # noqa: E402

from helpers import DEVICES  # noqa: E402


def test_bench_scale_prints_the_table(capsys):
    if not wg.webgpu.is_available():  # pragma: no cover - no Vulkan driver on this machine
        pytest.skip("no WebGPU adapter")
    assert scale.main(["--models", "transformer", "--batch", "1", "--steps", "1", "--warmup", "3",
                       "--windows", "1"]) == 0
    out = capsys.readouterr().out
    print(out)
    assert "webgrad samples/s" in out and "torch samples/s" in out, out
    assert re.search(r"^PyTorch \S+ .*float32", out, re.M), out  # what PyTorch's float32 math is, stated
    row = re.search(r"^transformer +1 \| +([\d.,]+) +([\d.]+) +([\d.]+) \| +([\d.,]+) +([\d.]+) +(\S+) +(cpu|cuda) "
                    r"\| +([\d.]+)x +(\S+)$", out, re.M)
    assert row, out
    params = sum(p.numel() for p in transformer().parameters()) * 4
    assert float(row.group(3)) * 2**20 >= 3 * params  # parameters, gradients, momentum at least
    assert float(row.group(1).replace(",", "")) > 0 and float(row.group(4).replace(",", "")) > 0


@pytest.mark.parametrize("mode", ["off", "on"])
def test_torch_tf32_sets_pytorchs_float32_math(mode, monkeypatch):
    """--torch-tf32 off/on sets PyTorch's TF32 switches for convolutions and matmuls (restored afterwards); default
    leaves them as PyTorch has them."""
    from webgrad.bench import train

    flags = (torch.backends.cudnn, torch.backends.cuda.matmul)  # the second answers getattr, not monkeypatch
    saved = [f.allow_tf32 for f in flags]
    monkeypatch.setattr(train, "TORCH_TF32", "default")
    try:
        for f in flags:
            f.allow_tf32 = mode != "on"
        train.torch_float32_math(torch)
        assert [f.allow_tf32 for f in flags] == [mode != "on"] * 2
        train.set_torch_tf32(mode)
        line = train.torch_float32_math(torch)
        assert [f.allow_tf32 for f in flags] == [mode == "on"] * 2
        assert line.startswith(f"PyTorch {torch.__version__}"), line
        if torch.cuda.is_available():  # pragma: no cover - CI has no CUDA
            assert ("TF32" in line) is (mode == "on"), line
    finally:
        for f, value in zip(flags, saved):
            f.allow_tf32 = value


def test_bench_scale_refuses_a_warmup_without_the_recording():
    with pytest.raises(SystemExit, match="warmup"):
        scale.main(["--warmup", "2"])


def test_transformer_has_torchs_layout():
    ours, ref = transformer(), transformer(nn=torch.nn)
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
           {k: tuple(v.shape) for k, v in ref.state_dict().items()}
    assert INPUT_SHAPES["transformer"] == (128, 256)


@pytest.mark.parametrize("device", DEVICES)
def test_transformer_training_step_matches_torch(device):
    """The benchmark's block at a smaller width (d_model 32, 4 heads, feed-forward 64, sequence 8, batch 2):
    loss, every gradient and the SGD momentum update against PyTorch in float64 from the same weights."""
    torch.manual_seed(0)
    ref = transformer(nn=torch.nn, d_model=32, dim_feedforward=64).double()
    ours = transformer(d_model=32, dim_feedforward=64)
    ours.load_state_dict({k: v.float() for k, v in ref.state_dict().items()})
    ours = ours.to(device)
    x = torch.randn(2, 8, 32, dtype=torch.float64)
    y = torch.tensor([3, 7])

    ref_opt = benchmark_optimizer("transformer", ref.parameters(), torch.optim)
    ref_loss = torch.nn.functional.cross_entropy(ref(x), y)
    ref_opt.zero_grad()
    ref_loss.backward()
    grads = {k: p.grad.clone() for k, p in ref.named_parameters()}
    ref_opt.step()

    step = training_step(ours, benchmark_optimizer("transformer", ours.parameters(), wg.optim))
    params = dict(ours.named_parameters())
    loss = step(wg.tensor(x.float().numpy(), device=device), wg.tensor(y.numpy(), device=device))
    assert abs(loss.item() - ref_loss.item()) < 1e-5
    for k, g in grads.items():
        np.testing.assert_allclose(params[k].grad.numpy(), g.numpy(), rtol=1e-3, atol=1e-5, err_msg=k)
    for k, v in ref.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[k].numpy(), v.numpy(), rtol=1e-4, atol=1e-6, err_msg=k)
