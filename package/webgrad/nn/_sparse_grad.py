"""The rows of an embedding table read with a sparse gradient (embedding / embedding_bag with sparse=True).

PyTorch gives the table a sparse COO gradient: uncoalesced, one entry per index read (the indices flattened, those
at padding_idx left out), its values the rows of the output's gradient. Leaving padding out selects by a mask
(nonzero: one read-back on WebGPU); everything else is index_select and reshape, on either backend.
"""

from .. import _bounds
from .._autograd import no_grad, record
from ..sparse._coo import SparseCOOTensor


def rows_with_sparse_grad(indices, weight, padding_idx=None, scale_grad_by_freq=False, name="Embedding"):
    """weight's rows at `indices` (any shape; the result is indices.shape + [embedding_dim]); weight's gradient
    through them is sparse. padding_idx: a row index (negative counts from the end) whose entries get no gradient.
    scale_grad_by_freq: refused at backward, as torch's."""
    flat = indices.reshape(-1)
    with no_grad(), _bounds.reporting("embedding(): index {value} is out of range for {size} embeddings"):
        out = weight.index_select(0, flat).reshape(tuple(indices.shape) + (weight.shape[1],))
    if padding_idx is not None and padding_idx < 0:
        padding_idx += weight.shape[0]
    shape = tuple(weight.shape)

    def backward(g):
        if scale_grad_by_freq:
            raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with sparse gradients")
        rows, values = flat, g.reshape(flat.shape[0], shape[1])
        if padding_idx is not None:
            kept = (flat != padding_idx).nonzero().reshape(-1)
            rows, values = flat.index_select(0, kept), values.index_select(0, kept)
        return (SparseCOOTensor(rows.reshape(1, -1), values, shape),)

    return record(out, name, (weight,), backward)
