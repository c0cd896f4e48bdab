"""How tensors print (repr), as PyTorch prints them.

A tensor of more than `threshold` elements (1000) is summarised: each dim longer than 2 * `edgeitems`
(3) shows its first and last `edgeitems` entries around "...". Only those entries are read from the
device (one gather per summarised dim), so printing a 50,000 x 784 tensor reads 36 numbers, not 157 MB.
Number formatting (fixed or scientific, the column width) is chosen from the values shown, and rows
wrap at 80 columns, as PyTorch's defaults.
"""

from . import devices, dtypes
from ._tensor import _nest, tensor
from .ops.shape import index_select

_options = {"threshold": 1000, "edgeitems": 3}
_LINEWIDTH = 80


def set_printoptions(threshold=None, edgeitems=None, **ignored):
    """torch.set_printoptions for summarising (threshold, edgeitems); precision and linewidth are accepted
    and ignored (webgrad prints 4 decimals, as PyTorch's default)."""
    if threshold is not None:
        _options["threshold"] = threshold
    if edgeitems is not None:
        _options["edgeitems"] = edgeitems


def format_tensor(t):
    if t.device.type == "meta":  # no values to show: torch prints the size instead
        body, extras = "...", ["device='meta'", f"size={tuple(t.shape)}"]
    else:
        body, extras = _format_values(t), []
        if t.device.type != devices.get_default_device().type:
            extras.append(f"device='{t.device}'")
    # PyTorch leaves out its defaults (float32, and int64 unless the tensor is empty)
    if t.dtype not in (dtypes.float32, dtypes.bool_, dtypes.complex64) and not (
            t.dtype is dtypes.int64 and t.numel() > 0):
        extras.append(f"dtype={t.dtype!r}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name_()}>")  # (torch prints no address here)
    elif t.requires_grad:
        extras.append("requires_grad=True")
    text = _add_suffixes("tensor(" + body, extras, indent=len("tensor("))
    return text if type(t).__module__.split(".")[0] == "webgrad" else _named(text, type(t).__name__ + "(")


def _named(text, prefix):
    """A user's Tensor subclass prints under its class name (``MyTensor([1., 2.])``, as torch's): the prefix
    replaces "tensor(" and the continuation lines move with it."""
    shift = " " * len(prefix)
    lines = text.split("\n")
    return "\n".join([prefix + lines[0][len("tensor("):]] + [
        shift + line[len("tensor("):] if line.startswith(" " * len("tensor(")) else line for line in lines[1:]])


def _add_suffixes(text, suffixes, indent):
    """Each suffix (device=..., grad_fn=...) after ", ", or on a line of its own where it would pass the line
    width, as PyTorch's _add_suffixes (its count of the last line's length included)."""
    parts, last_line = [text], len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line + len(suffix) + 2 > _LINEWIDTH:
            parts.append(",\n" + " " * indent + suffix)
            last_line = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line += len(suffix) + 2
    return "".join(parts) + ")"


def _summarised(t, edge):
    """(t restricted to the entries shown, per dim: is it summarised)."""
    cut = [n > 2 * edge for n in t.shape]
    shown = t.detach()
    for d, n in enumerate(t.shape):
        if cut[d]:
            idx = list(range(edge)) + list(range(n - edge, n))
            shown = index_select(shown, d, tensor(idx, dtype=dtypes.int32, device=t.device))
    return shown, cut


def _special(v):
    return "nan" if v != v else ("inf" if v > 0 else "-inf")


def _strings(t, flat):
    """PyTorch's number formatting: integers as "3.", else 4 decimals, scientific when the nonzero finite
    magnitudes span more than 1000x, exceed 1e8 or go below 1e-4."""
    if t.dtype.is_floating:
        return _float_strings(flat)
    if t.dtype is dtypes.bool_:
        return ["True" if v else "False" for v in flat]
    return [str(v) for v in flat]


def _float_strings(flat):
    """PyTorch's formatting of floating values (see _strings)."""
    finite = [abs(v) for v in flat if v == v and abs(v) != float("inf") and v != 0]
    ints = all(v == int(v) for v in finite)
    mx, mn = (max(finite), min(finite)) if finite else (0.0, 0.0)
    wide = bool(finite) and (mx / mn > 1000.0 or mx > 1.0e8)
    if ints:
        fmt = "{:.4e}" if wide else "{:.0f}."
    else:
        fmt = "{:.4e}" if wide or (finite and mn < 1.0e-4) else "{:.4f}"
    return [fmt.format(v) if v == v and abs(v) != float("inf") else _special(v) for v in flat]


def _complex_strings(pairs):
    """Complex numbers from their flat (real, imag) pairs, as torch prints them: the real parts formatted
    together and padded to one width, the imaginary parts formatted together, signed, unpadded, with a j."""
    re, im = _float_strings(pairs[0::2]), _float_strings(pairs[1::2])
    width = max(len(s) for s in re)
    return [r.rjust(width) + ("" if i.startswith("-") else "+") + i + "j" for r, i in zip(re, im)]


def _column_width(t, flat, strs):
    """The width every value is padded to. PyTorch's float formatter measures only the nonzero finite values
    (at least 1), so nan, inf and zeros never widen a column: tensor([-0., 1.]), tensor([nan, 1.])."""
    if t.dtype.is_floating and not t.dtype.is_complex:
        return max([1] + [len(s) for s, v in zip(strs, flat) if v == v and v != 0 and abs(v) != float("inf")])
    return max(len(s) for s in strs)


def _format_values(t):
    if t.numel() == 0:
        return "[]" if t.ndim <= 1 else f"[], size={tuple(t.shape)}"
    edge = _options["edgeitems"]
    # a complex tensor is summarised and read through its (real, imag) pairs (webgrad/_complex.py)
    data = t._r.detach() if t.dtype.is_complex else t
    if t.numel() > _options["threshold"]:
        shown, cut = _summarised(data, edge)
    else:
        shown, cut = data, [False] * data.ndim
    flat = shown._decode(shown._bytes())
    strs = _complex_strings(flat) if t.dtype.is_complex else _strings(t, flat)
    width = _column_width(t, flat, strs)
    strs = [s.rjust(width) for s in strs]
    nested = _nest(strs, shown._view.shape[:t.ndim])
    ndim = t.ndim

    def render(x, depth):
        if not isinstance(x, list):
            return x
        if not x or not isinstance(x[0], list):
            items = list(x)
            if cut[depth]:
                items = items[:edge] + [" ..."] + items[edge:]
            # rows wrap at 80 columns, as PyTorch's linewidth
            indent = 7 + depth
            per_line = max(1, (_LINEWIDTH - indent) // (width + 2))
            lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
            return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
        rows = [render(v, depth + 1) for v in x]
        if cut[depth]:
            rows = rows[:edge] + ["..."] + rows[edge:]
        sep = "," + "\n" * (ndim - depth - 1) + " " * (8 + depth)
        return "[" + sep.join(rows) + "]"

    return render(nested, 0)
