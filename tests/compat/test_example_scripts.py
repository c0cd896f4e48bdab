"""PyTorch training scripts run unchanged on webgrad (issue 13): scripts with the structure of
pytorch/examples mnist/main.py, the quickstart tutorial and time_sequence_prediction (tests/scripts/, with
PyTorch's own import lines: `import torch`, `import torch.nn as nn`, ...) run after `webgrad.as_torch()`
in a fresh interpreter, on tiny synthetic data, through device discovery (CPU or the WebGPU accelerator);
their saved checkpoints load in the real torch here."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import webgrad as wg

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)  # torchvision_standin.py
SCRIPTS = os.path.join(HERE, "scripts")


class _Run:
    """What a script printed and returned, run in a fresh interpreter after webgrad.as_torch()."""

    def __init__(self, call, cwd):
        code = (
            "import json, sys\n"
            "import webgrad\n"
            "torch = webgrad.as_torch()\n"
            f"sys.path[:0] = [{SCRIPTS!r}, {TESTS!r}]\n"
            "import torch as imported\n"
            "assert imported is webgrad, imported\n"
            f"result = {call}\n"
            "def plain(v):\n"
            "    if isinstance(v, (list, tuple)): return [plain(x) for x in v]\n"
            "    if hasattr(v, 'tolist'): return {'array': v.tolist(), 'dtype': str(v.dtype)}\n"
            "    return v\n"
            "print('@@RESULT@@' + json.dumps(plain(result)))\n"
        )
        env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(TESTS), "package"))
        proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, env=env,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr[-4000:]
        self.out, _, result = proc.stdout.partition("@@RESULT@@")
        self.result = json.loads(result)


def test_as_torch_refuses_where_the_real_torch_is_imported():
    assert sys.modules["torch"] is torch  # the real one, imported by this test module
    with pytest.raises(RuntimeError, match="the real torch is already imported"):
        wg.as_torch()
    assert sys.modules["torch"] is torch


@pytest.mark.parametrize("accel", [False, True], ids=["cpu", "accelerator"])
def test_mnist_main_runs_unchanged(accel, tmp_path):
    if accel and not wg.accelerator.is_available():
        pytest.skip("no WebGPU adapter")
    argv = ["--save-model", "--epochs", "2"] + ([] if accel else ["--no-accel"])
    run = _Run(f"__import__('mnist_main').main({argv!r})", tmp_path)
    out, losses = run.out, run.result
    assert f"Using device: {'webgpu' if accel else 'cpu'}" in out
    assert "Train Epoch: 2 [16/24 (67%)]\tLoss: " in out and "Test set: Average loss: " in out
    assert all(np.isfinite(losses)) and losses[-1] < 2.3  # below chance level (ln 10 = 2.30) after 2 epochs
    # the checkpoint is PyTorch's: torch.load reads it and torch's own Net takes the weights
    state = torch.load(tmp_path / "mnist_cnn.pt", weights_only=True)
    assert list(state) == ["conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc1.weight", "fc1.bias",
                           "fc2.weight", "fc2.bias"]
    assert tuple(state["fc1.weight"].shape) == (128, 9216)


@pytest.mark.parametrize("accel", [False, True], ids=["cpu", "accelerator"])
def test_quickstart_runs_unchanged(accel, tmp_path):
    if accel and not wg.accelerator.is_available():
        pytest.skip("no WebGPU adapter")
    run = _Run(f"__import__('quickstart').main(use_accelerator={accel})", tmp_path)
    out, losses = run.out, run.result
    assert f"Using {'webgpu' if accel else 'cpu'} device" in out
    assert "Shape of X [N, C, H, W]: torch.Size([8, 1, 28, 28])" in out and "Predicted: " in out  # (as_torch)
    assert "loss: " in out and "[   24/   24]" in out and "Accuracy: " in out
    assert losses[-1] < losses[0]  # it learns
    assert list(torch.load(tmp_path / "model.pth", weights_only=True)) == [
        "linear_relu_stack.0.weight", "linear_relu_stack.0.bias", "linear_relu_stack.2.weight",
        "linear_relu_stack.2.bias", "linear_relu_stack.4.weight", "linear_relu_stack.4.bias"]


def test_time_sequence_prediction_runs_unchanged(tmp_path):
    run = _Run("__import__('time_sequence').main()", tmp_path)
    out, (test_losses, y) = run.out, run.result
    assert "STEP:  1" in out and "test loss:" in out
    assert y["dtype"] == "float64" and np.asarray(y["array"]).shape == (3, 23 + 10)
    assert test_losses[-1] < test_losses[0]  # LBFGS through the unrolled LSTMCells learns
