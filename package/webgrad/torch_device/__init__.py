"""``torch.device("webgpu")`` in real PyTorch, natively: tensors live on the GPU through webgrad.

    import torch
    import webgrad.torch_device                      # registers the device (once per process)
    model = Net().to("webgpu")
    x = torch.randn(64, 784, device="webgpu")
    loss = F.cross_entropy(model(x), y.to("webgpu")); loss.backward(); opt.step()
    print(loss.item())                                # the only read-back

Eager ATen ops run on webgrad's kernels with the data resident on the GPU (kernels.py); autograd, the
optimizers (foreach and fused paths), ``state_dict``, ``torch.save``/``torch.load(map_location="webgpu")``,
``.to()``/``.cpu()`` and printing behave as for CUDA tensors. An op with no kernel runs on the CPU with one
warning naming it, or raises with ``set_fallback("error")`` (fallback.py). ``torch.compile(...,
backend="webgrad")`` on webgpu tensors keeps everything on the GPU (webgrad.torch_backend). Data-parallel
training: webgrad.torch_device.distributed.

How the device is made (docs/ARCHITECTURE.md, "The PyTorch device"): PrivateUse1 renamed "webgpu", registered
from Python (PyTorch >= 2.9 lets Python register the device guard and hooks), tensors are plain torch.Tensors
over storages whose data pointers name webgrad storages (storage.py), and kernels are registered with
torch.library. No C++ is built.

WEBGRAD_TORCH_DEVICE=cpu backs the device with webgrad's NumPy backend instead of WebGPU (the torch device is
still called "webgpu"): for tests of the mechanics on a machine without a GPU adapter.
"""

import os
import warnings

_MIN_TORCH = (2, 9)


def _require_torch():
    try:
        import torch
    except ImportError:
        raise ImportError("webgrad.torch_device needs PyTorch: pip install 'torch>=2.9'") from None
    version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if version < _MIN_TORCH or not hasattr(torch._C, "_acc"):
        raise ImportError(f"webgrad.torch_device needs torch >= {'.'.join(map(str, _MIN_TORCH))} (a device "
                          f"registered from Python: torch._C._acc), found {torch.__version__}. "
                          "torch.compile(backend='webgrad') works from torch 2.2 on CPU tensors.")
    return torch


torch = _require_torch()
NAME = "webgpu"


def _rename():
    current = torch._C._get_privateuse1_backend_name()
    if current not in ("privateuseone", NAME):
        raise ImportError(f"webgrad.torch_device: PyTorch's PrivateUse1 device is already registered as "
                          f"{current!r} in this process; one out-of-tree device per process")
    if current != NAME:
        torch.utils.rename_privateuse1_backend(NAME)


_rename()  # before anything names torch.device("webgpu")

import webgrad as wg  # noqa: E402

from . import storage  # noqa: E402


class _Hooks(torch._C._acc.PrivateUse1Hooks):
    def is_available(self):
        return True

    def has_primary_context(self, dev_id):
        return True

    def is_built(self):
        return True


_PRIVATE_USE1 = torch._C._autograd.DeviceType.PrivateUse1


class _Guard(torch._C._acc.DeviceGuard):
    # (PyTorch's C++ asks this for every device and stream query: each autograd node a step makes and runs)
    def type_(self):
        return _PRIVATE_USE1


class _DeviceModule:
    """``torch.webgpu``: what PyTorch asks of a device's module (availability, seeding, RNG state, sync)."""

    @staticmethod
    def is_available():
        return True

    @staticmethod
    def is_initialized():
        return True

    @staticmethod
    def _is_in_bad_fork():
        return False

    @staticmethod
    def device_count():
        return 1

    @staticmethod
    def current_device():
        return 0

    @staticmethod
    def set_device(device):
        pass

    @staticmethod
    def synchronize(device=None):
        storage.webgrad_device().backend.synchronize()

    @staticmethod
    def manual_seed(seed):
        wg.manual_seed(int(seed))

    manual_seed_all = manual_seed

    @staticmethod
    def seed():
        wg.seed()

    seed_all = seed

    @staticmethod
    def initial_seed():
        return wg.initial_seed()

    @staticmethod
    def get_rng_state(device=None):
        seed, offset = wg.get_rng_state()
        return torch.tensor([seed, offset], dtype=torch.int64)

    @staticmethod
    def set_rng_state(state, device=None):
        seed, offset = (int(v) for v in state.tolist())
        wg.set_rng_state((seed, offset))

    @staticmethod
    def get_amp_supported_dtype():
        return [torch.float16]

    @staticmethod
    def is_autocast_enabled():
        return False


def _webgrad_device():
    name = os.environ.get("WEBGRAD_TORCH_DEVICE") or "webgpu"
    dev = wg.device(name)
    if dev.type == "webgpu":
        try:
            import wgpu  # noqa: F401
        except ImportError:
            raise ImportError("the webgpu torch device needs wgpu-py: pip install 'webgrad[native]'") from None
    return dev


def _synchronize_through_accelerator():
    """torch.accelerator.synchronize() waits for webgrad's queue when webgpu is the accelerator. PyTorch's C++ asks
    the device guard, and the Python guard of this PyTorch exposes no synchronizeDevice to implement, so it raised
    "Backend doesn't support synchronizing all streams on device" for every caller, torch.utils.benchmark's Timer
    among them (it synchronizes the accelerator before each clock read)."""
    torch_synchronize = torch.accelerator.synchronize

    def synchronize(device=None):
        current = torch.accelerator.current_accelerator()
        if current is not None and current.type == NAME:
            storage.webgrad_device().backend.synchronize()
            return
        torch_synchronize(device)
    synchronize.__doc__ = torch_synchronize.__doc__
    torch.accelerator.synchronize = synchronize


def _register():
    if storage._device:
        return
    storage._device.append(_webgrad_device())
    torch.utils.generate_methods_for_privateuse1_backend()
    torch._register_device_module(NAME, _DeviceModule())
    torch._C._acc.register_python_privateuseone_hook(_Hooks())
    torch._C._acc.register_python_privateuseone_device_guard(_Guard())
    torch.serialization.register_package(19, _tag, _deserialize)
    _pin_memory_for_webgpu()
    _synchronize_through_accelerator()
    # the backward of webgpu tensors runs in the thread that calls it, as the CPU's does: webgrad's recording
    # of a step (replay hooks, capture) is per thread, and PyTorch's engine sizes its per-device worker queues
    # once, at its first backward, which may come before this registration
    torch._C._set_multithreading_enabled(False)
    _print_from_cpu()
    from torch.optim.optimizer import register_optimizer_step_post_hook
    register_optimizer_step_post_hook(_submit_after_step)


def _submit_after_step(optimizer, args, kwargs):
    """Start the GPU on the queued work when an optimizer's step over webgpu parameters is done, whatever its
    implementation (for-loop, foreach or fused), as webgrad's own optimizers do: eager work is otherwise submitted
    only at a read-back or every Runtime.FLUSH_AFTER dispatches, so with the loss read every few steps the GPU
    would idle while the host issues them and the host then wait for all of them. (Nothing queued: no submit.)"""
    backend = storage.webgrad_device().backend
    if getattr(backend, "capturing", True):  # (the CPU backend; a step being recorded is submitted by its replays)
        return
    for group in optimizer.param_groups:
        params = group["params"]
        if params and params[0].device.type == NAME:
            backend.submit()
            return


_LIBRARY = []  # the torch.library registration below, kept alive


def _pin_memory_for_webgpu():
    """Tensor.pin_memory() where webgpu is the accelerator (a DataLoader with pin_memory=True, as pytorch/examples
    make one whenever an accelerator is there) returns the tensor itself: webgrad uploads from any host memory
    (queue.writeBuffer), and PyTorch asks a device for a pinned-memory allocator only through a C++ hook that
    Python cannot register. Elsewhere it does what PyTorch's own pin_memory does (is_pinned, then _pin_memory)."""
    def pin_memory(self, device=None):
        target = torch.device(device) if device is not None else torch.accelerator.current_accelerator()
        if target is not None and target.type == NAME:
            return self
        if torch.ops.aten.is_pinned(self, device):
            return self
        return torch.ops.aten._pin_memory(self, device)

    library = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():  # ("Overriding a previously registered kernel": that is the point)
        warnings.simplefilter("ignore")
        library.impl("pin_memory", pin_memory, "CompositeImplicitAutograd")
    _LIBRARY.append(library)


def _tag(obj):
    return str(storage.DEVICE) if obj.device.type == NAME else None


def _deserialize(obj, location):
    """torch.load(map_location="webgpu"): the storage's bytes go to the device when a tensor first views them
    (storage.load_storage), typed as that tensor's dtype."""
    if location == NAME or location.startswith(NAME + ":"):
        return storage.load_storage(obj)
    return None


def _print_from_cpu():
    """Printing formats a CPU copy (as PyTorch does for XLA and lazy tensors): a tensor's repr runs a dozen
    ops (masked_select, float64 casts) only to lay out digits."""
    from torch import _tensor_str
    original = _tensor_str._tensor_str

    def _tensor_str_webgpu(self, indent):
        if self.device.type == NAME:
            self = storage.to_cpu(self)
        return original(self, indent)
    _tensor_str._tensor_str = _tensor_str_webgpu


_register()

from . import kernels, fallback, fused_autograd, sparse  # noqa: E402,F401
from .fallback import fallback_counts, get_fallback, reset_fallback_counts, set_fallback, strict  # noqa: E402,F401
from .storage import from_webgrad, live_storages, to_webgrad  # noqa: E402,F401
from .replay import replayable  # noqa: E402,F401


def synchronize():
    """Wait for the GPU work queued so far (as torch.cuda.synchronize)."""
    storage.webgrad_device().backend.synchronize()


__all__ = ["NAME", "fallback_counts", "from_webgrad", "get_fallback", "live_storages", "replayable",
           "reset_fallback_counts", "set_fallback", "strict", "synchronize", "to_webgrad"]
