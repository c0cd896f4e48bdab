"""Per-kernel GPU time of a training step: `python -m webgrad.bench profile [--models cnn] [--batch-sizes 128]`.

Records one training step (the models and recipes of bench/train.py) with webgrad.replayable, then
re-encodes the recorded graph with every dispatch in a compute pass of its own, bracketed by timestamp
queries, and submits it `--repeats` times. Per dispatch it prints the median GPU time, in graph order,
then the same summed by kernel (matmuls by shape and tile configuration), and the step's total: the sum
of the dispatches, and the wall clock of a plain replay for comparison (one pass, no timestamps; it
includes the host's cost of submitting and waiting). Needs a native adapter with timestamp queries.

Separate passes add a little per-dispatch overhead (each pass end is a full barrier; within one pass
WebGPU orders dispatches with barriers too, so the difference is small) — the figures are for finding
where the time goes, not for adding up to the last microsecond.
"""

import argparse
import statistics
import struct
import time

import webgrad as wg
from webgrad._backends.webgpu import matmul_plan
from webgrad._backends.webgpu.runtime import default_runtime
from webgrad.bench.recipes import INPUT_SHAPES, MNIST_MODELS, SCALE_MODELS, TRANSFORMER_MODELS, benchmark_optimizer
from webgrad.models import train_step

ALL_MODELS = {**MNIST_MODELS, **SCALE_MODELS, **TRANSFORMER_MODELS}


def record_step(model_name, batch, amp=False):
    """The replayable training step after its recording and one replay, and its inputs. amp: the step of
    `bench train --amp` (autocast to float16 and a GradScaler)."""
    wg.manual_seed(0)
    model = ALL_MODELS[model_name]().to("webgpu")
    opt = benchmark_optimizer(model_name, model.parameters(), wg.optim)
    run = train_step(model, opt, amp="webgpu" if amp else None, replay=True)
    x = wg.rand(batch, *INPUT_SHAPES[model_name], device="webgpu")
    y = wg.randint(0, 10, (batch,), device="webgpu")
    for _ in range(3):  # eager warm-up, recording, one replay
        run(x, y)
    wg.webgpu.synchronize()
    return run, (x, y)


def _config_name(constants):
    if "WG" in constants:  # matmul_cpu.wgsl: 16 x 16 blocks, WG invocations per workgroup
        return f"cpu16x16 wg{constants['WG']}"
    keys = ("WG_X", "WG_Y", "TM", "TN", "BK", "KS")
    for name, c in matmul_plan.CONFIGS.items():
        if all(c[k] == constants.get(k) for k in keys):
            return name
    return ",".join(str(constants.get(k)) for k in keys)


def label(d):
    """A dispatch's name (a Runtime.describe entry): kernel entry point, and for matmuls the product's shape."""
    if d.kernel is None:
        return "?"
    name = f"{d.kernel.shader.name.removesuffix('.wgsl')}:{d.kernel.entry}"
    consts = dict(d.constants)
    raw = d.params
    if d.kernel.entry.startswith("matmul_reduce") and raw is not None:
        M, N = struct.unpack_from("<2I", raw)
        splits, batch = struct.unpack_from("<2I", raw, 56)
        return f"{name} {batch}x{M}x{N} splits={splits}"
    if d.kernel.entry.startswith("matmul_") and raw is not None:
        M, N, K = struct.unpack_from("<3I", raw)
        items, _, splits, batch = struct.unpack_from("<4I", raw, 48)
        t = ("T" if consts.get("TRANS_A") else "N") + ("T" if consts.get("TRANS_B") else "N")
        extra = (f" items={items}" if items > 1 else "") + (f" splits={splits}" if splits > 1 else "")
        gather = " gather" if consts.get("B_GATHER") else ""
        return f"{name} {batch}x{M}x{N}x{K} {t}{gather} {_config_name(consts)}{extra}"
    shown = ",".join(f"{k}={v}" for k, v in d.constants if not k.startswith("DT_"))
    return f"{name}" + (f" [{shown}]" if shown else "") + " groups=" + "x".join(map(str, d.groups))


def time_dispatches(rt, records, repeats):
    """Median GPU seconds of each dispatch record (copies are replayed but not timed)."""
    import wgpu

    device = rt.binding._device
    if "timestamp-query" not in device.features:
        raise SystemExit("this adapter has no timestamp queries: cannot profile")
    dispatches = [r for r in records if r[0] == 0]
    n = len(dispatches)
    queries = device.create_query_set(type=wgpu.QueryType.timestamp, count=2 * n)
    resolve = device.create_buffer(size=16 * n, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
    samples = [[] for _ in range(n)]
    for _ in range(repeats):
        encoder = device.create_command_encoder()
        i = 0
        for r in records:
            if r[0] == 0:
                cp = encoder.begin_compute_pass(timestamp_writes={
                    "query_set": queries, "beginning_of_pass_write_index": 2 * i,
                    "end_of_pass_write_index": 2 * i + 1})
                cp.set_pipeline(r[1])
                cp.set_bind_group(0, r[2])
                cp.dispatch_workgroups(r[3], r[4], r[5])
                cp.end()
                i += 1
            else:
                encoder.copy_buffer_to_buffer(r[1], r[2], r[3], r[4], r[5])
        encoder.resolve_query_set(queries, 0, 2 * n, resolve, 0)
        device.queue.submit([encoder.finish()])
        stamps = struct.unpack(f"<{2 * n}Q", device.queue.read_buffer(resolve))
        for j in range(n):
            samples[j].append(max(stamps[2 * j + 1] - stamps[2 * j], 0) * 1e-9)
    return dispatches, [statistics.median(s) for s in samples]


def replay_wall(run, inputs, seconds=0.5):
    """Seconds per plain replay, best of 3 bursts: (wall clock including the final wait, host time
    of the calls alone). Host < wall means the GPU is the bottleneck; host ~ wall, the host."""
    def burst(k):
        t0 = time.perf_counter()
        for _ in range(k):
            run(*inputs)
        t1 = time.perf_counter()
        wg.webgpu.synchronize()
        return (time.perf_counter() - t0) / k, (t1 - t0) / k
    k = max(5, int(seconds / burst(5)[0]))
    return min(burst(k) for _ in range(3))


def profile(model_name, batch, repeats, top):
    rt = default_runtime()
    run, inputs = record_step(model_name, batch)
    replay_wall(run, inputs, 1.0)  # clocks up
    wall, host = replay_wall(run, inputs)
    labels = [label(d) for d in rt.describe(run.graph.records)]
    dispatches, times = time_dispatches(rt, run.graph.records, repeats)
    total = sum(times)
    print(f"\n{model_name} batch {batch}: {len(dispatches)} dispatches, GPU sum {total * 1e6:.1f} us, "
          f"replay wall {wall * 1e6:.1f} us/step ({batch / wall:,.0f} samples/s), host {host * 1e6:.1f} us/step")
    print(f"{'#':>4} {'us':>8}  kernel")
    for i, (name, t) in enumerate(zip(labels, times)):
        print(f"{i:4d} {t * 1e6:8.1f}  {name}")
    by = {}
    for name, t in zip(labels, times):
        n, s = by.get(name, (0, 0.0))
        by[name] = (n + 1, s + t)
    print(f"\nby kernel (top {top}):\n{'us':>8} {'share':>6} {'n':>3}  kernel")
    for name, (n, s) in sorted(by.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"{s * 1e6:8.1f} {100 * s / total:5.1f}% {n:3d}  {name}")
    run.release()


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m webgrad.bench profile", description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["cnn"], choices=sorted(ALL_MODELS))
    p.add_argument("--batch-sizes", nargs="+", type=int, default=[128])
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args(argv)
    info = wg.webgpu.adapter_info()
    print(f"webgrad on WebGPU: {info.get('device') or info.get('description')} ({info.get('backend')})")
    for model in args.models:
        for batch in args.batch_sizes:
            profile(model, batch, args.repeats, args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
