"""PyTorch's DistributedDataParallel around models compiled with the webgrad torch.compile backend.

Two ranks (gloo, spawned processes) train tiny models; the parent process trains the same models on the
concatenated batch without DDP, and the parameters must agree. Process launches cost seconds on a small
machine, so one launch per device runs every scenario (plain steps over several buckets, no_sync()
accumulation, find_unused_parameters) and the tests below each check one of its results.
"""

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from helpers import webgpu_available  # noqa: E402

WORLD = 2
STEPS = 3
TOL = 1e-5  # float32 all-reduce averages in another order than one big batch: ~3e-8 seen


class ConvNet(nn.Module):
    """A model class of the user's own, as in real code: under DDP, Dynamo compiles the wrapped module's
    forward as a frame of its own and starts none in torch.nn's files, so DDP(nn.Sequential(...)) compiled
    this way would run wholly in eager PyTorch, unnoticed (test_ddp_graphs_ran_on_webgrad would fail)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.fc1 = nn.Linear(4 * 4 * 4, 4096)  # 1 MiB of weight: DDP puts it in a bucket of its own
        self.fc2 = nn.Linear(4096, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 2).flatten(1)
        return self.fc2(F.relu(self.fc1(x)))


def conv_model():
    torch.manual_seed(0)
    return ConvNet()


class UnusedBranch(nn.Module):
    """`extra` never takes part in forward: DDP needs find_unused_parameters=True to finish its reduction."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(64, 10))
        self.extra = nn.Linear(64, 10)

    def forward(self, x):
        return self.body(x)


def batches(n):
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 8, 1, 8, 8, generator=g), torch.randint(0, 10, (n, 8), generator=g)


def numpy_params(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


def run_rank(rank, init, device, queue):
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=WORLD)
    from webgrad.torch_backend import webgrad_backend
    graphs = []

    def backend(gm, example_inputs, **kwargs):  # counts the graphs DDP's bucket splitting hands us
        graphs.append(len(gm.graph.nodes))
        return webgrad_backend(gm, example_inputs, **kwargs)

    def compiled(model, stats, **ddp_kwargs):
        ddp = nn.parallel.DistributedDataParallel(model, **ddp_kwargs)
        # fallback="error": an ATen op without a webgrad mapping raises instead of running in eager torch
        return ddp, torch.compile(ddp, backend=backend,
                                  options={"device": device, "fallback": "error", "stats": stats})

    def shard(t):
        return t.chunk(WORLD)[rank]

    out = {}
    # (a) plain steps; with bucket_cap_mb=1 (Dynamo's DDP optimizer allows no less) the 1 MiB weight starts
    # a second bucket, so the graph is split at the bucket boundary
    torch._dynamo.reset()
    model, stats = conv_model(), {"time": {}}
    _, step = compiled(model, stats, bucket_cap_mb=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    xs, ys = batches(STEPS)
    for x, y in zip(xs, ys):
        opt.zero_grad()
        F.cross_entropy(step(shard(x)), shard(y)).backward()
        opt.step()
    out["plain"] = numpy_params(model)
    out["plain_stats"] = {"fallback": dict(stats["fallback"]), "ops": sorted(stats["time"]),
                          "uploads": stats["uploads"], "replays": stats.get("replays", 0), "graphs": len(graphs)}

    # (b) gradient accumulation: the first micro-batch under no_sync(), the second synchronises
    torch._dynamo.reset()
    model = conv_model()
    ddp, step = compiled(model, {})
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    xs, ys = batches(2 * STEPS)
    for i in range(0, 2 * STEPS, 2):
        opt.zero_grad()
        with ddp.no_sync():
            F.cross_entropy(step(shard(xs[i])), shard(ys[i])).backward()
        out.setdefault("local_grad", [p.grad.numpy().copy() for p in model.parameters()])  # not all-reduced
        F.cross_entropy(step(shard(xs[i + 1])), shard(ys[i + 1])).backward()
        opt.step()
    out["no_sync"] = numpy_params(model)

    # (d) a parameter that forward never uses
    torch._dynamo.reset()
    model = UnusedBranch()
    _, step = compiled(model, {}, find_unused_parameters=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    xs, ys = batches(STEPS)
    for x, y in zip(xs, ys):
        opt.zero_grad()
        F.cross_entropy(step(shard(x)), shard(y)).backward()
        opt.step()
    out["unused"] = numpy_params(model)
    out["unused_grad_is_none"] = model.extra.weight.grad is None

    queue.put((rank, out))  # NumPy arrays, not torch tensors: their shared memory dies with this process
    dist.barrier()  # no rank tears gloo down while a peer still talks to it
    dist.destroy_process_group()


def reference(model_fn, xs, ys, micro=1):
    """One process, whole batches; `micro` batches accumulated per optimizer step."""
    model = model_fn()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(0, len(xs), micro):
        opt.zero_grad()
        for j in range(i, i + micro):
            F.cross_entropy(model(xs[j]), ys[j]).backward()
        opt.step()
    return numpy_params(model)


@pytest.fixture(scope="module", params=["cpu", pytest.param("webgpu", marks=pytest.mark.skipif(
    not webgpu_available(), reason="no WebGPU adapter (wgpu-py and a Vulkan/Metal/DX12 driver)"))])
def ranks(request, tmp_path_factory):
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    init = "file://" + str(tmp_path_factory.mktemp("ddp") / "init")
    procs = [ctx.Process(target=run_rank, args=(r, init, request.param, queue)) for r in range(WORLD)]
    for p in procs:
        p.start()
    results = {}
    for _ in range(WORLD):  # a rank that dies puts nothing: join first would hang, so poll the exits
        while queue.empty() and all(p.exitcode in (None, 0) for p in procs):
            procs[0].join(0.2)
        if queue.empty():
            break
        rank, out = queue.get()
        results[rank] = out
    for p in procs:
        p.join(60)
        if p.exitcode is None:  # its peer died: it waits in a collective forever
            p.terminate()
    assert sorted(results) == list(range(WORLD)), f"ranks exited with {[p.exitcode for p in procs]}"
    return results


def assert_close(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert abs(a - b).max() <= TOL


def test_ddp_matches_one_process(ranks):
    xs, ys = batches(STEPS)
    want = reference(conv_model, xs, ys)
    for rank in range(WORLD):
        assert_close(ranks[rank]["plain"], want)


def test_ddp_no_sync_accumulation(ranks):
    xs, ys = batches(2 * STEPS)
    assert_close(ranks[0]["no_sync"], reference(conv_model, xs, ys, micro=2))
    assert_close(ranks[1]["no_sync"], ranks[0]["no_sync"])
    # under no_sync() each rank kept its own gradient: different shards, so different gradients
    assert max(abs(a - b).max() for a, b in zip(ranks[0]["local_grad"], ranks[1]["local_grad"])) > 1e-4


def test_ddp_graphs_ran_on_webgrad(ranks):
    for rank in range(WORLD):
        stats = ranks[rank]["plain_stats"]
        assert stats["fallback"] == {}
        # forward and backward ops both ran as webgrad nodes
        assert any("convolution" in op for op in stats["ops"]), stats["ops"]
        assert any("backward" in op for op in stats["ops"]), stats["ops"]
        assert stats["uploads"] > 0
        # two buckets: Dynamo's DDP optimizer split the model into several compiled graphs
        assert stats["graphs"] >= 2, stats


def test_ddp_find_unused_parameters(ranks):
    xs, ys = batches(STEPS)
    want = reference(UnusedBranch, xs, ys)
    for rank in range(WORLD):
        assert_close(ranks[rank]["unused"], want)
        assert ranks[rank]["unused_grad_is_none"]


def test_ddp_mnist_example(capfd):
    """The example's own launcher (--spawn 2) on synthetic data: trains, and every op ran on webgrad."""
    from webgrad.examples import ddp_mnist
    ddp_mnist.main(["--spawn", "2", "--device", "cpu", "--synthetic", "--train-limit", "256", "--batch-size", "32"])
    out = capfd.readouterr().out
    assert "samples/s over 2 rank(s)" in out and "instead of webgrad: none" in out, out
