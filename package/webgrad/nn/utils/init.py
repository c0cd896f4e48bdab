"""torch.nn.utils.init: skip_init, a module built without running its parameter initialisation."""

import inspect


def skip_init(module_cls, *args, **kwargs):
    """module_cls(*args, **kwargs) with uninitialised parameters and buffers on `device` (default "cpu"): built on
    the meta device, then given empty storage. The class must take a device argument, as torch requires."""
    from ..module import Module
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    final_device = kwargs.pop("device", "cpu")
    kwargs["device"] = "meta"
    return module_cls(*args, **kwargs).to_empty(device=final_device)
