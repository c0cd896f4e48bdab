"""webgrad.as_torch(): PyTorch scripts run unchanged on webgrad.

After ``import webgrad; webgrad.as_torch()``, ``import torch``, ``import torch.nn as nn``,
``import torch.nn.functional as F``, ``from torch.utils.data import DataLoader``, ``import torch.optim as
optim``, ``from torch.optim.lr_scheduler import StepLR`` and the like give webgrad's modules: a tutorial
pasted into a notebook cell trains on WebGPU (in Pyodide, where no real torch exists) or on webgrad's CPU
backend. It works by registering module aliases in ``sys.modules``; nothing is patched.

Where webgrad has no CPU device (Pyodide without NumPy), tensors a script makes "on the CPU" are made on
WebGPU instead: as_torch() sets the default device to "webgpu" there, so ``torch.randn(...)`` then
``.to(device)`` work as written.

Not covered: torchvision, torchaudio and torchtext are separate libraries (use ``webgrad.datasets`` and
``webgrad.transforms``: MNIST, CIFAR-10/100, ImageFolder, GPU augmentation); CUDA-only calls answer as on
a machine without CUDA (``torch.cuda.is_available()`` is False; ``torch.accelerator`` is WebGPU).
"""

import sys

# torch's module name -> webgrad's module (imported on demand: only what webgrad has)
ALIASES = {
    "torch": "webgrad",
    "torch.nn": "webgrad.nn",
    "torch.nn.functional": "webgrad.nn.functional",
    "torch.nn.init": "webgrad.nn.init",
    "torch.nn.utils": "webgrad.nn.utils",
    "torch.optim": "webgrad.optim",
    "torch.optim.lr_scheduler": "webgrad.optim.lr_scheduler",
    "torch.utils": "webgrad.utils",
    "torch.utils.data": "webgrad.utils.data",
    "torch.autograd": "webgrad.autograd",
    "torch.amp": "webgrad.amp",
    "torch.cuda": "webgrad.cuda",
    "torch.backends": "webgrad.backends",
    "torch.backends.mps": "webgrad.backends.mps",
    "torch.backends.cudnn": "webgrad.backends.cudnn",
    "torch.accelerator": "webgrad.accelerator",
    "torch.distributions": "webgrad.distributions",
}


def as_torch():
    """Make ``import torch`` (and its submodules in ALIASES) resolve to webgrad; returns webgrad.

    Refuses where the real torch is already imported: two libraries under one name would mix tensors
    silently. Calling it again is harmless."""
    import importlib
    import importlib.util

    current = sys.modules.get("torch")
    webgrad = importlib.import_module("webgrad")
    if current is not None and current is not webgrad:
        raise RuntimeError(
            "webgrad.as_torch(): the real torch is already imported in this process, so 'import torch' cannot "
            "mean webgrad. Call webgrad.as_torch() before anything imports torch (in a fresh interpreter or "
            "kernel), or use webgrad directly: import webgrad as torch")
    for name, target in ALIASES.items():
        try:
            sys.modules[name] = importlib.import_module(target)
        except ImportError:  # a part webgrad does not have (yet): `import torch.X` then fails as it should
            continue
    if importlib.util.find_spec("numpy") is None and webgrad.get_default_device().type == "cpu":
        webgrad.set_default_device("webgpu")  # no CPU device without NumPy: "CPU" tensors live on the GPU
    return webgrad
