"""Scale benchmark: `python -m webgrad.bench scale [--models resnet18 widemlp transformer] [--batch N] [--steps N]`.

Training steps of the models users train at scale, webgrad replayed (webgrad.replayable, on WebGPU) against
PyTorch eager on its best device here (CUDA if present), in one run:

  resnet18     ResNet-18, CIFAR variant, 3x32x32 inputs, batch 128       (webgrad.models, webgrad.bench.recipes)
  widemlp      MLP 3072-4096-4096-10, batch 128
  transformer  one encoder block, d_model 256, 4 heads, sequence 128, batch 32, mean-pooled into a classifier

All train with cross-entropy and SGD (lr 0.01, momentum 0.9) on random data of the right shapes. Each row
gives samples/s, ms per step and peak GPU memory for both libraries, and the ratios (webgrad / PyTorch:
above 1 is faster for speed, below 1 is leaner for memory).

Peak memory counts what the run holds on the GPU from before the model is built: parameters, gradients,
optimizer state, the data batches and the step's intermediates.
  webgrad  webgrad.webgpu.max_memory_allocated() (live tensors' buffers at their peak), or, if higher,
           what a replay holds: the live tensors plus the buffers the recorded step keeps for its
           intermediates (every one of them is in use while it replays; see peak_bytes)
  PyTorch  torch.cuda.max_memory_allocated() (on the CPU there is no counter: "-")
tools/bench_dawn.py --scale prints the same table for the browser path (the wheel in Pyodide under Node with
Dawn), through webgrad_result and torch_result here.
"""

import argparse
import gc
import time

import webgrad as wg
# bench train's loop (loss read every 10 steps, warmed up) and its PyTorch side
from webgrad.bench.train import (add_comparison_arguments, apply_comparison_arguments, print_torch_float32_math,
                                 time_loop, torch_training)
from webgrad.bench.recipes import INPUT_SHAPES, SCALE_MODELS, TRANSFORMER_MODELS, benchmark_optimizer
from webgrad.models import train_step

MODELS = {**SCALE_MODELS, **TRANSFORMER_MODELS}
BATCH = {"resnet18": 128, "widemlp": 128, "transformer": 32}  # the configurations
CLASSES = 10
# replayable's calls before its first replay: an eager call, the recording, and the planned recording that may
# replace it (replay.py's memory planning)
MIN_WARMUP = 3
def peak_bytes(step):
    """webgrad's peak GPU memory so far: max_memory_allocated(), or what a replay of `step` (a Replayable)
    holds if that is more. A recorded step owns the buffers of the intermediates it made; between replays
    no tensor holds them (so memory_allocated() leaves them out) but no one else may use them either."""
    held = wg.webgpu.memory_allocated() + (step.graph.idle_bytes if step.graph is not None else 0)
    return max(wg.webgpu.max_memory_allocated(), held)


def _settle():
    gc.collect()
    wg.webgpu.synchronize()
    wg.webgpu.empty_cache()  # buffers earlier rows left free must not count as this row's


def webgrad_result(model_name, batch, steps, warmup=10, device="webgpu"):
    """{samples_s, ms, peak}: `steps` replayed training steps of `model_name` at `batch` on WebGPU; peak in
    bytes above what was allocated before the model was built."""
    _settle()
    base = wg.webgpu.memory_allocated()
    wg.webgpu.reset_peak_memory_stats()
    wg.manual_seed(0)
    model = MODELS[model_name]().to(device)
    opt = benchmark_optimizer(model_name, model.parameters(), wg.optim)
    step = train_step(model, opt, replay=True)
    shape = INPUT_SHAPES[model_name]
    batches = [(wg.rand(batch, *shape, device=device), wg.randint(0, CLASSES, (batch,), device=device))
               for _ in range(4)]
    seconds = time_loop(step, batches, steps, wg.webgpu.synchronize, warmup)
    peak = peak_bytes(step) - base
    step.release()
    return {"samples_s": batch * steps / seconds, "ms": 1000 * seconds / steps, "peak": peak}


def torch_result(model_name, batch, steps, warmup=10):
    """The same for PyTorch eager on CUDA if present, else the CPU (peak None there), or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cuda":
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    step, batches, sync = torch_training(torch, MODELS, model_name, batch, dev)
    seconds = time_loop(step, batches, steps, sync, warmup)
    peak = torch.cuda.max_memory_allocated() - base if dev == "cuda" else None
    return {"samples_s": batch * steps / seconds, "ms": 1000 * seconds / steps, "peak": peak, "device": dev}


def parser(description):
    """The arguments this table and tools/bench_dawn.py --scale share."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=sorted(MODELS))
    p.add_argument("--batch", type=int, help="one batch size for every model (default: resnet18 128, "
                                             "widemlp 128, transformer 32)")
    p.add_argument("--steps", type=int, default=30, help="timed steps per row, after a warm-up (default 30)")
    p.add_argument("--warmup", type=int, default=10, help=f"untimed steps first, at least {MIN_WARMUP} and a "
                                                          "second (default 10)")
    p.add_argument("--no-torch", action="store_true", help="leave out PyTorch's columns")
    add_comparison_arguments(p)
    return p


def rows(args):
    """(model, batch) for each row the arguments ask for."""
    return [(m, args.batch or BATCH[m]) for m in args.models]


def header():
    return (f"{'model':11} {'batch':>5} | {'webgrad samples/s':>17} {'ms/step':>8} {'peak MiB':>9} | "
            f"{'torch samples/s':>15} {'ms/step':>8} {'peak MiB':>9} {'device':>6} | {'speed':>6} {'memory':>6}")


def _rate(samples_s):
    return f"{samples_s:,.0f}" if samples_s >= 100 else f"{samples_s:.1f}"


def _mib(nbytes):
    return "-" if nbytes is None else f"{nbytes / 2**20:9.1f}"


def row(model, batch, ours, theirs):
    """One line of the table; theirs (torch_result) may be None."""
    line = f"{model:11} {batch:5d} | {_rate(ours['samples_s']):>17} {ours['ms']:8.2f} {_mib(ours['peak']):>9} | "
    if theirs is None:
        return line + f"{'-':>15} {'-':>8} {'-':>9} {'-':>6} | {'-':>6} {'-':>6}"
    speed = f"{ours['samples_s'] / theirs['samples_s']:5.2f}x"
    memory = f"{ours['peak'] / theirs['peak']:5.2f}x" if theirs["peak"] else "-"
    return (line + f"{_rate(theirs['samples_s']):>15} {theirs['ms']:8.2f} {_mib(theirs['peak']):>9} "
            f"{theirs['device']:>6} | {speed:>6} {memory:>6}")


def check_warmup(args, prog):
    """Refuse a --warmup whose untimed calls would not reach the first replay (see MIN_WARMUP)."""
    if args.warmup < MIN_WARMUP:
        raise SystemExit(f"{prog}: --warmup must be at least {MIN_WARMUP} (an eager call, the recording, and "
                         "the planned recording that may replace it)")


def main(argv=None):
    args = parser(__doc__.splitlines()[0]).parse_args(argv)
    apply_comparison_arguments(args)
    check_warmup(args, "bench scale")
    info = wg.webgpu.adapter_info()
    print(f"webgrad on WebGPU: {info.get('device') or info.get('description')} ({info.get('backend')})")
    print_torch_float32_math(args.no_torch)
    print(header(), flush=True)
    start = time.perf_counter()
    for model, batch in rows(args):
        ours = webgrad_result(model, batch, args.steps, args.warmup)
        theirs = None if args.no_torch else torch_result(model, batch, args.steps, args.warmup)
        print(row(model, batch, ours, theirs), flush=True)
    print(f"({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
