"""Where an eager (not replayed) training step's host time goes, on either binding:
`python -m webgrad.bench phases [--models mlp cnn] [--batch-sizes 128] [--steps 300]` natively (wgpu-py),
`python tools/bench_dawn.py --phases [same arguments]` in Pyodide on Dawn.

An eager step is host-bound where the GPU work is small (bench train's eager column; Pyodide runs CPython
in WebAssembly): its speed is the Python each op costs. This times each phase of bench train's eager step
(the same model and optimizer; webgrad.models.train_step's forward, loss, zero_grad, backward and optimizer
step, written out here with a clock between them) and then the submit of the step's recorded work, with the
GPU idle when each step starts (a synchronize first, outside the timing), so the figures are host time
alone, not waits. It prints the median and the 10th percentile (the machine's quiet moments: a shared
machine's noise only ever adds) per phase, in microseconds, and the dispatches recorded per step.
"""

import argparse
import time

import webgrad as wg
import webgrad.nn.functional as F
from webgrad._backends.webgpu.runtime import default_runtime
from webgrad.bench.recipes import INPUT_SHAPES, MNIST_MODELS, benchmark_optimizer

PHASES = ("forward", "loss", "zero_grad", "backward", "step", "submit")


def phase_times(model_name, batch, steps, warmup=20):
    """{phase: [seconds per step]} of `steps` eager steps (after `warmup` untimed ones), and the
    dispatches one step records."""
    wg.manual_seed(0)
    model = MNIST_MODELS[model_name]().to("webgpu")
    opt = benchmark_optimizer(model_name, model.parameters(), wg.optim)
    x = wg.rand(batch, *INPUT_SHAPES[model_name], device="webgpu")
    y = wg.randint(0, 10, (batch,), device="webgpu")
    rt = default_runtime()
    times = {p: [] for p in PHASES}
    dispatches = 0
    for i in range(warmup + steps):
        wg.webgpu.synchronize()
        before = rt.stats["dispatches"]
        t0 = time.perf_counter()
        out = model(x)
        t1 = time.perf_counter()
        loss = F.cross_entropy(out, y)
        t2 = time.perf_counter()
        opt.zero_grad()
        t3 = time.perf_counter()
        loss.backward()
        t4 = time.perf_counter()
        opt.step()
        t5 = time.perf_counter()
        rt.flush()  # the step's records to the GPU: in Pyodide the FFI call, encode.js and Dawn's submit
        t6 = time.perf_counter()
        dispatches = rt.stats["dispatches"] - before
        if i >= warmup:
            for phase, a, b in zip(PHASES, (t0, t1, t2, t3, t4, t5), (t1, t2, t3, t4, t5, t6)):
                times[phase].append(b - a)
    return times, dispatches


def _quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(model_name, batch, times, dispatches):
    totals = [sum(t) for t in zip(*times.values())]
    cells = [f"{p} {_quantile(v, 0.5) * 1e6:.0f}/{_quantile(v, 0.1) * 1e6:.0f}" for p, v in times.items()]
    return (f"{model_name:<6}{batch:>6}  " + "  ".join(cells) +
            f"  | total {_quantile(totals, 0.5) * 1e6:.0f}/{_quantile(totals, 0.1) * 1e6:.0f}"
            f"  ({dispatches} dispatches)")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m webgrad.bench phases", description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", choices=sorted(MNIST_MODELS), default=["mlp", "cnn"])
    p.add_argument("--batch-sizes", nargs="+", type=int, default=[128])
    p.add_argument("--steps", type=int, default=300, help="timed steps per row (default 300)")
    args = p.parse_args(argv)
    info = wg.webgpu.adapter_info()
    print(f"eager step phases on {info.get('device') or info.get('description')} ({info.get('backend')}): "
          "host us per step, median/p10", flush=True)
    for model_name in args.models:
        for batch in args.batch_sizes:
            times, dispatches = phase_times(model_name, batch, args.steps)
            print(report(model_name, batch, times, dispatches), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
