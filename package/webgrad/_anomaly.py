"""Anomaly detection, as torch.autograd.detect_anomaly / set_detect_anomaly (exported by webgrad.autograd).

The engine (autograd.py) asks two things of this module: a forward traceback for each new Node
(:func:`forward_trace`, None unless anomaly mode is on) and a check of each backward's gradients
(:func:`check_anomaly`, called only in anomaly mode).
"""

import array
import math
import traceback

_anomaly = {"enabled": False, "check_nan": True}


def is_anomaly_enabled():
    return _anomaly["enabled"]


def is_anomaly_check_nan_enabled():
    return _anomaly["check_nan"]


class set_detect_anomaly:
    """Like torch.autograd.set_detect_anomaly(mode, check_nan=True): takes effect at once; as a `with`
    block, restores the previous setting at its end. While on, ops remember where they were called
    (forward tracebacks) and backward() checks every gradient an op returns: the first that holds NaN
    or infinity raises RuntimeError naming the op, as PyTorch's "Function 'LogBackward0' returned nan
    values in its 0th output." The check reads each gradient back: a sync per op, for debugging only."""

    def __init__(self, mode, check_nan=True):
        self.prev = dict(_anomaly)
        _anomaly["enabled"], _anomaly["check_nan"] = bool(mode), bool(check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _anomaly.update(self.prev)


class detect_anomaly(set_detect_anomaly):
    """``with webgrad.autograd.detect_anomaly():`` anomaly detection inside the block (see set_detect_anomaly)."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        super().__init__(True, self.check_nan)
        return self


def _non_finite(g):
    """"nan", "inf" or None: what of NaN / infinity the gradient `g` holds (read back to the host)."""
    if g.is_sparse:  # (nn.Embedding(sparse=True)'s gradient: its values are what it holds)
        g = g._values()
    if not g.dtype.is_floating or g.numel() == 0:
        return None
    data = g.device.backend.to_bytes(g.contiguous()._view)
    values = array.array("d" if g.dtype.itemsize == 8 else "f", data)
    # The sum of finite values is finite (a float32 sum in double precision always is; a float64 one
    # may overflow, hence the scan): one C-level pass clears the common case.
    if math.isfinite(sum(values)):
        return None
    if any(v != v for v in values):
        return "nan"
    return "inf" if any(math.isinf(v) for v in values) else None


_PACKAGE_DIR = __file__.rsplit("_anomaly.py", 1)[0]


def _user_stack():
    """The calling stack, formatted, without webgrad's own frames (the op's internals)."""
    frames = [f for f in traceback.extract_stack() if not f.filename.startswith(_PACKAGE_DIR)]
    return traceback.format_list(frames)


def forward_trace():
    """What a new Node keeps as its forward traceback: the user's stack in anomaly mode, else None."""
    return _user_stack() if _anomaly["enabled"] else None


def check_anomaly(node, input_grads):
    """In anomaly mode, raise for the first gradient of `node`'s backward that holds NaN / inf; returns
    the gradients (as a tuple)."""
    input_grads = tuple(input_grads)
    if not _anomaly["check_nan"]:
        return input_grads
    for i, g in enumerate(input_grads):
        if g is None:
            continue
        bad = _non_finite(g)
        if bad is not None:
            where = ""
            if node.trace:
                where = "\n\nTraceback of the forward call that caused the error:\n" + "".join(node.trace)
            raise RuntimeError(f"Function '{node.name_()}' returned {bad} values in its {i}th output.{where}")
    return input_grads
