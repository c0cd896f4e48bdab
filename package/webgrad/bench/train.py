"""Training benchmark: `python -m webgrad.bench train [--models mlp cnn] [--batch-sizes 128 1024] [--steps N]`.

MNIST-shaped training steps (the reference recipe of ENVIRONMENT.md: cross-entropy, Adam lr 1e-3, data
resident on the device, loss read back every 10 steps) timed side by side in one run:

  webgrad replay   the step recorded once and replayed (webgrad.replayable), on WebGPU
  webgrad eager    every op issued from Python, on WebGPU
  torch eager      PyTorch on its best device here (CUDA if present, else the CPU), if installed

Prints steady-state samples/s after warm-up and the ratios. Data are random tensors of MNIST's shapes:
throughput does not depend on pixel values.
"""

import argparse
import time

import webgrad as wg
from webgrad.examples.models import MODELS, training_step


WARMUP_SECONDS = 1.0


def _time_loop(step, batches, steps, sync):
    """Run `steps` steps cycling over `batches`, loss read back every 10 steps, after a warm-up of at
    least 10 steps and WARMUP_SECONDS: an idle GPU clocks down (an H100 idles at 345 MHz), and a few
    milliseconds of warm-up would time the first library at lower clocks than the next."""
    i, start = 0, time.perf_counter()
    while i < 10 or time.perf_counter() - start < WARMUP_SECONDS:
        step(*batches[i % len(batches)])
        if i % 10 == 9:
            sync()
        i += 1
    sync()
    start = time.perf_counter()
    for i in range(steps):
        loss = step(*batches[i % len(batches)])
        if i % 10 == 9:
            float(loss.item())
    sync()
    return time.perf_counter() - start


def webgrad_rate(model_name, batch, steps, replay, device):
    wg.manual_seed(0)
    model = MODELS[model_name]().to(device)
    opt = wg.optim.Adam(model.parameters(), lr=1e-3)

    step = training_step(model, opt)
    run = wg.replayable(step) if replay else step
    batches = [(wg.rand(batch, 1, 28, 28, device=device), wg.randint(0, 10, (batch,), device=device))
               for _ in range(4)]
    sync = wg.webgpu.synchronize if device == "webgpu" else (lambda: None)
    return batch * steps / _time_loop(run, batches, steps, sync)


def torch_rate(model_name, batch, steps):
    import torch
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    nn = torch.nn
    if model_name == "mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    else:
        model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(1568, 10))
    model = model.to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(x, y):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    batches = [(torch.rand(batch, 1, 28, 28, device=dev), torch.randint(0, 10, (batch,), device=dev))
               for _ in range(4)]
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    return batch * steps / _time_loop(step, batches, steps, sync), dev


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["mlp", "cnn"], choices=sorted(MODELS))
    p.add_argument("--batch-sizes", nargs="+", type=int, default=[128, 1024])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--device", default="webgpu", help="webgrad device (default webgpu)")
    p.add_argument("--no-torch", action="store_true")
    args = p.parse_args(argv)
    if args.device == "webgpu":
        info = wg.webgpu.adapter_info()
        print(f"webgrad on WebGPU: {info.get('device') or info.get('description')} ({info.get('backend')})")
    print(f"{'model':5} {'batch':>5} {'webgrad replay':>15} {'webgrad eager':>14} {'torch eager':>18} "
          f"{'replay/torch':>12}")
    for model in args.models:
        for batch in args.batch_sizes:
            steps = max(20, args.steps * 128 // batch) if model == "mlp" else max(10, args.steps * 32 // batch)
            replay = webgrad_rate(model, batch, steps, True, args.device)
            eager = webgrad_rate(model, batch, steps, False, args.device)
            torch_col, ratio = "-", "-"
            if not args.no_torch:
                try:
                    t, dev = torch_rate(model, batch, steps)
                    torch_col, ratio = f"{t:12,.0f} ({dev})", f"{replay / t:11.2f}x"
                except ImportError:
                    pass
            print(f"{model:5} {batch:5d} {replay:13,.0f}/s {eager:12,.0f}/s {torch_col:>18} {ratio:>12}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
