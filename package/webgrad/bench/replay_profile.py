"""Where a replayed training step's time goes, on either binding:
`python -m webgrad.bench replay [--models transformer cnn gpt2-small] [--batch-sizes N] [--each] [--list] [--amp]
[--attention sdpa|manual]` natively (wgpu-py), `python tools/bench_dawn.py --profile [same arguments]` in Pyodide
on Dawn.

The same code runs on both bindings so that their figures compare line by line. For each model it records
one training step (webgrad.replayable, the models and recipes of bench train and bench scale; the GPTs, gpt-6x384
and gpt2-small or `gpt` for both, as bench scale builds and trains them: random tokens, AdamW, and with --attention
manual nanoGPT's hand-written attention instead of F.scaled_dot_product_attention) and prints:

  dispatches  the recorded step's dispatches, copies and compute passes, and a digest of its dispatch list
              (kernel entry points, override constants, workgroup grids: Runtime.describe through bench
              profile's labels); equal digests mean both bindings chose the same kernels (--list prints it)
  wall        seconds per replay in a loop of replays, including the final wait (bench profile's replay_wall)
  loop        the same in bench train's loop (the loss read back every 10 steps), and one read-back's round trip
  host        the host's seconds per replay call alone (Python, the FFI, encoding, queue.submit), and of
              that, inside binding.submit (in Pyodide: the conversion to JS, the FFI call, encode.js's
              encoding and Dawn's submit); then the recorded records alone, submitted again and again:
              host time encoding them, in encoder.finish() and in queue.submit()
  GPU span    the GPU's time from before the step's first command to after its last, encoded as a replay
              encodes it (timestamp queries around it; median of --repeats submits)
  reads       with --reads N: bench train's loop segment by segment (10 replays, then the loss read back, or
              a synchronize), the time each wait took against 10 steps of GPU span
  GPU sum     with --each: the sum of every dispatch timed in a compute pass of its own, and the top kernels

Reading it: wall ~ host > GPU span means the host is the bottleneck; wall ~ GPU span > host, the GPU; GPU span
well above GPU sum, per-pass or per-dispatch costs between kernels (barriers, pass boundaries).
Needs the "timestamp-query" feature (on Dawn, quantised unless the toggle timestamp_quantization is off:
tools/bench_dawn.py --profile turns it off).
"""

import argparse
import hashlib
import statistics
import sys
import time

import webgrad as wg
from webgrad._backends.webgpu.runtime import default_runtime
from webgrad.bench import profile as _profile
from webgrad.bench.profile import label, replay_wall
from webgrad.bench.recipes import GPT_MODELS, benchmark_batches, benchmark_optimizer, benchmark_step

from webgrad.bench.scale import BATCH as _SCALE_BATCH, CHOICES as _SCALE_CHOICES

ALL_MODELS = {**_profile.ALL_MODELS, **GPT_MODELS}
BATCH = {**_SCALE_BATCH, "mlp": 128, "cnn": 128}  # bench scale's, and bench train's for the MNIST models


def record_step(model_name, batch, amp=False, attention="sdpa"):
    """The replayable training step of `model_name` after its recording and one replay, and its inputs (bench
    profile's for the classifiers; a GPT's as bench scale trains it, attention "sdpa" or "manual")."""
    if model_name not in GPT_MODELS:
        return _profile.record_step(model_name, batch, amp)
    wg.manual_seed(0)
    model = GPT_MODELS[model_name](flash=attention == "sdpa").to("webgpu")
    opt = benchmark_optimizer(model_name, model.parameters(), wg.optim)
    run = benchmark_step(model_name, model, opt, wg, amp="webgpu" if amp else None, replay=True)
    inputs = benchmark_batches(model_name, wg, batch, "webgpu", count=1)[0]
    for _ in range(3):  # eager warm-up, recording (and the planned recording), one replay
        run(*inputs)
    wg.webgpu.synchronize()
    return run, inputs


def shape(records):
    """(dispatches, copies, compute passes) of a record list, passes as encode.js / native.py group them."""
    dispatches = sum(1 for r in records if r[0] == 0)
    passes, previous = 0, 1
    for r in records:
        if r[0] == 0 and previous != 0:
            passes += 1
        previous = r[0]
    return dispatches, len(records) - dispatches, passes


# ------------------------------------------------------------------------------------ GPU timing


def gpu_times(rt, records, prepared, mode, repeats):
    """Per repeat, GPU seconds: mode "span" [the whole record list as a replay encodes it], mode "each"
    [each dispatch in a pass of its own]."""
    if rt.binding.name == "browser":
        from pyodide.ffi import run_sync

        binding = rt.binding
        if "timestamp-query" not in binding.features:
            raise SystemExit("this Dawn device has no timestamp-query feature: cannot time the GPU")
        out = run_sync(binding._helper.timestamps(binding._device, prepared, mode, repeats)).to_py()
        return [[ns * 1e-9 for ns in rep] for rep in out]
    return _native_times(rt, records, prepared, mode, repeats)


def _native_times(rt, records, prepared, mode, repeats):
    import struct

    import wgpu

    device = rt.binding._device
    if "timestamp-query" not in device.features:
        raise SystemExit("this adapter has no timestamp queries: cannot time the GPU")
    n = sum(1 for r in records if r[0] == 0) if mode == "each" else 1
    queries = device.create_query_set(type=wgpu.QueryType.timestamp, count=2 * n)
    resolve = device.create_buffer(size=16 * n, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
    out = []
    for _ in range(repeats):
        encoder = device.create_command_encoder()
        if mode == "each":
            i = 0
            for r in records:
                if r[0] != 0:
                    encoder.copy_buffer_to_buffer(r[1], r[2], r[3], r[4], r[5])
                    continue
                cp = encoder.begin_compute_pass(timestamp_writes={
                    "query_set": queries, "beginning_of_pass_write_index": 2 * i, "end_of_pass_write_index": 2 * i + 1})
                cp.set_pipeline(r[1])
                cp.set_bind_group(0, r[2])
                cp.dispatch_workgroups(r[3], r[4], r[5])
                cp.end()
                i += 1
        else:
            encoder.begin_compute_pass(timestamp_writes={"query_set": queries, "beginning_of_pass_write_index": 0}).end()
            if hasattr(prepared, "encode"):  # native.py's _Prepared: exactly what a replay encodes
                prepared.encode(encoder._internal)
            else:
                _encode_plain(encoder, records)
            encoder.begin_compute_pass(timestamp_writes={"query_set": queries, "end_of_pass_write_index": 1}).end()
        encoder.resolve_query_set(queries, 0, 2 * n, resolve, 0)
        device.queue.submit([encoder.finish()])
        stamps = struct.unpack(f"<{2 * n}Q", device.queue.read_buffer(resolve))
        out.append([max(stamps[2 * j + 1] - stamps[2 * j], 0) * 1e-9 for j in range(n)])
    return out


def _encode_plain(encoder, records):
    cp = None
    for r in records:
        if r[0] == 0:
            cp = cp or encoder.begin_compute_pass()
            cp.set_pipeline(r[1])
            cp.set_bind_group(0, r[2])
            cp.dispatch_workgroups(r[3], r[4], r[5])
        else:
            if cp is not None:
                cp.end()
                cp = None
            encoder.copy_buffer_to_buffer(r[1], r[2], r[3], r[4], r[5])
    if cp is not None:
        cp.end()


# ------------------------------------------------------------------------------------ host timing


class _SubmitTimer:
    """Wraps binding.submit to add up the host seconds spent inside it."""

    def __init__(self, binding):
        self.binding, self.inner, self.seconds, self.calls = binding, binding.submit, 0.0, 0

    def __call__(self, segments):
        t0 = time.perf_counter()
        try:
            return self.inner(segments)
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += 1

    def __enter__(self):
        self.binding.submit = self
        return self

    def __exit__(self, *exc):
        del self.binding.submit  # the instance attribute goes; the class's method is back


def host_split(run, inputs, steps=50):
    """(host seconds per replay call, of which inside binding.submit, submits per call), GPU waited for
    between bursts of `steps` calls only."""
    wg.webgpu.synchronize()
    with _SubmitTimer(default_runtime().binding) as timer:
        t0 = time.perf_counter()
        for _ in range(steps):
            run(*inputs)
        host = time.perf_counter() - t0
    wg.webgpu.synchronize()
    return host / steps, timer.seconds / steps, timer.calls / steps


def submit_parts(rt, records, prepared, n=50):
    """Host seconds per submit of the recorded step alone, split into (encoding, finish, queue.submit);
    the step runs n more times on the GPU meanwhile (the same work as a replay, on the same buffers)."""
    wg.webgpu.synchronize()
    if rt.binding.name == "browser":
        binding = rt.binding
        parts = [ms * 1e-3 / n for ms in binding._helper.timeSubmit(binding._device, prepared, n).to_py()]
    else:
        device, parts = rt.binding._device, [0.0, 0.0, 0.0]
        for _ in range(n):
            t0 = time.perf_counter()
            encoder = device.create_command_encoder()
            if hasattr(prepared, "encode"):
                prepared.encode(encoder._internal)
            else:
                _encode_plain(encoder, records)
            t1 = time.perf_counter()
            commands = encoder.finish()
            t2 = time.perf_counter()
            device.queue.submit([commands])
            t3 = time.perf_counter()
            parts[0] += (t1 - t0) / n
            parts[1] += (t2 - t1) / n
            parts[2] += (t3 - t2) / n
    wg.webgpu.synchronize()
    return parts


def loop_and_read(run, inputs, steps=30):
    """(seconds per step of bench train's loop: the loss read back every 10 steps; seconds of one read-back
    of the loss with the GPU idle, median of 5: the round trip a .item() costs on top of the work)."""
    wg.webgpu.synchronize()
    t0 = time.perf_counter()
    for i in range(steps):
        loss = run(*inputs)
        if i % 10 == 9:
            float(loss.item())
    wg.webgpu.synchronize()
    loop = (time.perf_counter() - t0) / steps
    reads = []
    for _ in range(5):
        wg.webgpu.synchronize()
        t0 = time.perf_counter()
        float(loss.item())
        reads.append(time.perf_counter() - t0)
    return loop, statistics.median(reads)


def read_stalls(run, inputs, segments, per=10):
    """bench train's loop, segment by segment: `per` replays, then the loss read back (item) or, alternately,
    a plain synchronize. Per kind, (issue seconds, wait seconds) of every segment: issue is the host's time for
    the replays, wait the read-back's or synchronize's. A wait far above `per` steps of GPU time, when issue is
    short, is the read-back path stalling (or the GPU running slower in this pattern)."""
    out = {"item": [], "sync": []}
    wg.webgpu.synchronize()
    for k in range(2 * segments):
        kind = "item" if k % 2 == 0 else "sync"
        t0 = time.perf_counter()
        for _ in range(per):
            loss = run(*inputs)
        t1 = time.perf_counter()
        if kind == "item":
            float(loss.item())
        else:
            wg.webgpu.synchronize()
        out[kind].append((t1 - t0, time.perf_counter() - t1))
    return out


# ------------------------------------------------------------------------------------ report


def span_without(rt, records, labels, pattern, repeats):
    """(records kept, GPU span in seconds) of the step's records without those whose label contains `pattern`:
    what such records cost in the span (the records left run on whatever their inputs hold: only the timing
    means anything)."""
    kept = [r for r, name in zip(records, labels) if pattern not in name]
    prepared = rt.binding.prepare(kept)
    return len(kept), statistics.median(rep[0] for rep in gpu_times(rt, kept, prepared, "span", repeats))


def profile(model_name, batch, repeats, each, top, full_list, reads=0, leave_out=(), amp=False, attention="sdpa"):
    rt = default_runtime()
    run, inputs = record_step(model_name, batch, amp, attention)
    graph = run.graph
    records = graph.records
    dispatches, copies, passes = shape(records)
    labels = [label(d) for d in rt.describe(records)]
    digest = hashlib.sha1("\n".join(labels).encode()).hexdigest()[:12]
    step = " (autocast float16, GradScaler)" if amp else ""
    if model_name in GPT_MODELS:
        step += " (F.scaled_dot_product_attention)" if attention == "sdpa" else " (hand-written attention)"
    print(f"\n{model_name}{step} batch {batch} on {rt.binding.name}: {dispatches} dispatches, {copies} copies, "
          f"{passes} compute passes; dispatch list digest {digest}", flush=True)
    if full_list:
        for i, name in enumerate(labels):
            print(f"  {i:4d} {name}")
    replay_wall(run, inputs, 0.5)  # clocks up
    wall, host_burst = replay_wall(run, inputs)
    host, submit, submits = min(host_split(run, inputs) for _ in range(3))
    loop, read = loop_and_read(run, inputs)
    prepared = rt.binding.prepare(records)  # (the whole step at once, as the profilers time it)
    encode, finish, submit_call = min(submit_parts(rt, records, prepared) for _ in range(3))
    span = statistics.median(rep[0] for rep in gpu_times(rt, records, prepared, "span", repeats))
    print(f"  wall {wall * 1e6:9.1f} us/step  ({batch / wall:,.0f} samples/s)")
    print(f"  loop {loop * 1e6:9.1f} us/step  (loss read every 10 steps, as bench train); one read-back with "
          f"the GPU idle {read * 1e6:.1f} us")
    print(f"  host {host * 1e6:9.1f} us/step  (burst {host_burst * 1e6:.1f}); in binding.submit "
          f"{submit * 1e6:.1f} us ({submits:.1f} submits/step); outside it {(host - submit) * 1e6:.1f} us")
    print(f"  the step's records alone, host per submit: encode {encode * 1e6:.1f} us, finish {finish * 1e6:.1f} us, "
          f"queue.submit {submit_call * 1e6:.1f} us")
    print(f"  GPU span {span * 1e6:9.1f} us/step (one replay's records, timestamps around them; "
          f"median of {repeats})", flush=True)
    if reads:
        for kind, segs in read_stalls(run, inputs, reads).items():
            waits = sorted(w for _, w in segs)
            issue = statistics.median(i for i, _ in segs)
            print(f"  10 replays then {kind:4}: issue median {issue * 1e6:8.1f} us; wait min {waits[0] * 1e6:8.1f} "
                  f"median {statistics.median(waits) * 1e6:8.1f} max {waits[-1] * 1e6:8.1f} us "
                  f"(10 x GPU span = {10 * span * 1e6:.1f} us); all waits: {' '.join(f'{w * 1e3:.1f}' for _, w in segs)} ms")
    for pattern in leave_out:
        kept, without = span_without(rt, records, labels, pattern, repeats)
        print(f"  GPU span without the {dispatches + copies - kept} records labelled *{pattern}*: "
              f"{without * 1e6:9.1f} us ({(span - without) * 1e6:.1f} us less)", flush=True)
    if each:
        times = gpu_times(rt, records, prepared, "each", repeats)
        medians = [statistics.median(rep[j] for rep in times) for j in range(len(labels))]
        total = sum(medians)
        print(f"  GPU sum  {total * 1e6:9.1f} us/step (each dispatch in a pass of its own); span - sum "
              f"{(span - total) * 1e6:.1f} us = {(span - total) / max(dispatches, 1) * 1e6:.2f} us/dispatch")
        by = {}
        for name, t in zip(labels, medians):
            k = name.split(" groups=")[0]
            n, s = by.get(k, (0, 0.0))
            by[k] = (n + 1, s + t)
        print(f"  by kernel (top {top}):\n  {'us':>8} {'share':>6} {'n':>3}  kernel")
        for name, (n, s) in sorted(by.items(), key=lambda kv: -kv[1][1])[:top]:
            print(f"  {s * 1e6:8.1f} {100 * s / max(total, 1e-12):5.1f}% {n:3d}  {name}")
    sys.stdout.flush()
    run.release()


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m webgrad.bench replay", description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["transformer", "cnn"], choices=sorted(ALL_MODELS) + ["gpt"],
                   help="gpt: both GPT rows")
    p.add_argument("--batch-sizes", nargs="+", type=int, help="default: each model's benchmark batch")
    p.add_argument("--repeats", type=int, default=10, help="timestamped submits per figure (median)")
    p.add_argument("--each", action="store_true", help="also time every dispatch in a pass of its own")
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--list", action="store_true", help="print the dispatch list")
    p.add_argument("--reads", type=int, default=0, metavar="N",
                   help="also N segments of 10 replays then a read-back, and N then a synchronize: each wait")
    p.add_argument("--leave-out", nargs="+", default=(), metavar="PATTERN",
                   help="also the GPU span without the records whose label holds each PATTERN (e.g. optim: "
                        "batch_norm:finish matmul_reduce): what they cost in the step")
    p.add_argument("--amp", action="store_true", help="the step of bench train --amp: autocast to float16 and a "
                   "GradScaler (needs an adapter with shader-f16)")
    p.add_argument("--attention", choices=("sdpa", "manual"), default="sdpa",
                   help="the GPTs' attention: F.scaled_dot_product_attention (default) or nanoGPT's hand-written "
                        "q @ k^T, masked_fill, softmax, @ v")
    args = p.parse_args(argv)
    info = wg.webgpu.adapter_info()
    print(f"webgrad on WebGPU: {info.get('device') or info.get('description')} ({info.get('backend')})")
    rt = default_runtime()
    print(f"vendor {info.get('vendor')!r}, architecture {info.get('architecture')!r}, description "
          f"{info.get('description')!r}; kernel variants for a "
          f"{'software' if rt.software else 'GPU'} adapter; features {sorted(rt.features)}; limits {rt.limits}")
    models = [m for name in args.models for m in (_SCALE_CHOICES["gpt"] if name == "gpt" else (name,))]
    for model in dict.fromkeys(models):
        for batch in args.batch_sizes or [BATCH[model]]:
            profile(model, batch, args.repeats, args.each, args.top, args.list, args.reads, args.leave_out,
                    args.amp, args.attention)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
