"""torch.nn.functional.ctc_loss (Connectionist Temporal Classification, Graves et al. 2006), for speech and OCR
models that align unsegmented label sequences with per-frame log-probabilities.

The label sequence l of a sample is extended with blanks, l' = (blank, l1, blank, l2, ..., blank), and the
forward variables alpha_t(s) (log-probability of the paths through l'_1..s ending at frame t) are worked out for
every sample and extended position at once, one frame a step:
    alpha_t(s) = logsumexp(alpha_{t-1}(s), alpha_{t-1}(s - 1), alpha_{t-1}(s - 2) where l'_s is a label that
                 differs from l'_{s-2}) + log_probs[t, l'_s]
and the loss is -logsumexp(alpha_{T-1}(|l'| - 1), alpha_{T-1}(|l'| - 2)) at the sample's own input length T.
Samples of different input lengths stop updating past their length; positions past a sample's |l'| stay -inf.

The gradient is PyTorch's (ATen's ctc_loss_backward): with the backward variables beta (the same recursion run
from the end), grad[t, n, k] = exp(log_probs[t, n, k]) - exp(logsumexp_{s: l'_s = k}(alpha_t(s) + beta_t(s))
- log_probs[t, n, k] + nll_n), zero past the input length. That is the derivative through a log_softmax folded
in (it equals -posterior + softmax, whose sum over k is 0): what PyTorch returns for log_probs, and the same
gradient of the logits a log_softmax before it then passes back."""

from .. import dtypes
from .._autograd import no_grad, record
from .._tensor import Tensor, full, tensor
from ..ops.elementwise import where
from ..ops.shape import cat, stack

_REDUCTIONS = ("none", "mean", "sum")


def _lengths(value, name, n, device):
    """A list of n ints from a tuple/list or a 1-D (or 0-d, unbatched) integer tensor."""
    if isinstance(value, Tensor):
        if value.dtype.is_floating:
            raise RuntimeError(f"ctc_loss(): {name} must be integers, got {value.dtype.name}")
        value = value.reshape(-1).cpu().tolist()
    elif isinstance(value, int):
        value = [value]
    value = [int(v) for v in value]
    if len(value) != n:
        raise RuntimeError(f"ctc_loss(): expected {name} to have {n} values (one per sample), got {len(value)}")
    return value


def _lse3(a, b, c):
    """logsumexp of three tensors elementwise, -inf where all three are -inf (no NaN from inf - inf)."""
    m = a.maximum(b).maximum(c)
    safe = where(m == float("-inf"), 0.0, m)
    return ((a - safe).exp() + (b - safe).exp() + (c - safe).exp()).log() + safe


def _shift(x, k, fill):
    """x [N, L'] moved k places to the right along its last dim (position s takes s - k), fill entering at the
    left; k < 0 moves it left, fill entering at the right."""
    pad = full((x.shape[0], abs(k)), fill, dtype=x.dtype, device=x.device)
    return cat([pad, x[:, :-k]], 1) if k > 0 else cat([x[:, -k:], pad], 1)


def _extended(targets, target_lengths, n, blank, device):
    """(l' [N, L'] int64 with blanks between and around the labels, whether position s may take s - 2 [N, L'],
    |l'| per sample), L' = 2 max(target_lengths) + 1 (positions past a sample's |l'| hold blanks)."""
    flat = targets.reshape(-1).cpu().tolist() if targets.ndim == 1 else None
    rows, starts = [], 0
    for i, length in enumerate(target_lengths):
        if targets.ndim == 1:
            row = flat[starts:starts + length]
            starts += length
        else:
            row = targets[i, :length].cpu().tolist() if length else []
        rows.append([int(v) for v in row])
    width = 2 * max(target_lengths, default=0) + 1
    ext = [[blank] * width for _ in range(n)]
    skip = [[False] * width for _ in range(n)]
    for i, row in enumerate(rows):
        for j, label in enumerate(row):
            ext[i][2 * j + 1] = label
            skip[i][2 * j + 1] = j > 0 and label != row[j - 1]
    return (tensor(ext, dtype=dtypes.int64, device=device), tensor(skip, device=device),
            [2 * length + 1 for length in target_lengths])


def _recursion(lp, ext, skip, ends, lengths, forward):
    """Stack [T, N, L'] of alpha (forward) or beta (backward, skip shifted to the position it leaves from)."""
    T, n = lp.shape[0], lp.shape[1]
    width = ext.shape[1]
    device = lp.device
    ninf = float("-inf")
    pos = tensor(list(range(width)), dtype=dtypes.int64, device=device).reshape(1, width)
    end = tensor(ends, dtype=dtypes.int64, device=device).reshape(n, 1)
    inside = pos < end
    length = tensor(lengths, dtype=dtypes.int64, device=device).reshape(n, 1)
    emit = lp.gather(2, ext.unsqueeze(0).expand(T, n, width))  # [T, N, L']: log_probs[t, n, l'_s]
    out = [None] * T
    if forward:
        first = where(inside & (pos < 2), emit[0], ninf)
        state = first
        out[0] = state
        for t in range(1, T):
            new = _lse3(state, _shift(state, 1, ninf), where(skip, _shift(state, 2, ninf), ninf)) + emit[t]
            state = where(inside & (length > t), new, state)
            out[t] = state
        return stack(out)
    skip_from = _shift(skip, -2, False)  # position s may take s + 2 where s + 2 may take s
    state = tensor(ninf, device=device).expand(n, width)
    for t in range(T - 1, -1, -1):
        last = (pos >= end - 2) & inside
        start = where(last, emit[t], ninf)
        new = _lse3(state, _shift(state, -1, ninf), where(skip_from, _shift(state, -2, ninf), ninf)) + emit[t]
        new = where(inside, new, ninf)
        state = where(length == t + 1, start, where(length > t + 1, new, ninf))
        out[t] = state
    return stack(out)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """The CTC loss of log_probs [T, N, C] (or unbatched [T, C]; log_softmax outputs) against targets [N, S]
    (padded) or the concatenated 1-D labels, as torch.nn.functional.ctc_loss: reduction "mean" divides each
    sample's loss by its target length (at least 1) before the batch mean; zero_infinity turns impossible
    alignments' inf losses (and their gradients) to zero."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    for value, name in ((log_probs, "log_probs"), (targets, "targets")):
        if not isinstance(value, Tensor):
            raise TypeError(f"ctc_loss(): argument '{name}' must be Tensor, not {type(value).__name__}")
    unbatched = log_probs.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    if lp.ndim != 3 or not lp.dtype.is_floating:
        raise RuntimeError(f"ctc_loss(): log_probs must be a floating [T, N, C] or [T, C] tensor, got "
                           f"{lp.dtype.name} of shape {list(log_probs.shape)}")
    if targets.dtype.is_floating:
        raise RuntimeError(f"ctc_loss(): targets must be integers, got {targets.dtype.name}")
    tg = targets.unsqueeze(0) if unbatched else targets
    T, n, classes = lp.shape
    if not 0 <= blank < classes:
        raise RuntimeError("blank must be in label range")
    in_lengths = _lengths(input_lengths, "input_lengths", n, lp.device)
    tg_lengths = _lengths(target_lengths, "target_lengths", n, lp.device)
    for v in in_lengths:
        if v > T:
            raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value {v} (while "
                               "checking arguments for ctc_loss_allocate_outputs)")
        if v < 0:
            raise RuntimeError(f"ctc_loss(): input_lengths must be non-negative, got {v}")
    if tg.ndim == 2:
        for v in tg_lengths:
            if v > tg.shape[1]:
                raise RuntimeError(f"Expected tensor to have size at least {v} at dimension 1, but got size "
                                   f"{tg.shape[1]} for argument #2 'targets' (while checking arguments for "
                                   "ctc_loss_allocate_outputs)")
    elif tg.ndim == 1 and sum(tg_lengths) > tg.shape[0]:
        raise RuntimeError(f"ctc_loss(): target_lengths sum to {sum(tg_lengths)}, more than the {tg.shape[0]} "
                           "concatenated targets")
    with no_grad():
        ext, skip, ends = _extended(tg if tg.ndim == 2 else targets, tg_lengths, n, blank, lp.device)
        x = lp.detach()
        alpha = _recursion(x, ext, skip, ends, in_lengths, True)
        last = alpha[[max(v - 1, 0) for v in in_lengths], list(range(n))]  # [N, L'] at each sample's last frame
        end = tensor([e - 1 for e in ends], dtype=dtypes.int64, device=lp.device).reshape(n, 1)
        a1 = last.gather(1, end).reshape(n)
        a2 = last.gather(1, (end - 1).clamp(min=0)).reshape(n)
        a2 = where(end.reshape(n) > 0, a2, float("-inf"))
        nll = -_lse3(a1, a2, a1.new_full((n,), float("-inf")))
        empty = tensor([v == 0 for v in in_lengths], device=lp.device)
        # no frames: the empty target alone has probability 1
        nll = where(empty, where(tensor([v == 0 for v in tg_lengths], device=lp.device), 0.0, float("inf")), nll)
        infinite = nll == float("inf")
        if zero_infinity:
            nll = where(infinite, 0.0, nll)
    losses = nll.to(lp.dtype)

    def backward(g):
        with no_grad():
            beta = _recursion(x, ext, skip, ends, in_lengths, False)
            ab = alpha + beta  # [T, N, L']
            top = ab.amax(2, keepdim=True)
            top = where(top == float("-inf"), 0.0, top)
            mass = x.new_zeros((T, n, classes)).scatter_add(2, ext.unsqueeze(0).expand(T, n, ext.shape[1]),
                                                            (ab - top).exp())
            lcab = mass.log() + top
            grad = x.exp() - (lcab - x + nll.reshape(1, n, 1)).exp()
            frames = tensor(list(range(T)), dtype=dtypes.int64, device=x.device).reshape(T, 1, 1)
            live = frames < tensor(in_lengths, dtype=dtypes.int64, device=x.device).reshape(1, n, 1)
            if zero_infinity:
                live = live & ~infinite.reshape(1, n, 1)
            grad = where(live, grad * g.reshape(1, n, 1), 0.0)
            return ((grad.squeeze(1) if unbatched else grad).to(log_probs.dtype),)
    losses = record(losses, "CtcLoss", (log_probs,), backward)
    if reduction == "sum":
        out = losses.sum()
    elif reduction == "mean":
        divisor = tensor([max(v, 1) for v in tg_lengths], dtype=losses.dtype, device=lp.device)
        out = (losses / divisor).mean()
    else:
        out = losses
    return out.squeeze(0) if unbatched and reduction == "none" else out


__all__ = ["ctc_loss"]
