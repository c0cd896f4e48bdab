"""Global switches scripts set before training: float32 matmul precision and deterministic algorithms.

Both are kept and read back as PyTorch's are. What they change there does not apply here: webgrad computes float32
products in float32 whatever the precision says (no TF32 or bfloat16 passes), and its kernels give the same result
for the same input run to run (scatters and index_add included), so determinism asks nothing more of them.
"""

_PRECISIONS = ("highest", "high", "medium")
_state = {"precision": "highest", "deterministic": False, "warn_only": False}


def set_float32_matmul_precision(precision):
    """Record the float32 matmul precision ("highest", "high" or "medium"), as torch's: another string warns and
    changes nothing, a non-string raises RuntimeError. webgrad multiplies float32 in float32 at every setting."""
    if not isinstance(precision, str):
        raise RuntimeError(f"set_float32_matmul_precision expects a str, but got {type(precision).__name__}")
    if precision not in _PRECISIONS:
        import warnings
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "setFloat32MatmulPrecision call has no effect.", UserWarning, stacklevel=2)
        return
    _state["precision"] = precision


def get_float32_matmul_precision():
    """The float32 matmul precision last set ("highest" by default), as torch's."""
    return _state["precision"]


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Ask for deterministic algorithms, as torch's (bools only: TypeError otherwise). webgrad's kernels are
    deterministic already, so no op raises or warns under it."""
    if not isinstance(mode, bool):
        raise TypeError(f"_set_deterministic_algorithms(): argument 'mode' (position 1) must be bool, not "
                        f"{type(mode).__name__}")
    if not isinstance(warn_only, bool):
        raise TypeError(f"_set_deterministic_algorithms(): argument 'warn_only' must be bool, not "
                        f"{type(warn_only).__name__}")
    _state["deterministic"], _state["warn_only"] = mode, warn_only


def are_deterministic_algorithms_enabled():
    return _state["deterministic"]


def is_deterministic_algorithms_warn_only_enabled():
    return _state["warn_only"]


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode):
    """The deterministic switch as one value, as torch's: "default"/0 off, "warn"/1 on with warn_only, "error"/2
    on (use_deterministic_algorithms)."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`, but got "
                               f"{debug_mode}")
        debug_mode = _DEBUG_MODES[debug_mode]
    elif not isinstance(debug_mode, int) or isinstance(debug_mode, bool):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode)}")
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode > 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode():
    """0, 1 or 2: see set_deterministic_debug_mode."""
    if not _state["deterministic"]:
        return 0
    return 1 if _state["warn_only"] else 2
