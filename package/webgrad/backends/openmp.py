"""torch.backends.openmp: webgrad is built without OpenMP (its CPU work is NumPy's)."""


def is_available():
    return False
