"""The in-page half of the browser benchmark (`python -m tools.bench_browser`): MNIST training speed of one
model at one batch size, on the data the App already holds on the GPU, measured where the page trains
(Pyodide + WebGPU).

    samples_per_s   steady state, trained as the page trains (the loss read back every 10 steps; the
                    step replayed with webgrad.replayable, or run eagerly with replay=False)
    host_ms         Python + FFI time to issue one step (autograd, kernel records, submits): the CPU side
    gpu_ms          one step's GPU work alone: the step's recording replayed (no Python), per step
    profile         optional: [kernel, workgroups, ms] of one step, each recorded dispatch submitted and
                    timed on its own, less an empty submit's time (for finding where the time goes)
"""

import time

import webgrad as wg
from webgrad import webgpu
from webgrad.models import train_step

from . import models

READ_EVERY = 10


class _Steps:
    """Training steps of a fresh model on shuffled batches of the whole training set."""

    def __init__(self, app, kind, batch_size, replay):
        self.model = models.build(kind, app.device)
        self.opt = wg.optim.Adam(self.model.parameters(), lr=1e-3)
        self.loader = app.data.train_loader(len(app.data.train), batch_size)
        self.batches = iter(self.loader)
        self.loss_sum = wg.zeros((), device=app.device)
        self.train_step = train_step(self.model, self.opt, replay=replay)  # the step the page trains with

    def __call__(self):
        try:
            x, y = next(self.batches)
        except StopIteration:
            self.batches = iter(self.loader)
            x, y = next(self.batches)
        self.loss_sum.add_(self.train_step(x, y).detach())

    async def read_loss(self):
        value = await self.loss_sum.item_async()
        self.loss_sum.zero_()
        return value


async def measure(app, kind, batch_size, steps=50, warmup=10, replays=20, replay=True, profile=False):
    step = _Steps(app, kind, batch_size, replay)
    for _ in range(warmup):  # pipelines compiled, buffers pooled
        step()
    await step.read_loss()

    host = 0.0
    start = time.perf_counter()
    for i in range(steps):
        t = time.perf_counter()
        step()
        host += time.perf_counter() - t
        if (i + 1) % READ_EVERY == 0 or i == steps - 1:
            await step.read_loss()
    wall = time.perf_counter() - start
    result = {"model": kind, "batch_size": batch_size, "steps": steps, "replay": replay,
              "samples_per_s": steps * batch_size / wall, "step_ms": 1000 * wall / steps, "host_ms": 1000 * host / steps}

    backend = wg.device(app.device).backend
    if replay:
        graph = step.train_step.graph
    else:
        with backend.capture() as graph:
            step()
    webgpu.synchronize()
    start = time.perf_counter()
    for _ in range(replays):
        graph.replay()
    webgpu.synchronize()
    result["gpu_ms"] = 1000 * (time.perf_counter() - start) / replays
    result["dispatches_per_step"] = graph.dispatches
    if profile:
        result["profile"] = _profile(backend.runtime, graph)
    if not replay:
        graph.release()
    return result


def _profile(runtime, graph, repeats=3):
    """Each dispatch of a recorded step submitted alone (best of `repeats`), minus an empty submit's
    time: [kernel, workgroups, ms], the slowest first. The runtime names each recorded dispatch
    (Runtime.describe); submit and wait are the binding interface (see _backends/webgpu/runtime.py)."""
    binding = runtime.binding
    runtime.synchronize()

    def best(records):
        fastest = float("inf")
        for _ in range(repeats):
            t = time.perf_counter()
            binding.submit([records])
            binding.wait()
            fastest = min(fastest, time.perf_counter() - t)
        return fastest

    empty = best([])
    rows = {}
    for d in runtime.describe(graph.records):
        name = f"{d.kernel.shader.name}:{d.kernel.entry}" if d.kernel is not None else "?"
        key = (name, "x".join(map(str, d.groups)))
        rows[key] = rows.get(key, 0.0) + max(best([d.record]) - empty, 0.0)
    return sorted(([k, g, 1000 * t] for (k, g), t in rows.items()), key=lambda row: -row[2])
