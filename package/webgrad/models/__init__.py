"""webgrad.models: the models the dashboard, the benchmarks and the examples train (torchvision.models'
role), and the training step they share.

Each builder takes the shape of one sample (`input_shape`, channels first) and the class count, and builds
with webgrad.nn or, through `nn=torch.nn`, the same network in PyTorch, so a state_dict moves between the
two by name:

    model = webgrad.models.cnn((3, 32, 32), num_classes=10, device="webgpu")   # the MNIST CNN on CIFAR
    ref = webgrad.models.cnn((3, 32, 32), num_classes=10, nn=torch.nn)         # the same layers in PyTorch
    ref.load_state_dict(...)                                                    # webgrad's safetensors, by name
    model = webgrad.models.get_model("resnet18", num_classes=100)              # by name (MODELS)
    step = webgrad.models.train_step(model, optimizer, replay=True)             # step(x, y) -> loss

Models by name (MODELS; INPUT_SHAPES holds each one's default sample shape):
  mlp          784-128-10 on 1x28x28 (MNIST); any input size and class count, other hidden widths
  cnn          conv16-pool-conv32-pool-fc on 1x28x28; any image of at least 4x4
  widemlp      3072-4096-4096-10 on 3x32x32 (the scale benchmark's)
  resnet8      CIFAR ResNet-8 (78k parameters), resnet20 ResNet-20 (0.27M)
  resnet18     ResNet-18, CIFAR variant (11M parameters)
  transformer  one transformer encoder block and a classifier over 128 x 256 sequences
  gpt          nanoGPT's decoder (models/gpt.py): 6 layers, width 384, 8 heads over 256 tokens of a 65-symbol
               vocabulary by default (input_shape (block_size,), num_classes the vocabulary); GPT, GPTConfig
  llama        a Llama-style decoder (models/llama.py: RMSNorm, rotary embeddings, SwiGLU, no biases): 8 layers,
               width 512, 8 heads over 256 tokens of a 32,000-token vocabulary by default
A new module registers its builders with registry.register and is imported below.
"""

from .registry import CIFAR_SHAPE, INPUT_SHAPES, MNIST_SHAPE, MODELS, get_model, list_models, register  # noqa: F401
from .mlp import mlp, widemlp  # noqa: F401
from .cnn import cnn  # noqa: F401
from .resnet import (BasicBlock, CifarBasicBlock, CifarResNet, ResNet18, resnet8, resnet18, resnet20,  # noqa: F401
                     resnet_cifar)
from .transformer import transformer  # noqa: F401
from .gpt import GPT, GPTConfig, gpt  # noqa: F401
from .llama import llama  # noqa: F401
from .training import train_step  # noqa: F401

__all__ = ["MODELS", "INPUT_SHAPES", "MNIST_SHAPE", "CIFAR_SHAPE", "get_model", "list_models", "register",
           "mlp", "widemlp", "cnn", "BasicBlock", "CifarBasicBlock", "CifarResNet", "ResNet18", "resnet8", "resnet18",
           "resnet20", "resnet_cifar", "transformer", "GPT", "GPTConfig", "gpt", "llama",
           "train_step"]
