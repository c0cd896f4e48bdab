"""Autocast's casts of a half product's result back to float32 folded into the product, in a captured step (run
by fusion.fuse first).

Under autocast a half product's result that meets float32 again (an input gradient flowing into LayerNorm's
backward, logits into a float32 loss) is cast back: a pass through memory for each (H200, gpt-6x384: 86 casts
back took 614 us of a 15.4 ms step). The product can store float32 itself: matmul.wgsl's "f32h" element type
(typed.py) stores its float16-rounded result as float32, the same rounding, to the bit, as the product's half
store then the cast: a replay computes what the recorded step computed.

A contiguous float16 -> float32 cast (f16.wgsl's f_from_h4) whose input only one matmul.wgsl record wrote, all of
it, and nothing else reads, is dropped; that record stores its result into the cast's output as f32h, at its own
place where nothing between touches that output, else at the cast's, where nothing between writes what it reads.
A product whose epilogue also writes GELU (fusion.py's linear_activation) keeps its float16 output. A weight
gradient's cast back usually stays: its float32 output takes the buffer of the product's input freed meanwhile,
which one dispatch cannot both read and write.

H200, gpt-6x384's autocast step (`bench replay --amp`): 508 -> 472 dispatches, 15.42 -> 15.30 ms of GPU time.
The other direction, a product reading a float32 weight rounded to float16 as it stages it instead of a float16
copy, computes the same too but was slower: 421 dispatches and 16.77 ms with both directions. A product reads each
weight element once per tile of rows and would round it each time (tens of times a step), where the cast rounds it
once and the product then reads half the bytes.

`python -m webgrad.bench replay --models gpt-6x384 --amp` shows the step's dispatches with and without
(WEBGRAD_FUSE=0).
"""

from ...dtypes import float16, float32
from . import f16, matmul, matmul_plan

_TO_FLOAT = f16.CONTIGUOUS_CASTS[(float32, float16)]  # f_from_h4: binding 0 the float32 result, 1 the half input

# matmul_plan._PARAMS fields
_M, _N, _O_OFF, _SPLITS, _BATCH = 0, 1, 6, 14, 15


def _nothing(t):
    """What stands at a dropped record's place in the trace: a record (recording.TracedRecord) binding nothing."""
    return t._replace(launch=None, serials=(), buffers=(), refs=())


def _cast(t, kernel):
    """(n, out offset, input offset) of a record of the contiguous cast `kernel`, or None."""
    if t.launch is None or t.launch.kernel is not kernel or t.launch.params is None:
        return None
    n, _, out_offset, in_offset = f16._CAST_PARAMS.unpack(t.launch.params)[:4]
    return n, out_offset, in_offset


def _replaced(t, slot, source, slot_of_source):
    """Trace record t with its binding `slot` taken by the storage of record `source`'s binding `slot_of_source`."""
    def swap(values, new):
        return values[:slot] + (new,) + values[slot + 1:]
    return t._replace(serials=swap(t.serials, source.serials[slot_of_source]),
                      buffers=swap(t.buffers, source.buffers[slot_of_source]),
                      refs=swap(t.refs, source.refs[slot_of_source]))


class _Folder:
    def __init__(self, trace, records, rt, clear_between):
        self.trace, self.records, self.rt = trace, records, rt
        self.clear_between = clear_between  # fusion._Fuser's check, on this trace
        self.users = {}
        for i, t in enumerate(trace):
            for s in t.serials:
                self.users.setdefault(s, []).append(i)

    def _set(self, i, t, launch):
        self.trace[i] = t._replace(launch=launch)
        self.records[i] = self.rt.dispatch_record(launch, t.buffers)

    def _relaunch(self, launch, types, offsets):
        """`launch` (a matmul.wgsl record's) on element `types`, with the Params fields in `offsets` changed."""
        f = list(matmul_plan._PARAMS.unpack(launch.params))
        for field, value in offsets.items():
            f[field] = value
        kernel = matmul.retyped(launch.kernel, types)
        return self.rt.launch(kernel, launch.constants, matmul_plan._PARAMS.pack(*f), launch.groups, launch.slots)

    def from_product(self, j):
        """Fold the float16 -> float32 cast at record j into the product that wrote its input; the index of the
        record dropped, or None."""
        c = self.trace[j]
        cast = _cast(c, _TO_FLOAT)
        if cast is None or c.refs[1]() is not None:
            return None
        n, y_off, h_off = cast
        writers = self.users[c.serials[1]]
        if len(writers) != 2 or writers[1] != j:
            return None
        i = writers[0]
        t = self.trace[i]
        typed = None if t.launch is None or t.launch.params is None else matmul.element_types_of(t.launch.kernel)
        if typed is None or typed[1] is not None or typed[0][2] != "f16" or t.serials.count(c.serials[1]) != 1:
            return None
        f = matmul_plan._PARAMS.unpack(t.launch.params)
        split = f[_SPLITS] > 1 and not t.launch.kernel.entry.startswith("matmul_reduce")
        # (storages share pooled buffers: the output's may be the product's own output buffer, not one it reads)
        if (split or t.serials[2] != c.serials[1] or f[_O_OFF] != h_off or f[_BATCH] * f[_M] * f[_N] != n
                or c.buffers[0] in (t.buffers[0], t.buffers[1], t.buffers[3])):
            return None
        if self.clear_between(i, j, (i, j), reads=(), writes={c.buffers[0]}):
            place, gone = i, j
        elif self.clear_between(i, j, (i, j), reads={t.buffers[0], t.buffers[1], t.buffers[3]}, writes=()):
            place, gone = j, i
        else:
            return None
        types = list(typed[0])
        types[2] = "f32h"
        launch = self._relaunch(t.launch, types, {_O_OFF: y_off})
        self._set(place, _replaced(t, 2, c, 0), launch)
        self.trace[gone] = _nothing(t)
        return gone


def fold_casts(trace, records, rt, clear_between):
    """Fold the casts back to float32 of a captured step's `trace` into its products (module doc), in place: `trace`
    and `records` (lists of one length) get the rewritten products and, at each dropped record's place, a record
    binding nothing. clear_between(start, end, chain, reads, writes): fusion's check on this trace. Returns the
    indices of the dropped records."""
    folder = _Folder(trace, records, rt, clear_between)
    dropped = set()
    for j in range(len(trace)):
        gone = folder.from_product(j)
        if gone is not None:
            dropped.add(gone)
    return dropped
