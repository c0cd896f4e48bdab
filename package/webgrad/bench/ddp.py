"""Data-parallel benchmark: `python -m webgrad.bench ddp [--ranks 2] [--device webgpu|cpu] [--models cnn resnet18]`.

PyTorch's DistributedDataParallel (gloo) around a model compiled with the webgrad torch.compile backend,
on 1 rank and on N local ranks (spawned processes; each takes its own WebGPU adapter by LOCAL_RANK where
there are several, else they share one). Prints samples/s for each, the scaling efficiency
(N-rank samples/s / (N x 1-rank samples/s)) and the time per step split into compute and all-reduce.

How the split is measured: a DDP comm hook runs the default all-reduce of each gradient bucket and waits
for it, timing the wait. Waiting in the hook serialises communication with the rest of the backward (no
overlap), so compute + all-reduce is the whole step, and the samples/s are those of this serialised step
(on the 1-rank run the all-reduce is a no-op of the process group). "copy" is the part of compute spent
moving tensors between torch and the webgrad device at the graphs' boundaries (inputs and changed
parameters up; outputs, gradients included, down): the executor's upload and download timed, a download
only after the device finished its queued work (that wait counts as compute, not copy). Data are random
tensors of the datasets' shapes; --batch-size is per rank (weak scaling: the global batch grows with the
ranks).
"""

import argparse
import os
import tempfile
import time

MODELS = {"cnn": ("cnn", (1, 28, 28)), "resnet18": ("resnet18", (3, 32, 32))}


def _net(name):
    import torch.nn as nn
    import torch.nn.functional as F
    from webgrad.examples import models

    class WithLoss(nn.Module):
        """The loss inside the compiled graph; also a model class of our own: under DDP, Dynamo starts no
        frame in torch.nn's files, so the Sequential models.cnn returns would run in eager PyTorch."""

        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x, y):
            return F.cross_entropy(self.net(x), y)

    return WithLoss(getattr(models, MODELS[name][0])(nn=nn))


def _time_copies(device, copies):
    """Wrap the torch backend's upload and download so their time adds up in copies[0]."""
    from webgrad.torch_backend import executor
    import webgrad.webgpu
    upload, download = executor.upload, executor.download
    settle = webgrad.webgpu.synchronize if device == "webgpu" else (lambda: None)

    def timed(fn, before):
        def wrapper(*a, **k):
            before()
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                copies[0] += time.perf_counter() - start
        return wrapper

    executor.upload = timed(upload, lambda: None)
    executor.download = timed(download, settle)


def _rank(rank, world, init, args, name, queue):
    os.environ["LOCAL_RANK"] = str(rank)
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from webgrad.torch_backend import webgrad_backend

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    torch.manual_seed(0)
    model = _net(name)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    waits = []

    def timed_allreduce(state, bucket):
        start = time.perf_counter()
        fut = allreduce_hook(None, bucket)
        fut.wait()
        waits.append(time.perf_counter() - start)
        return fut

    ddp.register_comm_hook(None, timed_allreduce)
    copies = [0.0]
    _time_copies(args.device, copies)
    stats = {}
    step = torch.compile(ddp, backend=webgrad_backend,
                         options={"device": args.device, "stats": stats, "replay": args.device == "webgpu"})
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(rank)
    shape = MODELS[name][1]
    x, y = torch.rand(args.batch_size, *shape, generator=g), torch.randint(0, 10, (args.batch_size,), generator=g)

    def one():
        opt.zero_grad()
        step(x, y).backward()
        opt.step()

    for _ in range(args.warmup):
        one()
    if "uploads" not in stats:
        raise RuntimeError("no graph was compiled by webgrad: the model ran in eager PyTorch")
    dist.barrier()
    waits.clear()
    copies[0] = 0.0
    start = time.perf_counter()
    for _ in range(args.steps):
        one()
    dist.barrier()  # the slowest rank sets the pace
    elapsed = time.perf_counter() - start
    queue.put((rank, elapsed, sum(waits), copies[0], dict(stats["fallback"])))
    dist.destroy_process_group()


def run(world, args, name):
    """(samples/s, seconds per step, all-reduce and copy seconds per step, fallback ops) of `world` ranks."""
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    init = "file://" + os.path.join(tempfile.mkdtemp(), "init")
    procs = [ctx.Process(target=_rank, args=(r, world, init, args, name, queue)) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    if any(p.exitcode for p in procs):
        raise RuntimeError(f"a rank failed (exit codes {[p.exitcode for p in procs]})")
    results = sorted(queue.get() for _ in range(world))
    elapsed = max(r[1] for r in results)
    allreduce = sum(r[2] for r in results) / world / args.steps  # means over ranks
    copy = sum(r[3] for r in results) / world / args.steps
    return world * args.batch_size * args.steps / elapsed, elapsed / args.steps, allreduce, copy, results[0][4]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m webgrad.bench ddp", description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--device", choices=["webgpu", "cpu"], default="webgpu")
    p.add_argument("--models", nargs="+", choices=sorted(MODELS), default=["cnn"])
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (compilation, replay recording)")
    args = p.parse_args(argv)
    print(f"DDP (gloo) around torch.compile(backend=webgrad) on {args.device}; batch {args.batch_size} per rank, "
          f"{args.steps} timed steps after {args.warmup}")
    print(f"{'model':10} {'ranks':>5} {'samples/s':>10} {'step ms':>8} {'compute ms':>10} {'(copy ms)':>9} "
          f"{'all-reduce ms':>13}")
    for name in args.models:
        rates = {}
        for world in sorted({1, args.ranks}):
            rate, step, allreduce, copy, fallback = run(world, args, name)
            rates[world] = rate
            print(f"{name:10} {world:5d} {rate:10.1f} {1e3 * step:8.1f} {1e3 * (step - allreduce):10.1f} "
                  f"{1e3 * copy:9.1f} {1e3 * allreduce:13.1f}" + (f"  eager fallback: {fallback}" if fallback else ""), flush=True)
        if args.ranks > 1:
            print(f"{name:10} scaling efficiency {args.ranks} ranks: "
                  f"{rates[args.ranks] / (args.ranks * rates[1]):.2f}", flush=True)
    return 0
