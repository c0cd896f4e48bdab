"""Memory planning for a recorded step: which buffer each storage made during a capture takes, decided
from a recording of the same step that came before.

A captured step (Runtime.capture, replay.py) owns the buffers of the storages it made for as long as it
lives, so its memory is the sum of those buffers. While it is first recorded its pool (CapturePool) can
only hand them out online, in the order the step asks: a request takes a free buffer of its size class or
a new one, not knowing which requests follow. ResNet-18's recorded step at batch 128 owned 735 MiB that way
(taking free buffers of up to twice the class, as the pool did then), where its storages alive at once never
took more than 600.

But a step that is recorded again asks for the same storages in the same order, and its first recording
says when each one was made and when it died. So its second recording can follow a plan made with all of
that known, as static memory planners for inference graphs do (TensorFlow Lite's "greedy by size"): the
requests by size, largest first, each into the smallest planned buffer that is at least as large and free
for its whole life, else into a new buffer of its size class. The largest requests are placed while every
buffer is still open to them, and a small request only ever fills a gap a larger one left. (Buffers are
bound whole: storages never share one at offsets.)

A storage that outlives the recording (a parameter's gradient, the returned loss) gets a buffer of its own,
as the online pool's would be. Its values stay readable through the next replay until the step itself
replaces them, as PyTorch's gradients stay until zero_grad(); and while the step is recorded again, the
first recording's such storages, still alive until the step drops them, are not counted twice over: sharing
a buffer with early activations, a gradient would have had its buffer in use from the forward pass on, beside
the first recording's gradient (the wide MLP's recording peaked at 455 MiB instead of 361).

The plan is a hint, never trusted: the pool takes a planned buffer only while the request matches the
first recording's and no live storage holds that buffer; anything else (a step that asked differently this
time) drops the plan and carries on online, so a wrong plan costs memory, never a wrong result.
"""

import bisect
from typing import NamedTuple


class BufferPlan(NamedTuple):
    """requests: the bytes each acquire asked for, in order; slots: the planned buffer of each; sizes: the
    size of each planned buffer (a size class)."""
    requests: tuple
    slots: tuple
    sizes: tuple

    @property
    def nbytes(self):
        return sum(self.sizes)


def lifetimes(events):
    """[(bytes asked, its acquire's event, its release's event)] per request, from a capture's events
    (CapturePool.events: ("acquire", bytes) per request, ("release", its index) when its storage dies). A
    storage that outlives the capture lives past the last event: it is held while the step is replayed."""
    made, end = [], {}
    for t, e in enumerate(events):
        if e[0] == "acquire":
            made.append((e[1], t))
        else:
            end[e[1]] = t
    forever = len(events)
    return [(nbytes, start, end.get(k, forever)) for k, (nbytes, start) in enumerate(made)]


def plan(events, size_class):
    """The BufferPlan of a capture's events (see lifetimes), greedy by size (module doc)."""
    lives = lifetimes(events)
    order = sorted(range(len(lives)), key=lambda k: (-size_class(lives[k][0]), lives[k][1]))
    sizes, slots = [], [None] * len(lives)
    starts, ends = [], []  # per planned buffer: its lives' starts, sorted, and their ends in the same order
    by_size = []  # (size, buffer), ascending: the first buffer free for a life is the smallest that fits
    forever = len(events)
    for k in order:
        nbytes, start, end = lives[k]
        need = size_class(nbytes)
        if end == forever:  # (a buffer of its own: see the module doc)
            slots[k] = len(sizes)
            sizes.append(need)
            starts.append(None)
            ends.append(None)
            continue
        chosen = None
        for size, b in by_size[bisect.bisect_left(by_size, (need, -1)):]:
            i = bisect.bisect_left(starts[b], start)
            if (i == 0 or ends[b][i - 1] <= start) and (i == len(starts[b]) or end <= starts[b][i]):
                chosen = b
                break
        if chosen is None:
            chosen = len(sizes)
            sizes.append(need)
            starts.append([])
            ends.append([])
            bisect.insort(by_size, (need, chosen))
            i = 0
        starts[chosen].insert(i, start)
        ends[chosen].insert(i, end)
        slots[k] = chosen
    return BufferPlan(tuple(n for n, _, _ in lives), tuple(slots), tuple(sizes))
