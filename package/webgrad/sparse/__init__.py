"""webgrad.sparse (torch.sparse under as_torch): sparse COO tensors and their products with dense ones.

    A = torch.sparse_coo_tensor(indices, values, (n, n))   # or dense.to_sparse()
    out = torch.sparse.mm(A, X)                             # also torch.spmm, torch.mm, A @ X

See _coo.py for what is supported and how it runs on each device.
"""

from ._coo import (DoubleTensor, FloatTensor, LongTensor, SparseCOOTensor, addmm, matmul, mm,  # noqa: F401
                   sparse_coo, sparse_coo_tensor, to_dense, to_sparse)
from ._coo import sparse_sum as sum  # noqa: F401,A001  (torch.sparse.sum)

__all__ = ["addmm", "mm", "sum", "FloatTensor", "DoubleTensor", "LongTensor"]
