"""Devices: names the user writes ("cpu", "webgpu", "meta") mapped to backend instances, created on first use."""

_backends = {}
_default = ["cpu"]
_entered = []  # the default devices that `with device(...)` blocks replaced, innermost last
KNOWN = ("cpu", "webgpu", "meta")  # meta: shapes and dtypes without data (_backends/meta.py)


# Devices of other libraries: a device object of theirs can be made, as torch makes torch.device("cuda") without
# CUDA (scripts build them for comparisons and defaults); placing memory there raises DeviceUnavailableError.
FOREIGN = ("cuda", "mps", "xpu", "hip")


class UnknownDeviceError(ValueError, RuntimeError):
    """A device name that is none of webgrad's (nor of PyTorch's): PyTorch raises RuntimeError, and webgrad's
    earlier ValueError is kept as a base so that either except clause catches it."""


class DeviceUnavailableError(RuntimeError, AssertionError):
    """Memory placed on a device webgrad does not drive (cuda, mps, ...). An AssertionError as well as a
    RuntimeError: a CPU-only torch raises AssertionError("Torch not compiled with CUDA enabled") there."""


class OutOfMemoryError(RuntimeError, MemoryError):
    """More device memory than the device gives, or than it binds at once (torch.OutOfMemoryError, also
    torch.cuda.OutOfMemoryError: a RuntimeError; a MemoryError as well, which webgrad raised before)."""


class device:
    """Like torch.device: `webgrad.device("webgpu")`; compares equal to its name. `index`: the number after a
    colon, else None."""

    __slots__ = ("type", "index")

    def __init__(self, spec, index=None):
        if isinstance(spec, device):
            spec, index = spec.type, spec.index if index is None else index
        name, _, number = str(spec).partition(":")
        if name == "gpu":
            name = "webgpu"
        if name not in KNOWN and name not in FOREIGN:
            raise UnknownDeviceError(f"unknown device {spec!r}: webgrad has devices "
                             f"{', '.join(repr(k) for k in KNOWN)}")
        if number:
            if not number.isdigit() or index is not None:
                raise ValueError(f"invalid device {spec!r}: expected a device type and an optional index, as 'cuda:0'")
            index = int(number)
        if name in KNOWN and index not in (None, 0):  # one adapter per process: webgpu:0 is the only WebGPU device
            raise ValueError(f"invalid device {spec!r}: webgrad has one {name} device, {name!r} (or '{name}:0')")
        self.type = name
        self.index = index

    @property
    def backend(self):
        be = _backends.get(self.type)
        if be is None:
            if self.type in FOREIGN:
                raise DeviceUnavailableError(
                    f"device {str(self)!r} is not available: webgrad reaches GPUs through WebGPU; use "
                    "device('webgpu'), or webgrad.accelerator.current_accelerator() to pick it when an adapter exists")
            be = _backends[self.type] = _create_backend(self.type)
        return be

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except ValueError:
                return False
        return isinstance(other, device) and other.type == self.type and \
            (self.type in KNOWN or other.index == self.index)

    def __hash__(self):
        return hash(self.type)

    def __enter__(self):
        """`with device("meta"):` makes this the default device inside the block, as torch's device context."""
        _entered.append(_default[0])
        set_default_device(self)
        return self

    def __exit__(self, *exc):
        _default[0] = _entered.pop()
        return False

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        return f"device(type='{self.type}')" if self.index is None else \
            f"device(type='{self.type}', index={self.index})"


def _create_backend(name):
    if name == "cpu":
        from ._backends.cpu import CPUBackend
        return CPUBackend()
    if name == "meta":
        from ._backends.meta import MetaBackend
        return MetaBackend()
    from ._backends.webgpu import create_backend
    return create_backend()


def forget(name):
    """Drop the backend instance of device `name`: the next use of the device creates a new one."""
    _backends.pop(device(name).type, None)


def get(spec=None):
    """The device for `spec` (None -> the default device)."""
    return device(_default[0] if spec is None else spec)


def set_default_device(spec):
    """Make `spec` the device for tensors created without device= (PyTorch's torch.set_default_device); None
    restores the usual default: "cpu", or "webgpu" where there is no CPU device (Pyodide without NumPy)."""
    if spec is None:
        import importlib.util
        _default[0] = "cpu" if importlib.util.find_spec("numpy") is not None else "webgpu"
        return
    _default[0] = device(spec).type


def get_default_device():
    return device(_default[0])
