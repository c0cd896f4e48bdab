"""DistributedDataParallel on webgpu tensors (webgrad.torch_device.distributed): two spawned ranks train on
halves of a batch, eagerly and compiled, and must end where one process training on the whole batch ends."""

import os

import pytest

torch = pytest.importorskip("torch")
if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 9):
    pytest.skip("webgrad.torch_device needs torch >= 2.9", allow_module_level=True)

import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

WORLD = 2
STEPS = 3


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.fc1 = nn.Linear(4 * 4 * 4, 4096)  # 1 MiB of weight: with bucket_cap_mb=1, a bucket of its own
        self.fc2 = nn.Linear(4096, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 2).flatten(1)
        return self.fc2(F.relu(self.fc1(x)))


def _data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(4 * WORLD, 1, 8, 8, generator=g), torch.randint(0, 10, (4 * WORLD,), generator=g)


def _worker(rank, init, queue):
    os.environ["LOCAL_RANK"] = str(rank)
    import torch.distributed as dist
    import webgrad.torch_device  # noqa: F401
    from webgrad import torch_backend
    from webgrad.torch_device import distributed as wdist
    dist.init_process_group("webgrad", init_method=init, rank=rank, world_size=WORLD)
    out = {"reducer": None}
    x, y = _data()
    x, y = x.chunk(WORLD)[rank].to("webgpu"), y.chunk(WORLD)[rank].to("webgpu")
    for compiled in (False, True):
        torch.manual_seed(rank)  # different initial weights: DDP's broadcast from rank 0 must even them
        model = Net().to("webgpu")
        ddp = wdist.DistributedDataParallel(model, bucket_cap_mb=1)
        fwd = torch_backend.compile(ddp, fallback="error") if compiled else ddp
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for _ in range(STEPS):
            opt.zero_grad()
            F.cross_entropy(fwd(x), y).backward()
            opt.step()
        out[compiled] = [p.detach().cpu().tolist() for p in model.parameters()]
        out["buckets", compiled] = wdist.TIMINGS.buckets
        wdist.TIMINGS.reset()
    out["reducer"] = type(dist.group.WORLD.reducer()).__name__
    queue.put((rank, out))
    dist.barrier()
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    init = "file://" + str(tmp_path_factory.mktemp("ddp") / "init")
    procs = [ctx.Process(target=_worker, args=(r, init, queue)) for r in range(WORLD)]
    for p in procs:
        p.start()
    try:
        # Read before joining: a rank's results (a megabyte of weights) fill the pipe, and its put blocks
        # until they are read.
        results = dict(queue.get(timeout=600) for _ in range(WORLD))
        for p in procs:
            p.join(timeout=120)
        assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    finally:
        for p in procs:  # a hung rank must not outlive the test run (it would hold the runner's output open)
            if p.is_alive():
                p.kill()
                p.join()
    return results


def _reference():
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = _data()
    for _ in range(STEPS):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return [p.detach() for p in model.parameters()]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_ddp_matches_one_process(ranks, compiled):
    want = _reference()
    for rank in range(WORLD):
        for got, ref in zip(ranks[rank][compiled], want):
            torch.testing.assert_close(torch.tensor(got), ref, atol=1e-5, rtol=1e-4)
    # every rank averages in the same order, so the replicas stay identical to the bit, step after step
    assert all(ranks[rank][compiled] == ranks[0][compiled] for rank in range(WORLD))


def test_ddp_reduces_through_shared_memory_bucket_by_bucket(ranks):
    assert ranks[0]["reducer"] == "SharedReducer"  # both ranks on this host
    # more than one bucket a step (DDP's first step buckets in parameter order, later steps in the order
    # the gradients came), eager and compiled
    assert ranks[0]["buckets", False] > STEPS
    assert ranks[0]["buckets", True] > STEPS
