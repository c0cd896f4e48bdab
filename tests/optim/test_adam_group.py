"""Adam and AdamW over many parameters a dispatch (kernels.adam_steps: adam4_group on WebGPU's GPU variant):
PyTorch's numbers for every flavour, the dispatches per step, and a replayed step that matches the eager one while a
scheduler changes the learning rate."""

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES, VARIANTS, variant as _variant

RNG = np.random.default_rng(5)
SHAPES = [(5, 7), (7,), (3, 4, 2), (13,), (1,), (64,), (6, 6), (2, 3)]
WEBGPU = "webgpu" in DEVICES


FLAVOURS = [("AdamW", {}), ("AdamW", {"amsgrad": True}), ("Adam", {"weight_decay": 0.05}),
            ("Adam", {"maximize": True})]


def _train(lib, device, name, kw, arrays, grads):
    ps = [torch.tensor(a, requires_grad=True) if lib is torch else wg.tensor(a, device=device, requires_grad=True)
          for a in arrays]
    groups = [{"params": ps[:4], "weight_decay": 0.1}, {"params": ps[4:], "weight_decay": 0.0, "lr": 0.02}]
    if name == "Adam":
        groups = [{"params": ps[:4]}, {"params": ps[4:], "lr": 0.02}]
    opt = getattr(lib.optim, name)(groups, lr=0.01, betas=(0.9, 0.95), **kw)
    for gs in grads:
        for p, g in zip(ps, gs):
            p.grad = torch.tensor(g) if lib is torch else wg.tensor(g, device=device)
        opt.step()
    return [p.detach().cpu().numpy() for p in ps]


@pytest.mark.parametrize("device,software", VARIANTS)
@pytest.mark.parametrize("name,kw", FLAVOURS, ids=[f"{n}-{'-'.join(k) or 'plain'}" for n, k in FLAVOURS])
def test_matches_torch(device, software, name, kw):
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads = [[RNG.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(4)]
    want = _train(torch, "cpu", name, kw, arrays, grads)
    with _variant(device, software):
        got = _train(wg, device, name, kw, arrays, grads)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not WEBGPU, reason="no WebGPU adapter")
def test_one_dispatch_per_run_of_alike_updates():
    from webgrad._backends.webgpu import optim
    from webgrad._backends.webgpu.runtime import default_runtime
    rt = default_runtime()
    with _variant("webgpu", False):
        ps = [wg.zeros(s, device="webgpu", requires_grad=True) for s in SHAPES]
        opt = wg.optim.AdamW([{"params": ps[:4], "weight_decay": 0.1}, {"params": ps[4:], "weight_decay": 0.0}])
        for p in ps:
            p.grad = wg.ones(p.shape, device="webgpu")
        opt.step()  # (makes the state)
        before = rt.stats["dispatches"]
        opt.step()
        size = optim.adam_group_size(rt, False)
        want = -(-4 // size) + -(-4 // size)  # two runs (weight decay on, off) of four, in groups of `size`
        assert rt.stats["dispatches"] - before == want


@pytest.mark.skipif(not WEBGPU, reason="no WebGPU adapter")
@pytest.mark.parametrize("software", [True, False])
def test_a_replayed_step_matches_eager(software):
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in SHAPES]
    x = wg.tensor(RNG.standard_normal((4, 3)).astype(np.float32), device="webgpu")
    results = {}
    with _variant("webgpu", software):
        for mode in ("eager", "replay"):
            ps = [wg.tensor(a, device="webgpu", requires_grad=True) for a in arrays]
            opt = wg.optim.AdamW(ps, lr=0.05, weight_decay=0.1)
            sched = wg.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)

            def step(x):
                loss = sum(((p.reshape(-1)[:3] * x).sum() ** 2) for p in ps[:1]) + sum((p ** 2).sum() for p in ps)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                return loss
            run = wg.replayable(step) if mode == "replay" else step
            results[mode] = [run(x).item() for _ in range(6)] + [p.detach().cpu().numpy() for p in ps]
    np.testing.assert_allclose(results["replay"][:6], results["eager"][:6], rtol=1e-6)
    for a, b in zip(results["replay"][6:], results["eager"][6:]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
