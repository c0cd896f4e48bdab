"""The small CNN of the MNIST reference recipe: conv3x3(16)-ReLU-maxpool2-conv3x3(32)-ReLU-maxpool2-Flatten-
Linear, as one nn.Sequential (state_dict names "0.weight", "3.weight", "7.weight" and their biases). On
1x28x28 digits the Linear takes 32 x 7 x 7 = 1568 features; on other images, 32 x (H // 4) x (W // 4).
"""

import webgrad.nn as _webgrad_nn

from .registry import MNIST_SHAPE, check_classes, image_shape, register


@register("cnn", MNIST_SHAPE)
def cnn(input_shape=MNIST_SHAPE, num_classes=10, device=None, nn=None):
    """The CNN for images of `input_shape` (channels, height, width, each side at least 4: it pools twice)
    and `num_classes` classes, its parameters made on `device`."""
    nn = nn or _webgrad_nn
    c, h, w = image_shape(input_shape, "cnn")
    check_classes(num_classes, "cnn")
    if h < 4 or w < 4:
        raise ValueError(f"the CNN pools twice: images of at least 4x4 pixels, got {h}x{w}")
    return nn.Sequential(
        nn.Conv2d(c, 16, 3, padding=1, device=device), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1, device=device), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * (h // 4) * (w // 4), num_classes, device=device),
    )
