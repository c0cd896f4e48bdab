"""Autocast's casts back to float32 folded into a captured step's products (cast_folding.py): a half product whose
result only a cast back to float32 reads stores float32 itself, through float16 rounding (matmul.wgsl's "f32h"
output), and the cast is gone from the replay. The replayed step computes, bit for bit, what the eager step (half
products, then casts) computes, unsplit and split-K (the reduction stores), and its gradients match torch's CPU
autocast. The runtime is told it runs on a GPU (matmul.wgsl; software adapters'
matmul_cpu.wgsl has no float16 variants)."""

import numpy as np
import pytest

import webgrad as wg
import webgrad.nn as nn
from helpers import webgpu_available
from gpu_fixtures import gpu_kernels, matmul_splits  # noqa: F401  (pytest fixtures)

torch = pytest.importorskip("torch")


def _has_f16():
    return webgpu_available() and wg.device("webgpu").backend.runtime.has_f16


pytestmark = pytest.mark.skipif(not _has_f16(), reason="needs a WebGPU adapter with shader-f16")

C, HIDDEN, ROWS = 32, 64, 16  # (K = 32 and 64: two and four K steps of 16, split 2 ways with split-k)


@pytest.fixture(params=[1, 2], ids=["unsplit", "split-k"])
def splits(request, matmul_splits):
    return matmul_splits(request.param)


def _model():
    return nn.Sequential(nn.Linear(C, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, C))


def _data(steps):
    rng = np.random.default_rng(3)
    return [(rng.standard_normal((ROWS, C)).astype(np.float32), rng.standard_normal((ROWS, C)).astype(np.float32))
            for _ in range(steps)]


def _step(model, opt):
    """One training step of `model` on (x, t): its output under autocast, a float32 squared error."""
    def step(x, t):
        with wg.autocast("webgpu", dtype=wg.float16):
            out = model(x)
        loss = (out.float() - t).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return step


def _train(replay, steps=4, lr=0.05):
    wg.manual_seed(0)
    model = _model().to("webgpu")
    opt = wg.optim.SGD(model.parameters(), lr=lr)
    step = _step(model, opt)
    run = wg.replayable(step) if replay else step
    losses = [run(wg.tensor(x, device="webgpu"), wg.tensor(t, device="webgpu")).item() for x, t in _data(steps)]
    state = {k: v.detach().to("cpu").numpy() for k, v in model.state_dict().items()}
    return np.array(losses), state, run


def _entries(run):
    describe = wg.device("webgpu").backend.runtime.describe
    return [d for d in describe(run.graph.records) if d.kernel]


def _casts(run, entry):
    return [d for d in _entries(run) if d.kernel.entry == entry]


def _folded(run):
    """(entry point, element types (AT, BT, OT, CT)) of the replay's matmul.wgsl records that read or write f32h."""
    from webgrad._backends.webgpu import matmul

    found = []
    for d in _entries(run):
        typed = matmul.element_types_of(d.kernel)
        if typed is not None and "f32h" in typed[0]:
            found.append((d.kernel.entry, typed[0]))
    return found


def test_replay_folds_the_casts_and_computes_what_eager_computes(gpu_kernels, splits):
    eager_losses, eager_state, _ = _train(False)
    losses, state, run = _train(True)
    assert run.replays == 2
    folded = _folded(run)
    # the output's cast back to float32 for the loss, stored by the second layer's product (split: its reduction)
    assert folded and all(t[2] == "f32h" and "f32h" not in t[:2] for _, t in folded), folded
    assert any(entry.startswith("matmul_reduce") for entry, _ in folded) == (splits > 1), folded
    np.testing.assert_array_equal(losses, eager_losses)
    for k in eager_state:
        np.testing.assert_array_equal(state[k], eager_state[k], err_msg=k)


def test_without_fusion_the_casts_run(gpu_kernels, monkeypatch):
    # (what the test above counts on: the same step unfused has more cast passes and no f32h product)
    from webgrad._backends.webgpu import recording

    _, _, fused = _train(True, steps=3)
    monkeypatch.setitem(recording.FUSE, "on", False)
    _, _, plain = _train(True, steps=3)
    assert not _folded(plain)
    assert len(_casts(fused, "h_from_f4")) == len(_casts(plain, "h_from_f4"))
    assert len(_casts(fused, "f_from_h4")) == len(_casts(plain, "f_from_h4")) - len(_folded(fused))


def test_folded_step_gradients_match_torch(gpu_kernels):
    # the replayed (folded) step's gradients, with the same data three times and no update, against torch's CPU
    # autocast
    wg.manual_seed(0)
    model = _model().to("webgpu")
    opt = wg.optim.SGD(model.parameters(), lr=0.0)
    run = wg.replayable(_step(model, opt))
    x, t = (wg.tensor(v, device="webgpu") for v in _data(1)[0])
    for _ in range(3):
        loss = run(x, t).item()
    assert run.replays == 1 and _folded(run)

    ref = torch.nn.Sequential(torch.nn.Linear(C, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, C))
    with torch.no_grad():
        for p, q in zip(ref.parameters(), model.parameters()):
            p.copy_(torch.tensor(q.detach().to("cpu").numpy()))
    tx, tt = (torch.tensor(v) for v in _data(1)[0])
    with torch.autocast("cpu", dtype=torch.float16):
        out = ref(tx)
    want = (out.float() - tt).square().mean()
    want.backward()
    np.testing.assert_allclose(loss, want.item(), rtol=2e-3, atol=1e-4)
    for p, q in zip(ref.parameters(), model.parameters()):
        np.testing.assert_allclose(q.grad.to("cpu").numpy(), p.grad.numpy(), rtol=2e-2, atol=2e-3)
