"""The memory plan of a recorded step (_backends/webgpu/memory_plan.py) and the capture pool that follows
it (memory.CapturePool), without a GPU: the pools' buffers here are plain objects.

- every planned buffer is free for the whole life of each request placed in it, and large enough;
- the plan is the greedy-by-size one (checked against a plain re-implementation on random steps);
- a storage that outlives the recording has a buffer of its own;
- a pool given a plan follows it while the step asks as it did, and drops it (going on online, never handing
  out a held buffer) when a request differs or its planned buffer is still held.
"""

import random

import pytest

from webgrad._backends.webgpu import memory_plan
from webgrad._backends.webgpu.memory import BufferPool, CapturePool, size_class

MIB = 1 << 20
SIZES = (100, 300, 1000, 4096, 5000, MIB, 3 * MIB // 2, 4 * MIB)


def _random_events(seed):
    rng = random.Random(seed)
    events, live, n = [], [], 0
    for _ in range(rng.randint(1, 80)):
        if live and rng.random() < 0.45:
            events.append(("release", live.pop(rng.randrange(len(live)))))
        else:
            events.append(("acquire", rng.choice(SIZES)))
            live.append(n)
            n += 1
    return events


def _greedy_by_size(events):
    """The plan's total bytes, as the module doc states the rule, by brute force."""
    lives = memory_plan.lifetimes(events)
    order = sorted(range(len(lives)), key=lambda k: (-size_class(lives[k][0]), lives[k][1]))
    sizes, busy = [], []
    for k in order:
        nbytes, start, end = lives[k]
        need = size_class(nbytes)
        fits = [b for b, size in enumerate(sizes) if size >= need and busy[b] is not None
                and all(end <= s or e <= start for s, e in busy[b])]
        if end == len(events) or not fits:
            sizes.append(need)
            busy.append(None if end == len(events) else [(start, end)])
        else:
            best = min(fits, key=lambda b: sizes[b])
            busy[best].append((start, end))
    return sum(sizes)


@pytest.mark.parametrize("seed", range(40))
def test_plan_places_each_request_in_a_large_enough_buffer_free_for_its_life(seed):
    events = _random_events(seed)
    plan = memory_plan.plan(events, size_class)
    lives = memory_plan.lifetimes(events)
    assert plan.requests == tuple(n for n, _, _ in lives)
    for a, (nbytes, start, end) in enumerate(lives):
        assert plan.sizes[plan.slots[a]] >= size_class(nbytes)
        for b in range(a):
            if plan.slots[a] == plan.slots[b]:
                assert end <= lives[b][1] or lives[b][2] <= start, (a, b)
    assert plan.nbytes == _greedy_by_size(events)


def test_plan_shares_buffers_and_keeps_one_for_what_outlives_the_step():
    events = [("acquire", 4 * MIB), ("release", 0),  # an activation, freed
              ("acquire", 3 * MIB // 2),  # a smaller one after it: takes its buffer
              ("acquire", 4096),  # outlives the step (a gradient): a buffer of its own
              ("release", 1)]
    plan = memory_plan.plan(events, size_class)
    assert plan.slots[0] == plan.slots[1] != plan.slots[2]
    assert plan.sizes == (4 * MIB, size_class(4096)) and plan.nbytes == 4 * MIB + size_class(4096)


def _pools():
    parent = BufferPool(lambda size: object())
    return parent, CapturePool(parent)


def _record(pool, events):
    """Replay `events` on `pool`: the buffers its requests got."""
    got = []
    for kind, value in events:
        if kind == "acquire":
            got.append(pool.acquire(value))
        else:
            pool.release(got[value])
    return got


STEP = [("acquire", 4 * MIB), ("release", 0), ("acquire", 3 * MIB // 2), ("acquire", MIB), ("release", 2),
        ("release", 1)]


def test_a_pool_follows_its_plan_where_the_step_asks_as_before():
    parent, first = _pools()
    _record(first, STEP)
    assert first.events == STEP and not first.planned
    online = sum(b.size for b in first.owned)  # 4 MiB, 1.5 MiB (its own class), 1 MiB
    plan = memory_plan.plan(first.events, size_class)
    planned = CapturePool(parent, plan)
    got = _record(planned, STEP)
    assert planned.planned and got[0] is got[1] and got[2] is not got[0]
    assert sum(b.size for b in planned.owned) == plan.nbytes == 5 * MIB < online
    assert planned.idle_bytes == 5 * MIB and parent.allocated == 0


def test_a_pool_drops_its_plan_where_a_request_differs():
    parent, first = _pools()
    _record(first, STEP)
    pool = CapturePool(parent, memory_plan.plan(first.events, size_class))
    a = pool.acquire(4 * MIB)
    pool.release(a)
    b = pool.acquire(2 * MIB)  # the plan's second request asked 1.5 MiB: online from here
    assert not pool.planned and b is not a and b.size == 2 * MIB  # online: its own class only
    assert pool.idle_bytes == 4 * MIB  # a's planned buffer, free, among the online pool's
    c = pool.acquire(4 * MIB)
    assert c is a
    pool.release(b)
    pool.release(c)
    assert parent.allocated == 0


def test_a_pool_never_hands_out_a_planned_buffer_that_is_held():
    parent, first = _pools()
    _record(first, STEP)
    pool = CapturePool(parent, memory_plan.plan(first.events, size_class))
    a = pool.acquire(4 * MIB)  # the step released it next: this time it is kept
    b = pool.acquire(3 * MIB // 2)  # planned into a's buffer, which is held: the plan is dropped
    assert not pool.planned and b is not a
    c = pool.acquire(MIB)
    assert len({id(a), id(b), id(c)}) == 3
    for buffer in (a, b, c):
        pool.release(buffer)
    assert parent.allocated == 0


def test_a_storage_freed_after_the_capture_outlived_the_step():
    # (the returned loss, dropped at the next call, while the step is recorded again: its release is not logged,
    # so the plan still gives it a buffer of its own)
    parent, pool = _pools()
    kept, temp = pool.acquire(4096), pool.acquire(MIB)
    pool.release(temp)
    pool.sealed = True
    pool.release(kept)
    assert pool.events == [("acquire", 4096), ("acquire", MIB), ("release", 1)]
    plan = memory_plan.plan(pool.events, size_class)
    assert plan.slots[0] != plan.slots[1]
