"""torch._C: the names of PyTorch's C extension that Python code uses directly. webgrad has no C extension;
these are the __torch_function__ switches and checks (webgrad/overrides.py)."""

from .overrides import (DisableTorchFunction, DisableTorchFunctionSubclass, _disabled_torch_function_impl,
                        _has_torch_function, _has_torch_function_unary, _has_torch_function_variadic,
                        _is_torch_function_enabled, _is_torch_function_mode_enabled)

__all__ = ["DisableTorchFunction", "DisableTorchFunctionSubclass", "_disabled_torch_function_impl",
           "_has_torch_function", "_has_torch_function_unary", "_has_torch_function_variadic",
           "_is_torch_function_enabled", "_is_torch_function_mode_enabled"]
