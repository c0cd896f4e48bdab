"""The models and the training step, defined once for the example script, the browser dashboard
(webgrad.apps.mnist), the benchmarks and the notebooks.

MODELS are the two MNIST models of the reference recipe (an MLP 784-128-10 and a small CNN); SCALE_MODELS
are the CIFAR-shaped models of the scale benchmarks (a wide MLP and ResNet-18), TRANSFORMER_MODELS its
sequence model (one transformer encoder block with a classification head); CifarResNet is the
ResNet-8/20 family of the CIFAR datasets' tests (the ResNets live in webgrad.models; their names stay
here for the scripts that use them). The MNIST and scale builders take the `nn` namespace to
build with (webgrad.nn by default): `resnet18(nn=torch.nn)` builds the same layout in PyTorch, so the
benchmarks compare like with like and a checkpoint moves between the two by name.
"""

import webgrad.models as _models
import webgrad.nn as nn
import webgrad.nn.functional as F
from webgrad.models import CifarBasicBlock, CifarResNet  # noqa: F401  (their home is webgrad.models)


def mlp(device=None, nn=nn):
    """784-128-ReLU-10, its parameters made on `device` (in Pyodide there is no CPU device to make them on
    and then move)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 128, device=device), nn.ReLU(),
                         nn.Linear(128, 10, device=device))


def cnn(device=None, nn=nn):
    """conv3x3(16)-ReLU-maxpool2-conv3x3(32)-ReLU-maxpool2-fc(1568 -> 10), its parameters made on `device`."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1, device=device), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1, device=device), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 10, device=device),
    )


def resnet_cifar(depth=8, num_classes=10, width=16):
    """A CIFAR ResNet (webgrad.models.CifarResNet): depth 8 (ResNet-8) by default, 20 for ResNet-20."""
    return CifarResNet(depth, num_classes, width)


def widemlp(nn=nn):
    """3072-4096-ReLU-4096-ReLU-10 on 3x32x32 inputs: large matmuls at small batch (M = batch)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(3072, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                         nn.Linear(4096, 10))


def resnet18(nn=nn, num_classes=10):
    """ResNet-18, CIFAR variant (webgrad.models.resnet18), built with `nn` (webgrad.nn or torch.nn)."""
    return _models.resnet18(num_classes, nn=nn)


def transformer(nn=nn, d_model=256, nhead=4, dim_feedforward=1024, num_classes=10):
    """One transformer encoder block (post-norm, ReLU, PyTorch's nn.TransformerEncoderLayer with
    batch_first) of d_model 256, 4 heads and a 4 x d_model feed-forward, then the mean over the sequence
    and a linear classifier; inputs (sequence 128, d_model) per sample. Dropout 0: the benchmark times the
    block's arithmetic, and the two libraries then compute the same function from the same weights."""

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout=0.0,
                                                    batch_first=True)
            self.fc = nn.Linear(d_model, num_classes)

        def forward(self, x):
            return self.fc(self.block(x).mean(1))

    return Encoder()


MODELS = {"mlp": mlp, "cnn": cnn}
SCALE_MODELS = {"widemlp": widemlp, "resnet18": resnet18}
TRANSFORMER_MODELS = {"transformer": transformer}

# Each model's input (one sample, channels first) and its benchmark optimizer: the MNIST recipe trains
# with Adam lr 1e-3, the scale models with SGD lr 0.01, momentum 0.9 (the usual ResNet-on-CIFAR recipe).
# The transformer block trains as the scale models do.
INPUT_SHAPES = {"mlp": (1, 28, 28), "cnn": (1, 28, 28), "widemlp": (3, 32, 32), "resnet18": (3, 32, 32),
                "transformer": (128, 256)}


def benchmark_optimizer(model_name, params, optim):
    """The optimizer of `model_name`'s benchmark recipe, from `optim` (webgrad.optim or torch.optim)."""
    if model_name in SCALE_MODELS or model_name in TRANSFORMER_MODELS:
        return optim.SGD(params, lr=0.01, momentum=0.9)
    return optim.Adam(params, lr=1e-3)


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
