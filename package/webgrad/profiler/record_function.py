"""record_function: a named range of the user's, shown around the ops inside it (torch's user annotation)."""

import contextlib

from . import recorder


class record_function(contextlib.ContextDecorator):
    """``with record_function("model_inference"): ...`` or ``@record_function("step")``: the ops run inside
    appear nested under an event of that name. Outside a profile it does nothing. `args` (a string) is
    accepted, as torch's, and not recorded."""

    def __init__(self, name, args=None):
        if not isinstance(name, str):
            raise TypeError(f"record_function(): name must be a str, got {type(name).__name__}")
        self.name, self.args = name, args
        self._open = []  # (recorder, range) per entry: a decorated function may recurse

    def __enter__(self):
        active = recorder.active()
        self._open.append((active, active.begin(self.name, "user_annotation") if active is not None else None))
        return self

    def __exit__(self, *exc):
        active, opened = self._open.pop()
        if opened is not None:
            active.end(opened)
        return False
