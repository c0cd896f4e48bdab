"""complex64 tensors (webgrad/_complex.py) against torch: each op's values, and its gradients through a real loss
(the complex results seen with view_as_real), on every device; views that share storage; the errors; and the
Llama rotary embedding written with complex numbers training as its float32 rewrite does."""

import pickle
import warnings

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.testing as wg_testing
from helpers import DEVICES

RNG = np.random.default_rng(0)


def crandn(*shape):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(np.complex64)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


Z, W, ZROW = crandn(3, 4), crandn(3, 4), crandn(4)
X, XROW = randn(3, 4), randn(4)
M, N = crandn(3, 5), crandn(5, 2)

# name -> (fn(lib, *tensors), inputs); fn must work with torch and webgrad as `lib` alike
OPS = {
    "mul": (lambda t, a, b: a * b, (Z, W)),
    "mul-broadcast": (lambda t, a, b: a * b, (Z, ZROW)),
    "mul-real-tensor": (lambda t, a, b: a * b, (Z, XROW)),
    "real-tensor-mul": (lambda t, a, b: b * a, (Z, X)),
    "torch-mul-real-first": (lambda t, a, b: t.mul(b, a), (Z, X)),
    "mul-complex-scalar": (lambda t, a: a * (0.5 - 2j), (Z,)),
    "complex-scalar-mul": (lambda t, a: (1.5 + 0.25j) * a, (Z,)),
    "mul-float-scalar": (lambda t, a: a * 2.5, (Z,)),
    "real-tensor-mul-complex-scalar": (lambda t, x: x * 2j + 1j * x, (X,)),
    "add": (lambda t, a, b: a + b, (Z, W)),
    "add-real": (lambda t, a, b: a + b + 2 + (1 - 1j), (Z, XROW)),
    "real-add": (lambda t, a, b: b + a, (ZROW, X)),
    "add-alpha": (lambda t, a, b: t.add(a, b, alpha=3), (Z, W)),
    "sub": (lambda t, a, b: a - b - 1j, (Z, W)),
    "rsub": (lambda t, a, b: b - a, (Z, X)),
    "scalar-rsub": (lambda t, a: (2 - 1j) - a, (Z,)),
    "div": (lambda t, a, b: a / b, (Z, W)),
    "div-real": (lambda t, a, b: a / (b.abs() + 1), (Z, XROW)),
    "real-div": (lambda t, a, b: b / a, (Z, X)),
    "div-scalar": (lambda t, a: a / (1 + 2j) + a / 4, (Z,)),
    "scalar-div": (lambda t, a: (1 - 3j) / a + 2 / a, (Z,)),
    "neg": (lambda t, a: -a, (Z,)),
    "exp": (lambda t, a: t.exp(a), (Z,)),
    "abs": (lambda t, a: a.abs(), (Z,)),
    "pow-int": (lambda t, a: a ** 3 + t.pow(a, -2) + a.square() + a ** 0, (Z,)),
    "pow-float-complex": (lambda t, a: a ** 0.5 + a.pow(1.5 - 0.5j) + t.sqrt(a), (Z,)),
    "pow-complex-tensor": (lambda t, a, b: a ** b + 2 ** b, (Z, W)),
    "log": (lambda t, a: t.log(a) * a.log(), (Z,)),
    "angle": (lambda t, a: t.angle(a), (Z,)),
    "conj": (lambda t, a, b: a.conj() * b, (Z, W)),
    "real-imag": (lambda t, a: a.real * 2 + a.imag * a.real, (Z,)),
    "sum": (lambda t, a: a.sum(), (Z,)),
    "sum-dim": (lambda t, a: a.sum(-1, keepdim=True) * a, (Z,)),
    "mean-dims": (lambda t, a: t.mean(a, (0, 1)), (Z,)),
    "matmul": (lambda t, a, b: a @ b, (M, N)),
    "polar": (lambda t, a, b: t.polar(a.abs(), b), (X, randn(3, 4))),
    "complex": (lambda t, a, b: t.complex(a, b), (X, randn(3, 4))),
    "view-as-complex": (lambda t, a: t.view_as_complex(a.reshape(3, 2, 2)) * 2j, (X,)),
    "reshape-view-flatten": (lambda t, a: a.reshape(2, 6).view(12).view(3, 2, 2).flatten(1), (Z,)),
    "unsqueeze-squeeze": (lambda t, a: a.unsqueeze(0).unsqueeze(-1).squeeze(0).squeeze(), (Z,)),
    "transpose-permute-t": (lambda t, a: a.t().unsqueeze(0).permute(2, 0, 1).transpose(0, -1).contiguous(), (Z,)),
    "expand": (lambda t, a: a.unsqueeze(0).expand(2, 3, 4) * a, (Z,)),
    "index-slice": (lambda t, a: a[1:, ::2] * a[0, None, 1:3], (Z,)),
    "index-ellipsis-none": (lambda t, a: a[..., 1] + a[None, :, 2][0], (Z,)),
    "index-tensor": (lambda t, a: a[t.tensor([2, 0, 2])], (Z,)),
    "cat-stack": (lambda t, a, b: t.cat([t.stack([a, b], 1), t.stack([b, a], -2)], 0), (Z, W)),
    "cat-real": (lambda t, a, b: t.cat([a, b], 0), (Z, X)),
    "clone-detach-mix": (lambda t, a, b: a.clone() * b.detach(), (Z, W)),
    "H-mH": (lambda t, a: a.H @ a + a.mH @ a.conj().T.H, (M,)),
    "float-of-complex-product": (lambda t, a, b: (a * b).real.float(), (Z, W)),
}


def _leaf(lib, a, device):
    if lib is torch:
        return torch.tensor(a, requires_grad=True)
    return wg.tensor(a, device=device).requires_grad_(True)


def _numpy(t):
    return t.detach().cpu().resolve_conj().numpy()


def _real_loss(lib, out, weights):
    real = lib.view_as_real(out) if out.is_complex() else out
    return (real * lib.tensor(weights, device=None if lib is torch else real.device)).sum()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(OPS))
def test_op_and_gradients_match_torch(name, device):
    fn, inputs = OPS[name]
    tl = [_leaf(torch, a, device) for a in inputs]
    wl = [_leaf(wg, a, device) for a in inputs]
    to, wo = fn(torch, *tl), fn(wg, *wl)
    assert wo.dtype.is_complex == to.dtype.is_complex and tuple(wo.shape) == tuple(to.shape)
    assert str(wo.device).startswith(device)
    np.testing.assert_allclose(_numpy(wo), _numpy(to), rtol=1e-4, atol=1e-5)
    weights = RNG.standard_normal(tuple(torch.view_as_real(to).shape) if to.is_complex() else tuple(to.shape))
    weights = weights.astype(np.float32)
    _real_loss(torch, to, weights).backward()
    _real_loss(wg, wo, weights).backward()
    for t, w in zip(tl, wl):
        assert (w.grad is None) == (t.grad is None)
        if t.grad is not None:
            assert w.grad.dtype == (wg.complex64 if t.grad.is_complex() else wg.float32)
            np.testing.assert_allclose(_numpy(w.grad), _numpy(t.grad), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_views_share_storage_both_ways(device):
    x = wg.tensor(randn(3, 4, 2), device=device)
    z = wg.view_as_complex(x)
    assert z.shape == (3, 4) and z.dtype == wg.complex64 and z.stride() == (4, 1)
    x[0, 1] = wg.tensor([5.0, -6.0], device=device)
    assert z[0, 1].item() == 5 - 6j
    z[2, 3] = 1 + 2j
    assert x[2, 3].tolist() == [1.0, 2.0]
    r = wg.view_as_real(z)
    r[1, 0, 1] = 9.0
    assert z[1, 0].item().imag == 9.0 and x[1, 0, 1].item() == 9.0
    z.imag[2, 0] = -3.0
    z.real.mul_(2)
    assert x[2, 0, 1].item() == -3.0
    np.testing.assert_allclose(x[..., 0].cpu().numpy(), wg.view_as_real(z)[..., 0].cpu().numpy())
    sub = z[1:, ::2]  # a strided complex view: its real view shares storage too
    wg.view_as_real(sub).zero_()
    assert z[1, 0].item() == 0 and z[1, 1].item() != 0
    assert z.t().is_contiguous() is False and z.t().contiguous().is_contiguous()


def test_view_as_complex_rules_match_torch():
    cases = [lambda t: t.randn(3, 4), lambda t: t.randn(2, 3, 2).transpose(0, 1).transpose(1, 2),
             lambda t: t.randn(3, 5)[:, 1:3], lambda t: t.randn(7)[1:].view(3, 2), lambda t: t.randn(3, 2).long(),
             lambda t: t.randn(3, 3, 2)[:, :2], lambda t: t.randn(2)]
    for make in cases:
        outcome = []
        for lib in (torch, wg):
            try:
                outcome.append(tuple(lib.view_as_complex(make(lib)).shape))
            except RuntimeError as e:
                outcome.append(str(e))
        assert outcome[0] == outcome[1]
    with pytest.raises(RuntimeError, match="only supported for complex tensors"):
        wg.view_as_real(wg.randn(3, 2))
    with pytest.raises(TypeError, match="complex64"):
        wg.view_as_complex(wg.randn(3, 2, dtype=wg.float64))


@pytest.mark.parametrize("device", DEVICES)
def test_ops_without_a_complex_path_raise(device):
    z = wg.tensor(Z, device=device)
    F = wg.nn.functional
    calls = [lambda: F.relu(z), lambda: wg.max(z), lambda: z > z, lambda: z.sigmoid(), lambda: wg.sigmoid(z),
             lambda: z.softmax(-1), lambda: F.scaled_dot_product_attention(z[None, None], z[None, None], z[None, None]),
             lambda: wg.sort(z), lambda: z.cumsum(0),
             lambda: wg.where(z.abs() > 1, z, z), lambda: z.div(z, rounding_mode="floor"), lambda: z.var(),
             lambda: wg.zeros(2, dtype=wg.complex128), lambda: z.to(wg.complex128), lambda: wg.randn(2, dtype=wg.cfloat)]
    for call in calls:
        with pytest.raises(TypeError, match="complex"):
            call()
    with pytest.raises(NotImplementedError):  # PyTorch's type for an op without a complex kernel, too
        z.relu()
    # an op that converts its non-floating input with .float() (meant for integers) raises, never computing on
    # the real part; the user's own .float() keeps torch's meaning (the real part, with a warning)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for call in (lambda: F.layer_norm(z, (4,)), lambda: F.embedding(wg.tensor([0], device=device), z),
                     lambda: F.silu(z)):
            with pytest.raises(TypeError, match="complex64"):
                call()
    with pytest.raises(TypeError, match="complex128"):
        wg.view_as_complex(wg.randn(2, 2)) * wg.randn(2, dtype=wg.float64)
    with pytest.raises(RuntimeError, match="real scalar"):
        wg.tensor(Z, requires_grad=True).sum().backward()


@pytest.mark.parametrize("device", DEVICES)
def test_creation_dtype_and_conversions_match_torch(device):
    for data in ([1 + 2j, 3.5 - 1j], [[1, 2j], [3, -4.5 + 0.5j]], 2 - 1j, Z, np.complex64(1 + 1j)):
        t, w = torch.tensor(data), wg.tensor(data, device=device)
        assert w.dtype == wg.complex64 and w.dtype.is_complex and not w.dtype.is_floating_point
        assert w.is_complex() and wg.is_complex(w) and not w.is_floating_point() and w.dtype.itemsize == 8
        np.testing.assert_allclose(np.array(w.tolist()), np.array(t.tolist()), rtol=1e-6)
        assert w.numpy().dtype == np.complex64 and np.array_equal(w.numpy(), t.numpy())
    assert wg.cfloat is wg.complex64 and wg.cdouble is wg.complex128 and repr(wg.complex64) == "webgrad.complex64"
    assert wg.tensor(1 + 2j).item() == 1 + 2j and wg.tensor([1.0, 2.0], dtype=wg.complex64).tolist() == [1, 2]
    assert wg.zeros(2, 3, dtype=wg.cfloat, device=device).tolist() == torch.zeros(2, 3, dtype=torch.cfloat).tolist()
    assert wg.ones(2, dtype=wg.complex64).tolist() == [1 + 0j, 1 + 0j]
    assert wg.full((2,), 1 - 2j).tolist() == torch.full((2,), 1 - 2j).tolist()
    assert not wg.randn(2).is_complex() and not wg.is_complex(wg.randn(2))
    x = wg.tensor(X, device=device)
    assert x.real is x and x.type_as(wg.tensor(Z)).tolist() == torch.tensor(X).type_as(torch.tensor(Z)).tolist()
    with pytest.raises(RuntimeError, match="non-complex"):
        x.imag
    z = wg.tensor(Z, device=device)
    for convert in (lambda t, r: t.float(), lambda t, r: t.to(r.float32), lambda t, r: t.type_as(r.ones(1)),
                    lambda t, r: t.real.clone(), lambda t, r: t.to(r.int32)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expect, got = convert(torch.tensor(Z), torch), convert(z, wg)
        assert str(got.dtype).split(".")[-1] == str(expect.dtype).split(".")[-1]
        assert got.tolist() == expect.tolist()
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        z.float()
    assert z.to(wg.complex64) is z and z.cfloat() is z and z.to("cpu").device.type == "cpu"


def test_from_numpy_shares_memory_and_tensor_copies():
    a = crandn(3, 4)
    for arr in (a, a[:, ::2], a.T):
        z, t = wg.from_numpy(arr), torch.from_numpy(arr)
        arr[0, 1] = 7 - 7j
        assert z.tolist() == t.tolist()
        z[1, 0] = 9j
        assert arr[1, 0] == 9j
    copy = wg.tensor(z)
    copy[0, 0] = 1
    assert z[0, 0].item() != 1 and copy.dtype == wg.complex64
    assert wg.tensor(a.astype(np.complex128)).dtype == wg.complex64
    with pytest.raises(TypeError, match="complex128"):
        wg.from_numpy(a.astype(np.complex128))


def test_zero_dim_tensors_never_reach_the_pair_dim():
    """A 0-d complex tensor's pairs have one dim, the (real, imag) one: ops on its dims are no-ops or errors."""
    results = []
    for lib in (torch, wg):
        s = lib.tensor(3 - 1j)
        results.append([s.sum(0).item(), s.mean(-1).item(), s.flip(0).item(), s.squeeze(0).item(),
                        s.transpose(0, -1).item(), lib.stack([s, s]).tolist(), s.unsqueeze(-1).tolist(),
                        s[None, ..., None].tolist(), s.expand(2).tolist()])
        for bad in (lambda: s.sum(1), lambda: s.select(0, 0), lambda: s.unbind(0), lambda: lib.cat([s, s])):
            with pytest.raises((IndexError, RuntimeError)):
                bad()
    assert results[0] == results[1]


@pytest.mark.skipif(not hasattr(wg_testing, "assert_close"), reason="webgrad.testing.assert_close is not there")
def test_testing_assert_close_compares_complex_values():
    z = wg.tensor(Z)
    wg_testing.assert_close(z, z + 1e-7)
    with pytest.raises(AssertionError, match="not close"):
        wg_testing.assert_close(z, z.conj())


def test_cast_warning_matches_torch():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        wg.tensor(Z).to(wg.float32)
        wg.tensor(Z).real.float()
    assert [str(c.message) for c in caught] == ["Casting complex values to real discards the imaginary part"]


@pytest.mark.parametrize("device", DEVICES)
def test_moves_grad_and_leaf_semantics(device):
    z = wg.tensor(Z).to(device).requires_grad_()
    assert z.is_leaf and z.requires_grad and z.grad is None and z.device.type == device
    out = wg.view_as_real(z * z).sum()
    out.backward()
    tz = torch.tensor(Z, requires_grad=True)
    torch.view_as_real(tz * tz).sum().backward()
    assert z.grad.dtype == wg.complex64 and z.grad.device.type == device
    np.testing.assert_allclose(z.grad.cpu().numpy(), tz.grad.numpy(), rtol=1e-5, atol=1e-5)
    w = (z * 2).detach()
    assert not w.requires_grad and w.grad_fn is None
    g = wg.tensor(W, device=device)
    z.grad = None
    (z * (1 + 1j)).backward(g)
    tz.grad = None
    (tz * (1 + 1j)).backward(torch.tensor(W))
    np.testing.assert_allclose(z.grad.cpu().numpy(), tz.grad.numpy(), rtol=1e-5, atol=1e-5)
    moved = z.detach().cpu()
    assert moved.device.type == "cpu" and np.array_equal(moved.numpy(), z.detach().cpu().numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_autograd_grad_and_backward_inputs_take_complex_tensors(device):
    results = []
    for lib in (torch, wg):
        z = lib.tensor(Z, device=device if lib is wg else None).requires_grad_()
        x = lib.tensor(X, device=device if lib is wg else None).requires_grad_()
        out = z * z * x
        loss = lib.view_as_real(out).sum()
        (gz, gx) = lib.autograd.grad(loss, (z, x), retain_graph=True)
        (gout,) = lib.autograd.grad(loss, out, retain_graph=True)
        loss.backward(inputs=[z])
        assert x.grad is None and z.grad.dtype == lib.complex64
        results.append([gz, gx, gout, z.grad])
    for t, w in zip(*results):
        assert w.dtype == (wg.complex64 if t.is_complex() else wg.float32)
        np.testing.assert_allclose(_numpy(w), _numpy(t), rtol=1e-5, atol=1e-5)


def test_repr_matches_torch():
    for data in ([1 + 2j, 3.5 - 1j], [[1e-5 + 2j, 100 - 3j]], 1 + 1j, [0j, 0j], [[1.25 - 0.5j, -2 + 1j], [0, 3j]]):
        assert repr(wg.tensor(data)) == repr(torch.tensor(data))
    big = crandn(40, 40)
    assert repr(wg.tensor(big)) == repr(torch.tensor(big))
    assert "requires_grad=True" in repr(wg.tensor(Z, requires_grad=True))


@pytest.mark.parametrize("device", DEVICES)
def test_comparisons_match_torch(device):
    z, w = wg.tensor(Z, device=device), wg.tensor(Z + 1e-7, device=device)
    assert wg.allclose(z, w) and z.allclose(w) and not wg.allclose(z, z + 1e-3j)
    assert wg.equal(z, z.clone()) and not wg.equal(z, z.conj()) and not wg.equal(z, z[:2])
    assert (z == z.clone()).all().item() and (z != z.conj()).tolist() == (torch.tensor(Z) != torch.tensor(Z).conj()).tolist()
    assert wg.isclose(z, w).dtype == wg.bool
    t = torch.tensor([1 + 1j, 2])
    assert (wg.tensor([1 + 1j, 2]) == 2).tolist() == (t == 2).tolist()


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_ops_write_through(device):
    z = wg.tensor(Z, device=device)
    keep = wg.view_as_real(z)
    z += wg.tensor(W, device=device)
    z *= 1j
    z.sub_(1)
    expect = (Z + W) * 1j - 1
    np.testing.assert_allclose(z.numpy(), expect, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(keep.cpu().numpy()[..., 1], expect.imag, rtol=1e-5, atol=1e-6)
    z.zero_()
    assert not keep.any().item()
    z.fill_(2 - 1j)
    assert z[2, 3].item() == 2 - 1j


def test_pickle_and_deepcopy():
    import copy
    z = wg.tensor(Z)
    for back in (pickle.loads(pickle.dumps(z)), copy.deepcopy(z)):
        assert back.dtype == wg.complex64 and np.array_equal(back.numpy(), Z)


@pytest.mark.parametrize("device", DEVICES)
def test_module_with_complex_buffer_moves_and_saves(device, tmp_path):
    class M(wg.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = wg.nn.Linear(4, 4)
            self.register_buffer("freqs", wg.polar(wg.ones(3, 2), wg.randn(3, 2)), persistent=False)
            self.register_buffer("kept", wg.tensor(Z))

    m = M().to(device)
    assert m.freqs.device.type == device and m.freqs.dtype == wg.complex64 and m.kept.device.type == device
    sd = m.state_dict()
    assert "freqs" not in sd and sd["kept"].dtype == wg.complex64
    path = tmp_path / "m.pt"
    wg.save(sd, str(path))
    back = wg.load(str(path))
    assert back["kept"].dtype == wg.complex64 and np.array_equal(back["kept"].numpy(), Z)
    from_torch = torch.load(str(path))
    assert from_torch["kept"].dtype == torch.complex64 and np.array_equal(from_torch["kept"].numpy(), Z)
    torch_path = tmp_path / "t.pt"
    torch.save({"z": torch.tensor(Z)[:, 1:3], "w": torch.tensor(W)}, str(torch_path))
    read = wg.load(str(torch_path), map_location=device)
    assert np.array_equal(read["z"].cpu().numpy(), Z[:, 1:3]) and np.array_equal(read["w"].cpu().numpy(), W)
    m2 = M()
    m2.load_state_dict(back)
    assert np.array_equal(m2.kept.numpy(), Z)
    st_path = tmp_path / "m.safetensors"  # safetensors' C64, read back by both
    wg.save({"kept": m.kept, "w": m.lin.weight}, str(st_path))
    import safetensors.torch
    assert np.array_equal(safetensors.torch.load_file(str(st_path))["kept"].numpy(), Z)
    safetensors.torch.save_file({"z": torch.tensor(W), "x": torch.tensor(X)}, str(st_path))
    read = wg.load(str(st_path), device=device)
    assert read["z"].dtype == wg.complex64 and np.array_equal(read["z"].cpu().numpy(), W)


# ------------------------------------------------------------------------------------- the Llama rotary embedding
def _rope_complex(torch_, xq, freqs_cis):
    xq_ = torch_.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    return torch_.view_as_real(xq_ * freqs_cis).flatten(3).type_as(xq)


def _freqs_cis(torch_, dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch_.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch_.arange(end, device=freqs.device)
    freqs = torch_.outer(t, freqs).float()
    return torch_.polar(torch_.ones_like(freqs), freqs)


def _rope_real(xq, angles):
    """The same rotation with cos and sin of float32 tensors, on interleaved (even, odd) pairs."""
    cos, sin = angles.cos()[None, :, None, :], angles.sin()[None, :, None, :]
    x = xq.reshape(*xq.shape[:-1], -1, 2)
    a, b = x[..., 0], x[..., 1]
    return wg.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(3)


def _llama_losses(device, complex_rope, steps=5):
    nn, F = wg.nn, wg.nn.functional
    dim, heads, seq = 32, 2, 16
    hd = dim // heads

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq, self.wk = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
            self.wv, self.wo = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)

        def forward(self, x, rope):
            b, s, _ = x.shape
            q, k, v = (w(x).view(b, s, heads, hd) for w in (self.wq, self.wk, self.wv))
            q, k = rope(q), rope(k)
            out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                 is_causal=True)
            return x + self.wo(out.transpose(1, 2).contiguous().view(b, s, -1))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.block, self.out = nn.Embedding(64, dim), Block(), nn.Linear(dim, 64, bias=False)
            freqs = wg.outer(wg.arange(seq).float(), 1.0 / (10000.0 ** (wg.arange(0, hd, 2).float() / hd)))
            self.register_buffer("angles", freqs, persistent=False)
            self.register_buffer("freqs_cis", _freqs_cis(wg, hd, seq), persistent=False)

        def forward(self, tokens):
            if complex_rope:
                rope = lambda q: _rope_complex(wg, q, self.freqs_cis[:tokens.shape[1]])  # noqa: E731
            else:
                rope = lambda q: _rope_real(q, self.angles[:tokens.shape[1]])  # noqa: E731
            return self.out(self.block(self.emb(tokens), rope))

    wg.manual_seed(0)
    model = Model().to(device)
    opt = wg.optim.AdamW(model.parameters(), lr=3e-3)
    data = wg.randint(0, 64, (4, seq + 1), generator=wg.Generator().manual_seed(1))
    x, y = data[:, :-1].to(device), data[:, 1:].to(device)
    losses = []
    for _ in range(steps):
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, 64), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_complex_rope_matches_torch_and_the_real_rewrite_forward():
    xq = randn(2, 8, 3, 16)
    tz = _rope_complex(torch, torch.tensor(xq), _freqs_cis(torch, 16, 8))
    wz = _rope_complex(wg, wg.tensor(xq), _freqs_cis(wg, 16, 8))
    np.testing.assert_allclose(wz.numpy(), tz.numpy(), rtol=1e-5, atol=1e-5)
    angles = wg.outer(wg.arange(8).float(), 1.0 / (10000.0 ** (wg.arange(0, 16, 2).float() / 16)))
    np.testing.assert_allclose(_rope_real(wg.tensor(xq), angles).numpy(), tz.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_llama_rope_trains_as_its_float32_rewrite(device):
    complex_losses = _llama_losses(device, True)
    real_losses = _llama_losses(device, False)
    np.testing.assert_allclose(complex_losses, real_losses, rtol=1e-4)
    assert complex_losses[-1] < complex_losses[0]
