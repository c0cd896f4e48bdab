"""PyTorch-style training scripts run unchanged on webgrad (issue 13): the structure of pytorch/examples
mnist/main.py, on tiny synthetic data, through device discovery (CPU or the WebGPU accelerator), and its
saved mnist_cnn.pt loads in the real torch."""

import os
import sys

import numpy as np
import pytest
import torch

import webgrad as wg

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "scripts"))


@pytest.mark.parametrize("accel", [False, True], ids=["cpu", "accelerator"])
def test_mnist_main_runs_unchanged(accel, tmp_path, monkeypatch, capsys):
    import mnist_main
    if accel and not wg.accelerator.is_available():
        pytest.skip("no WebGPU adapter")
    monkeypatch.chdir(tmp_path)
    argv = ["--save-model", "--epochs", "2"] + ([] if accel else ["--no-accel"])
    losses = mnist_main.main(argv)
    out = capsys.readouterr().out
    assert f"Using device: {'webgpu' if accel else 'cpu'}" in out
    assert "Train Epoch: 2 [16/24 (67%)]\tLoss: " in out and "Test set: Average loss: " in out
    assert all(np.isfinite(losses)) and losses[-1] < 2.3  # below chance level (ln 10 = 2.30) after 2 epochs
    # the checkpoint is PyTorch's: torch.load reads it and torch's own Net takes the weights
    state = torch.load(tmp_path / "mnist_cnn.pt", weights_only=True)
    assert list(state) == ["conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc1.weight", "fc1.bias",
                           "fc2.weight", "fc2.bias"]
    assert tuple(state["fc1.weight"].shape) == (128, 9216)


@pytest.mark.parametrize("accel", [False, True], ids=["cpu", "accelerator"])
def test_quickstart_runs_unchanged(accel, tmp_path, monkeypatch, capsys):
    import quickstart
    if accel and not wg.accelerator.is_available():
        pytest.skip("no WebGPU adapter")
    monkeypatch.chdir(tmp_path)
    losses = quickstart.main(use_accelerator=accel)
    out = capsys.readouterr().out
    assert f"Using {'webgpu' if accel else 'cpu'} device" in out
    assert "Shape of X [N, C, H, W]: webgrad.Size([8, 1, 28, 28])" in out and "Predicted: " in out
    assert "loss: " in out and "[   24/   24]" in out and "Accuracy: " in out
    assert losses[-1] < losses[0]  # it learns
    assert list(torch.load(tmp_path / "model.pth", weights_only=True)) == [
        "linear_relu_stack.0.weight", "linear_relu_stack.0.bias", "linear_relu_stack.2.weight",
        "linear_relu_stack.2.bias", "linear_relu_stack.4.weight", "linear_relu_stack.4.bias"]


def test_time_sequence_prediction_runs_unchanged(capsys):
    import time_sequence
    test_losses, y = time_sequence.main()
    out = capsys.readouterr().out
    assert "STEP:  1" in out and "test loss:" in out
    assert y.dtype == np.float64 and y.shape == (3, 23 + 10)
    assert test_losses[-1] < test_losses[0]  # LBFGS through the unrolled LSTMCells learns
