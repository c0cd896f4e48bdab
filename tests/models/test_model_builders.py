"""webgrad.models' builders and registry: every registered model has PyTorch's state_dict layout (built with
torch.nn from the same builder, and, for the MLP and the CNN, written out here in plain PyTorch), parameter
counts of the networks they reproduce, the output shape its input shape and class count ask for, and a
state_dict that loads into the PyTorch network (through safetensors, as the dashboard's exports do) and
gives webgrad's outputs there."""

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import webgrad as wg
from webgrad import models


def layout(model):
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def count(model):
    return sum(p.numel() for p in model.parameters())


def torch_mlp(features, classes):
    nn = torch.nn
    return nn.Sequential(nn.Flatten(), nn.Linear(features, 128), nn.ReLU(), nn.Linear(128, classes))


def torch_cnn(c, h, w, classes):
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(c, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * (h // 4) * (w // 4), classes))


# torchvision's resnet18(num_classes=10) has 11,181,642 parameters; the CIFAR variant's 3x3 stem holds
# 64 x 3 x 9 weights where its 7x7 one holds 64 x 3 x 49: 7,680 fewer. ResNet-20 with projection shortcuts
# (option B): the paper's 0.27M.
PARAMETERS = {"mlp": 101_770, "cnn": 20_490, "widemlp": 29_409_290, "resnet8": 78_042, "resnet20": 272_474,
              "resnet18": 11_181_642 - 7_680, "transformer": 792_330,
              # nanoGPT's Shakespeare-character model (65 symbols, 256 positions, 6 x 384): its 10.67M + wpe's 98,304
              "gpt": 10_770_816,
              # 32,000 x 512 embeddings and output, 8 layers of attention (4 x 512^2), SwiGLU (3 x 512 x 1,376), norms
              "llama": 58_073_600}


def test_registry_lists_the_models_and_their_input_shapes():
    assert models.list_models() == sorted(PARAMETERS)
    assert set(models.MODELS) == set(models.INPUT_SHAPES) == set(PARAMETERS)
    assert models.INPUT_SHAPES["mlp"] == models.INPUT_SHAPES["cnn"] == (1, 28, 28)
    assert models.INPUT_SHAPES["resnet18"] == models.INPUT_SHAPES["widemlp"] == (3, 32, 32)
    assert models.INPUT_SHAPES["transformer"] == (128, 256)
    assert models.MODELS["cnn"] is models.cnn


@pytest.mark.parametrize("name", sorted(PARAMETERS))
def test_same_layout_and_parameter_count_as_pytorchs(name):
    ours, theirs = models.get_model(name), models.get_model(name, nn=torch.nn)
    assert isinstance(theirs, torch.nn.Module)
    assert layout(ours) == layout(theirs)
    assert count(ours) == count(theirs) == PARAMETERS[name]


@pytest.mark.parametrize("shape,classes", [((1, 28, 28), 10), ((3, 32, 32), 10), ((3, 20, 24), 5), ((1, 4, 4), 2)])
def test_mlp_and_cnn_are_the_plain_pytorch_networks(shape, classes):
    c, h, w = shape
    assert layout(models.mlp(shape, classes)) == layout(torch_mlp(c * h * w, classes))
    assert layout(models.cnn(shape, classes)) == layout(torch_cnn(c, h, w, classes))


@pytest.mark.parametrize("name,shape,classes", [
    ("mlp", (3, 32, 32), 7), ("cnn", (3, 20, 24), 5), ("cnn", (1, 28, 28), 10), ("resnet8", (1, 28, 28), 3),
    ("resnet20", (3, 12, 12), 4), ("resnet18", (3, 16, 16), 5), ("transformer", (8, 32), 4),
])
def test_output_shape_follows_input_shape_and_classes(name, shape, classes):
    options = {"dim_feedforward": 64} if name == "transformer" else {}
    model = models.get_model(name, input_shape=shape, num_classes=classes, **options).eval()
    with wg.no_grad():
        assert model(wg.zeros(2, *shape)).shape == (2, classes)


def test_mlp_hidden_widths():
    model = models.mlp((2, 3), 4, hidden=(8, 6))
    assert layout(model) == {"1.weight": (8, 6), "1.bias": (8,), "3.weight": (6, 8), "3.bias": (6,),
                             "5.weight": (4, 6), "5.bias": (4,)}
    assert layout(models.widemlp()) == layout(models.mlp((3, 32, 32), 10, hidden=(4096, 4096)))


def test_parameters_made_on_the_device(device):
    for name in ("mlp", "cnn", "resnet8"):
        model = models.get_model(name, device=device)
        assert {p.device.type for p in model.parameters()} == {device}


@pytest.mark.parametrize("name,shape,classes", [
    ("mlp", (3, 32, 32), 10), ("cnn", (3, 32, 32), 100), ("cnn", (1, 28, 28), 10), ("resnet8", (1, 28, 28), 10),
    ("resnet18", (3, 32, 32), 10), ("transformer", (8, 32), 3),
])
def test_state_dict_loads_into_pytorch_through_safetensors(name, shape, classes, device, tmp_path):
    """What the dashboard's Export writes loads, strictly and by name, into the PyTorch network: the same
    outputs in eval mode."""
    options = {"dim_feedforward": 64} if name == "transformer" else {}
    ours = models.get_model(name, input_shape=shape, num_classes=classes, device=device, **options).eval()
    path = tmp_path / f"{name}.safetensors"
    wg.save(ours.state_dict(), str(path))
    theirs = models.get_model(name, input_shape=shape, num_classes=classes, nn=torch.nn, **options).eval()
    theirs.load_state_dict(load_file(str(path)), strict=True)
    x = np.random.default_rng(0).standard_normal((2, *shape)).astype(np.float32)
    with wg.no_grad(), torch.no_grad():
        np.testing.assert_allclose(ours(wg.tensor(x, device=device)).numpy(), theirs(torch.from_numpy(x)).numpy(),
                                   rtol=1e-4, atol=1e-5)


def test_pytorch_state_dict_loads_into_webgrad():
    torch.manual_seed(0)
    theirs = models.cnn((3, 32, 32), 10, nn=torch.nn).eval()
    ours = models.cnn((3, 32, 32), 10)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    x = torch.rand(2, 3, 32, 32)
    with wg.no_grad(), torch.no_grad():
        np.testing.assert_allclose(ours.eval()(wg.tensor(x.numpy())).numpy(), theirs(x).numpy(), rtol=1e-5, atol=1e-6)


def test_same_seed_same_weights():
    wg.manual_seed(3)
    a = models.cnn((3, 16, 16), 4)
    wg.manual_seed(3)
    b = models.get_model("cnn", input_shape=(3, 16, 16), num_classes=4)
    assert all(np.array_equal(v.numpy(), b.state_dict()[k].numpy()) for k, v in a.state_dict().items())


def test_bad_names_and_shapes_say_what_is_wrong():
    with pytest.raises(ValueError, match="unknown model 'vgg'.*resnet18"):
        models.get_model("vgg")
    with pytest.raises(ValueError, match="at least 4x4"):
        models.cnn((1, 3, 28))
    with pytest.raises(ValueError, match=r"\(channels, height, width\)"):
        models.cnn((28, 28))
    with pytest.raises(ValueError, match=r"\(channels, height, width\)"):
        models.resnet18((3, 0, 32))
    with pytest.raises(ValueError, match="num_classes"):
        models.mlp(num_classes=0)
    with pytest.raises(ValueError, match=r"\(sequence, d_model\)"):
        models.transformer((3, 32, 32))
    with pytest.raises(ValueError, match="registered already"):
        models.register("cnn", (1, 28, 28))(lambda **config: None)
