"""torch.serialization's allowlist for weights-only loads: add_safe_globals, safe_globals, get_safe_globals,
clear_safe_globals, as PyTorch's.

torch.load(f) reads with weights_only=True by default: tensors and plain containers, nothing that runs code.
A file that also holds objects of classes the user trusts (a whole module, `torch.save(model, f)`) loads that way
once those classes (and functions stored as values, such as an activation) are allowlisted:

    with torch.serialization.safe_globals([MyModel, torch.nn.Linear, torch.nn.functional.relu]):
        model = torch.load(f)

Each entry is a class or function, or (object, "module.name") for an object the file names otherwise. The
allowlisted classes are then made and given their state as the file says (no code of theirs runs but
__setstate__ and __new__), the functions may be called. torch.load(f, weights_only=False) loads whatever the
file holds, running its code: only for files from a trusted source.
"""

_safe = []  # in the order added, as torch keeps them (a list, entries compared by identity)


def _check(entry):
    if isinstance(entry, tuple):
        if len(entry) != 2:
            raise ValueError("Expected tuple of length 2 (global, str of callable full path), but got tuple of "
                             f"length: {len(entry)}")
        if type(entry[1]) is not str:
            raise TypeError(f"Expected second item in tuple to be str of callable full path, but got: "
                            f"{type(entry[1])}")
    elif not callable(entry):
        raise TypeError(f"safe globals are classes or functions (or (object, 'module.name') tuples), got "
                        f"{type(entry).__name__}")
    return entry


def add_safe_globals(safe_globals):
    """Allowlist these globals for every later weights-only load (torch.serialization.add_safe_globals)."""
    if not isinstance(safe_globals, (list, tuple)):
        raise TypeError(f"add_safe_globals expects a list of globals, got {type(safe_globals).__name__}")
    for entry in safe_globals:
        entry = _check(entry)
        if not any(entry is known for known in _safe):
            _safe.append(entry)


def get_safe_globals():
    """The globals allowlisted by add_safe_globals (and by safe_globals blocks being run)."""
    return list(_safe)


def clear_safe_globals():
    """Forget every allowlisted global."""
    _safe.clear()


class safe_globals:
    """Allowlist these globals inside a `with` block (or a decorated function) only."""

    def __init__(self, safe_globals):
        if not isinstance(safe_globals, (list, tuple)):
            raise TypeError(f"safe_globals expects a list of globals, got {type(safe_globals).__name__}")
        self.safe_globals = [_check(entry) for entry in safe_globals]
        self._added = []

    def __enter__(self):
        self._added = [e for e in self.safe_globals if not any(e is known for known in _safe)]
        add_safe_globals(self._added)

    def __exit__(self, *exc):
        for entry in self._added:
            for i, known in enumerate(_safe):
                if known is entry:
                    del _safe[i]
                    break
        self._added = []
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with safe_globals(self.safe_globals):
                return fn(*args, **kwargs)
        return wrapper


def allowed_globals():
    """{"module.name": object} for torch_format.load: each entry under its module and qualified name (as torch
    looks it up) and under the name webgrad's own pickles reference it by (torch_format.global_name)."""
    from .torch_format import global_name
    found = {}
    for entry in _safe:
        if isinstance(entry, tuple):
            found[entry[1]] = entry[0]
            continue
        module, name = getattr(entry, "__module__", None), getattr(entry, "__qualname__", None)
        if module and name:
            found[f"{module}.{name}"] = entry
        where = global_name(entry)
        if where is not None:
            found[f"{where[0]}.{where[1]}"] = entry
    return found
