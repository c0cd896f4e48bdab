"""torch.nn.attention.flex_attention: attention whose scores a user's Python functions modify (score_mod) and mask
(mask_mod, gathered into a BlockMask), with PyTorch's names, defaults, outputs and errors.

PyTorch vmaps each mod over scalar index tensors and compiles the result into a kernel. webgrad calls each mod
once, with index tensors that broadcast to the whole score matrix: b [B,1,1,1], h [1,H,1,1], q_idx [1,1,Q,1] and
kv_idx [1,1,1,KV], and the score [B,H,Q,KV]. The same Python then yields the whole [B,H,Q,KV] tensor from ordinary
tensor ops, so it runs on every device and autograd reaches any tensor a mod captures (an ALiBi slope table, a
relative-position bias). A mod with Python control flow on its indices (``if q_idx >= kv_idx:``) cannot be
broadcast; write it with torch.where, as PyTorch's own documentation asks for the same reason.

Attention itself is computed densely: softmax over KV of score_mod(q @ k^T * scale), positions the block mask
leaves out at -inf, fully masked rows giving zero output and a logsumexp of -inf (PyTorch's). A BlockMask keeps
PyTorch's block-sparse layout (kv_num_blocks, kv_indices, full_kv_*, q_*), and flex_attention honours it as
PyTorch's kernels do: blocks absent from it are masked, full blocks are attended without calling mask_mod,
partial blocks call mask_mod (PyTorch's uncompiled CPU path calls mask_mod everywhere and ignores the layout;
the two agree on every mask create_block_mask makes, and differ only for a hand-made from_kv_blocks layout).
Unlike PyTorch on CPU, gradients are supported on every device.
"""

import functools
import inspect
import itertools
import math
import operator
import warnings
from typing import NamedTuple, TypedDict

from ... import _tensor, dtypes
from ..._tensor import Tensor
from ...devices import get_default_device
from ...ops.core import broadcast_shapes
from ...ops.elementwise import where
from .. import functional as F

_DEFAULT_SPARSE_BLOCK_SIZE = 128
_LARGE_SPARSE_BLOCK_SIZE = 1 << 30  # the block size of the mask flex_attention uses when given none: one block

_WARNINGS_SHOWN = set()


class FlexKernelOptions(TypedDict, total=False):
    """Options PyTorch's Triton kernels take (BLOCK_M, BLOCK_N, num_warps, BACKEND...). webgrad's composition has
    no such knobs: flex_attention accepts the dict and reads none of it."""


class AuxRequest(NamedTuple):
    """Which auxiliary outputs flex_attention returns (return_aux=AuxRequest(lse=True))."""
    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """flex_attention's auxiliary outputs: each is None unless requested."""
    lse: Tensor = None
    max_scores: Tensor = None


def _positional_arity(fn):
    if hasattr(fn, "__code__"):
        return fn.__code__.co_argcount - len(getattr(fn, "__defaults__", None) or ())
    return sum(1 for p in inspect.signature(fn).parameters.values() if p.default is inspect.Parameter.empty)


def _is_score_mod(fn):
    """True for a score_mod (score, b, h, q_idx, kv_idx), False for a mask_mod (b, h, q_idx, kv_idx), as
    PyTorch tells them apart: by the number of positional parameters."""
    arity = _positional_arity(fn)
    if arity not in (4, 5):
        raise AssertionError(f"Expected 4 or 5 positional args, got {arity}")
    return arity == 5


def _identity(score, batch, head, token_q, token_kv):
    return score


def noop_mask(batch, head, token_q, token_kv):
    """Returns a noop mask_mod"""
    return batch.new_ones(size=(), dtype=dtypes.bool_, device=batch.device)


def _sliced_mask_mod_error(batch, head, token_q, token_kv):
    """The mask_mod of a sliced BlockMask: slicing drops the mask_mod, as in PyTorch."""
    raise RuntimeError(
        "Cannot use mask_mod from a sliced BlockMask. When you slice a BlockMask using [], the mask_mod attribute "
        "is reset. You must set it from the original BlockMask's mask_mod.")


def or_masks(*mask_mods):
    """Returns a mask_mod that's the union of provided mask_mods"""
    if not all(callable(arg) for arg in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def or_mask(b, h, q_idx, kv_idx):
        result = b.new_zeros((), dtype=dtypes.bool_)
        for mask in mask_mods:
            result = result | mask(b, h, q_idx, kv_idx)
        return result

    return or_mask


def and_masks(*mask_mods):
    """Returns a mask_mod that's the intersection of provided mask_mods"""
    if not all(callable(arg) for arg in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def and_mask(b, h, q_idx, kv_idx):
        result = b.new_ones((), dtype=dtypes.bool_)
        for mask in mask_mods:
            result = result & mask(b, h, q_idx, kv_idx)
        return result

    return and_mask


# ------------------------------------------------------------------------------------------ calling the mods

def _index_grids(B, H, Q, KV, device, dtype):
    """b [B,1,1,1], h [1,H,1,1], q_idx [1,1,Q,1], kv_idx [1,1,1,KV]: together, every (b, h, q, kv) position."""
    return (_tensor.arange(B, device=device, dtype=dtype).view(B, 1, 1, 1),
            _tensor.arange(H, device=device, dtype=dtype).view(1, H, 1, 1),
            _tensor.arange(Q, device=device, dtype=dtype).view(1, 1, Q, 1),
            _tensor.arange(KV, device=device, dtype=dtype).view(1, 1, 1, KV))


def _name(fn):
    return getattr(fn, "__name__", None) or repr(fn)


def _broadcast_mod(fn, args, shape, role):
    """fn(*args) once over the broadcast index tensors, checked to broadcast to shape [B, H, Q, KV]."""
    try:
        result = fn(*args)
    except Exception as e:
        raise RuntimeError(
            f"{role} {_name(fn)!r} could not be applied to broadcast index tensors (b {list(args[-4].shape)}, h "
            f"{list(args[-3].shape)}, q_idx {list(args[-2].shape)}, kv_idx {list(args[-1].shape)}): webgrad calls "
            f"it once for all positions, so it must be written with tensor ops (torch.where rather than Python "
            f"if/and/or on the indices). It raised {type(e).__name__}: {e}") from e
    if not isinstance(result, Tensor):
        raise RuntimeError(f"{role} {_name(fn)!r} must return a Tensor, got {type(result).__name__}")
    try:
        broadcast = broadcast_shapes(tuple(result.shape), tuple(shape))
    except RuntimeError:
        broadcast = None
    if broadcast != tuple(shape):
        raise RuntimeError(f"{role} {_name(fn)!r} returned a tensor of shape {list(result.shape)}, which does not "
                           f"broadcast to the scores' shape {list(shape)}")
    return result


def create_mask(mod_fn, B, H, Q_LEN, KV_LEN, device=None):
    r"""This function creates a mask tensor from a mod_fn function (a mask_mod, or a score_mod whose -inf scores
    mark masked positions).

    Args:
        mod_fn (Union[_score_mod_signature, _mask_mod_signature]): Function to modify attention scores.
        B (int): Batch size.
        H (int): Number of query heads.
        Q_LEN (int): Sequence length of query.
        KV_LEN (int): Sequence length of key/value.
        device (str): Device to run the mask creation on (webgrad's default device when None).

    Returns:
        mask (Tensor): A boolean mask tensor with shape (B, H, M, N).
    """
    device = get_default_device() if device is None else device
    B = 1 if B is None else B
    H = 1 if H is None else H
    shape = (B, H, Q_LEN, KV_LEN)
    grids = _index_grids(B, H, Q_LEN, KV_LEN, device, dtypes.int64)  # PyTorch's create_mask: torch.arange's int64
    if _is_score_mod(mod_fn):
        scores = _broadcast_mod(mod_fn, (_tensor.zeros(shape, device=device),) + grids, shape, "score_mod")
        return (~scores.isneginf()).expand(shape).contiguous()
    return _broadcast_mod(mod_fn, grids, shape, "mask_mod").to(dtypes.bool_).expand(shape).contiguous()


# ------------------------------------------------------------------------------------ block-sparse layout

def _dense_to_ordered(dense_mask):
    """[..., ROWS, COLS] 0/1 blocks -> (blocks per row [..., ROWS], their column indices first, in ascending
    order, then the absent columns [..., ROWS, COLS]), int32 as PyTorch's (its stable descending argsort)."""
    dense_mask = dense_mask.to(dtypes.int32)
    cols = dense_mask.shape[-1]
    order_key = (1 - dense_mask) * cols + _tensor.arange(cols, device=dense_mask.device, dtype=dtypes.int32)
    return dense_mask.sum(dim=-1).to(dtypes.int32), order_key.argsort(dim=-1).to(dtypes.int32)


def _ordered_to_dense(num_blocks_in_row, col_indices, num_cols):
    """The inverse of _dense_to_ordered: the first num_blocks_in_row[r] entries of col_indices[r] set."""
    entries = col_indices.shape[-1]
    device = col_indices.device
    valid = _tensor.arange(entries, device=device) < num_blocks_in_row.unsqueeze(-1)        # [..., R, E]
    hits = col_indices.unsqueeze(-1) == _tensor.arange(num_cols, device=device)           # [..., R, E, C]
    return (hits & valid.unsqueeze(-1)).any(dim=-2).to(dtypes.int32)


def _transpose_ordered(num_blocks_in_row, col_indices):
    dense = _ordered_to_dense(num_blocks_in_row, col_indices, col_indices.shape[-1])
    return _dense_to_ordered(dense.transpose(-2, -1))


def _adjust_num_blocks_and_indices(num_blocks, indices, new_num_rows, new_num_cols):
    indices = indices[:, :, :new_num_rows, :new_num_cols]
    num_blocks = num_blocks[:, :, :new_num_rows]
    num_blocks = where(num_blocks < new_num_cols, num_blocks, new_num_cols)
    num_blocks = (indices < num_blocks[:, :, :, None]).sum(dim=-1).to(dtypes.int32)
    return num_blocks, indices


def _convert_mask_to_block_mask(mask, Q_BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE,
                                KV_BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE, separate_full_blocks=False):
    """A [B, H, Q, KV] boolean mask -> its blocks that are partly set (and, with separate_full_blocks, those
    wholly set), int32 [B, H, Q / Q_BLOCK_SIZE, KV / KV_BLOCK_SIZE], the last blocks padded as unset."""
    if mask.dtype != dtypes.bool_:
        raise AssertionError(f"mask.dtype must be torch.bool, got {mask.dtype}")
    while mask.dim() < 4:
        mask = mask.unsqueeze(0)
    pad_kv = -mask.shape[-1] % KV_BLOCK_SIZE
    pad_q = -mask.shape[-2] % Q_BLOCK_SIZE
    if pad_kv or pad_q:
        mask = F.pad(mask, (0, pad_kv, 0, pad_q))
    B, H, Q, KV = mask.shape
    blocks = mask.reshape(B, H, Q // Q_BLOCK_SIZE, Q_BLOCK_SIZE, KV // KV_BLOCK_SIZE, KV_BLOCK_SIZE)
    block_sum = blocks.permute(0, 1, 2, 4, 3, 5).sum(dim=[-2, -1])
    if separate_full_blocks:
        full = block_sum == Q_BLOCK_SIZE * KV_BLOCK_SIZE
        partial = (block_sum > 0) & ~full
        return partial.to(dtypes.int32), full.to(dtypes.int32)
    return (block_sum > 0).to(dtypes.int32), None


class BlockMask:
    r"""PyTorch's block-sparse attention mask: for each Q_BLOCK_SIZE row tile, the KV_BLOCK_SIZE column tiles it
    attends (kv_num_blocks [B, H, ROWS], kv_indices [B, H, ROWS, COLS]: the first kv_num_blocks[r] entries of
    row r count), optionally split into partial blocks (mask_mod applies) and full blocks (full_kv_num_blocks,
    full_kv_indices: attended without calling mask_mod), with the transposed layout (q_num_blocks, q_indices...)
    that PyTorch's backward reads. B and H may be 1 to broadcast over the batch and the heads.

    Made by create_block_mask(mask_mod, ...) or BlockMask.from_kv_blocks(...); flex_attention reads it as
    PyTorch's kernels do (see the module's docstring)."""

    _TENSOR_ATTRS = ["kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks",
                     "q_indices", "full_q_num_blocks", "full_q_indices", "dq_write_order", "dq_write_order_full",
                     "dq_kv_order"]

    def __init__(self, seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, q_num_blocks,
                 q_indices, full_q_num_blocks, full_q_indices,
                 BLOCK_SIZE=(_DEFAULT_SPARSE_BLOCK_SIZE, _DEFAULT_SPARSE_BLOCK_SIZE), mask_mod=noop_mask, *,
                 dq_write_order=None, dq_write_order_full=None, dq_kv_order=None, dq_kv_order_spt=None):
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError("full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        if (full_q_num_blocks is None) != (full_q_indices is None):
            raise AssertionError("full_q_num_blocks and full_q_indices must be both provided or omitted")
        if dq_write_order_full is not None and dq_write_order is None:
            raise ValueError("dq_write_order_full requires dq_write_order")
        self.seq_lengths = tuple(seq_lengths)
        self.kv_num_blocks, self.kv_indices = kv_num_blocks, kv_indices
        self.full_kv_num_blocks, self.full_kv_indices = full_kv_num_blocks, full_kv_indices
        self.q_num_blocks, self.q_indices = q_num_blocks, q_indices
        self.full_q_num_blocks, self.full_q_indices = full_q_num_blocks, full_q_indices
        # PyTorch's deterministic-backward metadata: kept and carried, never read (webgrad's backward is dense)
        self.dq_write_order, self.dq_write_order_full = dq_write_order, dq_write_order_full
        self.dq_kv_order, self.dq_kv_order_spt = dq_kv_order, dq_kv_order_spt
        self.BLOCK_SIZE = tuple(BLOCK_SIZE)
        self.mask_mod = mask_mod

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks, kv_indices, full_kv_num_blocks=None, full_kv_indices=None,
                       BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE, mask_mod=None, seq_lengths=None, compute_q_blocks=True,
                       *, dq_write_order=None, dq_write_order_full=None, dq_kv_order=None):
        """Creates a BlockMask from its KV block layout, deriving the Q layout (q_num_blocks, q_indices) as
        PyTorch's; seq_lengths defaults to the whole tiles (ROWS * Q_BLOCK_SIZE, COLS * KV_BLOCK_SIZE)."""
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError("full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        q_num_blocks = q_indices = full_q_num_blocks = full_q_indices = None
        if compute_q_blocks:
            q_num_blocks, q_indices = _transpose_ordered(kv_num_blocks, kv_indices)
            if full_kv_num_blocks is not None:
                full_q_num_blocks, full_q_indices = _transpose_ordered(full_kv_num_blocks, full_kv_indices)
        if isinstance(BLOCK_SIZE, int):
            BLOCK_SIZE = (BLOCK_SIZE, BLOCK_SIZE)
        if seq_lengths is None:
            seq_lengths = (kv_indices.shape[-2] * BLOCK_SIZE[0], kv_indices.shape[-1] * BLOCK_SIZE[1])
        if dq_kv_order is not None and not isinstance(dq_kv_order, (bool, Tensor)):
            raise ValueError("dq_kv_order must be a bool, Tensor, or None")
        return cls(seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, q_num_blocks,
                   q_indices, full_q_num_blocks, full_q_indices, BLOCK_SIZE=BLOCK_SIZE,
                   mask_mod=mask_mod if mask_mod is not None else noop_mask, dq_write_order=dq_write_order,
                   dq_write_order_full=dq_write_order_full,
                   dq_kv_order=dq_kv_order if isinstance(dq_kv_order, Tensor) else None,
                   dq_kv_order_spt=dq_kv_order if isinstance(dq_kv_order, bool) else None)

    def as_tuple(self, flatten=True):
        """The BlockMask's attributes, in PyTorch's order (BLOCK_SIZE and seq_lengths flattened by default)."""
        block_size = self.BLOCK_SIZE if flatten else (self.BLOCK_SIZE,)
        seq_lengths = self.seq_lengths if flatten else (self.seq_lengths,)
        return (*seq_lengths, self.kv_num_blocks, self.kv_indices, self.full_kv_num_blocks, self.full_kv_indices,
                self.q_num_blocks, self.q_indices, self.full_q_num_blocks, self.full_q_indices, self.dq_write_order,
                self.dq_write_order_full, self.dq_kv_order, self.dq_kv_order_spt, *block_size, self.mask_mod)

    @property
    def shape(self):
        return tuple(self.kv_indices.shape[:-2]) + self.seq_lengths

    def numel(self):
        """Returns the number of elements (not accounting for sparsity) in the mask."""
        return functools.reduce(operator.mul, self.shape, 1)

    def sparsity(self):
        """Computes the percentage of blocks that are sparse (i.e. not computed)"""
        computed_blocks = int(self.kv_num_blocks.sum().item())
        if self.full_kv_num_blocks is not None:
            computed_blocks += int(self.full_kv_num_blocks.sum().item())
        computed_size = computed_blocks * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1]
        return 100 * (1 - computed_size / self.numel())

    def to_dense(self):
        """Returns a dense block that is equivalent to the block mask (int32 [B, H, ROWS, COLS], 1 where a block
        is attended, partly or fully)."""
        dense = _ordered_to_dense(self.kv_num_blocks, self.kv_indices, self.kv_indices.shape[-1])
        if self.full_kv_num_blocks is not None:
            dense = dense | _ordered_to_dense(self.full_kv_num_blocks, self.full_kv_indices,
                                              self.full_kv_indices.shape[-1])
        return dense

    def to_string(self, grid_size=(20, 20), limit=4):
        """Returns a string representation of the block mask, PyTorch's picture: a full block of a grid cell is
        '██', an empty one '  ', a partly attended one '░░'. grid_size -1 draws every block."""
        dense = self.to_dense()
        *batch_dims, num_rows, num_cols = dense.shape
        if isinstance(grid_size, int) and grid_size != -1:
            max_rows = max_cols = grid_size
        elif grid_size == -1:
            max_rows, max_cols = num_rows, num_cols
        else:
            max_rows, max_cols = grid_size
        row_step = max(1, -(-num_rows // max_rows))
        col_step = max(1, -(-num_cols // max_cols))
        # the share of attended blocks in each grid cell, for all batches and heads in one reduction
        pad = (0, -num_cols % col_step, 0, -num_rows % row_step)
        counts = F.pad(dense, pad).to(dtypes.float32)
        cells = counts.reshape(*batch_dims, counts.shape[-2] // row_step, row_step, counts.shape[-1] // col_step,
                               col_step).sum(dim=[-3, -1])
        sizes = F.pad(_tensor.ones(num_rows, num_cols), pad)
        sizes = sizes.reshape(sizes.shape[0] // row_step, row_step, sizes.shape[1] // col_step, col_step)
        share = (cells / sizes.sum(dim=[-3, -1])).to("cpu").tolist()
        pictures = []
        for count, batch_idx in enumerate(itertools.product(*[range(i) for i in batch_dims])):
            if count == limit:
                pictures += ["...", "To print out more, set BlockMask.to_string(limit=N)",
                             "You can also index (BlockMask[batch, head]) to choose a specific batch or head"]
                break
            grid = functools.reduce(lambda rows, i: rows[i], batch_idx, share)
            lines = ["".join(("█" if s == 1 else " " if s == 0 else "░") * 2 for s in row) for row in grid]
            pictures.append(f"{batch_idx}\n" + "\n".join(lines) + "\n")
        return "\n".join(pictures)

    def __str__(self):
        return f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n{self.to_string().strip()}\n)"

    def __repr__(self):
        def shape_or_none(x):
            return x.shape if x is not None else None

        return (f"BlockMask(\n"
                f"    kv_num_blocks={self.kv_num_blocks.shape},\n"
                f"    kv_indices={self.kv_indices.shape},\n"
                f"    full_kv_num_blocks={shape_or_none(self.full_kv_num_blocks)},\n"
                f"    full_kv_indices={shape_or_none(self.full_kv_indices)},\n"
                f"    q_num_blocks={shape_or_none(self.q_num_blocks)},\n"
                f"    q_indices={shape_or_none(self.q_indices)},\n"
                f"    full_q_num_blocks={shape_or_none(self.full_q_num_blocks)},\n"
                f"    full_q_indices={shape_or_none(self.full_q_indices)},\n"
                f"    BLOCK_SIZE={self.BLOCK_SIZE},\n"
                f"    shape={self.shape},\n"
                f"    sparsity={self.sparsity():.2f}%,\n"
                f"    mask_mod={_name(self.mask_mod)}\n"
                f")")

    def __getitem__(self, index):
        """The mask of some batches, heads and Q row tiles (block_mask[0], block_mask[0:2, 1], ...); its mask_mod
        is dropped, as PyTorch's: set it from the original BlockMask's."""
        index = index if isinstance(index, tuple) else (index,)
        padded = (*index, slice(None), slice(None), slice(None))[:3]
        sizes = self.kv_num_blocks.shape[:3]
        # integers index as one-long slices on the block tensors, so the dimensions kv_indices needs stay
        index = tuple((slice(i + n, i + n + 1) if -n <= i < 0 else slice(i, i + 1)) if isinstance(i, int) else i
                      for i, n in zip(padded, sizes))
        full = (None, None)
        if self.full_kv_num_blocks is not None:
            full = (self.full_kv_num_blocks[index], self.full_kv_indices[index])
        return BlockMask.from_kv_blocks(self.kv_num_blocks[index], self.kv_indices[index], *full,
                                        BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=_sliced_mask_mod_error,
                                        seq_lengths=self.seq_lengths, compute_q_blocks=self.q_indices is not None)

    def _adjust(self, new_q_len, new_kv_len):
        """The mask cropped to its upper-left (new_q_len, new_kv_len) corner, as PyTorch's."""
        rows = -(-new_q_len // self.BLOCK_SIZE[0])
        cols = -(-new_kv_len // self.BLOCK_SIZE[1])
        kv = _adjust_num_blocks_and_indices(self.kv_num_blocks, self.kv_indices, rows, cols)
        full = (None, None)
        if self.full_kv_num_blocks is not None:
            full = _adjust_num_blocks_and_indices(self.full_kv_num_blocks, self.full_kv_indices, rows, cols)
        return self.from_kv_blocks(*kv, *full, BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=self.mask_mod,
                                   seq_lengths=(new_q_len, new_kv_len), compute_q_blocks=self.q_indices is not None)

    def to(self, device):
        """A new BlockMask with every tensor moved to device."""
        moved = {a: getattr(self, a).to(device) if getattr(self, a) is not None else None
                 for a in self._TENSOR_ATTRS}
        return BlockMask(self.seq_lengths, **moved, BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=self.mask_mod,
                         dq_kv_order_spt=self.dq_kv_order_spt)

    def _attended(self, B, H, Q, KV, index_dtype):
        """The element mask flex_attention applies, bool broadcastable to [B, H, Q, KV], or None where every
        position is attended: full blocks, or partial blocks where mask_mod allows."""
        if self.mask_mod is _sliced_mask_mod_error:
            raise RuntimeError("Cannot use mask_mod from a sliced BlockMask")
        device = self.kv_num_blocks.device
        grids = _index_grids(B, H, Q, KV, device, index_dtype)
        mod_mask = None if self.mask_mod is noop_mask else _broadcast_mod(self.mask_mod, grids, (B, H, Q, KV),
                                                                          "mask_mod").to(dtypes.bool_)
        if self.BLOCK_SIZE == (_LARGE_SPARSE_BLOCK_SIZE, _LARGE_SPARSE_BLOCK_SIZE):
            return mod_mask  # flex_attention's default mask: one block covering everything

        # each position's block, gathered from the block-level masks (both [Bm, Hm, ROWS, COLS])
        row_block = (grids[2] // self.BLOCK_SIZE[0]).view(Q, 1).to(dtypes.int64)
        col_block = (grids[3] // self.BLOCK_SIZE[1]).view(1, KV).to(dtypes.int64)

        def elements(num_blocks, indices):
            dense = _ordered_to_dense(num_blocks, indices, indices.shape[-1]).to(dtypes.bool_)
            while dense.dim() < 4:
                dense = dense.unsqueeze(0)
            return dense[:, :, row_block, col_block]

        partial = elements(self.kv_num_blocks, self.kv_indices)
        attended = partial if mod_mask is None else partial & mod_mask
        if self.full_kv_num_blocks is not None:
            attended = attended | elements(self.full_kv_num_blocks, self.full_kv_indices)
        return attended


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device=None, BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE,
                      _compile=False, separate_full_blocks=True, compute_dq_write_order=False, dq_kv_order=True):
    r"""This function creates a block mask from a mask_mod function (b, h, q_idx, kv_idx) -> bool Tensor.

    Args:
        mask_mod (Callable): True where attention is allowed. Called once on broadcast index tensors (see the
            module's docstring).
        B (int): Batch size (None: 1, broadcasting over the batch).
        H (int): Number of query heads (None: 1, broadcasting over the heads).
        Q_LEN (int): Sequence length of query.
        KV_LEN (int): Sequence length of key/value.
        device (str): Device to run the mask creation on. PyTorch's default is its accelerator; webgrad's is its
            default device (torch.set_default_device), where a script's q, k and v are made.
        BLOCK_SIZE (int or tuple[int, int]): Block size for the block mask (Q, KV).
        _compile (bool): deprecated in PyTorch; webgrad has nothing to compile and ignores it.
        separate_full_blocks (bool): store fully unmasked blocks apart (full_kv_*), where mask_mod is skipped.
        compute_dq_write_order, dq_kv_order: PyTorch's deterministic-backward metadata; webgrad's backward is
            deterministic without it and computes none.

    Returns:
        BlockMask
    """
    if _is_score_mod(mask_mod):
        raise AssertionError(f"create-block_mask requires a mask_mod function! Got {mask_mod}")
    if _compile:
        warnings.warn("_compile flag on create_block_mask was originally added to work around a torch.compile "
                      "limitation. That limitation has since been addressed. So, to compile create_block_mask, we "
                      "suggest doing torch.compile(create_block_mask). This still works for now, but will be "
                      "removed in the future.", DeprecationWarning, stacklevel=2)
    if not isinstance(dq_kv_order, bool):
        raise ValueError("dq_kv_order must be a bool when using create_block_mask")
    q_block, kv_block = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else BLOCK_SIZE
    mask = create_mask(mask_mod, B, H, Q_LEN, KV_LEN, device)
    partial, full = _convert_mask_to_block_mask(mask, q_block, kv_block, separate_full_blocks)
    full_blocks = _dense_to_ordered(full) if full is not None else (None, None)
    return BlockMask.from_kv_blocks(*_dense_to_ordered(partial), *full_blocks, BLOCK_SIZE=(q_block, kv_block),
                                    mask_mod=mask_mod, seq_lengths=(Q_LEN, KV_LEN))


def _create_empty_block_mask(query, key):
    """flex_attention's mask when given none: one block covering every position."""
    device = query.device
    return BlockMask.from_kv_blocks(kv_num_blocks=_tensor.ones([1, 1, 1], dtype=dtypes.int32, device=device),
                                    kv_indices=_tensor.zeros([1, 1, 1, 1], dtype=dtypes.int32, device=device),
                                    BLOCK_SIZE=_LARGE_SPARSE_BLOCK_SIZE, seq_lengths=(1, 1))


# --------------------------------------------------------------------------------------------- flex_attention

def _warn_once(warning_id, message, category=UserWarning):
    if warning_id not in _WARNINGS_SHOWN:
        _WARNINGS_SHOWN.add(warning_id)
        warnings.warn(message, category, stacklevel=3)


def _validate(query, key, value, block_mask, enable_gqa):
    """PyTorch's checks of flex_attention's inputs, with its exception types and messages."""
    if query.device != key.device or query.device != value.device:
        raise ValueError(f"Expected query, key, and value to have the same device type, but got query.device: "
                         f"{query.device}, key.device: {key.device}, and value.device: {value.device} instead.")
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise ValueError(f"Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: "
                         f"{query.dim()}, key.dim: {key.dim()} and value.dim: {value.dim()} instead.")
    if query.size(-1) != key.size(-1):
        raise ValueError(f"Expect query and key/value to have the same embedding dimension but got "
                         f"E={query.size(-1)} and E={key.size(-1)}.")
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise NotImplementedError("NYI: query, key, and value must be 4D tensors")
    if key.size(-2) != value.size(-2) or key.size(1) != value.size(1) or key.size(0) != value.size(0):
        raise ValueError(f"Expect key and value to have the same batch size, number of heads and sequence length "
                         f"but got key {list(key.shape)} and value {list(value.shape)}.")
    if not enable_gqa and query.size(-3) != key.size(-3):
        raise ValueError(f"Expect query and key/value to have the same number of heads but got Hq={query.size(-3)} "
                         f"and Hkv={key.size(-3)}. Try setting enable_gqa=True for GQA.")
    if enable_gqa and query.size(1) % key.size(1) != 0:
        raise ValueError(f"Expect number of query heads to be a multiple of kv heads for GQA but got "
                         f"Hq={query.size(1)} and Hkv={key.size(1)}.")
    if query.size(0) != key.size(0):
        if block_mask is None:
            raise ValueError(f"Expect query and key/value to have the same batch size, or non-none block_mask, but "
                             f"got block_mask=None, Bq={query.size(0)}, and Bkv={key.size(0)}.")
        if block_mask.kv_num_blocks.size(0) != query.size(0):
            raise ValueError(f"Expect query and key/value to have the same batch size, or block_mask and query to "
                             f"have the same batch size, but got Bq={query.size(0)}, Bkv={key.size(0)}, "
                             f"B_block_mask={block_mask.kv_num_blocks.size(0)}.")
        if key.size(0) != 1:
            raise RuntimeError(f"Bq and Bkv must broadcast. Got Bq={query.size(0)} and Bkv={key.size(0)}")


def _validate_block_mask(block_mask, query, key):
    if block_mask.mask_mod is _sliced_mask_mod_error:
        raise RuntimeError("Cannot use mask_mod from a sliced BlockMask")
    if block_mask.BLOCK_SIZE != (_LARGE_SPARSE_BLOCK_SIZE, _LARGE_SPARSE_BLOCK_SIZE):
        q_len, kv_len = block_mask.shape[-2], block_mask.shape[-1]
        if query.size(-2) > q_len or key.size(-2) > kv_len:
            raise ValueError(
                f"block_mask was created for block_mask.shape={block_mask.shape} but got q_len={query.size(-2)} "
                f"and kv_len={key.size(-2)}. As the block mask was created for a smaller length than you're using "
                f"it for, you likely need to create a new block mask.")
        if query.size(-2) < q_len or key.size(-2) < kv_len:
            raise ValueError(
                f"block_mask was created for block_mask.shape={block_mask.shape} but got q_len={query.size(-2)} "
                f"and kv_len={key.size(-2)}. As the block mask was created for a larger length than you're using "
                f"it for, you can either 1. create a new block mask with the correct length, or 2. 'adjust' the "
                f"existing block mask to the correct length by calling block_mask._adjust(q_len, kv_len). This "
                f"essentially 'crops' the block mask to the upper left corner, which does not work for all "
                f"mask_mods!")
    if query.device != block_mask.kv_num_blocks.device:
        raise RuntimeError(f"Expect q/k/v and block_mask to be on the same device but got {query.device} and "
                           f"{block_mask.kv_num_blocks.device}.")
    for name, size, total in (("batch", block_mask.kv_num_blocks.size(0), query.size(0)),
                              ("heads", block_mask.kv_num_blocks.size(1), query.size(1))):
        if size not in (1, total):
            raise ValueError(f"block_mask was created for {size} {name} but the query has {total}: create it with "
                             f"{'B' if name == 'batch' else 'H'}={total}, or None to broadcast")


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                   return_lse=False, kernel_options=None, *, return_aux=None):
    r"""Scaled dot product attention whose scores score_mod modifies and block_mask masks, as PyTorch's.

    softmax over KV of score_mod(query @ key^T * scale, b, h, q_idx, kv_idx), positions the block mask leaves out
    at -inf (a row with none left gives zeros), times value.

    Args:
        query (Tensor): (B, Hq, L, E).
        key (Tensor): (B, Hkv, S, E).
        value (Tensor): (B, Hkv, S, Ev).
        score_mod (Callable): (score, b, h, q_idx, kv_idx) -> score, called once on the [B, Hq, L, S] scores and
            broadcast int32 index tensors (see the module's docstring). None: the scores as they are.
        block_mask (BlockMask): which positions are attended (create_block_mask). None: all of them.
        scale (float): applied to q @ k^T before score_mod; 1 / sqrt(E) when None.
        enable_gqa (bool): grouped-query attention: Hq a multiple of Hkv, query head h reading kv head
            h // (Hq / Hkv).
        return_lse (bool): deprecated in PyTorch for return_aux; also return the logsumexp (natural log) of the
            modified, masked scores over S, (B, Hq, L), -inf for a fully masked row.
        kernel_options: PyTorch's Triton kernel options; accepted and unused.
        return_aux (AuxRequest): return (output, AuxOutput(lse, max_scores)) with the fields requested.

    Returns:
        output (B, Hq, L, Ev) in query's dtype; with return_lse, (output, lse); with return_aux, (output, aux).
    """
    _validate(query, key, value, block_mask, enable_gqa)
    score_mod = _identity if score_mod is None else score_mod
    block_mask = _create_empty_block_mask(query, key) if block_mask is None else block_mask
    _validate_block_mask(block_mask, query, key)
    if return_lse and return_aux is not None:
        raise ValueError("Cannot specify both return_lse and return_aux. return_lse is deprecated, please use "
                         "return_aux=AuxRequest(lse=True) instead.")
    if return_lse:
        _warn_once("deprecated_return_lse", "return_lse is deprecated and will be removed in v2.10. Please use "
                   "return_aux=AuxRequest(lse=True) instead.", FutureWarning)
    scale = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale

    B, Hq, L, _ = query.shape
    S = key.size(-2)
    group = Hq // key.size(1)
    if group > 1:
        key, value = key.repeat_interleave(group, dim=1), value.repeat_interleave(group, dim=1)
    if key.size(0) != B:
        key, value = key.expand(B, *key.shape[1:]), value.expand(B, *value.shape[1:])

    # PyTorch's working precision: float64 inputs stay float64, every other float type computes in float32
    work = dtypes.float64 if query.dtype == dtypes.float64 else dtypes.float32
    scores = (query.to(work) @ key.to(work).transpose(-2, -1)) * scale
    grids = _index_grids(B, Hq, L, S, query.device, dtypes.int32)  # PyTorch's kernels pass torch.int indices
    if score_mod is not _identity:
        scores = _broadcast_mod(score_mod, (scores,) + grids, (B, Hq, L, S), "score_mod").to(work)
        scores = scores.expand(B, Hq, L, S)
    attended = block_mask._attended(B, Hq, L, S, dtypes.int32)
    if attended is not None:
        scores = where(attended, scores, _tensor.tensor(-math.inf, dtype=work, device=query.device))

    # a softmax whose fully masked rows give zeros: shift by the row's finite maximum (held constant, as the
    # softmax does not depend on it), and divide only where something was attended
    row_max = scores.amax(dim=-1, keepdim=True)
    shift = where(row_max.isfinite(), row_max, _tensor.zeros_like(row_max)).detach()
    exps = (scores - shift).exp()
    total = exps.sum(dim=-1, keepdim=True)
    any_attended = total > 0
    safe_total = where(any_attended, total, _tensor.ones_like(total))
    out = (exps / safe_total).to(query.dtype) @ value.to(query.dtype)

    want_lse = return_lse or (return_aux is not None and return_aux.lse)
    want_max = return_aux is not None and return_aux.max_scores
    lse = max_scores = None
    if want_lse:
        lse = where(any_attended, safe_total.log() + shift,
                            _tensor.full_like(total, -math.inf)).squeeze(-1)
    if want_max:
        max_scores = row_max.squeeze(-1)
    if return_aux is not None:
        return out, AuxOutput(lse=lse, max_scores=max_scores)
    if return_lse:
        return out, lse
    return out


__all__ = ["BlockMask", "create_block_mask", "create_mask", "flex_attention", "and_masks", "or_masks",
           "noop_mask", "AuxRequest", "AuxOutput", "FlexKernelOptions"]
