"""check_values on the CPU: the failing element's error, raised at once (as PyTorch raises where it reads it)."""

from .. import kernels
from .arrays import array, np


@kernels.check_values.implement("cpu")
def check_values(x, message, error, low=None, high=None, nan=False, zero=False, below_message=None):
    a = np.ascontiguousarray(array(x)).reshape(-1)
    if a.size == 0:
        return
    if a.dtype == np.bool_:
        a = a.astype(np.uint8)
    floating = a.dtype.kind == "f"
    checks = []  # (failing elements, template), in the record's order
    with np.errstate(over="ignore"):  # (a bound beyond float32 compares as an infinity)
        if nan and floating:
            checks.append((np.isnan(a), message))
        if low is not None:
            checks.append((~(a >= low) if floating else a < low, below_message or message))
        if high is not None:
            checks.append((~(a <= high) if floating else a > high, message))
        if zero:
            checks.append((a == 0, message))
    for failing, template in checks:
        where = np.flatnonzero(failing)
        if where.size:
            raise error(template.format(value=int(where[0]), size=a.size))
