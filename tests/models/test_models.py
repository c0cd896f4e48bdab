"""webgrad.models: the CIFAR ResNets' state_dicts load, by name, into the same networks written in PyTorch,
and a briefly trained ResNet-8 saved as safetensors gives PyTorch's outputs there."""

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import webgrad as wg
import webgrad.models as models
from webgrad.examples import models as examples

from helpers import DEVICES


def shapes(model):
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


@pytest.mark.parametrize("build,params", [(models.resnet8, 78_042), (models.resnet20, 272_474),
                                          (models.resnet18, 11_173_962)])
def test_names_and_shapes_are_pytorch_s(build, params):
    ours, theirs = build(num_classes=10), build(num_classes=10, nn=torch.nn)
    assert shapes(ours) == {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters()) == params


def test_input_channels_classes_and_sizes():
    model = models.resnet8((1, 28, 28), num_classes=3).eval()
    with wg.no_grad():
        assert model(wg.zeros(2, 1, 28, 28)).shape == (2, 3)  # global pooling: any size of at least 8x8
        assert models.resnet18(num_classes=5).eval()(wg.zeros(1, 3, 16, 16)).shape == (1, 5)
    with pytest.raises(ValueError, match="depth 6n \\+ 2"):
        models.resnet_cifar(10)


def test_examples_keep_their_names():
    assert examples.CifarResNet is models.CifarResNet and examples.CifarBasicBlock is models.CifarBasicBlock
    assert shapes(examples.resnet_cifar(20)) == shapes(models.resnet20())
    assert shapes(examples.resnet18()) == shapes(models.resnet18())
    assert type(examples.resnet18(nn=torch.nn)) is type(models.resnet18(nn=torch.nn))


@pytest.mark.parametrize("device", DEVICES)
def test_trained_resnet8_safetensors_load_into_pytorch(device, tmp_path):
    """A few SGD steps (BatchNorm's running statistics move too), saved with webgrad.save, loaded with
    safetensors.torch into PyTorch's ResNet-8: the same outputs in eval mode."""
    wg.manual_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 3, 32, 32)).astype(np.float32)
    y = rng.integers(0, 10, 8)
    model = models.resnet8(num_classes=10, width=8, device=device)
    opt = wg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    xs, ys = wg.tensor(x, device=device), wg.tensor(y, device=device)
    losses = []
    for _ in range(4):
        loss = wg.nn.functional.cross_entropy(model(xs), ys)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    path = tmp_path / "resnet8.safetensors"
    wg.save(model.state_dict(), str(path))

    ref = models.resnet8(num_classes=10, width=8, nn=torch.nn)
    ref.load_state_dict(load_file(str(path)), strict=True)
    assert not torch.equal(ref.bn1.running_mean, torch.zeros(8))  # the trained statistics came along
    model.eval(), ref.eval()
    test = rng.standard_normal((4, 3, 32, 32)).astype(np.float32)
    with wg.no_grad(), torch.no_grad():
        ours = model(wg.tensor(test, device=device)).numpy()
        theirs = ref(torch.from_numpy(test)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)
