"""The GPT rows of `python -m webgrad.bench scale` (and of tools/bench_dawn.py --scale, which prints them with the
same functions): `--models gpt` asks for both shapes with their batches and step counts, and a run prints the
training table in tokens/s with PyTorch's columns beside webgrad's, then the generation table with and without
the KV cache. The smoke runs use a one-layer GPT in place of gpt-6x384 (the real one takes minutes a step on a
software adapter); the figures are printed, never asserted on beyond being there."""

import functools
import re

import pytest

pytest.importorskip("wgpu")
torch = pytest.importorskip("torch")

import webgrad as wg  # noqa: E402
from webgrad import models  # noqa: E402
from webgrad.bench import recipes, scale  # noqa: E402


def test_models_gpt_asks_for_both_shapes():
    args = scale.parser("test").parse_args(["--models", "gpt"])
    assert scale.rows(args) == [("gpt-6x384", 16, 30), ("gpt2-small", 8, 5)]
    args = scale.parser("test").parse_args(["--models", "transformer", "gpt2-small", "--steps", "2"])
    assert scale.rows(args) == [("transformer", 32, 2), ("gpt2-small", 8, 2)]
    assert recipes.GPT_CONFIGS["gpt2-small"] == dict(input_shape=(1024,), num_classes=50257, n_layer=12, n_head=12,
                                                     n_embd=768)
    assert recipes.INPUT_SHAPES["gpt-6x384"] == (256,)


def test_the_gpt_recipe_is_nanogpts_adamw():
    model = recipes.GPT_MODELS["gpt-6x384"](n_layer=1)
    opt = recipes.benchmark_optimizer("gpt-6x384", model.parameters(), wg.optim)
    assert isinstance(opt, wg.optim.AdamW)
    decay, plain = opt.param_groups
    assert decay["weight_decay"] == 0.1 and plain["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decay["params"]) and all(p.dim() < 2 for p in plain["params"])
    assert decay["lr"] == 6e-4 and decay["betas"] == (0.9, 0.95)
    x, y = recipes.benchmark_batches("gpt-6x384", wg, 2, "cpu", count=1)[0]
    assert tuple(x.shape) == tuple(y.shape) == (2, 256) and x.dtype is wg.int64 and int(x.max()) < 65


@pytest.fixture
def tiny_gpt(monkeypatch):
    """gpt-6x384's row on a one-layer GPT of 16 tokens."""
    config = dict(input_shape=(16,), num_classes=11, n_layer=1, n_head=2, n_embd=16)
    builder = functools.partial(models.gpt, **config)
    monkeypatch.setitem(recipes.GPT_CONFIGS, "gpt-6x384", config)
    monkeypatch.setitem(recipes.GPT_MODELS, "gpt-6x384", builder)
    monkeypatch.setitem(scale.MODELS, "gpt-6x384", builder)
    monkeypatch.setitem(recipes.INPUT_SHAPES, "gpt-6x384", (16,))


def _table_rows(out, label):
    number = r"([\d.,]+)"
    return re.findall(rf"^{label} +(\d+) \| +{number} +{number} +{number} \| +{number} +{number} +(\S+) +(cpu|cuda) "
                      r"\| +([\d.]+)x +(\S+)$", out, re.M)


def test_a_gpt_row_and_its_generation_rows(tiny_gpt, capsys):
    if not wg.webgpu.is_available():  # pragma: no cover - no Vulkan driver on this machine
        pytest.skip("no WebGPU adapter")
    assert scale.main(["--models", "gpt-6x384", "--batch", "2", "--steps", "1", "--warmup", "3", "--windows", "1",
                       "--new-tokens", "3"]) == 0
    out = capsys.readouterr().out
    print(out)
    assert "webgrad tokens/s" in out and "torch tokens/s" in out and "GPT attention: F.scaled_dot_product" in out
    (row,) = _table_rows(out, "gpt-6x384")
    assert row[0] == "2" and float(row[1].replace(",", "")) > 0 and float(row[4].replace(",", "")) > 0
    gen = re.search(r"^gpt-6x384 +3 \| +([\d.,]+) +([\d.,]+) \| +([\d.,]+) +([\d.,]+) +(cpu|cuda) \| +([\d.]+)x "
                    r"+([\d.]+)x$", out, re.M)
    assert gen, out


def test_mixed_precision_and_hand_written_attention(tiny_gpt, capsys):
    if not wg.webgpu.is_available():  # pragma: no cover
        pytest.skip("no WebGPU adapter")
    if not wg.device("webgpu").backend.runtime.has_f16:
        pytest.skip("the WebGPU adapter has no shader-f16: autocast needs it")
    assert scale.main(["--models", "gpt-6x384", "--batch", "2", "--steps", "1", "--warmup", "3", "--windows", "1",
                       "--amp", "--attention", "manual", "--no-generation"]) == 0
    out = capsys.readouterr().out
    print(out)
    assert "mixed precision: autocast(float16) + GradScaler on both sides" in out and "GPT attention: hand-written" in out
    assert len(_table_rows(out, "gpt-6x384")) == 1 and "generation" not in out


def test_the_llama_row_trains_and_has_no_generation_rows(monkeypatch, capsys):
    """llama-8x512's row (on a one-layer Llama of 16 tokens): tokens/s beside PyTorch's, no generation table, and
    `--models gpt` still names the two GPT rows only."""
    if not wg.webgpu.is_available():  # pragma: no cover
        pytest.skip("no WebGPU adapter")
    assert scale.CHOICES["gpt"] == ("gpt-6x384", "gpt2-small")
    config = dict(input_shape=(16,), num_classes=11, n_layer=1, n_head=2, n_embd=16)
    builder = functools.partial(recipes._llama, **config)
    monkeypatch.setitem(recipes.GPT_CONFIGS, "llama-8x512", config)
    monkeypatch.setitem(recipes.GPT_MODELS, "llama-8x512", builder)
    monkeypatch.setitem(scale.MODELS, "llama-8x512", builder)
    monkeypatch.setitem(recipes.INPUT_SHAPES, "llama-8x512", (16,))
    assert scale.main(["--models", "llama-8x512", "--batch", "2", "--steps", "1", "--warmup", "3", "--windows",
                       "1"]) == 0
    out = capsys.readouterr().out
    print(out)
    (row,) = _table_rows(out, "llama-8x512")
    assert row[0] == "2" and float(row[1].replace(",", "")) > 0 and float(row[4].replace(",", "")) > 0
    assert "KV cache" not in out and "generation" not in out.lower().split("llama-8x512")[-1]
    with pytest.raises(ValueError, match="hand-written attention"):
        scale.main(["--models", "llama-8x512", "--batch", "2", "--steps", "1", "--attention", "manual"])
