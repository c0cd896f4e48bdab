"""torch.nn.utils.rnn: batches of sequences of different lengths, padded or packed.

    padded = pad_sequence([a, b, c], batch_first=True)            # [3, max_len, *], padding_value elsewhere
    packed = pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False)
    padded, lengths = pad_packed_sequence(packed, batch_first=True)

The functions compose webgrad's ops (slices, cat, stack, index_select), so gradients flow through them on
every device. A PackedSequence holds the time steps one after another, each with the sequences still
running at that step (batch_sizes[t] of them, longest first), as in PyTorch; webgrad.nn's RNN, LSTM and GRU
take one and give their output as one.
"""

from collections import namedtuple

from ... import dtypes
from ..._tensor import Tensor, full, tensor


def cat(tensors, dim):
    import webgrad  # the public functions, looked up when called (webgrad.nn is imported while webgrad is)
    return webgrad.cat(tensors, dim)


def stack(tensors, dim):
    import webgrad
    return webgrad.stack(tensors, dim)


def _lengths(lengths):
    values = lengths.tolist() if isinstance(lengths, Tensor) else [int(n) for n in lengths]
    if isinstance(values, int):
        values = [values]
    return [int(n) for n in values]


def _long(values, device=None):
    return tensor(values, dtype=dtypes.to_dtype("int64"), device=device)


class PackedSequence(namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """PackedSequence(data, batch_sizes, sorted_indices=None, unsorted_indices=None), as PyTorch's; build one
    with pack_padded_sequence or pack_sequence."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if batch_sizes is None:
            raise TypeError("PackedSequence: batch_sizes is required (build one with pack_padded_sequence)")
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = _invert(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """data moved or converted (batch_sizes stay where they are); the indices follow data's device."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        move = (lambda t: None if t is None else t.to(device=data.device))
        return type(self)(data, self.batch_sizes, move(self.sorted_indices), move(self.unsorted_indices))

    def cpu(self):
        return self.to("cpu")

    def float(self):
        return self.to(dtypes.float32)

    def double(self):
        return self.to(dtypes.float64)

    def half(self):
        return self.to(dtypes.float16)

    @property
    def is_cuda(self):
        return False

    def is_pinned(self):
        return False


def _invert(permutation):
    order = permutation.tolist()
    inverse = [0] * len(order)
    for i, j in enumerate(order):
        inverse[j] = i
    return _long(inverse, permutation.device)


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack sequences [L_i, *] into [max_len, B, *] (or [B, max_len, *] with batch_first), padding with
    padding_value on the right (or the left)."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, Tensor):
        sequences = list(sequences.contiguous().unbind(0))
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - s.shape[0]
        if missing:
            pad = full((missing, *s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
            s = cat([s, pad] if padding_side == "right" else [pad, s], 0)
        padded.append(s)
    return stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The sequences pad_sequence stacked: padded_sequences [max_len, B, *] (or batch_first) cut to lengths."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    # sliced from a contiguous copy: getitem's backward misplaces gradients of a strided view's slices
    return [seq[:n] for seq, n in zip(padded_sequences.contiguous().unbind(0), _lengths(lengths))]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch [T, B, *] (or [B, T, *] with batch_first) whose sequence b has lengths[b] steps.

    With enforce_sorted (the default) lengths must be in decreasing order; otherwise the batch is sorted here
    and the PackedSequence remembers the order (sorted_indices/unsorted_indices)."""
    n = _lengths(lengths)
    batch = input.shape[0 if batch_first else 1]
    if len(n) != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(n)} (batch_size={batch})")
    if any(v <= 0 for v in n):
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    if max(n) > input.shape[1 if batch_first else 0]:
        raise RuntimeError(f"pack_padded_sequence: a length of {max(n)} is longer than the input's "
                           f"{input.shape[1 if batch_first else 0]} time steps")
    if enforce_sorted:
        if any(a < b for a, b in zip(n, n[1:])):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
                               "to sidestep this requirement if you do not need ONNX exportability.")
        sorted_indices = None
    else:
        order = sorted(range(len(n)), key=lambda b: -n[b])  # stable: equal lengths keep their order
        n = [n[b] for b in order]
        sorted_indices = _long(order, input.device)
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    if batch_first:
        input = input.transpose(0, 1)
    input = input.contiguous()  # (see unpad_sequence)
    batch_sizes = [sum(1 for v in n if v > t) for t in range(n[0])]
    data = cat([input[t, :size] for t, size in enumerate(batch_sizes)], 0)
    return PackedSequence(data, _long(batch_sizes), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The padded batch and the lengths (an int64 tensor) of a PackedSequence, in the original batch order;
    total_length pads the time dimension to that many steps."""
    data, batch_sizes = sequence.data, [int(b) for b in sequence.batch_sizes.tolist()]
    steps = len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {steps}")
        steps = total_length
    batch = batch_sizes[0] if batch_sizes else 0
    rows, start = [], 0
    for size in batch_sizes:
        step = data[start:start + size]
        start += size
        if size < batch:
            step = cat([step, full((batch - size, *data.shape[1:]), padding_value, dtype=data.dtype,
                                   device=data.device)], 0)
        rows.append(step)
    for _ in range(steps - len(batch_sizes)):
        rows.append(full((batch, *data.shape[1:]), padding_value, dtype=data.dtype, device=data.device))
    padded = stack(rows, 0)  # [T, B, *], sorted by length
    lengths = [sum(1 for size in batch_sizes if size > b) for b in range(batch)]
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lengths = [lengths[i] for i in sequence.unsorted_indices.tolist()]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, _long(lengths)


def pack_sequence(sequences, enforce_sorted=True):
    """pack_padded_sequence of pad_sequence(sequences) with their lengths."""
    return pack_padded_sequence(pad_sequence(sequences), [s.shape[0] for s in sequences],
                                enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences a PackedSequence holds, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
