"""Advanced indexing against torch: several index tensors, ranges, lists, negative and repeated indices,
boolean masks; reads with gradients, and writes; on every device."""

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES

A = np.random.default_rng(0).standard_normal((4, 5, 6)).astype(np.float32)
I1, I2 = np.array([0, 3, 3, -1]), np.array([1, 4, 0, 2])

READS = {
    "range-and-tensor": lambda m, T: m[range(4), T(I2)],
    "two-tensors": lambda m, T: m[T(I1), T(I2)],
    "slice-then-tensor": lambda m, T: m[:, T(I2)],
    "two-adjacent-after-slice": lambda m, T: m[:, T(I2), T(I2)],
    "separated-by-slice": lambda m, T: m[T(I1), :, T(I2)],
    "int-is-basic": lambda m, T: m[0, :, T(I2)],
    "mask-full": lambda m, T: m[m > 0],
    "mask-leading-dims": lambda m, T: m[m[:, :, 0] > 0],
    "mask-middle-dim-and-int": lambda m, T: m[:, m[0, :, 0] > 0, 1],
    "ellipsis-list": lambda m, T: m[..., [1, 2]],
    "2d-index": lambda m, T: m[T(np.array([[0, 1], [2, 3]]))],
    "slice-list-none": lambda m, T: m[1:3, [0, 2], None],
    "broadcast-indices": lambda m, T: m[T(I1)[:, None], T(I2)[None, :3]],
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(READS))
def test_advanced_read_and_gradient_match_torch(name, device):
    fn = READS[name]
    tx = torch.tensor(A, requires_grad=True)
    wx = wg.tensor(A, requires_grad=True, device=device)
    to = fn(tx, torch.tensor)
    wo = fn(wx, lambda v: wg.tensor(v, device=device))
    assert tuple(wo.shape) == tuple(to.shape)
    np.testing.assert_array_equal(wo.detach().to("cpu").numpy(), to.detach().numpy())
    w = np.random.default_rng(1).standard_normal(tuple(to.shape)).astype(np.float32)
    (to * torch.tensor(w)).sum().backward()
    (wo * wg.tensor(w, device=device)).sum().backward()
    # repeated indices (3, 3) accumulate their gradients
    np.testing.assert_allclose(wx.grad.to("cpu").numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_cross_entropy_idiom():
    logits = np.random.default_rng(2).standard_normal((8, 10)).astype(np.float32)
    target = np.arange(8) % 10
    t = torch.tensor(logits).log_softmax(1)[range(8), torch.tensor(target)].mean()
    w = wg.tensor(logits).log_softmax(1)[range(8), wg.tensor(target)].mean()
    assert abs(float(t) - float(w)) < 1e-6


WRITES = {
    "mask-scalar": lambda m, T: m.__setitem__(m > 0.5, 0.0),
    "two-tensors-scalar": lambda m, T: m.__setitem__((T(I1), T(I2)), 7.0),
    "repeated-last-wins": lambda m, T: m.__setitem__((T(np.array([1, 1])), T(np.array([2, 2]))),
                                                      T(np.array([[1.0] * 6, [2.0] * 6], dtype=np.float32))),
    "slice-then-list-tensor-value": lambda m, T: m.__setitem__((slice(None), [0, 2]),
                                                                T(np.ones((4, 2, 6), dtype=np.float32))),
    "int-slice-list": lambda m, T: m.__setitem__((1, slice(None), [0, 5]), T(np.arange(10, dtype=np.float32)
                                                                           .reshape(5, 2))),
    "separated-by-slice": lambda m, T: m.__setitem__((T(I1[:2]), slice(None), T(I2[:2])),
                                                      T(np.arange(10, dtype=np.float32).reshape(2, 5))),
    "range-row": lambda m, T: m.__setitem__(range(2), -1.0),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(WRITES))
def test_advanced_write_matches_torch(name, device):
    t, w = torch.tensor(A), wg.tensor(A, device=device)
    WRITES[name](t, torch.tensor)
    WRITES[name](w, lambda v: wg.tensor(v, device=device))
    np.testing.assert_array_equal(w.to("cpu").numpy(), t.numpy())


def test_errors():
    x = wg.tensor(A)
    with pytest.raises(IndexError, match="integer|long"):
        x[wg.tensor([0.5])]
    with pytest.raises(IndexError, match="mask"):
        x[wg.tensor([True, False])]
    with pytest.raises(IndexError, match="too many"):
        x[[0], [0], [0], [0]]


def test_numpy_integer_scalars_index_like_ints():
    x = wg.tensor(A)
    assert x[np.int64(2), np.int32(1)].tolist() == x[2, 1].tolist()
    assert x[np.array([0, 2])].shape == (2, 5, 6)


@pytest.mark.parametrize("select", [
    lambda x: x.t()[0, :2], lambda x: x[:, :2][1:3, 0], lambda x: x.permute(1, 0)[1], lambda x: x.t()[1:, ::2],
    lambda x: x[1][None, 2:], lambda x: x.t()[..., -1],
], ids=["t-row", "slice-of-slice", "permute-row", "t-strided", "row-unsqueezed", "t-ellipsis"])
def test_basic_indexing_of_a_strided_view_sends_the_gradient_to_the_right_elements(device, select):
    # The backward writes into a fresh contiguous tensor: the selection must be made with its strides, not with
    # the strides of the (transposed, sliced) view that was indexed.
    data = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    x = wg.tensor(data, device=device, requires_grad=True)
    (select(x) * wg.arange(1.0, 1.0 + select(x).numel(), device=device).reshape(select(x).shape)).sum().backward()
    t = torch.tensor(data, requires_grad=True)
    (select(t) * torch.arange(1.0, 1.0 + select(t).numel()).reshape(select(t).shape)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


def test_list_indices_are_read_on_the_host_without_a_tensor_on_the_default_device(monkeypatch):
    # In Pyodide the default device is the CPU, which has no NumPy there: x[:, [-1]] on a WebGPU tensor (a GPT's
    # last position) must not make a tensor anywhere but on x's device
    import webgrad.ops.shape as shape

    made = []
    real = shape.tensor
    monkeypatch.setattr(shape, "tensor", lambda *a, **k: (made.append(k.get("device")), real(*a, **k))[1])
    x = wg.arange(12.0).reshape(3, 4)
    assert x[:, [-1]].tolist() == [[3.0], [7.0], [11.0]]
    assert made and all(d is not None for d in made)
    with pytest.raises(IndexError, match="must be long, int, byte or bool"):
        x[[0.5]]


def test_basic_indexing_grad_fn_names_are_torchs():
    # x[:2] is a SliceBackward0, x[0] a SelectBackward0, x[None] an UnsqueezeBackward0, x[:] an AliasBackward0: the
    # last view applied, left to right, as PyTorch names it (a tutorial prints param[:2])
    indices = [0, (slice(0, 2),), (0, slice(0, 2)), (slice(0, 2), 0), (slice(None), 0), (0, slice(None)),
               (slice(None),), (None,), (Ellipsis, 0), (0, None), (None, 0), (slice(None), None),
               (slice(1, 3), slice(None), slice(0, 6)), (slice(0, 4),), (slice(0, 4, 2),), (Ellipsis,),
               (0, Ellipsis, slice(2, 3)), (-1, slice(-3, None))]
    names = []
    for lib in (torch, wg):
        x = lib.zeros(4, 5, 6, requires_grad=True) * 1
        names.append([x[i].grad_fn.name() if lib is torch else x[i].grad_fn.name_() for i in indices])
    assert names[1] == names[0]


@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
def test_writes_with_a_value_or_mask_from_another_device_follow_torchs_rules():
    # As torch's CUDA (checked there): x[basic] = v is a copy_, so v may come from any device; an advanced write
    # (index_put_) takes a host index or mask, and a value from another device only when it is 0-dim
    x = wg.zeros(3, 4, device="webgpu")
    x[0] = wg.ones(4)
    x[1:, 1:3] = wg.full((2, 2), 2.0)
    x[2, 0] = wg.tensor(5.0)
    x[wg.tensor([True, False, False])] = 7.0
    x[wg.tensor([1]), wg.tensor([3])] = wg.tensor(9.0)
    t = torch.zeros(3, 4)
    t[0] = 1.0
    t[1:, 1:3] = 2.0
    t[2, 0] = 5.0
    t[torch.tensor([True, False, False])] = 7.0
    t[1, 3] = 9.0
    assert x.device.type == "webgpu" and x.tolist() == t.tolist()
    host = wg.zeros(2, 3)
    host[1] = wg.arange(3.0, device="webgpu")
    assert host.device.type == "cpu" and host.tolist() == [[0.0, 0.0, 0.0], [0.0, 1.0, 2.0]]
    full_mask = wg.zeros(3, device="webgpu")
    full_mask[wg.tensor([True, False, True])] = 2.0
    assert full_mask.tolist() == [2.0, 0.0, 2.0]
    with pytest.raises(RuntimeError, match="same device"):
        x[wg.tensor([0, 2])] = wg.ones(2, 4)


@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
def test_a_value_copied_in_from_another_device_gets_its_gradient_on_its_own_device():
    v = wg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = wg.zeros(2, 3, device="webgpu", requires_grad=True).clone()
    y[1] = v
    (y * wg.tensor([[1.0, 1.0, 1.0], [4.0, 5.0, 6.0]], device="webgpu")).sum().backward()
    assert v.grad.device.type == "cpu" and v.grad.tolist() == [4.0, 5.0, 6.0]
