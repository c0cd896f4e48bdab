"""Data-parallel benchmark: `python -m webgrad.bench ddp [--ranks 2] [--models cnn resnet18] [--batch-size 128]`.

PyTorch's DistributedDataParallel on webgpu tensors (webgrad.torch_device.distributed: the "webgrad" process
group, gradients read back bucket by bucket and all-reduced by gloo while the backward goes on), the model
compiled with torch.compile(backend="webgrad") (--eager: not), on 1 rank and on N local ranks in one run
(spawned processes; each takes its own WebGPU adapter by LOCAL_RANK where there are several, else they share
one). Prints samples/s for each, the scaling efficiency (N-rank samples/s / (N x 1-rank samples/s)), the time per
step and the part of it the communication hook spent reading buckets back (it waits there for the GPU to finish
the backward so far). Data are random tensors of the datasets' shapes resident on the device; --batch-size is per
rank (weak scaling: the global batch grows with the ranks). Optimizers: the recipes' (Adam for the CNN, SGD with
momentum for ResNet-18), fused=True. Each rank runs PyTorch's CPU ops on one thread, as torchrun sets
OMP_NUM_THREADS=1 for its ranks, unless OMP_NUM_THREADS says otherwise.
"""

import argparse
import os
import tempfile
import time

MODELS = {"cnn": (1, 28, 28), "resnet18": (3, 32, 32)}


def _net(name):
    import torch.nn as nn
    import torch.nn.functional as F
    from webgrad import models

    class WithLoss(nn.Module):
        """The loss inside the compiled graph; also a model class of our own: under DDP, Dynamo starts no
        frame in torch.nn's files, so a bare Sequential would run in eager PyTorch."""

        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x, y):
            return F.cross_entropy(self.net(x), y)

    return WithLoss(getattr(models, name)(nn=nn))


def _rank(rank, world, init, args, name, queue):
    os.environ["LOCAL_RANK"] = str(rank)  # this rank's adapter (webgrad.webgpu), before the device is made
    import torch
    import torch.distributed as dist
    import webgrad.torch_device as td
    from webgrad.torch_device import distributed as wdist

    if "OMP_NUM_THREADS" not in os.environ:
        # one intra-op thread per rank, as torchrun starts its ranks: with every rank's pool as wide as the
        # host, the pools' spinning threads starve the ranks' Python threads (H200 pair, ResNet-18: 0.46-0.52
        # scaling efficiency instead of 1.03)
        torch.set_num_threads(1)
    dist.init_process_group("webgrad", init_method=init, rank=rank, world_size=world)
    torch.manual_seed(0)
    model = _net(name).to("webgpu")
    ddp = wdist.DistributedDataParallel(model)
    step_fn = ddp
    if not args.eager:
        from webgrad import torch_backend
        step_fn = torch_backend.compile(ddp, fallback="error")
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True) if name == "cnn" else \
        torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True)
    g = torch.Generator().manual_seed(rank)
    shape = MODELS[name]
    x = torch.rand(args.batch_size, *shape, generator=g).to("webgpu")
    y = torch.randint(0, 10, (args.batch_size,), generator=g).to("webgpu")

    def one():
        opt.zero_grad()
        loss = step_fn(x, y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        one()
    one().item()
    dist.barrier()
    wdist.TIMINGS.reset()
    start = time.perf_counter()
    for i in range(args.steps):
        loss = one()
        if i % 10 == 9:
            loss.item()
    loss.item()
    td.synchronize()
    dist.barrier()  # the slowest rank sets the pace
    elapsed = time.perf_counter() - start
    queue.put((rank, elapsed, wdist.TIMINGS.read, wdist.TIMINGS.buckets, dict(td.fallback_counts())))
    dist.destroy_process_group()


def run(world, args, name):
    """(samples/s, seconds per step, read-back seconds per step, buckets per step, fallback ops) of `world` ranks."""
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
    read = sum(r[2] for r in results) / world / args.steps  # means over ranks
    buckets = results[0][3] / args.steps
    return world * args.batch_size * args.steps / elapsed, elapsed / args.steps, read, buckets, results[0][4]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m webgrad.bench ddp", description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--models", nargs="+", choices=sorted(MODELS), default=["cnn", "resnet18"])
    p.add_argument("--batch-size", type=int, default=128, help="per rank")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (compilation, replay recording)")
    p.add_argument("--eager", action="store_true", help="DDP around the eager model, not compiled")
    args = p.parse_args(argv)
    print(f"DDP on webgpu tensors ({'eager' if args.eager else 'torch.compile(backend=webgrad)'}), gradients "
          f"all-reduced by gloo from host copies, bucket by bucket; batch {args.batch_size} per rank, {args.steps} "
          f"timed steps after {args.warmup}")
    print(f"{'model':10} {'ranks':>5} {'samples/s':>10} {'step ms':>8} {'read-back ms':>12} {'buckets':>7}")
    for name in args.models:
        rates = {}
        for world in sorted({1, args.ranks}):
            rate, step, read, buckets, fallback = run(world, args, name)
            rates[world] = rate
            print(f"{name:10} {world:5d} {rate:10.1f} {1e3 * step:8.1f} {1e3 * read:12.1f} {buckets:7.1f}"
                  + (f"  CPU fallback: {fallback}" if fallback else ""), flush=True)
        if args.ranks > 1:
            print(f"{name:10} scaling efficiency {args.ranks} ranks: "
                  f"{rates[args.ranks] / (args.ranks * rates[1]):.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
