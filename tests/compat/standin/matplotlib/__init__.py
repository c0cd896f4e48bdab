"""matplotlib stand-in for the corpus runner: every name is a callable that accepts anything and draws nothing."""


class Anything:
    """Returned for every attribute, call, index and context: scripts that plot keep running."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return Anything()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Anything()

    def __getitem__(self, key):
        return Anything()

    def __setitem__(self, key, value):
        pass

    def __iter__(self):
        return iter(())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def use(*args, **kwargs):
    pass


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return Anything()
