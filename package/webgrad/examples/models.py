"""The two MNIST models and the training step, defined once for the example script, the browser dashboard
(webgrad.apps.mnist), the benchmarks and the notebooks. Layouts match the same torch.nn.Sequential, so
a checkpoint moves between all of them, and to PyTorch, by name."""

import webgrad.nn as nn
import webgrad.nn.functional as F


def mlp(device=None):
    """784-128-ReLU-10, its parameters made on `device` (in Pyodide there is no CPU device to make them on
    and then move)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 128, device=device), nn.ReLU(),
                         nn.Linear(128, 10, device=device))


def cnn(device=None):
    """conv3x3(16)-ReLU-maxpool2-conv3x3(32)-ReLU-maxpool2-fc(1568 -> 10), its parameters made on `device`."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1, device=device), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1, device=device), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 10, device=device),
    )


MODELS = {"mlp": mlp, "cnn": cnn}


def training_step(model, optimizer):
    """step(x, y) -> loss: one cross-entropy training step of `model` (forward, backward, update), the
    function the example, the benchmarks and webgrad.replayable share."""
    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss
    return step
