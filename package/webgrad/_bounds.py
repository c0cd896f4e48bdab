"""Out-of-range indices: the error each op reports, shared by the backends.

A backend kernel that reads through an index (index_select, gather, the fused cross-entropy) knows only
its own name; the op the user called (embedding, nll_loss, cross_entropy, x[idx]) knows what the index
means. The op states its message around the backend call:

    with _bounds.reporting("embedding(): index {value} is out of range for {size} embeddings"):
        backend.index_select(...)

and the backend raises ``IndexError(template.format(value=bad_index, size=dimension_size))``: the CPU
backend at once, the WebGPU backend at the next read-back (its kernels record the index in the
runtime's error word, runtime.py). The outermost op wins (nll_loss inside cross_entropy reports as
cross_entropy). Indices the host holds (lists, Python ints) are checked with :func:`check_host` before
they are uploaded.
"""

import contextlib
import threading

_state = threading.local()

# The backends' own messages, for kernels called outside any op's `reporting` block.
INDEX_SELECT = "index_select(): index {value} is out of range for a dimension of size {size}"
GATHER = "gather(): index {value} is out of bounds for a dimension of size {size}"
CROSS_ENTROPY = "cross_entropy: target {value} is out of bounds for {size} classes"


def template(default):
    """The message the innermost backend call reports: the outermost op's, else `default`."""
    return getattr(_state, "template", None) or default


@contextlib.contextmanager
def reporting(message):
    """Index errors of the backend calls inside the block use `message` ({value}, {size} filled in),
    unless an enclosing op already set its own."""
    if getattr(_state, "template", None) is not None:
        yield
        return
    _state.template = message
    try:
        yield
    finally:
        _state.template = None


def check_host(values, size, message):
    """Raise IndexError(message) for the first of the host-side `values` outside [0, size)."""
    for v in values:
        if not 0 <= v < size:
            raise IndexError(template(message).format(value=v, size=size))


# Values PyTorch refuses where it reads them, checked by the check_values kernel (the CPU at once, WebGPU at the
# next read-back; {value} is the failing element's position, {size} the element count).
class IntegerDivisionByZero(RuntimeError, ZeroDivisionError):
    """An integer division or remainder by zero: PyTorch's RuntimeError("ZeroDivisionError"), and a
    ZeroDivisionError as Python's own // and % raise."""


DIVISION_BY_ZERO = "ZeroDivisionError: integer division by zero (element {value} of the divisor's {size} is 0)"
ONE_HOT_NEGATIVE = "one_hot: Class values must be non-negative."
