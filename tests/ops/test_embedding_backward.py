"""index_select's backward (an embedding's gradient) by lists per row (embedding.wgsl): PyTorch's gradients for
embeddings with repeated indices (a language's common tokens), padding_idx, index_select over an inner dim, int32
gradients and offset views through the kernel itself, and the three dispatches it takes."""

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES, read_view, stored_view

RNG = np.random.default_rng(7)
WEBGPU = "webgpu" in DEVICES


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("vocab,dim,tokens", [(10, 8, 40), (1000, 6, 300), (50257, 12, 64)])
def test_embedding_gradient_matches_torch(device, vocab, dim, tokens):
    w = RNG.standard_normal((vocab, dim)).astype(np.float32)
    idx = RNG.integers(0, min(vocab, 25), (4, tokens // 4))  # few distinct rows, each named many times
    g = RNG.standard_normal((4, tokens // 4, dim)).astype(np.float32)
    tw = torch.tensor(w, requires_grad=True)
    torch.nn.functional.embedding(torch.tensor(idx), tw).backward(torch.tensor(g))
    ww = wg.tensor(w, device=device, requires_grad=True)
    wg.nn.functional.embedding(wg.tensor(idx, device=device), ww).backward(wg.tensor(g, device=device))
    np.testing.assert_allclose(ww.grad.cpu().numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_padding_idx_and_an_inner_dim(device):
    m = wg.nn.Embedding(9, 4, padding_idx=2).to(device)
    tm = torch.nn.Embedding(9, 4, padding_idx=2)
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(m.weight.detach().cpu().numpy()))
    idx = np.array([[2, 3, 2, 8], [0, 2, 3, 3]])
    m(wg.tensor(idx, device=device)).sum().backward()
    tm(torch.tensor(idx)).sum().backward()
    np.testing.assert_array_equal(m.weight.grad.cpu().numpy(), tm.weight.grad.numpy())
    x = RNG.standard_normal((3, 7, 5)).astype(np.float32)
    wx, tx = wg.tensor(x, device=device, requires_grad=True), torch.tensor(x, requires_grad=True)
    wx.index_select(1, wg.tensor([6, 0, 6, 2], device=device)).sum().backward()
    tx.index_select(1, torch.tensor([6, 0, 6, 2])).sum().backward()
    np.testing.assert_array_equal(wx.grad.cpu().numpy(), tx.grad.numpy())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kw", [dict(max_norm=1.0), dict(max_norm=1.5, norm_type=1.0), dict(scale_grad_by_freq=True),
                                dict(max_norm=2.0, scale_grad_by_freq=True, padding_idx=0)])
def test_max_norm_renorms_rows_in_place_and_scale_grad_by_freq_as_torch(device, kw):
    w = RNG.standard_normal((6, 4)).astype(np.float32) * 2
    idx = np.array([[1, 2, 1], [5, 1, 0]])
    got, want = [], []
    for lib, out, dev in ((torch, want, "cpu"), (wg, got, device)):
        e = lib.nn.Embedding(6, 4, **kw).to(dev)
        with lib.no_grad():
            e.weight.copy_(lib.tensor(w, device=dev))
        y = e(lib.tensor(idx, device=dev))
        (y * lib.arange(4.0, device=dev)).sum().backward()
        out += [y.detach().cpu().numpy(), e.weight.detach().cpu().numpy(), e.weight.grad.cpu().numpy(), repr(e)]
    for g, t in zip(got[:3], want[:3]):
        np.testing.assert_allclose(g, t, rtol=1e-5, atol=1e-6)
    assert got[3] == want[3]


@pytest.mark.skipif(not WEBGPU, reason="no WebGPU adapter")
@pytest.mark.parametrize("inner,offset", [(4, 0), (6, 0), (8, 3)])
def test_the_kernel_against_the_cpu(inner, offset):
    """Float and int32 gradients; vec4 rows (inner 4 and 8 at offset 0) and scalar ones (inner 6, offset 3)."""
    from webgrad._backends import kernels
    from webgrad._view import View
    gpu, cpu = wg.device("webgpu").backend, wg.device("cpu").backend
    idx = np.array([3, 1, 3, 3, 0, 5, 1], np.int32)
    grad = RNG.standard_normal((2, 7, inner)).astype(np.float32)
    results = []
    for be in (cpu, gpu):
        out = stored_view(be, np.zeros((2, 6, inner), np.float32), offset)
        index = View(be.from_bytes(idx.tobytes(), wg.int32), (7,), (1,), 0, wg.int32)
        kernels.index_select_backward(be, out, stored_view(be, grad, offset), index)
        results.append(read_view(be, out))
        ints = View(be.from_bytes(np.arange(2 * 7 * inner, dtype=np.int32).tobytes(), wg.int32), (2, 7, inner),
                    View.contiguous_strides((2, 7, inner)), 0, wg.int32)
        out_i = View(be.empty(2 * 6 * inner, wg.int32), (2, 6, inner), View.contiguous_strides((2, 6, inner)), 0,
                     wg.int32)
        kernels.index_select_backward(be, out_i, ints, index)
        results.append(np.frombuffer(be.to_bytes(out_i), np.int32).reshape(2, 6, inner))
    np.testing.assert_allclose(results[2], results[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(results[3], results[1])


@pytest.mark.skipif(not WEBGPU, reason="no WebGPU adapter")
def test_three_dispatches_whatever_the_repeats():
    from webgrad._backends.webgpu.runtime import default_runtime
    stats = default_runtime().stats
    w = wg.randn(500, 8, device="webgpu", requires_grad=True)
    y = wg.nn.functional.embedding(wg.zeros(64, dtype=wg.int64, device="webgpu"), w)  # one row, 64 times
    g = wg.ones(64, 8, device="webgpu")
    before = stats["dispatches"]
    y.backward(g)
    assert stats["dispatches"] - before == 3  # the heads' fill, link, sum_rows
    np.testing.assert_array_equal(w.grad.cpu().numpy()[:2], np.stack([np.full(8, 64.0), np.zeros(8)]))
