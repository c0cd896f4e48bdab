"""Devices: names the user writes ("cpu", "webgpu") mapped to backend instances, created on first use."""

_backends = {}
_default = ["cpu"]
KNOWN = ("cpu", "webgpu")


class device:
    """Like torch.device: `webgrad.device("webgpu")`; compares equal to its name."""

    __slots__ = ("type",)

    def __init__(self, spec):
        if isinstance(spec, device):
            spec = spec.type
        name, _, index = str(spec).partition(":")
        if name == "gpu":
            name = "webgpu"
        if name not in KNOWN:
            hint = ""
            if name in ("cuda", "mps", "xpu", "hip"):
                hint = ("; webgrad reaches GPUs through WebGPU: use device('webgpu'), or "
                        "webgrad.accelerator.current_accelerator() to pick it when an adapter exists")
            raise ValueError(f"unknown device {spec!r}: webgrad has devices "
                             f"{', '.join(repr(k) for k in KNOWN)}{hint}")
        if index not in ("", "0"):  # one adapter per process: webgpu:0 is the only WebGPU device
            raise ValueError(f"invalid device {spec!r}: webgrad has one {name} device, {name!r} (or '{name}:0')")
        self.type = name

    @property
    def backend(self):
        be = _backends.get(self.type)
        if be is None:
            be = _backends[self.type] = _create_backend(self.type)
        return be

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except ValueError:
                return False
        return isinstance(other, device) and other.type == self.type

    def __hash__(self):
        return hash(self.type)

    def __str__(self):
        return self.type

    def __repr__(self):
        return f"device(type='{self.type}')"


def _create_backend(name):
    if name == "cpu":
        from ._backends.cpu import CPUBackend
        return CPUBackend()
    from ._backends.webgpu import create_backend
    return create_backend()


def forget(name):
    """Drop the backend instance of device `name`: the next use of the device creates a new one."""
    _backends.pop(device(name).type, None)


def get(spec=None):
    """The device for `spec` (None -> the default device)."""
    return device(_default[0] if spec is None else spec)


def set_default_device(spec):
    """Make `spec` the device for tensors created without device= (PyTorch's torch.set_default_device)."""
    _default[0] = device(spec).type


def get_default_device():
    return device(_default[0])
