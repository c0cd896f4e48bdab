"""The meta device (_backends/meta.py): tensors with shapes, dtypes and graphs but no data, as PyTorch's. Shapes
through ops, modules and backward against torch's meta device, printing, the device context, a module moved to
meta for torch.func's ensembling recipe, and PyTorch's errors where values are needed."""

import copy

import pytest
import torch

import webgrad as wg
from webgrad.func import functional_call, stack_module_state, vmap


def _shapes(lib):
    lib.manual_seed(0)
    nn, dev = lib.nn, "meta"
    outs = []
    conv = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(8 * 4 * 4, 10)).to(dev)
    outs.append(conv(lib.randn(2, 3, 8, 8, device=dev)).shape)
    o, (h, _) = nn.LSTM(5, 7, num_layers=2, batch_first=True).to(dev)(lib.randn(3, 4, 5, device=dev))
    outs += [o.shape, h.shape]
    outs.append(nn.TransformerEncoderLayer(16, 4, 32, batch_first=True).to(dev)(lib.randn(2, 6, 16, device=dev)).shape)
    outs.append(nn.Embedding(10, 4).to(dev)(lib.randint(0, 10, (3, 5), device=dev)).shape)
    x = lib.randn(4, 6, device=dev, requires_grad=True)
    (x.softmax(-1) * x).cumsum(1).max(1).values.sum().backward()
    outs.append(x.grad.shape)
    outs.append(nn.functional.cross_entropy(lib.randn(4, 10, device=dev), lib.randint(0, 10, (4,), device=dev)).shape)
    return [tuple(s) for s in outs], x.grad.device.type


def test_shapes_through_ops_modules_and_backward_are_torchs():
    assert _shapes(wg) == _shapes(torch)


def test_printing_and_dtypes_as_torch():
    for lib in (wg, torch):
        x = lib.zeros(2, 3, device="meta", dtype=lib.int32)
        assert x.dtype == lib.int32 and tuple(x.shape) == (2, 3) and x.device.type == "meta"
    assert repr(wg.randn(2, 3, device="meta", requires_grad=True)) == \
        repr(torch.randn(2, 3, device="meta", requires_grad=True))


def test_values_are_refused_with_pytorchs_error():
    x = wg.randn(3, device="meta")
    for read in (lambda: x[0].item(), x.tolist, lambda: x.to("cpu"), lambda: wg.nn.Linear(2, 2).to("meta").cpu()):
        with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
            read()
    with pytest.raises(RuntimeError, match="same device"):
        x + wg.randn(3)


def test_the_device_context_makes_meta_modules():
    with wg.device("meta"):
        layer = wg.nn.Linear(3, 2)
        assert wg.empty(4).device.type == "meta"
    assert layer.weight.device.type == "meta" and wg.get_default_device().type == "cpu"
    with torch.device("meta"):
        ref = torch.nn.Linear(3, 2)
    assert tuple(ref.weight.shape) == tuple(layer.weight.shape)


def test_a_meta_copy_runs_stacked_parameters_as_the_ensembling_tutorial():
    """torch.func's model ensembling: a copy of one model moved to meta holds the structure; functional_call under
    vmap runs it with every model's stacked parameters."""
    wg.manual_seed(0)
    models = [wg.nn.Sequential(wg.nn.Linear(4, 8), wg.nn.ReLU(), wg.nn.Linear(8, 2)) for _ in range(3)]
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")
    x = wg.randn(5, 4)
    out = vmap(lambda p, b, x: functional_call(base, (p, b), (x,)), in_dims=(0, 0, None))(params, buffers, x)
    assert tuple(out.shape) == (3, 5, 2) and out.device.type == "cpu"
    for i, model in enumerate(models):
        assert wg.allclose(out[i], model(x))
