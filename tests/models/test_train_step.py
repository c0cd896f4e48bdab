"""webgrad.models.train_step, the one training step of the dashboard, the benchmarks and the examples: from
the same weights on the same batches it does what PyTorch's forward / loss / zero_grad / backward / step
does, replayed (webgrad.replayable) as eagerly; with amp it is the autocast + GradScaler step, its scaler
exposed; with lib=torch it is PyTorch's step."""

import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import models
from webgrad.replay import Replayable


def batches(n=4, batch=8, shape=(1, 12, 12), seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.random((batch, *shape), dtype=np.float32), rng.integers(0, 10, batch)) for _ in range(n)]


def twins(shape=(1, 12, 12), seed=0):
    """The CNN in PyTorch and in webgrad, from the same weights."""
    torch.manual_seed(seed)
    theirs = models.cnn(shape, 10, nn=torch.nn)
    ours = models.cnn(shape, 10)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def assert_same_weights(ours, theirs, rtol=1e-4, atol=1e-5):
    state = ours.state_dict()
    for k, v in theirs.state_dict().items():
        np.testing.assert_allclose(state[k].numpy(), v.numpy(), rtol=rtol, atol=atol, err_msg=k)


@pytest.mark.parametrize("replay", [False, True])
def test_steps_match_pytorchs(device, replay):
    ours, theirs = twins()
    ours = ours.to(device)
    start = ours.state_dict()["7.weight"].numpy().copy()
    step = models.train_step(ours, wg.optim.Adam(ours.parameters(), lr=1e-2), replay=replay)
    ref = models.train_step(theirs, torch.optim.Adam(theirs.parameters(), lr=1e-2), lib=torch)
    assert isinstance(step, Replayable) is replay
    losses = []
    for x, y in batches(5):  # eager, recording, replays (on WebGPU)
        loss = step(wg.tensor(x, device=device), wg.tensor(y, device=device))
        ref_loss = ref(torch.from_numpy(x), torch.from_numpy(y))
        losses.append((loss.item(), ref_loss.item()))
    if replay and device == "webgpu":
        assert step.replays == 3
    np.testing.assert_allclose(*zip(*losses), rtol=1e-4)
    assert_same_weights(ours, theirs)
    assert np.abs(ours.state_dict()["7.weight"].numpy() - start).max() > 1e-3  # five Adam steps of 1e-2 moved it


def test_pytorch_step_is_forward_loss_zero_grad_backward_step():
    torch.manual_seed(0)
    a, b = models.mlp((6,), 3, hidden=(5,), nn=torch.nn), models.mlp((6,), 3, hidden=(5,), nn=torch.nn)
    b.load_state_dict(a.state_dict())
    opt_a = torch.optim.SGD(a.parameters(), lr=0.1, momentum=0.9)
    opt_b = torch.optim.SGD(b.parameters(), lr=0.1, momentum=0.9)
    step = models.train_step(a, opt_a, lib=torch)
    for _ in range(3):
        x, y = torch.rand(4, 6), torch.randint(0, 3, (4,))
        loss = step(x, y)
        ref = torch.nn.functional.cross_entropy(b(x), y)
        opt_b.zero_grad()
        ref.backward()
        opt_b.step()
        assert torch.equal(loss, ref)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_loss_fn():
    model = models.mlp((6,), 3, hidden=(5,))
    opt = wg.optim.SGD(model.parameters(), lr=0.1)
    seen = []

    def loss_fn(out, y):
        seen.append(tuple(out.shape))
        return wg.nn.functional.mse_loss(out, y)

    step = models.train_step(model, opt, loss_fn)
    before = model[1].weight.detach().clone()
    loss = step(wg.rand(4, 6), wg.zeros(4, 3))
    assert seen == [(4, 3)] and loss.shape == ()
    assert not np.array_equal(before.numpy(), model[1].weight.detach().numpy())


def test_amp_step_is_autocast_and_grad_scaler():
    """On the CPU: the same step as autocast(float16) + GradScaler written out, from the same weights on the
    same batches; the step's scaler is its GradScaler."""
    wg.manual_seed(0)
    a, b = models.cnn((1, 12, 12), 10), models.cnn((1, 12, 12), 10)
    b.load_state_dict(a.state_dict())
    opt_a, opt_b = wg.optim.Adam(a.parameters(), lr=1e-3), wg.optim.Adam(b.parameters(), lr=1e-3)
    step = models.train_step(a, opt_a, amp="cpu")
    scaler = wg.amp.GradScaler("cpu")
    assert isinstance(step.scaler, wg.amp.GradScaler) and step.scaler.get_scale() == scaler.get_scale()
    for x, y in batches(3):
        x, y = wg.tensor(x), wg.tensor(y)
        loss = step(x, y)
        with wg.autocast(device_type="cpu", dtype=wg.float16):
            ref = wg.nn.functional.cross_entropy(b(x), y)
        opt_b.zero_grad()
        scaler.scale(ref).backward()
        scaler.step(opt_b)
        scaler.update()
        assert loss.item() == ref.item()
    assert_same_weights(a, b, rtol=0, atol=0)
    assert step.scaler.get_scale() == scaler.get_scale()


def test_amp_step_with_a_scaler_of_ones_own_and_replayed():
    model = models.mlp((6,), 3, hidden=(5,))
    scaler = wg.amp.GradScaler("cpu", init_scale=1024.0)
    step = models.train_step(model, wg.optim.SGD(model.parameters(), lr=0.1), amp="cpu", scaler=scaler,
                             replay=True)
    assert isinstance(step, Replayable) and step.scaler is scaler
    step(wg.rand(4, 6), wg.randint(0, 3, (4,)))
    assert scaler.get_scale() == 1024.0  # finite gradients: no backoff, no growth before growth_interval


def test_plain_step_has_no_scaler():
    model = models.mlp((6,), 3)
    assert not hasattr(models.train_step(model, wg.optim.SGD(model.parameters(), lr=0.1)), "scaler")
    assert not hasattr(models.train_step(model, wg.optim.SGD(model.parameters(), lr=0.1), replay=True), "scaler")


def test_bad_arguments():
    model = models.mlp((6,), 3)
    opt = wg.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="replay"):
        models.train_step(model, opt, replay=True, lib=torch)
    with pytest.raises(TypeError, match="device type"):
        models.train_step(model, opt, amp=True)
    with pytest.raises(ValueError, match="amp="):
        models.train_step(model, opt, scaler=wg.amp.GradScaler("cpu"))
