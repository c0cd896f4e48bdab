"""The names this module gave before webgrad.models became the models' home, for the scripts, notebooks and
tests written against it. Nothing is defined here:

  mlp, cnn, widemlp, resnet18, resnet_cifar, CifarResNet, CifarBasicBlock   webgrad.models'
  training_step                                                             webgrad.models.train_step
  MODELS (the MNIST MLP and CNN), SCALE_MODELS, TRANSFORMER_MODELS,
  INPUT_SHAPES, benchmark_optimizer                                         webgrad.bench.recipes'
  transformer(nn, d_model, nhead, dim_feedforward, num_classes)             webgrad.models.transformer with
                                                                            input_shape (128, d_model)
"""

from webgrad import models as _models
from webgrad.bench.recipes import INPUT_SHAPES, SCALE_MODELS, TRANSFORMER_MODELS, benchmark_optimizer  # noqa: F401
from webgrad.bench.recipes import MNIST_MODELS as MODELS  # noqa: F401
from webgrad.models import CifarBasicBlock, CifarResNet, cnn, mlp, resnet18, resnet_cifar, widemlp  # noqa: F401
from webgrad.models import train_step as training_step  # noqa: F401


def transformer(nn=None, d_model=256, nhead=4, dim_feedforward=1024, num_classes=10):
    """webgrad.models.transformer of width `d_model` (its input_shape's last dimension), sequences of 128."""
    return _models.transformer((128, d_model), num_classes, nhead, dim_feedforward, nn=nn)
