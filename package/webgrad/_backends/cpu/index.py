"""The CPU reference of index_select and gather, with their gradients.

Indices outside [0, size) raise (negative ones too: NumPy would wrap them), with the message of the op that
called (webgrad/_bounds.py); the WebGPU kernels report the same at the next read-back."""

from ... import _bounds
from .. import kernels
from .arrays import array, checked, np, write


@kernels.index_select.implement("cpu")
def index_select(out, x, index):
    idx = checked(array(index), x.shape[1], _bounds.INDEX_SELECT)
    write(out, array(x)[:, idx, :])


@kernels.index_select_backward.implement("cpu")
def index_select_backward(out, grad, index):
    res = np.zeros(out.shape, np.float64)
    idx = checked(array(index), out.shape[1], _bounds.INDEX_SELECT)
    np.add.at(res, (slice(None), idx, slice(None)), array(grad))
    write(out, res)


@kernels.gather.implement("cpu")
def gather(out, x, index):
    idx = checked(array(index), x.shape[1], _bounds.GATHER)
    write(out, np.take_along_axis(array(x), idx, axis=1))


@kernels.gather_backward.implement("cpu")
def gather_backward(out, grad, index):
    res = np.zeros(out.shape, np.float64)
    idx = checked(array(index), out.shape[1], _bounds.GATHER)
    o, k, i = np.indices(idx.shape)
    np.add.at(res, (o, idx, i), array(grad))
    write(out, res)
