"""mpl_toolkits.mplot3d stand-in: every name accepts anything."""

from matplotlib import Anything


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return Anything()
