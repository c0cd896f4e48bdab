"""The `flags(...)` context managers of torch.backends' modules: a module's switches set inside the block and
restored after it."""

import contextlib
import sys


@contextlib.contextmanager
def switched(module_name, values):
    """Set module `module_name`'s attributes to `values` (name -> value) inside the block; restore them after."""
    module = sys.modules[module_name]
    saved = {name: getattr(module, name) for name in values}
    for name, value in values.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)
