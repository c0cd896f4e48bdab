"""The ResNets of CIFAR-sized images, defined once for any `nn` namespace (webgrad.nn or torch.nn): the two
builds have the same submodules under the same names, so their state_dicts are interchangeable.

- CifarResNet(depth): He et al. (2016, section 4.2): a 3x3 conv, three stages of (depth - 2) / 6 basic blocks
  at widths w, 2w, 4w (stride 2 entering the last two), global average pooling, one linear layer; projection
  shortcuts (option B). ResNet-8 and ResNet-20 are depths 8 and 20.
- ResNet18: the CIFAR variant of torchvision's ResNet-18: a 3x3 stride-1 stem with no max-pool, four stages of
  two BasicBlocks (64-128-256-512 channels, stride 2 from the second stage on), global average pooling, one
  linear layer. Names follow torchvision (conv1, bn1, layer1..layer4, fc; a block's downsample is a
  Sequential of conv and bn), so torchvision-style checkpoints of this variant load.
Both pool globally, so any input size of at least 8x8 works (the page trains them on 28x28 MNIST and on
the user's own images at the size they choose): the builders take the input's channels from input_shape.
"""

import webgrad.nn as _webgrad_nn

from .registry import CIFAR_SHAPE, check_classes, image_shape, register

_DEFINED = {}  # id(nn namespace) -> its classes (each namespace's are made once)


def _define(nn):
    """The classes built from `nn` (a namespace with Module, Conv2d, BatchNorm2d, ReLU, Sequential, Linear,
    AdaptiveAvgPool2d, Flatten)."""
    key = id(nn)
    if key in _DEFINED:
        return _DEFINED[key]

    class CifarBasicBlock(nn.Module):
        """conv3x3-BN-ReLU-conv3x3-BN plus the shortcut (a 1x1 conv + BN where the shape changes), then ReLU."""

        def __init__(self, inputs, outputs, stride, device=None):
            super().__init__()
            self.conv1 = nn.Conv2d(inputs, outputs, 3, stride=stride, padding=1, bias=False, device=device)
            self.bn1 = nn.BatchNorm2d(outputs, device=device)
            self.conv2 = nn.Conv2d(outputs, outputs, 3, padding=1, bias=False, device=device)
            self.bn2 = nn.BatchNorm2d(outputs, device=device)
            self.relu = nn.ReLU()  # no parameters: the state_dict is the same with or without it
            self.shortcut = nn.Sequential()
            if stride != 1 or inputs != outputs:
                self.shortcut = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride=stride, bias=False, device=device),
                                              nn.BatchNorm2d(outputs, device=device))

        def forward(self, x):
            y = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(y)) + self.shortcut(x))

    class CifarResNet(nn.Module):
        """The CIFAR ResNet of depth 6n + 2 (see the module's docstring)."""

        def __init__(self, depth=20, num_classes=10, width=16, in_channels=3, device=None):
            super().__init__()
            if depth < 8 or (depth - 2) % 6:
                raise ValueError(f"a CIFAR ResNet has depth 6n + 2 (8, 14, 20, 32, 44, 56, 110), got {depth}")
            blocks = (depth - 2) // 6
            self.conv1 = nn.Conv2d(in_channels, width, 3, padding=1, bias=False, device=device)
            self.bn1 = nn.BatchNorm2d(width, device=device)
            self.relu = nn.ReLU()
            stages, inputs = [], width
            for k, stride in enumerate((1, 2, 2)):
                outputs = width * 2 ** k
                layers = []
                for b in range(blocks):
                    layers.append(CifarBasicBlock(inputs, outputs, stride if b == 0 else 1, device=device))
                    inputs = outputs
                stages.append(nn.Sequential(*layers))
            self.layer1, self.layer2, self.layer3 = stages
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(inputs, num_classes, device=device)

        def forward(self, x):
            x = self.relu(self.bn1(self.conv1(x)))
            x = self.layer3(self.layer2(self.layer1(x)))
            return self.fc(self.pool(x).flatten(1))

    class BasicBlock(nn.Module):
        """torchvision's BasicBlock (downsample is None where the shape does not change)."""

        def __init__(self, cin, cout, stride, device=None):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False, device=device)
            self.bn1 = nn.BatchNorm2d(cout, device=device)
            self.relu = nn.ReLU()
            self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False, device=device)
            self.bn2 = nn.BatchNorm2d(cout, device=device)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False, device=device),
                                                nn.BatchNorm2d(cout, device=device))

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            identity = x if self.downsample is None else self.downsample(x)
            return self.relu(out + identity)

    class ResNet18(nn.Module):
        """ResNet-18, CIFAR variant (see the module's docstring)."""

        def __init__(self, num_classes=10, in_channels=3, device=None):
            super().__init__()
            self.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False, device=device)
            self.bn1 = nn.BatchNorm2d(64, device=device)
            self.relu = nn.ReLU()
            cin, stages = 64, []
            for i, cout in enumerate((64, 128, 256, 512)):
                stride = 1 if i == 0 else 2
                stages.append(nn.Sequential(BasicBlock(cin, cout, stride, device=device),
                                            BasicBlock(cout, cout, 1, device=device)))
                cin = cout
            self.layer1, self.layer2, self.layer3, self.layer4 = stages
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.flatten = nn.Flatten()
            self.fc = nn.Linear(512, num_classes, device=device)

        def forward(self, x):
            x = self.relu(self.bn1(self.conv1(x)))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(self.flatten(self.avgpool(x)))

    defined = _DEFINED[key] = {"CifarBasicBlock": CifarBasicBlock, "CifarResNet": CifarResNet,
                               "BasicBlock": BasicBlock, "ResNet18": ResNet18}
    return defined


_ours = _define(_webgrad_nn)
CifarBasicBlock = _ours["CifarBasicBlock"]
CifarResNet = _ours["CifarResNet"]
BasicBlock = _ours["BasicBlock"]
ResNet18 = _ours["ResNet18"]


def resnet_cifar(depth=8, input_shape=CIFAR_SHAPE, num_classes=10, width=16, device=None, nn=None):
    """A CIFAR ResNet of `depth` (6n + 2) for images of `input_shape` (its channels; it pools globally, so any
    height and width), built with `nn` (webgrad.nn by default; torch.nn for PyTorch's)."""
    c, _, _ = image_shape(input_shape, f"ResNet-{depth}")
    check_classes(num_classes, f"ResNet-{depth}")
    return _define(nn or _webgrad_nn)["CifarResNet"](depth, num_classes, width, c, device=device)


@register("resnet8", CIFAR_SHAPE)
def resnet8(input_shape=CIFAR_SHAPE, num_classes=10, width=16, device=None, nn=None):
    """ResNet-8, CIFAR style: one basic block per stage (78k parameters at width 16)."""
    return resnet_cifar(8, input_shape, num_classes, width, device, nn)


@register("resnet20", CIFAR_SHAPE)
def resnet20(input_shape=CIFAR_SHAPE, num_classes=10, width=16, device=None, nn=None):
    """ResNet-20, CIFAR style: three basic blocks per stage (0.27M parameters at width 16)."""
    return resnet_cifar(20, input_shape, num_classes, width, device, nn)


@register("resnet18", CIFAR_SHAPE)
def resnet18(input_shape=CIFAR_SHAPE, num_classes=10, device=None, nn=None):
    """ResNet-18, CIFAR variant (11M parameters)."""
    c, _, _ = image_shape(input_shape, "ResNet-18")
    check_classes(num_classes, "ResNet-18")
    return _define(nn or _webgrad_nn)["ResNet18"](num_classes, c, device=device)
