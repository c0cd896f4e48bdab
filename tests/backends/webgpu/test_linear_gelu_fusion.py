"""A captured step's linear -> GELU (a GPT's MLP: c_fc, GELU, c_proj) runs as one product whose epilogue writes
GELU's output beside the pre-activation (fusion.py's linear_activation, matmul.wgsl's act_store): erf and tanh
GELU, float32 and float16 under autocast, unsplit and split-K (the reduction takes the epilogue). The replayed
step computes what the eager step (product, then GELU) computes, its gradients match torch's, and the GELU's own
pass is gone from the replay (the tests fail if the unfused kernels run). The runtime is told it runs on a GPU
(matmul.wgsl; software adapters' matmul_cpu.wgsl has no epilogue)."""

import numpy as np
import pytest

import webgrad as wg
import webgrad.nn as nn
from helpers import webgpu_available
from gpu_fixtures import gpu_kernels, matmul_splits  # noqa: F401  (pytest fixtures)

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not webgpu_available(), reason="needs a WebGPU adapter")

C, HIDDEN, ROWS = 48, 96, 24  # (K = 48: three K steps of 16, split 3 ways with split-k)


@pytest.fixture(params=[1, 3], ids=["unsplit", "split-k"])
def splits(request, matmul_splits):
    return matmul_splits(request.param)


class MLP(nn.Module):
    """nanoGPT's MLP: c_fc, GELU, c_proj (a module, as nanoGPT's; or F.gelu when functional)."""

    def __init__(self, approximate, functional=False, hidden=HIDDEN):
        super().__init__()
        self.c_fc, self.c_proj = nn.Linear(C, hidden), nn.Linear(hidden, C)
        self.gelu = nn.GELU(approximate=approximate)
        self.approximate, self.functional = approximate, functional

    def forward(self, x):
        h = self.c_fc(x)
        h = nn.functional.gelu(h, approximate=self.approximate) if self.functional else self.gelu(h)
        return self.c_proj(h)


def _has_f16():
    return webgpu_available() and wg.device("webgpu").backend.runtime.has_f16


def _data(steps):
    rng = np.random.default_rng(5)
    return [(rng.standard_normal((2, ROWS // 2, C)).astype(np.float32),
             rng.standard_normal((2, ROWS // 2, C)).astype(np.float32)) for _ in range(steps)]


def _step(model, opt, amp):
    """One training step of `model` on (x, t): a squared error, under autocast when amp."""
    def step(x, t):
        with wg.autocast("webgpu", dtype=wg.float16, enabled=amp):
            out = model(x)
        loss = (out.float() - t).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def _train(replay, approximate, amp, steps=4, lr=0.05, functional=False, hidden=HIDDEN):
    wg.manual_seed(0)
    model = MLP(approximate, functional, hidden).to("webgpu")
    opt = wg.optim.SGD(model.parameters(), lr=lr)

    step = _step(model, opt, amp)
    run = wg.replayable(step) if replay else step
    losses = [run(wg.tensor(x, device="webgpu"), wg.tensor(t, device="webgpu")).item() for x, t in _data(steps)]
    state = {k: v.detach().to("cpu").numpy() for k, v in model.state_dict().items()}
    grads = {k: p.grad.to("cpu").numpy() for k, p in model.named_parameters()}
    return np.array(losses), state, grads, run


def _entries(run):
    describe = wg.device("webgpu").backend.runtime.describe
    return [d for d in describe(run.graph.records) if d.kernel]


def _gelu_passes(run):
    """The replay's elementwise dispatches whose op is a GELU (forward)."""
    from webgrad._backends.webgpu import elementwise

    codes = elementwise.ops().unary
    gelus = {codes["gelu"], codes["gelu_tanh"]}
    return [d for d in _entries(run) if d.kernel.entry in ("unary4", "unary", "unary_h8")
            and dict(d.constants).get("OP") in gelus]


def _fused_products(run):
    return [d for d in _entries(run) if (5, "write") in d.kernel.bindings and d.kernel.shader.name == "matmul.wgsl"]


AMP = [False, pytest.param(True, marks=pytest.mark.skipif(not _has_f16(), reason="needs shader-f16"))]


@pytest.mark.parametrize("hidden", [HIDDEN, HIDDEN + 1], ids=["vec4-stores", "scalar-stores"])
@pytest.mark.parametrize("amp", AMP, ids=["float32", "autocast"])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_replay_fuses_and_computes_what_eager_computes(gpu_kernels, splits, approximate, amp, hidden):
    # (an odd hidden width: c_fc's output rows are not vec4-aligned, so its product stores, and the reduction
    # sums, one element at a time)
    eager_losses, eager_state, _, _ = _train(False, approximate, amp, hidden=hidden)
    losses, state, _, run = _train(True, approximate, amp, hidden=hidden)
    assert run.replays == 2
    fused = _fused_products(run)
    assert len(fused) == 1 and not _gelu_passes(run), "the GELU's own pass ran"
    assert fused[0].kernel.entry.startswith("matmul_reduce") == (splits > 1)
    assert fused[0].kernel.entry.endswith("4") == (hidden % 4 == 0)
    np.testing.assert_array_equal(losses, eager_losses)
    for k in eager_state:
        np.testing.assert_array_equal(state[k], eager_state[k], err_msg=k)


def test_without_fusion_the_gelu_pass_runs(gpu_kernels, monkeypatch):
    # (what the test above counts on: unfused, the replay has the GELU's pass and no product with its epilogue)
    from webgrad._backends.webgpu import recording

    monkeypatch.setitem(recording.FUSE, "on", False)
    _, _, _, run = _train(True, "none", False, steps=3)
    assert len(_gelu_passes(run)) == 1 and not _fused_products(run)


def _torch_grads(approximate, amp, functional=False):
    """One step's loss and gradients of the same MLP in torch (float64, or float16 autocast on the CPU)."""
    wg.manual_seed(0)
    ours = MLP(approximate, functional)
    model = torch.nn.Sequential(torch.nn.Linear(C, HIDDEN), torch.nn.GELU(approximate=approximate),
                                torch.nn.Linear(HIDDEN, C))
    with torch.no_grad():
        for (_, p), (_, q) in zip(model.named_parameters(), ours.named_parameters()):
            p.copy_(torch.tensor(q.detach().numpy()))
    if not amp:
        model.double()
    x, t = (torch.tensor(v) for v in _data(1)[0])
    with torch.autocast("cpu", dtype=torch.float16, enabled=amp):
        out = model(x if amp else x.double())
    loss = (out.float() - t).square().mean() if amp else (out - t.double()).square().mean()
    loss.backward()
    names = ["c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"]
    return loss.item(), {k: p.grad.double().numpy() for k, p in zip(names, model.parameters())}


@pytest.mark.parametrize("amp", AMP, ids=["float32", "autocast"])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_fused_step_gradients_match_torch(gpu_kernels, approximate, amp):
    # the replayed (fused) step's gradients, with the same data three times (record, record again, replay) and
    # no update, against torch's: float64 for float32 (a gradient check), torch's CPU autocast for float16
    wg.manual_seed(0)
    model = MLP(approximate, functional=True).to("webgpu")
    opt = wg.optim.SGD(model.parameters(), lr=0.0)

    step = _step(model, opt, amp)
    run = wg.replayable(step)
    x, t = (wg.tensor(v, device="webgpu") for v in _data(1)[0])
    for _ in range(3):
        loss = run(x, t).item()
    assert run.replays == 1 and len(_fused_products(run)) == 1 and not _gelu_passes(run)
    want_loss, want = _torch_grads(approximate, amp, functional=True)
    tol = dict(rtol=2e-2, atol=2e-3) if amp else dict(rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(loss, want_loss, **tol)
    for k, p in model.named_parameters():
        np.testing.assert_allclose(p.grad.to("cpu").numpy(), want[k], err_msg=k, **tol)
