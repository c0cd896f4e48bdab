"""webgrad.models.gpt, nanoGPT's decoder: the same state_dict layout as its PyTorch build (both attention paths),
GPT-2's initialisation, state_dicts that move both ways with the same outputs, 20 AdamW steps with PyTorch's
losses from the same weights and batches (float32 within 1e-4 on cpu and webgpu; autocast within float16's
rounding noise), and generate(): greedy tokens with and without the KV cache equal to PyTorch's greedy
continuation, sampling that the cache does not change, streaming, and clear errors."""

import contextlib
import math

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import webgrad as wg
from webgrad import models
from webgrad.models import GPTConfig
from webgrad.models.gpt import define

from helpers import DEVICES

TINY = GPTConfig(block_size=16, vocab_size=23, n_layer=2, n_head=2, n_embd=32)
TEXT = "the quick brown fox jumps over the lazy dog. " * 8  # a pattern a tiny model learns within 20 steps


def twins(config=TINY, flash=True, device="cpu", seed=0):
    """The GPT in PyTorch and in webgrad (on `device`), from PyTorch's initial weights."""
    torch.manual_seed(seed)
    theirs = define(torch.nn).GPT(config, flash=flash)
    ours = define(wg.nn).GPT(config, flash=flash)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    return ours.to(device), theirs


def layout(model):
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


@pytest.mark.parametrize("flash", [True, False])
def test_pytorchs_layout_and_nanogpts_names(flash):
    ours, theirs = define(wg.nn).GPT(TINY, flash=flash), define(torch.nn).GPT(TINY, flash=flash)
    assert layout(ours) == layout(theirs)
    names = set(layout(ours))
    assert {"transformer.wte.weight", "transformer.wpe.weight", "transformer.h.1.attn.c_attn.weight",
            "transformer.h.0.mlp.c_proj.bias", "transformer.ln_f.weight", "lm_head.weight"} <= names
    assert not any(n.endswith(".attn.bias") for n in names)  # the causal mask is not persistent
    assert ours.lm_head.weight is ours.transformer.wte.weight  # tied
    # default registry build: nanoGPT's Shakespeare-character shape, 8 heads
    assert models.INPUT_SHAPES["gpt"] == (256,)
    assert layout(models.get_model("gpt")) == layout(models.get_model("gpt", nn=torch.nn))
    assert models.gpt(n_layer=1).get_num_params() == sum(p.numel() for p in models.gpt(n_layer=1).parameters()) - 256 * 384


def test_gpt2_initialisation():
    wg.manual_seed(0)
    config = GPTConfig(block_size=64, vocab_size=512, n_layer=8, n_head=4, n_embd=128)
    model = models.GPT(config)
    params = dict(model.named_parameters())
    std = {name: float(p.detach().numpy().std()) for name, p in params.items()}
    assert abs(std["transformer.h.3.attn.c_attn.weight"] - 0.02) < 0.002
    assert abs(std["transformer.wpe.weight"] - 0.02) < 0.002
    assert abs(std["transformer.h.3.mlp.c_proj.weight"] - 0.02 / math.sqrt(16)) < 0.001
    assert abs(std["transformer.h.0.attn.c_proj.weight"] - 0.02 / math.sqrt(16)) < 0.001
    assert float(np.abs(params["transformer.h.0.mlp.c_fc.bias"].detach().numpy()).max()) == 0.0
    assert params["transformer.ln_f.weight"].tolist() == [1.0] * 128


@pytest.mark.parametrize("flash", [True, False])
def test_state_dicts_move_both_ways_with_the_same_outputs(device, flash, tmp_path):
    rng = np.random.default_rng(0)
    idx = rng.integers(0, TINY.vocab_size, (3, TINY.block_size))
    # PyTorch's weights into webgrad
    ours, theirs = twins(flash=flash, device=device)
    with wg.no_grad(), torch.no_grad():
        logits, loss = ours(wg.tensor(idx, device=device), wg.tensor(idx, device=device))
        ref_logits, ref_loss = theirs(torch.from_numpy(idx), torch.from_numpy(idx))
        np.testing.assert_allclose(logits.numpy(), ref_logits.numpy(), rtol=1e-4, atol=1e-5)
        assert abs(loss.item() - ref_loss.item()) < 1e-5
        last, none = ours(wg.tensor(idx, device=device))  # inference: the last position only
        assert none is None and tuple(last.shape) == (3, 1, TINY.vocab_size)
        np.testing.assert_allclose(last.numpy(), ref_logits[:, -1:].numpy(), rtol=1e-4, atol=1e-5)
    # webgrad's weights (through safetensors, as the page's Export writes them) into PyTorch
    wg.manual_seed(1)
    ours = define(wg.nn).GPT(TINY, flash=flash, device=device)
    path = tmp_path / "gpt.safetensors"
    wg.save(ours.state_dict(), str(path))
    theirs = define(torch.nn).GPT(TINY, flash=not flash)  # the other attention path: the same state_dict
    theirs.load_state_dict(load_file(str(path)), strict=True)
    with wg.no_grad(), torch.no_grad():
        np.testing.assert_allclose(ours(wg.tensor(idx, device=device))[0].numpy(),
                                   theirs(torch.from_numpy(idx))[0].numpy(), rtol=1e-4, atol=1e-5)


def _batches(steps=20, batch=4, seed=1):
    rng = np.random.default_rng(seed)
    text = np.array([ord(c) % TINY.vocab_size for c in TEXT])
    starts = rng.integers(0, len(text) - TINY.block_size - 1, (steps, batch))
    return text[starts[..., None] + np.arange(TINY.block_size + 1)]


def _train(flash, device, amp=None, replay=False):
    """20 AdamW steps (nanoGPT's configure_optimizers: weight decay on the matrices) of both twins on the same
    batches through webgrad.models.train_step; the two loss curves."""
    ours, theirs = twins(flash=flash, device=device)
    step = models.train_step(lambda idx: idx, ours.configure_optimizers(0.1, 1e-2, (0.9, 0.95)),
                             lambda idx, targets: ours(idx, targets)[1], amp=device if amp else None, replay=replay)
    ref = models.train_step(lambda idx: idx, theirs.configure_optimizers(0.1, 1e-2, (0.9, 0.95)),
                            lambda idx, targets: theirs(idx, targets)[1], amp="cpu" if amp else None, lib=torch)
    losses, ref_losses = [], []
    for b in _batches():
        x, y = np.ascontiguousarray(b[:, :-1]), np.ascontiguousarray(b[:, 1:])
        losses.append(step(wg.tensor(x, device=device), wg.tensor(y, device=device)).item())
        with _portable_half_kernels() if amp else contextlib.nullcontext():
            ref_losses.append(ref(torch.from_numpy(x), torch.from_numpy(y)).item())
    return np.array(losses), np.array(ref_losses), ours, theirs


@contextlib.contextmanager
def _portable_half_kernels():
    """PyTorch's CPU float16 kernels that are the same on every CPU: ATen's products and its math attention. On a
    CPU with AVX512-FP16 and AMX, oneDNN's float16 products and the fused CPU attention kernel take other paths
    (the attention keeps its probabilities in float32, which no GPU autocast does), and the reference curve moved
    by 3e-3 with the CPU it ran on."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with torch.backends.mkldnn.flags(enabled=False), sdpa_kernel(SDPBackend.MATH):
        yield


@pytest.mark.parametrize("flash", [True, False])
def test_twenty_adamw_steps_match_pytorchs_losses(device, flash):
    losses, ref_losses, ours, theirs = _train(flash, device, replay=device == "webgpu")
    assert ref_losses[-1] < ref_losses[0] - 1.0  # it learns: 3.14 -> 1.47
    np.testing.assert_allclose(losses, ref_losses, rtol=0, atol=1e-4)
    state = ours.state_dict()
    for k, v in theirs.state_dict().items():
        a, b = state[k].numpy(), v.numpy()
        if k.endswith("c_attn.bias"):
            # the keys' bias shifts every score of a row alike, which softmax ignores: its gradient is rounding
            # noise, which Adam scales to full steps, different in each library
            n = TINY.n_embd
            a, b = np.delete(a, np.s_[n:2 * n]), np.delete(b, np.s_[n:2 * n])
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4, err_msg=k)


def _has_f16():
    return "webgpu" in DEVICES and wg.device("webgpu").backend.runtime.has_f16


@pytest.mark.parametrize("amp_device", ["cpu"] + (["webgpu"] if "webgpu" in DEVICES else []))
@pytest.mark.parametrize("flash", [True, False])
def test_autocast_steps_match_pytorchs_within_float16_noise(amp_device, flash):
    """Autocast (float16) with a GradScaler on both sides, PyTorch's on the CPU. Float16 rounds each product and
    activation to 11 bits, and the two libraries accumulate in different orders, so a value here and there
    rounds the other way: the curves agree within 1e-3 (1.5e-3 on WebGPU, whose products sum in tiles, in
    another order than the CPU's), under a third of what mixed precision itself moves them from float32 (about
    4e-3 here)."""
    if amp_device == "webgpu" and not _has_f16():
        pytest.skip("the WebGPU adapter has no shader-f16 (float16 storage): autocast needs it")
    losses, ref_losses, _, _ = _train(flash, amp_device, amp=True)
    _, float32_losses, _, _ = _train(flash, "cpu")
    shift = np.abs(ref_losses - float32_losses).max()
    gap = np.abs(losses - ref_losses).max()
    assert gap < (1e-3 if amp_device == "cpu" else 1.5e-3) and gap < shift / 3, (gap, shift)


@pytest.mark.parametrize("flash", [True, False])
def test_greedy_generation_with_and_without_the_cache_is_pytorchs(device, flash):
    ours, theirs = twins(flash=flash, device=device, seed=3)
    ours.eval(), theirs.eval()
    prompt = np.array([[1, 2, 3], [4, 5, 6]])
    steps = 20  # 3 + 20 > block_size 16: the cropped context is run again past it
    ref = torch.from_numpy(prompt)
    with torch.no_grad():
        for _ in range(steps):
            logits, _ = theirs(ref[:, -TINY.block_size:])
            ref = torch.cat([ref, logits[:, -1].argmax(-1, keepdim=True)], 1)
    for kv_cache in (True, False):
        out = ours.generate(wg.tensor(prompt, device=device), steps, top_k=1, kv_cache=kv_cache)
        assert out.dtype is wg.int64 and out.device.type == device
        assert out.tolist() == ref.tolist(), kv_cache
        assert not out.requires_grad


def test_sampling_draws_the_same_tokens_with_and_without_the_cache(device):
    ours, _ = twins(device=device, seed=4)
    ours.eval()
    prompt = wg.tensor([[7, 8]], device=device)
    runs = []
    for kv_cache in (True, False):
        wg.manual_seed(9)
        runs.append(ours.generate(prompt, 18, temperature=0.8, top_k=5, kv_cache=kv_cache).tolist())
    assert runs[0] == runs[1]
    wg.manual_seed(10)
    assert ours.generate(prompt, 18, temperature=0.8, top_k=5).tolist() != runs[0]  # another seed, other tokens


def test_streaming_gives_the_tokens_as_they_come(device):
    ours, _ = twins(device=device, seed=5)
    prompt = wg.tensor([[1, 2]], device=device)
    seen = []
    wg.manual_seed(2)
    out = ours.generate(prompt, 5, callback=lambda token: seen.append(token.item()))
    wg.manual_seed(2)
    streamed = [t.tolist() for t in ours.stream(prompt, 5)]
    assert out.tolist()[0][2:] == seen == [t[0][0] for t in streamed]
    assert ours.generate(prompt, 0).tolist() == [[1, 2]]


def test_clear_errors():
    model = models.GPT(TINY)
    idx = wg.zeros(1, 17, dtype=wg.int64)
    with pytest.raises(ValueError, match="Cannot forward sequence of length 17, block size is only 16"):
        model(idx)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        model.generate(idx[:, :2], 1, temperature=0)
    with pytest.raises(ValueError, match="top_k"):
        model.generate(idx[:, :2], 1, top_k=0)
    with pytest.raises(ValueError, match=r"idx must be \[B, T\]"):
        model.generate(idx[0, :2], 1)
    with pytest.raises(ValueError, match="multiple of n_head"):
        GPTConfig(n_embd=10, n_head=3)
    with pytest.raises(ValueError, match=r"\(block_size,\)"):
        models.gpt((3, 32, 32))
