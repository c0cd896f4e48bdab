"""matplotlib.pyplot stand-in: draws nothing; `subplots` returns a (figure, axes) pair as the real one."""

from . import Anything


def subplots(*args, **kwargs):
    return Anything(), Anything()


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return Anything()
