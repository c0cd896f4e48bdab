"""Training benchmark: `python -m webgrad.bench train [--models mlp cnn] [--batch-sizes 128 1024] [--steps N]`.

Training steps timed side by side in one run: the MNIST models of the reference recipe (docs/PERFORMANCE.md:
cross-entropy, Adam lr 1e-3, data resident on the device, loss read back every 10 steps), and with
`--models widemlp resnet18` the CIFAR-shaped scale models (SGD lr 0.01, momentum 0.9; see
webgrad.bench.recipes; the models are webgrad.models', the step webgrad.models.train_step):

  webgrad replay   the step recorded once and replayed (webgrad.replayable), on WebGPU
  webgrad eager    every op issued from Python, on WebGPU
  torch eager      PyTorch on its best device here (CUDA if present, else the CPU), if installed

Prints steady-state samples/s after warm-up and the ratios. Data are random tensors of the datasets'
shapes: throughput does not depend on pixel values. `--no-eager` leaves the eager column out (slow models
at large scale), `--no-torch` the PyTorch one; `--amp` runs both sides under autocast (float16) with a
GradScaler; `--torch-tf32 off` makes PyTorch compute its float32 convolutions in float32, as webgrad does (its
default is TF32 on the tensor cores; the table's first line says which). tools/bench_dawn.py prints the same
table for the browser path (the wheel in Pyodide under Node with Dawn) using webgrad_rate and torch_rate from
here.
"""

import argparse
import time

import webgrad as wg
from webgrad.bench.recipes import (GPT_MODELS, INPUT_SHAPES, MNIST_MODELS, SCALE_MODELS, benchmark_batches,
                                   benchmark_optimizer, benchmark_step)
from webgrad.models import train_step

ALL_MODELS = {**MNIST_MODELS, **SCALE_MODELS}


WARMUP_SECONDS = 1.0
# Timed windows per measurement, and the least time a window should cover: the figure is the median
# window's time per step. One short window (a fast replay step at batch 1024 is ~0.3 ms: 20 steps take
# 6 ms) swings 2x with one stall of the host or the driver: measured on the H200 through Dawn, the same
# wheel's MLP-1024 replay gave 1.6M and 3.4M samples/s in one call. Both libraries are timed alike.
WINDOWS = 3
MIN_WINDOW_SECONDS = 0.2
# PyTorch's float32 math on CUDA (--torch-tf32): "default" leaves PyTorch's settings as they are. Those run cuDNN's
# float32 convolutions in TF32 on the tensor cores (torch.backends.cudnn.allow_tf32 is True by default; inputs
# rounded to 10 mantissa bits) and matmuls in full float32 (torch.backends.cuda.matmul.allow_tf32 False). webgrad
# computes both in full float32, so "off" compares like with like and "on" gives PyTorch TF32 for both.
TORCH_TF32 = "default"


def time_loop(step, batches, steps, sync, warmup=10, windows=None):
    """Seconds for `steps` steps cycling over `batches`, loss read back every 10 steps: the median of
    `windows` (default WINDOWS) timed windows, each grown to at least MIN_WINDOW_SECONDS, as time per step
    times `steps`. Timing starts after a warm-up of at least `warmup` steps and WARMUP_SECONDS: an idle GPU
    clocks down (an H100 idles at 345 MHz), and a few milliseconds of warm-up would time the first library
    at lower clocks than the next."""
    _warm_up(step, batches, sync, warmup)
    per_step, n = [], steps
    while len(per_step) < (windows or WINDOWS):
        seconds, n = _window(step, batches, sync, n)
        per_step.append(seconds / n)
    return sorted(per_step)[len(per_step) // 2] * steps


def interleaved_seconds(runs, steps, rounds=5, warmup=10):
    """Seconds for `steps` steps of each run in `runs` ({name: (step, batches, sync)}), timed by turns: each run
    is warmed up, then every round times one window (time_loop's) of each run in turn, and a run's figure is its
    median window. Drift on the host (another tenant, clocks, a collection) then falls on every run alike instead
    of on whichever ran during it: the ratios of eager and compiled PyTorch steps to webgrad's, host-bound at
    these sizes, swung 0.33-0.84x between two calls of one build timed one after another."""
    sizes = {}
    for name, (step, batches, sync) in runs.items():
        _warm_up(step, batches, sync, warmup)
        sizes[name] = _window(step, batches, sync, steps)[1]  # (the window's length, grown to be trusted)
    per_step = {name: [] for name in runs}
    for _ in range(rounds):
        for name, (step, batches, sync) in runs.items():
            seconds, n = _window(step, batches, sync, sizes[name])
            per_step[name].append(seconds / n)
    return {name: sorted(times)[len(times) // 2] * steps for name, times in per_step.items()}


def _warm_up(step, batches, sync, warmup):
    i, start = 0, time.perf_counter()
    while i < warmup or time.perf_counter() - start < WARMUP_SECONDS:
        step(*batches[i % len(batches)])
        if i % 10 == 9:
            sync()
        i += 1
    sync()


def _window(step, batches, sync, n):
    """(seconds, steps) of one timed window of at least `n` steps, grown until it lasts MIN_WINDOW_SECONDS."""
    while True:
        start = time.perf_counter()
        for i in range(n):
            loss = step(*batches[i % len(batches)])
            if i % 10 == 9:
                float(loss.item())
        sync()
        seconds = time.perf_counter() - start
        if seconds >= MIN_WINDOW_SECONDS or n >= 1 << 16:
            return seconds, n
        n = max(n * 2, int(n * MIN_WINDOW_SECONDS / max(seconds, 1e-6)))  # too short to trust: longer


def webgrad_rate(model_name, batch, steps, replay, device, amp=False):
    run, batches, sync = webgrad_training(model_name, batch, replay, device, amp)
    return batch * steps / time_loop(run, batches, steps, sync)


def webgrad_training(model_name, batch, replay, device, amp=False):
    """webgrad's side of a row: (its training step, replayed or eager, four random batches, the device's sync)."""
    wg.manual_seed(0)
    model = {**ALL_MODELS, **GPT_MODELS}[model_name]().to(device)
    opt = benchmark_optimizer(model_name, model.parameters(), wg.optim)
    run = benchmark_step(model_name, model, opt, wg, amp=device if amp else None, replay=replay)
    batches = benchmark_batches(model_name, wg, batch, device)
    sync = wg.webgpu.synchronize if device == "webgpu" else (lambda: None)
    return run, batches, sync


def torch_training(torch, models, model_name, batch, dev, amp=False):
    """PyTorch eager's side of a row (bench train and bench scale): the model (from `models`, a name ->
    builder table) built with torch.nn and seed 0 and its benchmark optimizer: (its training step, under
    autocast with a GradScaler where `amp`; four random batches; the device's sync)."""
    torch_float32_math(torch)
    torch.manual_seed(0)
    model = models[model_name](nn=torch.nn).to(dev)
    opt = benchmark_optimizer(model_name, model.parameters(), torch.optim)
    step = train_step(model, opt, amp=dev if amp else None, lib=torch)
    shape = INPUT_SHAPES[model_name]
    batches = [(torch.rand(batch, *shape, device=dev), torch.randint(0, 10, (batch,), device=dev))
               for _ in range(4)]
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    return step, batches, sync


def torch_rate(model_name, batch, steps, amp=False):
    import torch
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    step, batches, sync = torch_training(torch, ALL_MODELS, model_name, batch, dev, amp)
    return batch * steps / time_loop(step, batches, steps, sync), dev


def step_count(model, batch, steps):
    """Timed steps for one row: `steps` scaled so that every row takes a similar time (the MLP is the
    cheapest per sample, the scale models the dearest)."""
    if model == "mlp":
        return max(20, steps * 128 // batch)
    if model in SCALE_MODELS:
        return max(30, steps * 32 // batch)
    return max(10, steps * 32 // batch)


def parser(description):
    """The arguments this table and tools/bench_dawn.py share."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--models", nargs="+", default=["mlp", "cnn"], choices=sorted(ALL_MODELS))
    p.add_argument("--batch-sizes", nargs="+", type=int, default=[128, 1024])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--no-eager", action="store_true", help="leave out webgrad's eager column")
    p.add_argument("--no-torch", action="store_true", help="leave out PyTorch's column")
    p.add_argument("--amp", action="store_true", help="mixed precision on both sides: autocast to float16 and a "
                   "GradScaler (webgrad needs an adapter with shader-f16)")
    add_comparison_arguments(p)
    return p


def add_comparison_arguments(p):
    """The arguments of how a table times both libraries and what PyTorch computes in (bench train, bench scale,
    tools/bench_dawn.py); apply_comparison_arguments applies them."""
    p.add_argument("--windows", type=int, default=WINDOWS, help="timed windows per figure (their median; "
                   f"default {WINDOWS}, each at least {MIN_WINDOW_SECONDS} s)")
    p.add_argument("--torch-tf32", choices=["default", "off", "on"], default="default",
                   help="PyTorch's TF32 tensor-core math for float32 convolutions and matmuls on CUDA: default = "
                        "PyTorch's defaults (convolutions TF32, matmuls float32), off = both in float32 as "
                        "webgrad computes them, on = both in TF32")


def apply_comparison_arguments(args):
    set_windows(args.windows)
    set_torch_tf32(args.torch_tf32)


def set_torch_tf32(mode):
    global TORCH_TF32
    TORCH_TF32 = mode


def torch_float32_math(torch):
    """Applies --torch-tf32 to PyTorch and says what its float32 convolutions and matmuls compute in (a line for
    the table's header, so that every figure against PyTorch states it)."""
    if TORCH_TF32 != "default":
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = TORCH_TF32 == "on"
    if not torch.cuda.is_available():
        return f"PyTorch {torch.__version__} on the CPU: float32"

    def math(tf32):
        return "TF32 (tensor cores)" if tf32 else "float32"
    return (f"PyTorch {torch.__version__} (--torch-tf32 {TORCH_TF32}): convolutions "
            f"{math(torch.backends.cudnn.allow_tf32)}, matmuls {math(torch.backends.cuda.matmul.allow_tf32)}")


def print_torch_float32_math(no_torch):
    """The header line of torch_float32_math, where PyTorch is importable and its columns are asked for."""
    if no_torch:
        return
    try:
        import torch
    except ImportError:
        return
    print(torch_float32_math(torch))


def set_windows(n):
    global WINDOWS
    if n < 1:
        raise SystemExit("--windows must be at least 1")
    WINDOWS = n


def header():
    return (f"{'model':8} {'batch':>5} {'webgrad replay':>15} {'webgrad eager':>14} {'torch eager':>18} "
            f"{'replay/torch':>12}")


def row(model, batch, replay, eager, torch_result):
    """One line of the table; eager or torch_result (rate, device) may be None."""
    eager_col = f"{eager:12,.0f}/s" if eager is not None else "-"
    torch_col, ratio = "-", "-"
    if torch_result is not None:
        t, dev = torch_result
        torch_col, ratio = f"{t:12,.0f} ({dev})", f"{replay / t:11.2f}x"
    return f"{model:8} {batch:5d} {replay:13,.0f}/s {eager_col:>14} {torch_col:>18} {ratio:>12}"


def try_torch_rate(model, batch, steps, amp=False):
    """torch_rate, or None where PyTorch is not installed."""
    try:
        return torch_rate(model, batch, steps, amp)
    except ImportError:
        return None


def main(argv=None):
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--device", default="webgpu", help="webgrad device (default webgpu)")
    args = p.parse_args(argv)
    apply_comparison_arguments(args)
    if args.device == "webgpu":
        info = wg.webgpu.adapter_info()
        print(f"webgrad on WebGPU: {info.get('device') or info.get('description')} ({info.get('backend')})")
    if args.amp:
        print("mixed precision: autocast(float16) + GradScaler on both sides")
    print_torch_float32_math(args.no_torch)
    print(header())
    for model in args.models:
        for batch in args.batch_sizes:
            steps = step_count(model, batch, args.steps)
            replay = webgrad_rate(model, batch, steps, True, args.device, args.amp)
            eager = None if args.no_eager else webgrad_rate(model, batch, steps, False, args.device, args.amp)
            t = None if args.no_torch else try_torch_rate(model, batch, steps, args.amp)
            print(row(model, batch, replay, eager, t), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
