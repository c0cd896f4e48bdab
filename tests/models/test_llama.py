"""webgrad.models.llama, the Llama-style decoder the benchmarks train: PyTorch's layout and parameter count from the
same definition, the same outputs from the same weights, and AdamW steps with PyTorch's losses (replayed on WebGPU,
as the benchmarks run it)."""

import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import models

SMALL = dict(input_shape=(16,), num_classes=50, n_layer=2, n_head=4, n_embd=32)


def twins(device, seed=0):
    torch.manual_seed(seed)
    theirs = models.llama(**SMALL, nn=torch.nn)
    ours = models.llama(**SMALL, device=device)
    ours.load_state_dict({k: wg.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def test_pytorchs_layout_and_parameter_count():
    ours, theirs = models.llama(), models.llama(nn=torch.nn)
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    # 32,000 x 512 twice (embeddings, output), 8 layers of 4 x 512^2 + 3 x 512 x 1,376 (SwiGLU) + 2 x 512, and 512
    per_layer = 4 * 512 ** 2 + 3 * 512 * 1376 + 1024
    assert sum(p.numel() for p in ours.parameters()) == 2 * 32000 * 512 + 8 * per_layer + 512
    assert "layers.0.feed_forward.w3.weight" in ours.state_dict() and "cos" not in ours.state_dict()


def test_same_outputs_from_the_same_weights(device):
    ours, theirs = twins(device)
    idx = np.random.default_rng(0).integers(0, 50, (3, 16))
    with wg.no_grad(), torch.no_grad():
        logits, loss = ours(wg.tensor(idx, device=device), wg.tensor(idx, device=device))
        ref_logits, ref_loss = theirs(torch.from_numpy(idx), torch.from_numpy(idx))
    np.testing.assert_allclose(logits.cpu().numpy(), ref_logits.numpy(), rtol=1e-4, atol=1e-5)
    assert abs(loss.item() - ref_loss.item()) < 1e-5


def test_adamw_steps_match_pytorchs_losses(device):
    ours, theirs = twins(device)
    step = models.train_step(lambda idx: idx, wg.optim.AdamW(ours.parameters(), lr=3e-3),
                             lambda idx, targets: ours(idx, targets)[1], replay=device == "webgpu")
    ref = models.train_step(lambda idx: idx, torch.optim.AdamW(theirs.parameters(), lr=3e-3),
                            lambda idx, targets: theirs(idx, targets)[1], lib=torch)
    rng = np.random.default_rng(1)
    losses, ref_losses = [], []
    for _ in range(12):
        b = rng.integers(0, 50, (4, 17)) % 7  # a small alphabet: something to learn in a few steps
        x, y = np.ascontiguousarray(b[:, :-1]), np.ascontiguousarray(b[:, 1:])
        losses.append(step(wg.tensor(x, device=device), wg.tensor(y, device=device)).item())
        ref_losses.append(ref(torch.from_numpy(x), torch.from_numpy(y)).item())
    assert ref_losses[-1] < ref_losses[0] - 0.5
    np.testing.assert_allclose(losses, ref_losses, rtol=0, atol=1e-4)


def test_bad_shapes_say_what_is_wrong():
    with pytest.raises(ValueError, match="block_size"):
        models.llama(input_shape=(16, 2))
    with pytest.raises(ValueError, match="even width"):
        models.llama(n_embd=36, n_head=4)  # heads of 9
    with pytest.raises(ValueError, match="longer than block_size"):
        models.llama(**SMALL)(wg.zeros(1, 17, dtype=wg.int64))
