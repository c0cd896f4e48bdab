"""Autocast's casts folded into the products beside them, in a captured step (run by fusion.fuse first).

Under autocast a linear layer casts its float32 weight (and a float32 activation or gradient) to float16 before
the half product, and a half product's result that meets float32 again (a weight's gradient, an input gradient
flowing into LayerNorm's backward) is cast back. Each cast is a pass through memory, and a GPT's step has about
two hundred of them (H200, gpt-6x384: 123 casts to half took 761 us and 86 back 614 us of a 15.4 ms step). The
product can do both itself: matmul.wgsl's "f32h" element type (typed.py) reads a float32 operand rounded to float16
as it stages it, and stores a float16-rounded result as float32. That is the same rounding, to the bit, as the
cast: a replay computes what the recorded step computed.

Read side: a contiguous float32 -> float16 cast (f16.wgsl's h_from_f4) whose result only matmul.wgsl records read,
as operand a or b (or bound where the record reads nothing: a reduction's binding 1, a product's bias binding
without a bias), and which does not outlive the capture, is dropped; each product reads the cast's input instead,
as f32h, at the same place. Nothing between the cast and its last reader may write the input (a weight is written
by the optimizer only after the backward; an activation's buffer, freed after the cast, is usually taken by a
later storage: then the cast stays).

Write side: a contiguous float16 -> float32 cast (f_from_h4) whose input only one matmul.wgsl record wrote, all of
it, and nothing else reads, is dropped; that record stores its result into the cast's output as f32h (at its own
place where nothing between touches that output, else at the cast's, where nothing between writes what it reads).
A product whose epilogue also writes GELU (fusion.py's linear_activation) keeps its float16 output.

`python -m webgrad.bench replay --models gpt-6x384 --amp` shows the step's dispatches with and without
(WEBGRAD_FUSE=0).
"""

from ...dtypes import float16, float32
from . import f16, matmul, matmul_plan

_TO_HALF = f16.CONTIGUOUS_CASTS[(float16, float32)]  # h_from_f4: binding 0 the half result, 1 the float32 input
_TO_FLOAT = f16.CONTIGUOUS_CASTS[(float32, float16)]  # f_from_h4: binding 0 the float32 result, 1 the half input

# matmul_plan._PARAMS fields
_M, _N, _K, _A_OFF, _B_OFF, _O_OFF, _A_BS, _B_BS, _ITEMS, _SPLITS, _BATCH = 0, 1, 2, 4, 5, 6, 8, 9, 12, 14, 15


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

    def into_products(self, i):
        """Fold the float32 -> float16 cast at record i into the products that read its result; True if done."""
        t = self.trace[i]
        cast = _cast(t, _TO_HALF)
        if cast is None or t.refs[0]() is not None:
            return False
        n, h_off, x_off = cast
        half = t.serials[0]
        readers = self.users[half]
        if readers[0] != i or len(readers) < 2:
            return False
        rebound = {}
        for k in dict.fromkeys(readers[1:]):
            u = self.trace[k]
            typed = None if u.launch is None or u.launch.params is None else matmul.element_types_of(u.launch.kernel)
            if typed is None or t.buffers[1] in [b for s, b in enumerate(u.buffers) if s == 2 or s == 5]:
                return False
            types, launch = list(typed[0]), u.launch
            f = matmul_plan._PARAMS.unpack(launch.params)
            constants = dict(launch.constants)
            reduction = launch.kernel.entry.startswith("matmul_reduce")
            offsets = {}
            for slot, serial in enumerate(u.serials):
                if serial != half:
                    continue
                if slot == 1 and reduction or slot == 3 and not constants.get("HAS_BIAS"):
                    continue  # bound, never read
                if slot not in (0, 1) or reduction or types[slot] != "f16" or slot == 1 and constants.get("B_GATHER"):
                    return False
                field, bs, size = (_A_OFF, _A_BS, f[_M] * f[_K]) if slot == 0 else (_B_OFF, _B_BS, f[_K] * f[_N])
                start = f[field] - h_off
                if start < 0 or start + (f[_BATCH] * f[_ITEMS] - 1) * f[bs] + size > n:
                    return False  # reads outside what the cast wrote
                offsets[field] = x_off + start
                types[slot] = "f32h"
            rebound[k] = (types, offsets)
        if not self.clear_between(i, readers[-1], set(readers), reads={t.buffers[1]}, writes=()):
            return False
        for k, (types, offsets) in rebound.items():
            u = self.trace[k]
            for slot in range(len(u.serials)):
                if u.serials[slot] == half:
                    u = _replaced(u, slot, t, 1)
            launch = self._relaunch(u.launch, types, offsets) if offsets else u.launch
            self._set(k, u, launch)
        self.trace[i] = _nothing(t)
        return True

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
    """Fold the casts of a captured step's `trace` into its products (module doc), in place: `trace` and `records`
    (lists of one length) get the rewritten products and, at each dropped record's place, a TracedRecord binding
    nothing. clear_between(start, end, chain, reads, writes): fusion's check on this trace. Returns the indices of
    the dropped records."""
    dropped = set()
    folder = _Folder(trace, records, rt, clear_between)
    dropped.update(i for i in range(len(trace)) if folder.into_products(i))
    folder = _Folder(trace, records, rt, clear_between)  # (the readers of the casts' inputs changed)
    for j in range(len(trace)):
        gone = folder.from_product(j)
        if gone is not None:
            dropped.add(gone)
    return dropped
