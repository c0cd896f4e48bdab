"""Recording and replay: a captured step's records, fused at its seal and re-issued in one call into the binding."""

import itertools
import os
import weakref
from typing import NamedTuple

from . import memory_plan
from .fusion import fuse
from .memory import CapturePool, size_class


REPLAN_SHARE = 16
REPLAN_MIN_BYTES = 1 << 20


class TracedRecord(NamedTuple):
    """What a captured record ran on: its Launch (None: a copy or an upload), and per storage binding (in
    binding order) the storage's serial, its PooledBuffer and a weak reference to it."""

    launch: object
    serials: tuple
    buffers: tuple
    refs: tuple


# A long replay goes to the GPU in parts, each submitted as soon as it is encoded: after a read-back the GPU
# starts on the first few records while the host encodes the rest, instead of idling through the encoding of
# the whole step (ResNet-18's 627 records: about 2 ms natively, 2.7 through Dawn, against a 10.8 ms step). Each
# part is SUBMIT_GROWTH times the one before, so that its GPU time covers the encoding of the next. Steps of
# fewer than SUBMIT_SPLIT_MIN records (MNIST's, whose encoding is short) go in one submit: each submit costs
# host time of its own (a Pyodide FFI call in the browser).
SUBMIT_SPLIT_MIN = 200
SUBMIT_FIRST = 16
SUBMIT_GROWTH = 3


def replay_parts(records):
    """`records` cut into the parts a replay submits one after another (one part if they are few)."""
    if len(records) < SUBMIT_SPLIT_MIN:
        return [records]
    parts, start, size = [], 0, SUBMIT_FIRST
    while len(records) - start > 2 * size:
        parts.append(records[start:start + size])
        start, size = start + size, size * SUBMIT_GROWTH
    return parts + [records[start:]]


# A captured step's records are fused at its seal (fusion.py); WEBGRAD_FUSE=0 keeps them as recorded.
FUSE = {"on": os.environ.get("WEBGRAD_FUSE") != "0"}


class Graph:
    """A recorded sequence of GPU work (one training step, say) that can be re-issued.

    Made by ``with runtime.capture() as graph:``: the work inside runs normally *and* is recorded.
    ``graph.replay()`` issues the same dispatches and copies again, on the same buffers, in one call
    into the binding, without running any Python op code. To feed new data, write it into the input
    storages (``backend.write``) before replaying; to change scalars, use DynamicScalars. Results are
    found in the same storages as after the capture.

    The graph keeps alive every storage it reads or writes that was made before the capture, and owns
    the buffers of storages made during it (they return to the pool when the graph is released).
    """

    def __init__(self, runtime, plan=None, plannable=False):
        self._runtime = runtime
        self.plannable = plannable  # see Runtime.capture
        self.records = []
        self.buffers = set()  # PooledBuffers the records use (for write ordering)
        self.slots = set()  # dynamic scalar slots the records read
        self.pool = CapturePool(runtime.pool, plan)
        self._keep = {}  # id -> Storage made before the capture and used by it
        self._uploads = []  # buffers holding data written during the capture
        self._parts = None  # the records prepared for the binding, in the parts a replay submits
        self._failed = False
        self.checks_errors = False  # whether a recorded kernel may set the error word (see error_code)
        # Values read back while recording (Runtime.read): the host decided something from them that a replay,
        # which runs only the recorded GPU work, would repeat unchanged. Such a graph refuses to replay.
        self.read_backs = 0
        self._plan_gain = None  # see plan_gain
        self.better_plan = None  # the plan plan_gain found, where it pays
        # Per record, for fusion.py at the seal: a TracedRecord. Storages are told apart by a serial (an id
        # can be reused once its storage is gone) and held weakly, so that the seal sees which outlive the step.
        self.trace = []
        self.fused = 0  # chains fusion.py fused at the seal
        self.grouped = 0  # sgd4 updates fusion.py grouped into sgd4_group dispatches at the seal
        self.dead = 0  # dispatches fusion.py dropped at the seal: nothing read their results
        self._serials = weakref.WeakKeyDictionary()
        self._next_serial = itertools.count()

    def _add(self, record, storages, slots, launch=None):
        self.records.append(record)
        serials = []
        for s in storages:
            self.buffers.add(s.buffer)
            if s.pool is not self.pool:
                self._keep[id(s)] = s
            serial = self._serials.get(s)
            if serial is None:
                serial = self._serials[s] = next(self._next_serial)
            serials.append(serial)
        self.trace.append(TracedRecord(launch, tuple(serials), tuple(s.buffer for s in storages),
                                       tuple(weakref.ref(s) for s in storages)))
        self.slots.update(slots)

    def _seal(self, failed):
        self._failed = failed
        self.pool.sealed = True
        if not failed:
            if FUSE["on"]:
                self.records = fuse(self, self._runtime)
            self.trace = None  # (its weak references and launches are needed no longer)
            self._parts = [self._runtime.binding.prepare(part) for part in replay_parts(self.records)]
            self._dispatch_count = self.dispatches  # counted once, not at every replay

    @property
    def dispatches(self):
        return sum(1 for r in self.records if r[0] == 0)

    @property
    def idle_bytes(self):
        """Bytes of the buffers the graph owns that no live storage holds (its intermediates): not in
        the pool's `allocated`, yet a replay writes into them, so no one else may use them meanwhile."""
        return self.pool.idle_bytes

    @property
    def own_bytes(self):
        """Bytes of every buffer the graph owns: its intermediates' (idle_bytes) and those of the storages it
        made that outlive it (a parameter's gradient, the returned loss)."""
        return sum(b.size for b in self.pool.owned)

    @property
    def plan_gain(self):
        """Bytes that recording this step again, planned from this recording (capture(replacing=self);
        memory_plan.py), would save: 0 unless that is at least 1/REPLAN_SHARE of own_bytes and REPLAN_MIN_BYTES,
        and where this graph was not recorded plannable (Runtime.capture), cannot be replayed or was planned."""
        if self._plan_gain is None:
            self._plan_gain = 0
            if self.plannable and self._parts is not None and not self.read_backs and not self.pool.planned:
                plan = memory_plan.plan(self.pool.events, size_class)
                gain = self.own_bytes - plan.nbytes
                if gain * REPLAN_SHARE >= self.own_bytes and gain >= REPLAN_MIN_BYTES:
                    self._plan_gain, self.better_plan = gain, plan
        return self._plan_gain

    def replay(self):
        """Submit the recorded work again, with any eager work recorded before it (without waiting)."""
        if self._parts is None:
            raise RuntimeError(
                "this graph cannot be replayed: "
                + ("its capture raised an exception" if self._failed else "it was released")
            )
        if self.read_backs:
            raise RuntimeError(
                f"this graph cannot be replayed: its capture read {self.read_backs} value(s) back from the GPU "
                "(.item(), .tolist(), .numpy(), a tensor printed or used in a Python condition, an optimizer "
                "that takes a closure such as LBFGS), and a replay runs only the recorded GPU work, repeating "
                "whatever was decided from those values. Capture work that reads nothing back "
                "(webgrad.replayable runs such a step eagerly instead)")
        self._runtime._replay(self)

    def release(self):
        """Give the graph's buffers back to the pool; the graph cannot be replayed afterwards."""
        if self._parts is not None or not self.pool.closed:
            self._parts = None
            self.records = []
            self._keep = {}
            self._uploads = []
            self.pool.close()

    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutdown
            pass

