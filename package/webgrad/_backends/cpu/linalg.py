"""The CPU reference of the batched matrix product."""

from .. import kernels
from .arrays import array, np


@kernels.matmul.implement("cpu")
def matmul(out, a, b, trans_a=False, trans_b=False, bias=None, relu=False):
    # BLAS in the tensors' own dtype (as PyTorch on the CPU): float32 training stays fast, and float64
    # gradient checks stay exact. A stride-0 batch is one matrix: multiply it once, not per batch.
    av, bv = array(a), array(b)
    if trans_a:
        av = av.transpose(0, 2, 1)
    if trans_b:
        bv = bv.transpose(0, 2, 1)
    if av.shape[0] == 1 or a.strides[0] == 0:
        av = av[:1]
    if bv.shape[0] == 1 or b.strides[0] == 0:
        bv = bv[:1]
    if av.dtype == np.float16:  # half products accumulate in float32 and round once (PyTorch, cuBLAS)
        av, bv = av.astype(np.float32), bv.astype(np.float32)
    # NumPy only reaches BLAS for 2-D operands; a 3-D matmul of strided views is ~10x slower
    res = (av[0] @ bv[0])[None] if av.shape[0] == 1 and bv.shape[0] == 1 else np.matmul(av, bv)
    if bias is not None:
        res += array(bias).astype(res.dtype)
    if relu:
        np.maximum(res, 0, out=res)
    array(out)[...] = res
