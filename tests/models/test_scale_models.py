"""The benchmark's scale models (webgrad.examples.models) built in webgrad and in PyTorch from one
definition: same parameter names and shapes, and ResNet-18 (CIFAR variant) matching PyTorch through a
training step from the same weights: forward (BatchNorm in training mode), loss, every gradient, the SGD
momentum update and BatchNorm's running statistics. Batch 2 of 3x16x16 images keeps it fast (4 stages
still take the maps down to 2x2)."""

import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad.examples.models import INPUT_SHAPES, SCALE_MODELS, benchmark_optimizer, resnet18, training_step

from helpers import DEVICES


@pytest.mark.parametrize("name", sorted(SCALE_MODELS))
def test_same_layout_as_torch(name):
    ours, ref = SCALE_MODELS[name](), SCALE_MODELS[name](nn=torch.nn)
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
           {k: tuple(v.shape) for k, v in ref.state_dict().items()}
    assert INPUT_SHAPES[name] == (3, 32, 32)


@pytest.mark.parametrize("device", DEVICES)
def test_resnet18_training_step_matches_torch(device):
    # Seed 5: its ReLU inputs keep at least 1.2e-5 from the kink. Seed 0 put one at 1.1e-7 (layer1.0's), where
    # float32 rounding picks the side: a change of summation order in batch norm's statistics flipped it and
    # moved layer1.0.conv1's weight gradient by 3%.
    torch.manual_seed(5)
    ref = resnet18(nn=torch.nn).double()
    ours = resnet18()
    ours.load_state_dict({k: v.float() for k, v in ref.state_dict().items()})
    ours = ours.to(device)
    x = torch.rand(2, 3, 16, 16, dtype=torch.float64)
    y = torch.tensor([3, 7])

    gaps = []  # how far ReLU inputs keep from the kink
    hooks = [m.register_forward_hook(lambda mod, inp, out: gaps.append(inp[0].abs().min().item()))
             for m in ref.modules() if isinstance(m, torch.nn.ReLU)]
    ref_opt = benchmark_optimizer("resnet18", ref.parameters(), torch.optim)
    ref_loss = torch.nn.functional.cross_entropy(ref(x), y)
    for h in hooks:
        h.remove()
    assert min(gaps) > 5e-6, "a ReLU input sits at its kink: the comparison would measure which side float32 picks"
    ref_opt.zero_grad()
    ref_loss.backward()
    grads = {k: p.grad.clone() for k, p in ref.named_parameters()}
    ref_opt.step()

    step = training_step(ours, benchmark_optimizer("resnet18", ours.parameters(), wg.optim))
    params = dict(ours.named_parameters())
    loss = step(wg.tensor(x.float().numpy(), device=device), wg.tensor(y.numpy(), device=device))

    assert abs(loss.item() - ref_loss.item()) < 1e-4
    for k, g in grads.items():  # float32 against float64: gradients through 20 layers
        np.testing.assert_allclose(params[k].grad.numpy(), g.numpy(), rtol=2e-3, atol=2e-4, err_msg=k)
    for k, v in ref.state_dict().items():  # updated weights, running means and variances
        np.testing.assert_allclose(ours.state_dict()[k].numpy(), v.numpy(), rtol=1e-3, atol=1e-5, err_msg=k)
