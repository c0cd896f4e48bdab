"""einops on webgrad: einops finds its torch backend through sys.modules['torch'], so after webgrad.as_torch() its
functions (rearrange, reduce, repeat, einsum, pack/unpack) and its layers (einops.layers.torch: Rearrange, Reduce,
EinMix inside nn.Sequential) take webgrad tensors. Each program runs in a fresh interpreter under as_torch() and
its results (values and gradients) must be the real torch's, run through the same einops here."""

import inspect
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers import webgpu_available

pytest.importorskip("einops")
torch = pytest.importorskip("torch")

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "package")


def functions_program(torch):
    """einops' functions on an image batch: patches, pooling, repetition, contraction, packing; gradients through
    a rearrange and a reduce."""
    from einops import einsum, pack, rearrange, reduce, repeat, unpack
    rng = np.random.RandomState(0)
    images = torch.tensor(rng.standard_normal((2, 3, 8, 8)).astype(np.float32), requires_grad=True)
    patches = rearrange(images, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=4, p2=4)
    pooled = reduce(images, "b c (h 2) (w 2) -> b c h w", "max")
    means = reduce(images, "b c h w -> b c", "mean")
    tokens = repeat(torch.arange(5.0), "d -> b n d", b=2, n=3)
    a, b = torch.tensor(rng.standard_normal((2, 3)).astype(np.float32)), torch.tensor(rng.standard_normal((3, 4)))
    product = einsum(a, b.float(), "i j, j k -> i k")
    packed, shapes = pack([means, pooled.flatten(2)], "b *")
    first, second = unpack(packed, shapes, "b *")
    (patches.square().sum() + pooled.sum() * 2 + means.sum()).backward()
    return {"patches": patches, "pooled": pooled, "means": means, "tokens": tokens, "product": product,
            "packed": packed, "shapes": [list(s) for s in shapes], "first": first, "second": second,
            "grad": images.grad}


def layers_program(torch):
    """A patch-embedding MLP made of einops layers in nn.Sequential: forward, backward and one SGD step."""
    from einops.layers.torch import EinMix, Rearrange, Reduce
    torch.manual_seed(0)
    rng = np.random.RandomState(1)
    model = torch.nn.Sequential(
        Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=4, p2=4),
        torch.nn.Linear(48, 16),
        EinMix("b n d -> b n e", weight_shape="d e", bias_shape="e", d=16, e=8),
        torch.nn.GELU(),
        Reduce("b n e -> b e", "mean"),
        torch.nn.Linear(8, 3))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
    images = torch.tensor(rng.standard_normal((2, 3, 8, 8)).astype(np.float32))
    labels = torch.tensor([0, 2])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = torch.nn.functional.cross_entropy(model(images), labels)
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    optimizer.step()
    after = torch.nn.functional.cross_entropy(model(images), labels)
    return {"loss": loss, "after": after, "grads": grads, "printed": repr(model[0]) + repr(model[4])}


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "detach"):
        return {"shape": list(value.shape), "values": value.detach().cpu().flatten().tolist()}
    return value


def _under_webgrad(program, device):
    code = "\n".join([
        "import json, numpy as np, webgrad",
        "torch = webgrad.as_torch()",
        f"webgrad.set_default_device({device!r})",
        textwrap.dedent(inspect.getsource(_plain)),
        textwrap.dedent(inspect.getsource(program)),
        f"print('@@' + json.dumps(_plain({program.__name__}(torch))))"])
    env = dict(os.environ, PYTHONPATH=PACKAGE)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.partition("@@")[2])


def _assert_same(ours, theirs, where="result"):
    if isinstance(theirs, dict):
        assert sorted(ours) == sorted(theirs), where
        for k in theirs:
            _assert_same(ours[k], theirs[k], f"{where}[{k!r}]")
    elif isinstance(theirs, list) and not all(isinstance(v, (int, float)) for v in theirs):
        assert len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _assert_same(a, b, f"{where}[{i}]")
    elif isinstance(theirs, str):
        assert ours == theirs, where
    else:
        np.testing.assert_allclose(np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64),
                                   rtol=1e-5, atol=1e-6, err_msg=where)


@pytest.mark.parametrize("program", [functions_program, layers_program], ids=["functions", "layers"])
def test_einops_on_webgrad_as_torch(program):
    _assert_same(_under_webgrad(program, "cpu"), _plain(program(torch)))


@pytest.mark.skipif(not webgpu_available(), reason="no WebGPU adapter")
def test_einops_layers_on_webgpu():
    _assert_same(_under_webgrad(layers_program, "webgpu"), _plain(layers_program(torch)))
