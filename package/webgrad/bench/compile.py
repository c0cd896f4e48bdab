"""torch.compile(backend="webgrad") training steps against eager PyTorch, side by side, and the per-call cost
of the boundary (torch tensors in, torch tensors out).

    python -m webgrad.bench compile [--models mlp cnn resnet18] [--batch-size 128] [--steps N] [--device webgpu]

Each model is built once with torch.nn (webgrad.examples.models' builders) and trained with SGD (momentum
0.9) on random MNIST- or CIFAR-shaped batches: compiled onto webgrad's device (the batches are CPU torch
tensors, as a PyTorch loop hands them over) and in eager PyTorch on CUDA where there is one, else the CPU.
"""

import argparse
import time

from webgrad.examples.models import INPUT_SHAPES, MODELS, SCALE_MODELS

ALL_MODELS = {**MODELS, **SCALE_MODELS}


def _step(torch, model, opt, x, y):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def _rate(torch, model, x, y, steps, sync, stats=None, profile=0):
    """Samples/s over `steps` steps after warm-up; with `stats` (the backend's), the per-step counts of the
    timed steps are put in stats["per_step"]; `profile` > 0 prints that many of cProfile's costliest
    functions (own time) over the timed steps."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _ in range(3):  # compilation, replay recording, CUDA warm-up
        _step(torch, model, opt, x, y)
    sync()
    before = {k: v for k, v in (stats or {}).items() if isinstance(v, int)}
    profiler = None
    if profile:
        import cProfile
        profiler = cProfile.Profile()
        profiler.enable()
    start = time.perf_counter()
    for i in range(steps):
        loss = _step(torch, model, opt, x, y)
        if i % 10 == 9:
            loss.item()  # read the loss every 10 steps, as the train benchmark does
    loss.item()
    sync()
    seconds = time.perf_counter() - start
    if profiler is not None:
        import pstats
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(profile)
    if stats is not None:
        stats["per_step"] = {k: round((stats[k] - v) / steps, 1) for k, v in before.items()}
    return steps * x.shape[0] / seconds


def boundary_us(torch, device, calls=200):
    """µs per call of a compiled `x + 1` on 16 elements: the fixed cost of crossing into webgrad and back."""
    from webgrad.torch_backend import compile as wg_compile
    f = wg_compile(lambda t: t + 1, device=device)
    x = torch.ones(16)
    for _ in range(5):
        f(x)
    start = time.perf_counter()
    for _ in range(calls):
        f(x)
    return (time.perf_counter() - start) / calls * 1e6


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=sorted(ALL_MODELS), default=["mlp", "cnn", "resnet18"])
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--device", default="webgpu", choices=("webgpu", "cpu"))
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="print cProfile's N costliest functions over each model's compiled steps")
    args = parser.parse_args(argv)

    import torch
    from webgrad.torch_backend import compile as wg_compile
    cuda = torch.cuda.is_available()
    ref = "cuda" if cuda else "cpu"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    print(f"torch.compile(backend='webgrad') on {args.device} vs eager PyTorch on {ref}; SGD, batch "
          f"{args.batch_size}, {args.steps} timed steps")
    print(f"{'model':10s} {'compiled (webgrad)':>20s} {'eager torch':>14s} {'ratio':>7s}")
    for name in args.models:
        torch.manual_seed(0)
        shape = INPUT_SHAPES[name]
        x = torch.randn(args.batch_size, *shape)
        y = torch.randint(0, 10, (args.batch_size,))
        model = ALL_MODELS[name](nn=torch.nn)
        eager = ALL_MODELS[name](nn=torch.nn).to(ref)
        eager.load_state_dict(model.state_dict())
        stats = {}
        compiled = wg_compile(model, device=args.device, stats=stats)
        ours = _rate(torch, compiled, x, y, args.steps, lambda: None, stats, args.profile)
        theirs = _rate(torch, eager, x.to(ref), y.to(ref), args.steps, sync)
        fell_back = ", ".join(sorted(stats.get("fallback", {}))) or "none"
        print(f"{name:10s} {ours:18,.0f}/s {theirs:12,.0f}/s {ours / theirs:6.2f}x   fallback ops: {fell_back}")
        print(f"{'':10s} per step: {stats['per_step']}")
    print(f"boundary: {boundary_us(torch, args.device):.0f} us per call of a compiled x + 1 on 16 elements")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
