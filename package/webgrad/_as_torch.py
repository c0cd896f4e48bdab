"""webgrad.as_torch(): PyTorch scripts run unchanged on webgrad.

After ``import webgrad; webgrad.as_torch()``, ``import torch``, ``import torch.nn as nn``,
``import torch.nn.functional as F``, ``from torch.utils.data import DataLoader``, ``import torch.optim as
optim``, ``from torch.optim.lr_scheduler import StepLR`` and the like give webgrad's modules: a tutorial
pasted into a notebook cell trains on WebGPU (in Pyodide, where no real torch exists) or on webgrad's CPU
backend. It works by registering module aliases in ``sys.modules``; nothing is patched.

Where webgrad has no CPU device (Pyodide without NumPy), tensors a script makes "on the CPU" are made on
WebGPU instead: as_torch() sets the default device to "webgpu" there, so ``torch.randn(...)`` then
``.to(device)`` work as written.

``import torchvision`` gives webgrad.vision (torchvision's datasets, transforms, models and utils on webgrad)
where no torchvision is installed, as in the browser; an installed one loads as it is. Not covered: torchaudio and
torchtext. CUDA-only calls answer as on a machine without CUDA (``torch.cuda.is_available()`` is False;
``torch.accelerator`` is WebGPU).

Any other ``torch.X.Y`` resolves to webgrad's module ``webgrad.X.Y`` where there is one (an import hook,
_TorchFinder), and to ModuleNotFoundError where there is none.
"""

import sys

# torch's module name -> webgrad's module (imported on demand: only what webgrad has)
ALIASES = {
    "torch": "webgrad",
    "torch.nn": "webgrad.nn",
    "torch.nn.functional": "webgrad.nn.functional",
    "torch.nn.init": "webgrad.nn.init",
    "torch.nn.modules": "webgrad.nn.modules",
    "torch.nn.parallel": "webgrad.nn.parallel",
    "torch.nn.utils": "webgrad.nn.utils",
    "torch.nn.utils.clip_grad": "webgrad.nn.utils.clip_grad",
    "torch.nn.utils.rnn": "webgrad.nn.utils.rnn",
    "torch.optim": "webgrad.optim",
    "torch.optim.lr_scheduler": "webgrad.optim.lr_scheduler",
    "torch.utils": "webgrad.utils",
    "torch.utils.checkpoint": "webgrad.utils.checkpoint",
    "torch.utils.data": "webgrad.utils.data",
    "torch.utils.data.dataloader": "webgrad.utils.data.dataloader",
    "torch.utils.data.dataset": "webgrad.utils.data.dataset",
    "torch.utils.data.distributed": "webgrad.utils.data.distributed",
    "torch.utils.data.sampler": "webgrad.utils.data.sampler",
    "torch.autograd": "webgrad.autograd",
    "torch.amp": "webgrad.amp",
    "torch.cuda": "webgrad.cuda",
    "torch.cuda.amp": "webgrad.cuda.amp",
    "torch.backends": "webgrad.backends",
    "torch.backends.cuda": "webgrad.backends.cuda",
    "torch.backends.mps": "webgrad.backends.mps",
    "torch.backends.cudnn": "webgrad.backends.cudnn",
    "torch.accelerator": "webgrad.accelerator",
    "torch.distributed": "webgrad.distributed",
    "torch.distributions": "webgrad.distributions",
    "torch.jit": "webgrad.jit",
    "torch.onnx": "webgrad.onnx",
    "torch.special": "webgrad.special",
    "functorch": "webgrad.func.functorch",  # functorch, the package torch.func came from
}



class _TorchFinder:
    """The import hook for the torch.* names ALIASES does not list: `import torch.X.Y` gives the module
    webgrad.X.Y itself (torch.optim.optimizer is webgrad.optim.optimizer, torch.nn.modules.linear is
    webgrad.nn.modules.linear). Without it, Python would find webgrad's file through the aliased package's
    path and load a second copy, whose classes differ from webgrad's (isinstance checks would fail)."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("torch.") or sys.modules.get("torch") is not sys.modules.get("webgrad"):
            return None
        return _alias_spec(fullname, "webgrad" + fullname[len("torch"):])


def _alias_spec(fullname, ours):
    """The spec that makes module `fullname` webgrad's module `ours`, or None where webgrad has no such module
    (the import then fails as it should)."""
    import importlib
    import importlib.util
    try:
        module = importlib.import_module(ours)
    except ModuleNotFoundError as e:
        if e.name is not None and ours.startswith(e.name):
            return None
        raise
    return importlib.util.spec_from_loader(fullname, _Alias(module))


class _Alias:
    """Loader of an alias: the module is webgrad's, already imported; its own __spec__ is kept."""

    def __init__(self, module):
        self.module, self.spec = module, module.__spec__

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        module.__spec__ = self.spec  # (module_from_spec set it to the alias's)


class _VisionFinder:
    """``import torchvision`` (and its submodules) gives webgrad.vision, torchvision's API on webgrad, where no
    torchvision can be found on sys.path (the browser); an installed one is left to load as it is."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torchvision" and not fullname.startswith("torchvision."):
            return None
        import importlib
        import importlib.machinery
        if fullname == "torchvision":
            if importlib.machinery.PathFinder.find_spec(fullname) is not None:
                return None
        elif sys.modules.get("torchvision") is not importlib.import_module("webgrad.vision"):
            return None
        return _alias_spec(fullname, "webgrad.vision" + fullname[len("torchvision"):])


_FINDER = _TorchFinder()
_VISION_FINDER = _VisionFinder()


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
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    if _VISION_FINDER not in sys.meta_path:
        sys.meta_path.insert(1, _VISION_FINDER)
    if importlib.util.find_spec("numpy") is None and webgrad.get_default_device().type == "cpu":
        webgrad.set_default_device("webgpu")  # no CPU device without NumPy: "CPU" tensors live on the GPU
    webgrad.overrides.watch_tensor_likes()  # a script's Tensor-like (no Tensor subclass) takes calls, as torch's
    return webgrad
