"""webgrad.models: ready-made architectures (torchvision.models' role), built with webgrad.nn or, through
`nn=torch.nn`, as the same network in PyTorch, so a state_dict moves between the two by name.

    model = webgrad.models.resnet8(num_classes=10, device="webgpu")   # CIFAR-style ResNet-8
    ref = webgrad.models.resnet8(num_classes=10, nn=torch.nn)          # the same layers in PyTorch
    ref.load_state_dict(...)                                             # webgrad's safetensors, by name
"""

from .resnet import (BasicBlock, CifarBasicBlock, CifarResNet, ResNet18, resnet8, resnet18, resnet20,  # noqa: F401
                     resnet_cifar)

__all__ = ["BasicBlock", "CifarBasicBlock", "CifarResNet", "ResNet18", "resnet8", "resnet18", "resnet20",
           "resnet_cifar"]
