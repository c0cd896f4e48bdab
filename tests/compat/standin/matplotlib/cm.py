"""matplotlib.cm stand-in: every name accepts anything."""

from . import Anything


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return Anything()
