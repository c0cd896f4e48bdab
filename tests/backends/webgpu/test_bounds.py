"""Out-of-range indices raise, as in PyTorch, on the CPU (at once) and on WebGPU (at the next read-back,
through the runtime's error word: no sync per op), inside replayed steps too (issue 15)."""

import re

import pytest
import torch

import webgrad as wg
import webgrad.nn.functional as F
from helpers import DEVICES, webgpu_available
from webgrad.data import DataLoader, Subset, TensorDataset

needs_webgpu = pytest.mark.skipif(not webgpu_available(), reason="needs a WebGPU adapter")


def _raises(device, message, fn):
    """fn() raises IndexError matching `message`: on WebGPU at the read-back .tolist() does."""
    with pytest.raises(IndexError, match=message):
        out = fn()
        out.tolist()  # the CPU raised already; WebGPU raises here
    # the error is reported once: later reads work
    assert wg.ones(2, device=device).sum().item() == 2.0


def _torch_raises(fn):
    with pytest.raises((IndexError, RuntimeError)):
        fn()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("t", [3, 100000, -5, -1])
def test_loss_targets_out_of_range(device, t):
    logits = wg.randn(2, 3, device=device)
    target = wg.tensor([0, t], device=device)
    msg = f"target {t} is out of bounds for 3 classes"
    _raises(device, "cross_entropy: " + msg, lambda: F.cross_entropy(logits, target))
    _raises(device, "nll_loss: " + msg, lambda: F.nll_loss(logits.log_softmax(1), target))
    # the weighted path (log_softmax + nll_loss) reports as cross_entropy
    _raises(device, "cross_entropy: " + msg, lambda: F.cross_entropy(logits, target, weight=wg.ones(3, device=device)))
    _raises(device, "cross_entropy: " + msg, lambda: F.cross_entropy(logits, target, label_smoothing=0.1))
    _torch_raises(lambda: torch.nn.functional.cross_entropy(torch.randn(2, 3), torch.tensor([0, t])))
    _torch_raises(lambda: torch.nn.functional.nll_loss(torch.randn(2, 3), torch.tensor([0, t])))


@pytest.mark.parametrize("device", DEVICES)
def test_ignore_index_is_not_an_error(device):
    logits = wg.randn(3, 4, device=device, requires_grad=True)
    tl = torch.tensor(logits.tolist(), requires_grad=True)
    # ignored targets may lie outside [0, C); the mean divides by the rows not ignored
    for ignore, t, ls in ((7, [1, 7, 2], 0.0), (-100, [1, -100, 3], 0.0), (-100, [-100, 0, -100], 0.2)):
        loss = F.cross_entropy(logits, wg.tensor(t, device=device), ignore_index=ignore, label_smoothing=ls)
        loss.backward()
        ref = torch.nn.functional.cross_entropy(tl, torch.tensor(t), ignore_index=ignore, label_smoothing=ls)
        ref.backward()
        assert loss.item() == pytest.approx(ref.item(), abs=1e-5)
        assert F.nll_loss(logits, wg.tensor(t, device=device), ignore_index=ignore).item() == \
            pytest.approx(torch.nn.functional.nll_loss(tl, torch.tensor(t), ignore_index=ignore).item(), abs=1e-5)
    assert torch.allclose(torch.tensor(logits.grad.tolist()), tl.grad, atol=1e-5)
    # -100 is a target like any other once ignore_index is something else
    _raises(device, "cross_entropy: target -100 is out of bounds for 4 classes",
            lambda: F.cross_entropy(logits, wg.tensor([1, -100, 3], device=device), ignore_index=7))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("i", [5, 10 ** 6, -1])
def test_index_select_gather_embedding(device, i):
    x = wg.randn(3, 4, device=device)
    idx = wg.tensor([0, i], device=device)
    _raises(device, f"index_select\\(\\): index {i} is out of range for dimension 0 with size 3",
            lambda: x.index_select(0, idx))
    _raises(device, f"gather\\(\\): index {i} is out of bounds for dimension 1 with size 4",
            lambda: x.gather(1, wg.tensor([[0], [i], [1]], device=device)))
    _raises(device, f"embedding\\(\\): index {i} is out of range for 3 embeddings",
            lambda: wg.nn.Embedding(3, 2).to(device)(idx))
    _torch_raises(lambda: torch.randn(3, 4).index_select(0, torch.tensor([0, i])))
    _torch_raises(lambda: torch.randn(3, 4).gather(1, torch.tensor([[0], [i], [1]])))
    _torch_raises(lambda: torch.nn.Embedding(3, 2)(torch.tensor([0, i])))


@pytest.mark.parametrize("device", DEVICES)
def test_advanced_indexing_wraps_negatives_and_refuses_the_rest(device):
    x = wg.arange(12, device=device).reshape(3, 4)
    # as PyTorch: x[idx] counts negative indices from the end
    assert x[[0, -1]].tolist() == torch.arange(12).reshape(3, 4)[[0, -1]].tolist()
    assert x[wg.tensor([-3, 2], device=device)].tolist() == [[0, 1, 2, 3], [8, 9, 10, 11]]
    assert x[:, wg.tensor([-1], device=device)].tolist() == [[3], [7], [11]]
    # a list is checked on the host, before its upload: the error is immediate on every device
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x[[0, 3]]
    with pytest.raises(IndexError, match="index -4 is out of bounds for dimension 0 with size 3"):
        x[[-4]]
    # a CPU index tensor for a device tensor is checked on the host too
    assert x[wg.tensor([[2], [-1]])].tolist() == [[[8, 9, 10, 11]], [[8, 9, 10, 11]]]
    assert x[wg.tensor(1)].tolist() == [4, 5, 6, 7]
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 0 with size 3"):
        x[wg.tensor([7])]
    # a tensor index is checked on the device; below -size it is reported as written
    _raises(device, "index 3 is out of bounds for dimension 0 with size 3", lambda: x[wg.tensor([3], device=device)])
    _raises(device, "index -5 is out of bounds for dimension 1 with size 4",
            lambda: x[:, wg.tensor([-5], device=device)])


@pytest.mark.parametrize("device", DEVICES)
def test_subset_and_dataloader_past_the_end(device):
    ds = TensorDataset(wg.arange(5, device=device), wg.arange(5, device=device) * 2)
    sub = Subset(ds, [0, 4, 7])
    assert [int(v) for v in sub[1]] == [4, 8]
    with pytest.raises(IndexError, match="Subset: index 7 is out of range for a TensorDataset of 5 samples"):
        sub[2]
    with pytest.raises(IndexError, match="Subset: index 7 is out of range for a TensorDataset of 5 samples"):
        list(DataLoader(sub, batch_size=2))  # the batch-gathering path: checked before the upload
    with pytest.raises(IndexError, match="Subset: index 7"):
        list(DataLoader(sub, batch_size=2, collate_fn=lambda b: b))  # the per-sample path
    assert [b[0].tolist() for b in DataLoader(Subset(ds, [4, -1, 0]), batch_size=3)] == [[4, 4, 0]]


@pytest.mark.parametrize("device", DEVICES)
def test_backward_after_a_good_forward_still_works(device):
    w = wg.randn(4, 3, device=device, requires_grad=True)
    out = F.embedding(wg.tensor([[0, 3], [3, 1]], device=device), w)
    out.sum().backward()
    assert w.grad.tolist()[3] == [2.0, 2.0, 2.0]


@needs_webgpu
def test_webgpu_error_rides_on_the_existing_read_back():
    """No sync per op: an index kernel only records; the error word is copied with the next read's data."""
    from webgrad._backends.webgpu.runtime import default_runtime
    rt = default_runtime()
    x = wg.randn(3, 4, device="webgpu")
    x.sum().item()
    reads, submits = rt.stats["reads"], rt.stats["submits"]
    y = x.index_select(0, wg.tensor([0, 9], device="webgpu"))
    z = y * 2
    assert rt.stats["reads"] == reads  # nothing read yet, nothing raised yet
    with pytest.raises(IndexError, match="index 9"):
        z.sum().item()
    assert rt.stats["reads"] == reads + 1 and rt.stats["submits"] <= submits + 1
    # a clean read without index kernels since the last one carries no error word
    z = x * 3
    z.sum().item()
    assert rt.stats["reads"] == reads + 2
    # synchronize reports too
    x.index_select(0, wg.tensor([-2], device="webgpu"))
    with pytest.raises(IndexError, match="index -2"):
        wg.webgpu.synchronize()
    wg.webgpu.synchronize()


@pytest.mark.parametrize("device", DEVICES)
def test_error_inside_a_replayed_step_raises_at_the_loss_read_back(device):
    wg.manual_seed(0)
    model = wg.nn.Sequential(wg.nn.Linear(6, 8), wg.nn.ReLU(), wg.nn.Linear(8, 3)).to(device)
    opt = wg.optim.SGD(model.parameters(), lr=0.1)

    @wg.replayable
    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    x = wg.randn(4, 6, device=device)
    good = wg.tensor([0, 1, 2, 1], device=device)
    for _ in range(3):  # warm-up, recording, replay
        step(x, good).item()
    with pytest.raises(IndexError, match=re.escape("cross_entropy: target 3 is out of bounds for 3 classes")):
        loss = step(x, wg.tensor([0, 3, 2, 1], device=device))  # the CPU raises here
        if device == "webgpu":
            assert step.replays == 2  # replayed: nothing raised yet
        loss.item()  # WebGPU raises here
    before = step(x, good).item()
    assert step(x, good).item() < before  # training goes on
    if device == "webgpu":
        assert step.replays == 4


@pytest.mark.parametrize("device", DEVICES)
def test_several_index_tensors_check_each_dimension(device):
    # Flattened into one linear index, x[0, 5] of a [3, 4] tensor would silently read x[1, 1]: each index
    # is checked against its own dimension.
    x = wg.arange(12, device=device).reshape(3, 4)
    assert x[[0, 2], [3, -1]].tolist() == torch.arange(12).reshape(3, 4)[[0, 2], [3, -1]].tolist()
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 1 with size 4"):
        x[[0], [5]]
    rows, cols = wg.tensor([0], device=device), wg.tensor([5], device=device)
    _raises(device, "index 5 is out of bounds for dimension 1 with size 4", lambda: x[rows, cols])
