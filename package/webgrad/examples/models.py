"""The models and the training step, defined once for the example script, the browser dashboard
(webgrad.apps.mnist), the benchmarks and the notebooks.

MODELS are the two MNIST models of the reference recipe (an MLP 784-128-10 and a small CNN); SCALE_MODELS
are the CIFAR-shaped models of the scale benchmarks (a wide MLP and ResNet-18), TRANSFORMER_MODELS its
sequence model (one transformer encoder block with a classification head); CifarResNet is the
ResNet-8/20 family of the CIFAR datasets' tests. The MNIST and scale builders take the `nn` namespace to
build with (webgrad.nn by default): `resnet18(nn=torch.nn)` builds the same layout in PyTorch, so the
benchmarks compare like with like and a checkpoint moves between the two by name.
"""

import webgrad.nn as nn
import webgrad.nn.functional as F


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


class CifarBasicBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN plus the shortcut (a 1x1 conv + BN where the shape changes), then ReLU."""

    def __init__(self, inputs, outputs, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.shortcut = nn.Sequential()
        if stride != 1 or inputs != outputs:
            self.shortcut = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(outputs))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class CifarResNet(nn.Module):
    """The CIFAR ResNets of He et al. (2016, section 4.2): a 3x3 conv, three stages of (depth - 2) / 6 basic
    blocks at widths w, 2w, 4w (stride 2 entering the last two), global average pooling, one linear layer.
    Shortcuts are projections (option B). Attribute names make the state_dict load into the same
    architecture written in PyTorch."""

    def __init__(self, depth=20, num_classes=10, width=16, in_channels=3):
        super().__init__()
        if depth < 8 or (depth - 2) % 6:
            raise ValueError(f"a CIFAR ResNet has depth 6n + 2 (8, 14, 20, 32, 44, 56, 110), got {depth}")
        blocks = (depth - 2) // 6
        self.conv1 = nn.Conv2d(in_channels, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        stages, inputs = [], width
        for k, stride in enumerate((1, 2, 2)):
            outputs = width * 2 ** k
            layers = []
            for b in range(blocks):
                layers.append(CifarBasicBlock(inputs, outputs, stride if b == 0 else 1))
                inputs = outputs
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3 = stages
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inputs, num_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(self.pool(x).flatten(1))


def resnet_cifar(depth=8, num_classes=10, width=16):
    """A CIFAR ResNet: depth 8 (ResNet-8) by default, 20 for ResNet-20."""
    return CifarResNet(depth, num_classes, width)


def widemlp(nn=nn):
    """3072-4096-ReLU-4096-ReLU-10 on 3x32x32 inputs: large matmuls at small batch (M = batch)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(3072, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                         nn.Linear(4096, 10))


def resnet18(nn=nn, num_classes=10):
    """ResNet-18, CIFAR variant: a 3x3 stride-1 stem with no max-pool, four stages of two BasicBlocks
    (64-128-256-512 channels, stride 2 from the second stage on), BatchNorm after every convolution,
    global average pooling and one linear layer; 3x32x32 inputs. Submodule names follow torchvision's
    ResNet (conv1, bn1, layer1..layer4, fc; a block's downsample is a Sequential of conv and bn)."""

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                                nn.BatchNorm2d(cout))

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            identity = x if self.downsample is None else self.downsample(x)
            return self.relu(out + identity)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 3, stride=1, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU()
            cin, stages = 64, []
            for i, cout in enumerate((64, 128, 256, 512)):
                stride = 1 if i == 0 else 2
                stages.append(nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
                cin = cout
            self.layer1, self.layer2, self.layer3, self.layer4 = stages
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.flatten = nn.Flatten()
            self.fc = nn.Linear(512, num_classes)

        def forward(self, x):
            x = self.relu(self.bn1(self.conv1(x)))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(self.flatten(self.avgpool(x)))

    return ResNet()


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
