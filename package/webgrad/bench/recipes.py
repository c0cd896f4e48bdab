"""What the benchmarks train: the models (webgrad.models' builders, at their default input shapes and 10
classes), grouped as the tables group them, and each one's optimizer.

  MNIST_MODELS        the MLP 784-128-10 and the small CNN of the reference recipe: Adam, lr 1e-3
  SCALE_MODELS        the wide MLP 3072-4096-4096-10 and ResNet-18 (CIFAR variant) on 3x32x32: SGD, lr 0.01,
                      momentum 0.9 (the usual ResNet-on-CIFAR recipe)
  TRANSFORMER_MODELS  one transformer encoder block over 128 x 256 sequences: trains as the scale models do

Each is a name -> builder table; a builder called with no argument builds webgrad's model, with nn=torch.nn
PyTorch's, the same layers under the same names. INPUT_SHAPES is one sample's shape per model.
"""

from webgrad import models

MNIST_MODELS = {name: models.MODELS[name] for name in ("mlp", "cnn")}
SCALE_MODELS = {name: models.MODELS[name] for name in ("widemlp", "resnet18")}
TRANSFORMER_MODELS = {"transformer": models.MODELS["transformer"]}
INPUT_SHAPES = {name: models.INPUT_SHAPES[name] for name in (*MNIST_MODELS, *SCALE_MODELS, *TRANSFORMER_MODELS)}


def benchmark_optimizer(model_name, params, optim):
    """The optimizer of `model_name`'s benchmark recipe, from `optim` (webgrad.optim or torch.optim)."""
    if model_name in SCALE_MODELS or model_name in TRANSFORMER_MODELS:
        return optim.SGD(params, lr=0.01, momentum=0.9)
    return optim.Adam(params, lr=1e-3)
