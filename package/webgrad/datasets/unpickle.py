"""A restricted unpickler for the pickled CIFAR batches (the "python version" of CIFAR-10/100).

pickle.load runs whatever a file names: a pickle can call os.system. A dataset file comes from the user, so
it is read with an Unpickler that resolves only the globals those files need to rebuild a NumPy uint8
array (and, for files written by Python 3 at protocol 2, bytes) and refuses every other name.
"""

import io
import pickle

# (module, name) -> what a CIFAR batch may reference. NumPy renamed numpy.core to numpy._core in 2.0, and
# pickles written by either keep the name they were written with.
_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("_codecs", "encode"),  # protocol 2 written by Python 3 stores bytes as _codecs.encode(text, "latin1")
}


class RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(
                f"refused to load global {module}.{name}: a CIFAR batch holds only dicts, lists, strings and "
                "NumPy uint8 arrays (the file is not a CIFAR batch, or it was crafted to run code)")
        import importlib
        return getattr(importlib.import_module(module), name)


def load(path):
    """The object pickled in file `path`, through the restricted unpickler."""
    with open(path, "rb") as f:
        return loads(f.read(), path)


def loads(raw, where):
    """The object pickled in `raw` (latin-1 for Python 2 strings, as torchvision), through the restricted
    unpickler. Errors name `where` (the file)."""
    try:
        return RestrictedUnpickler(io.BytesIO(raw), encoding="latin1").load()
    except pickle.UnpicklingError as e:
        raise pickle.UnpicklingError(f"{where}: {e}") from None
    except (EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError) as e:
        raise ValueError(f"{where}: not a readable pickled CIFAR batch ({len(raw)} bytes; "
                         f"{type(e).__name__}: {e})") from None
