"""The CPU reference of masked_fill."""

from .. import kernels
from .arrays import array, np, write


@kernels.masked_fill.implement("cpu")
def masked_fill(out, x, mask, value):
    write(out, np.where(array(mask), value, array(x)))
