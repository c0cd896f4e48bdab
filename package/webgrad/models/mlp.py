"""Multilayer perceptrons: Flatten, then Linear-ReLU per hidden width, then a Linear to the classes, as one
nn.Sequential (state_dict names "1.weight", "1.bias", "3.weight", ...: the layers' indices, Flatten being 0).

- mlp: 784-128-10 on MNIST's 1x28x28 digits (the reference recipe), the input size and class count taken
  from its arguments on other data.
- widemlp: 3072-4096-4096-10 on CIFAR-shaped 3x32x32 inputs, the scale benchmark's (large matmuls at small
  batch).
"""

import webgrad.nn as _webgrad_nn

from .registry import CIFAR_SHAPE, MNIST_SHAPE, check_classes, register


@register("mlp", MNIST_SHAPE)
def mlp(input_shape=MNIST_SHAPE, num_classes=10, hidden=(128,), device=None, nn=None):
    """An MLP taking samples of `input_shape` (flattened) through Linear-ReLU layers of the `hidden` widths to
    `num_classes` logits; its parameters made on `device` (in Pyodide there is no CPU device to make them on
    and then move)."""
    nn = nn or _webgrad_nn
    check_classes(num_classes, "mlp")
    width = 1
    for d in input_shape:
        if not isinstance(d, int) or isinstance(d, bool) or d < 1:
            raise ValueError(f"mlp: input_shape must hold positive whole numbers, got {input_shape!r}")
        width *= d
    layers = [nn.Flatten()]
    for h in hidden:
        layers += [nn.Linear(width, h, device=device), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, num_classes, device=device))
    return nn.Sequential(*layers)


@register("widemlp", CIFAR_SHAPE)
def widemlp(input_shape=CIFAR_SHAPE, num_classes=10, device=None, nn=None):
    """3072-4096-ReLU-4096-ReLU-10 on 3x32x32 inputs (mlp with two hidden layers of 4096)."""
    return mlp(input_shape, num_classes, hidden=(4096, 4096), device=device, nn=nn)
