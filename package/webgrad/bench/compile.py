"""PyTorch on webgrad's GPU against webgrad itself and against PyTorch on the CPU, side by side in one run.

    python -m webgrad.bench compile [--models mlp cnn resnet18 gpt-6x384] [--batch-size 128] [--steps N] [--no-cpu]

For each model (webgrad.bench.recipes: the MNIST MLP and CNN with Adam, ResNet-18 with SGD momentum, a GPT as
bench scale trains it, with AdamW at batch 16; random batches of the datasets' shapes, or random tokens, resident
on the device; the loss read back every 10 steps), samples (a GPT's: sequences) per second of:

  webgrad replay      webgrad's own step recorded once and replayed (webgrad.replayable)
  compiled step       PyTorch's step (zero_grad, forward, backward, optimizer) on webgpu tensors through
                      torch.compile(backend="webgrad") and recorded whole (torch_backend.compile(whole_step=True))
  compiled graphs     the model alone compiled, on webgpu tensors: its forward and backward graphs each recorded
                      and replayed, the optimizer's foreach updates eager
  webgrad eager       webgrad's step, every op issued from Python
  torch eager         PyTorch's eager step on device="webgpu" (webgrad.torch_device)
  torch cpu           PyTorch's eager step on the CPU, CUDA hidden (CUDA_VISIBLE_DEVICES=""), as on a machine
                      whose GPU PyTorch does not drive

The GPU columns of a model are built together and timed by turns (bench.train.interleaved_seconds: --rounds
windows each, the median), so that the host's drift falls on all of them alike; the CPU column is timed on its
own. PyTorch's optimizers run with fused=True (on webgpu: webgrad's update kernels). The ratios: compiled step /
webgrad replay (and compiled graphs / webgrad replay), torch eager / webgrad eager, compiled step / torch cpu.
Then the per-call cost of crossing from CPU torch tensors into a compiled graph and back (the compile backend's
boundary). --no-eager leaves out the eager columns, --no-cpu the CPU one (slow at ResNet-18's size).
"""

import argparse
import os
import time

from webgrad.bench.recipes import (GPT_MODELS, MNIST_MODELS, SCALE_MODELS, benchmark_batches, benchmark_optimizer,
                                   benchmark_step)

ALL_MODELS = {**MNIST_MODELS, **SCALE_MODELS, **GPT_MODELS}
GPT_BATCH = 16  # gpt-6x384's batch in bench scale (a GPT row takes it instead of --batch-size)


def torch_training(torch, name, batch, dev, mode):
    """PyTorch's side of a column: (its training step on `dev`, "webgpu" or "cpu", four random batches, the
    device's sync); mode: "eager", "graphs" (the model compiled with backend="webgrad") or "step" (the whole
    step compiled and recorded)."""
    torch.manual_seed(0)
    model = ALL_MODELS[name](nn=torch.nn).to(dev)
    # the recipe's optimizer with fused=True: on webgpu webgrad's update kernels (Adam's step count a dynamic
    # scalar, so a recorded step replays it), on the CPU PyTorch's fused CPU kernels
    opt = benchmark_optimizer(name, model.parameters(), torch.optim, fused=True)
    if mode == "graphs":
        from webgrad import torch_backend
        model = torch_backend.compile(model, fallback="error")
    step = benchmark_step(name, model, opt, torch)
    if mode == "step":
        from webgrad import torch_backend
        step = torch_backend.compile(step, fallback="error", whole_step=True)
    batches = benchmark_batches(name, torch, batch, dev)
    if dev == "webgpu":
        import webgrad.torch_device as td
        return step, batches, td.synchronize
    return step, batches, lambda: None


def boundary_us(torch, device, calls=200):
    """µs per call of a compiled `x + 1` on 16 CPU elements: the fixed cost of crossing into webgrad and back."""
    from webgrad.torch_backend import compile as wg_compile
    f = wg_compile(lambda t: t + 1, device=device)
    x = torch.ones(16)
    for _ in range(5):
        f(x)
    start = time.perf_counter()
    for _ in range(calls):
        f(x)
    return (time.perf_counter() - start) / calls * 1e6


def _cell(rate):
    return f"{rate:11,.0f}" if rate is not None else f"{'-':>11}"


def _ratio(a, b):
    return f"{a / b:6.2f}x" if a is not None and b else f"{'-':>7}"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m webgrad.bench compile", description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=sorted(ALL_MODELS), default=["mlp", "cnn", "resnet18"])
    parser.add_argument("--batch-size", type=int, default=128,
                        help=f"batch of the classifiers (a GPT takes {GPT_BATCH})")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per window (bench.train.time_loop)")
    parser.add_argument("--rounds", type=int, default=5, help="windows of each GPU column, timed by turns "
                        "(bench.train.interleaved_seconds); the figure is the median")
    parser.add_argument("--no-eager", action="store_true", help="leave out webgrad eager and torch eager")
    parser.add_argument("--no-cpu", action="store_true", help="leave out PyTorch on the CPU")
    parser.add_argument("--no-graphs", action="store_true", help="leave out the model-only compiled column")
    args = parser.parse_args(argv)

    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")  # PyTorch's CPU column: no GPU that PyTorch drives
    import torch
    import webgrad.torch_device  # noqa: F401  (registers the webgpu device before any backward)
    import webgrad.webgpu
    from webgrad.bench.train import interleaved_seconds, time_loop, webgrad_training

    adapter = webgrad.webgpu.adapter_info().get("device", "?")
    print(f"adapter {adapter}; PyTorch {torch.__version__} with {torch.get_num_threads()} CPU threads, CUDA "
          f"{'visible' if torch.cuda.is_available() else 'hidden'}; batch {args.batch_size} (a GPT {GPT_BATCH}); "
          "samples (a GPT: sequences)/s")
    head = ["model", "webgrad replay", "compiled step", "compiled graphs", "webgrad eager", "torch eager",
            "torch cpu", "step/replay", "graphs/replay", "eager/eager", "step/cpu"]
    print(f"{head[0]:10s}" + "".join(f"{h:>16s}" for h in head[1:7]) + "".join(f"{h:>14s}" for h in head[7:]))
    for name in args.models:
        steps = args.steps
        batch = GPT_BATCH if name in GPT_MODELS else args.batch_size
        torch._dynamo.reset()
        runs = {"replay": webgrad_training(name, batch, True, "webgpu"),
                "step": torch_training(torch, name, batch, "webgpu", "step")}
        if not args.no_graphs:
            runs["graphs"] = torch_training(torch, name, batch, "webgpu", "graphs")
        if not args.no_eager:
            runs["wg_eager"] = webgrad_training(name, batch, False, "webgpu")
            runs["eager"] = torch_training(torch, name, batch, "webgpu", "eager")
        r = {key: batch * steps / seconds for key, seconds in interleaved_seconds(runs, steps, args.rounds).items()}
        del runs
        r["cpu"] = None
        if not args.no_cpu:
            cpu_steps = max(3, steps // 4)
            step, batches, sync = torch_training(torch, name, batch, "cpu", "eager")
            r["cpu"] = batch * cpu_steps / time_loop(step, batches, cpu_steps, sync)
        cells = [r.get(key) for key in ("replay", "step", "graphs", "wg_eager", "eager", "cpu")]
        print(f"{name:10s}" + "".join(f"{_cell(c):>16s}" for c in cells)
              + f"{_ratio(r['step'], r['replay']):>14s}{_ratio(r.get('graphs'), r['replay']):>14s}"
              + f"{_ratio(r.get('eager'), r.get('wg_eager')):>14s}{_ratio(r['step'], r['cpu']):>14s}", flush=True)
    print(f"boundary: {boundary_us(torch, 'webgpu'):.0f} us per call of a compiled x + 1 on 16 CPU elements "
          "(CPU tensors in and out)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
