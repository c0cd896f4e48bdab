"""`set_trace()`: a no-op, as the corpus runs without a terminal."""


def set_trace(*args, **kwargs):
    return None
