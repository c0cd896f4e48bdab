"""Data-parallel MNIST: PyTorch's DistributedDataParallel around a model compiled with backend="webgrad".

    torchrun --nproc_per_node=2 -m webgrad.examples.ddp_mnist --device webgpu       # torchrun sets the env
    python -m webgrad.examples.ddp_mnist --spawn 2 --device cpu --synthetic         # 2 local processes
    python -m webgrad.examples.ddp_mnist --root ~/data/mnist                        # 1 process, real MNIST

Each rank trains on its slice of every global batch (--batch-size per rank); DDP averages the gradients
through gloo (the compiled graphs hand back CPU torch tensors). With several GPUs each rank takes its own
WebGPU adapter by LOCAL_RANK (or WEBGRAD_ADAPTER_INDEX); with one, the ranks share it. The model class is
the user's own on purpose: under DDP, Dynamo compiles the wrapped module's forward as a frame of its own
and starts none in torch.nn's files, so DDP(nn.Sequential(...)) would train, correctly but in eager
PyTorch; the script checks that graphs ran.
"""

import argparse
import logging
import os
import tempfile
import time

import torch
import torch.distributed as dist
import torch.nn as nn

from webgrad.examples.compile_mnist import CNN, load


def data(args):
    if args.synthetic:
        g = torch.Generator().manual_seed(0)
        n = args.train_limit or 4096
        return torch.rand(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g)
    if args.root:
        os.environ["WEBGRAD_MNIST"] = args.root
    try:
        return load("train", args.train_limit)
    except FileNotFoundError as e:
        raise SystemExit(f"{e}\nPass --root DIR (a folder with MNIST's IDX files) or --synthetic.") from None


def train(rank, world, args):
    from webgrad.torch_backend import webgrad_backend
    logging.basicConfig(level=logging.INFO, format=f"rank {rank} %(name)s: %(message)s")  # the adapter choice
    torch.manual_seed(0)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    x, y = data(args)
    model = CNN()
    stats = {}
    ddp = nn.parallel.DistributedDataParallel(model)
    # replay records WebGPU work; webgrad's CPU backend has nothing to record
    options = {"device": args.device, "stats": stats, "replay": args.device == "webgpu"}
    step = torch.compile(ddp, backend=webgrad_backend, options=options)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    if args.device == "webgpu":
        import webgrad.webgpu
        print(f"rank {rank}: adapter {webgrad.webgpu.adapter_info()['device']}", flush=True)
    batch = args.batch_size * world  # the global batch; rank r trains on its r-th slice
    start, seen = time.perf_counter(), 0
    for epoch in range(args.epochs):
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(epoch))  # equal on all ranks
        for i in range(0, len(x) - batch + 1, batch):
            idx = order[i:i + batch].chunk(world)[rank]
            opt.zero_grad()
            loss, _ = step(x[idx], y[idx])
            loss.backward()
            opt.step()
            seen += batch
        if "uploads" not in stats:
            raise RuntimeError("no graph was compiled by webgrad: the model ran in eager PyTorch")
        if rank == 0:
            print(f"epoch {epoch + 1}: loss {loss.item():.4f} (rank 0's slice), "
                  f"{seen / (time.perf_counter() - start):,.0f} samples/s over {world} rank(s)", flush=True)
    if rank == 0:
        print(f"ops run in eager PyTorch instead of webgrad: {stats['fallback'] or 'none'}")


def worker(rank, world, init, args):
    os.environ["LOCAL_RANK"] = str(rank)  # what torchrun sets: picks this rank's adapter (webgrad.webgpu)
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)  # as torchrun: ranks with pools as wide as the host starve each other
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        train(rank, world, args)
        dist.barrier()  # no rank tears gloo down while a peer still talks to it (that aborted a rank at exit)
    finally:
        dist.destroy_process_group()


def main(argv=None):
    p = argparse.ArgumentParser(description="DDP MNIST CNN through torch.compile(backend='webgrad')")
    p.add_argument("--spawn", type=int, default=0, metavar="N", help="launch N local processes (no torchrun)")
    p.add_argument("--device", choices=["webgpu", "cpu"], default="webgpu")
    p.add_argument("--root", help="folder with MNIST's IDX files (default: $WEBGRAD_MNIST or node_modules)")
    p.add_argument("--synthetic", action="store_true", help="random images instead of MNIST (a quick check)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--train-limit", type=int, default=None)
    args = p.parse_args(argv)
    if args.spawn:
        import torch.multiprocessing as mp
        init = "file://" + os.path.join(tempfile.mkdtemp(), "init")
        mp.spawn(worker, args=(args.spawn, init, args), nprocs=args.spawn)
    elif "RANK" in os.environ:  # torchrun (or any launcher that sets RANK, WORLD_SIZE, MASTER_ADDR/PORT)
        worker_env = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group("gloo", init_method="env://")
        try:
            train(*worker_env, args)
            dist.barrier()
        finally:
            dist.destroy_process_group()
    else:
        worker(0, 1, "file://" + os.path.join(tempfile.mkdtemp(), "init"), args)


if __name__ == "__main__":
    main()
