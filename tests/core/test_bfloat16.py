"""bfloat16 tensors on the CPU against the real torch: rounding, promotion, conversions, printing, reductions and
products, checkpoints byte for byte, autocast's CPU default and a small training run; WebGPU's clear refusal."""

import io
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import webgrad as wg  # noqa: E402
from webgrad import dtypes  # noqa: E402

# values that exercise rounding: ties to even, the largest finite, overflow, subnormals, signed zero, inf, NaN
EDGES = [0.0, -0.0, 1.0, 1.00390625, 1.01171875, 1.005859375, -2.5, 3.14159, 1e-3, 1e-20, 1e-40, 65504.0, 3.0e38,
         3.3961775e38, 3.4e38, 1e39, -1e39, float("inf"), float("-inf"), 123456.789, -0.1, 2.0 ** -133]


def _bf16(t):
    """A torch bfloat16 tensor as webgrad's (its float32 values are exact bfloat16s)."""
    return wg.tensor(t.float().numpy()).to(wg.bfloat16)


def _values(t):
    return np.asarray(t.float().tolist(), dtype=np.float64)


def _same(ours, theirs):
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_array_equal(_values(ours), _values(theirs))


# ===================================================================== storage and rounding
def test_tensor_rounds_to_nearest_even_as_torch():
    ours, theirs = wg.tensor(EDGES, dtype=wg.bfloat16), torch.tensor(EDGES, dtype=torch.bfloat16)
    _same(ours, theirs)
    assert ours.element_size() == theirs.element_size() == 2 and ours.nbytes == theirs.nbytes
    nans = [float("nan"), -float("nan")]
    assert wg.tensor(nans, dtype=wg.bfloat16)._bytes() == bytes(torch.tensor(nans, dtype=torch.bfloat16)
                                                                .untyped_storage())  # torch's one NaN, 0x7FC0
    assert math.isnan(wg.tensor(nans, dtype=wg.bfloat16)[1].item())


def test_conversions_round_as_torch():
    g = np.random.default_rng(0)
    x = (g.standard_normal(2000) * 10.0 ** g.integers(-30, 30, 2000)).astype(np.float32)
    _same(wg.tensor(x).bfloat16(), torch.tensor(x).bfloat16())
    _same(wg.tensor(x).to(wg.bfloat16), torch.tensor(x).to(torch.bfloat16))
    _same(wg.tensor(x, dtype=wg.bfloat16), torch.tensor(x, dtype=torch.bfloat16))
    _same(wg.tensor(x.astype(np.float64)).bfloat16(), torch.tensor(x.astype(np.float64)).bfloat16())
    _same(wg.tensor(x).half().bfloat16(), torch.tensor(x).half().bfloat16())
    b = torch.tensor(x).bfloat16()
    for to in ("float", "half", "double"):
        _same(getattr(_bf16(b), to)(), getattr(b, to)())
    small = torch.tensor([-3.7, -0.5, 0.5, 2.9, 100.2]).bfloat16()
    for dtype in ("int64", "int32", "uint8", "bool"):
        _same(_bf16(small).abs().to(getattr(wg, dtype)), small.abs().to(getattr(torch, dtype)))
    _same(wg.tensor([1, 257, -3]).bfloat16(), torch.tensor([1, 257, -3]).bfloat16())


def test_creation_functions_take_bfloat16():
    _same(wg.full((3,), 3.14159, dtype=wg.bfloat16), torch.full((3,), 3.14159, dtype=torch.bfloat16))
    _same(wg.arange(0, 3, 0.3, dtype=wg.bfloat16), torch.arange(0, 3, 0.3, dtype=torch.bfloat16))
    _same(wg.zeros(2, 3, dtype=wg.bfloat16), torch.zeros(2, 3, dtype=torch.bfloat16))
    _same(wg.ones_like(wg.ones(2, dtype=wg.bfloat16)), torch.ones_like(torch.ones(2, dtype=torch.bfloat16)))
    assert wg.randn(4, dtype=wg.bfloat16).dtype is wg.bfloat16
    r = wg.rand(1000, dtype=wg.bfloat16)
    assert np.array_equal(_values(r), _values(r.float().bfloat16()))  # every value exactly a bfloat16
    assert wg.arange(0, 3, 0.3).shape == torch.arange(0, 3, 0.3).shape  # (ceil of the rounded quotient: 10)


def test_numpy_refuses_bfloat16_as_torch():
    for lib in (wg, torch):
        with pytest.raises(TypeError, match="Got unsupported ScalarType BFloat16"):
            lib.ones(2, dtype=lib.bfloat16).numpy()
    assert wg.ones(2, dtype=wg.bfloat16).float().numpy().dtype == np.float32


def test_dtype_properties_and_finfo():
    assert wg.bfloat16.is_floating_point and wg.bfloat16.itemsize == torch.bfloat16.itemsize == 2
    assert wg.ones(1, dtype=wg.bfloat16).is_floating_point()
    for attr in ("bits", "eps", "max", "min", "tiny", "resolution"):
        assert getattr(wg.finfo(wg.bfloat16), attr) == getattr(torch.finfo(torch.bfloat16), attr)
    assert wg.ones(2).bfloat16().type() == torch.ones(2).bfloat16().type() == "torch.BFloat16Tensor"


def test_repr_as_torch():
    for values in ([[1.0, 2.5, 3.14159], [1e10, -0.1, 7.0]], [1.5, 2.0, -3.0], [0.1], 2.75):
        ours = repr(wg.tensor(values, dtype=wg.bfloat16)).replace("webgrad.", "torch.")
        assert ours == repr(torch.tensor(values, dtype=torch.bfloat16))
    assert repr(wg.tensor([1.5, 2.0], dtype=wg.bfloat16)) == "tensor([1.5000, 2.0000], dtype=webgrad.bfloat16)"


# ===================================================================== promotion
PROMOTE = ["bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


@pytest.mark.parametrize("other", PROMOTE)
def test_promotion_table(other):
    assert wg.promote_types(wg.bfloat16, getattr(wg, other)).name == \
        str(torch.promote_types(torch.bfloat16, getattr(torch, other))).split(".")[1]
    ours = wg.ones(2, dtype=wg.bfloat16) + wg.ones(2, dtype=getattr(wg, other))
    theirs = torch.ones(2, dtype=torch.bfloat16) + torch.ones(2, dtype=getattr(torch, other))
    _same(ours, theirs)
    # a 0-d tensor beside one with dims lifts only the category
    ours = wg.ones(2, dtype=wg.bfloat16) * wg.tensor(3, dtype=getattr(wg, other))
    _same(ours, torch.ones(2, dtype=torch.bfloat16) * torch.tensor(3, dtype=getattr(torch, other)))


def test_python_scalars_keep_bfloat16():
    x = torch.tensor([1.1, -2.3, 0.7]).bfloat16()
    for op in (lambda t: t + 1, lambda t: t * 0.3, lambda t: 2.5 - t, lambda t: t / 3, lambda t: t ** 2,
               lambda t: t > 0.5, lambda t: t.clamp(-1.0, 1.0), lambda t: t.masked_fill(t > 0, 3.3)):
        _same(op(_bf16(x)), op(x))
    assert wg.result_type(wg.ones(1, dtype=wg.bfloat16), 2.5) is wg.bfloat16


# ===================================================================== arithmetic, reductions, products
OPS = {
    "add": lambda L, a, b: a + b, "mul": lambda L, a, b: a * b, "div": lambda L, a, b: a / b,
    "exp": lambda L, a, b: a.exp(), "tanh": lambda L, a, b: a.tanh(), "sigmoid": lambda L, a, b: a.sigmoid(),
    "relu": lambda L, a, b: L.nn.functional.relu(a), "gelu": lambda L, a, b: L.nn.functional.gelu(a),
    "silu": lambda L, a, b: L.nn.functional.silu(a), "sum": lambda L, a, b: a.sum(),
    "sum_dim": lambda L, a, b: a.sum(1), "mean": lambda L, a, b: a.mean(0), "amax": lambda L, a, b: a.amax(1),
    "argmax": lambda L, a, b: a.argmax(1), "cumsum": lambda L, a, b: a.cumsum(1),
    "softmax": lambda L, a, b: a.softmax(1), "matmul": lambda L, a, b: a @ b.T,
    "linear": lambda L, a, b: L.nn.functional.linear(a, b), "bmm": lambda L, a, b: L.bmm(a[None], b.T[None]),
    "layer_norm": lambda L, a, b: L.nn.functional.layer_norm(a, (a.shape[1],)),
    "sort": lambda L, a, b: a.sort(1).values, "topk": lambda L, a, b: a.topk(2, 1).values,
    "cummax": lambda L, a, b: a.cummax(1).values, "where": lambda L, a, b: L.where(a > 0, a, b),
    "gather": lambda L, a, b: a.gather(1, L.tensor([[0], [2], [1], [3]])), "cat": lambda L, a, b: L.cat([a, b]),
    "embedding": lambda L, a, b: L.nn.functional.embedding(L.tensor([1, 3]), a),
    "index_add": lambda L, a, b: a.index_add(0, L.tensor([0, 0, 1, 3]), b),
    "cross_entropy": lambda L, a, b: L.nn.functional.cross_entropy(a, L.tensor([0, 1, 2, 3])),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_ops_match_torch(name):
    torch.manual_seed(0)
    a, b = torch.randn(4, 6).bfloat16(), torch.randn(4, 6).bfloat16()
    theirs, ours = OPS[name](torch, a, b), OPS[name](wg, _bf16(a), _bf16(b))
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    # float32 math rounded once; torch's kernels round a few intermediates too: one bfloat16 step apart at most
    np.testing.assert_allclose(_values(ours), _values(theirs), rtol=2 ** -7, atol=1e-5)


def test_sums_and_products_accumulate_in_float32():
    # a bfloat16 running sum of ones would stall at 256 (257 rounds back to it); float32 accumulation gives 4096
    x = torch.ones(4096).bfloat16()
    _same(_bf16(x).sum(), x.sum())
    assert _bf16(x).sum().item() == 4096.0
    a, b = torch.full((1, 512), 1.0078125).bfloat16(), torch.full((512, 1), 1.0078125).bfloat16()
    _same(_bf16(a) @ _bf16(b), a @ b)
    assert (_bf16(a) @ _bf16(b)).item() == 520.0  # 512 * 1.0156860..., rounded once to bfloat16


def test_every_kernel_output_is_a_bfloat16():
    g = torch.Generator().manual_seed(1)
    x = _bf16(torch.randn(64, 64, generator=g).bfloat16())
    for out in (x.exp(), x @ x, x.sum(0), x.softmax(1), x.cumsum(0), wg.nn.functional.layer_norm(x, (64,)),
                x.mean(), x.var(0), x * 1.1):
        raw = np.asarray(out.float().tolist(), dtype=np.float32)
        assert not (raw.view(np.uint32) & 0xFFFF).any(), "a bfloat16 output holds bits below bfloat16's"


def test_autograd_keeps_bfloat16():
    torch.manual_seed(0)
    a = torch.randn(3, 5).bfloat16().requires_grad_()
    ours = _bf16(a.detach()).requires_grad_()
    (a.tanh() @ a.T).sum().backward()
    (ours.tanh() @ ours.T).sum().backward()
    assert ours.grad.dtype is wg.bfloat16
    np.testing.assert_allclose(_values(ours.grad), _values(a.grad), rtol=2 ** -6, atol=1e-3)


# ===================================================================== modules, training, autocast
def _mlp(lib, state=None):
    model = lib.nn.Sequential(lib.nn.Linear(8, 16), lib.nn.ReLU(), lib.nn.Linear(16, 3))
    if state is not None:
        model.load_state_dict({k: wg.tensor(v.numpy()) for k, v in state.items()})
    return model.to(lib.bfloat16)


@pytest.mark.parametrize("optimizer", ["SGD", "AdamW"])
def test_training_an_mlp_in_bfloat16_matches_torch(optimizer):
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    ours = _mlp(wg, theirs.state_dict())
    theirs = theirs.to(torch.bfloat16)
    assert all(p.dtype is wg.bfloat16 for p in ours.parameters())
    g = np.random.default_rng(0)
    x, y = g.standard_normal((32, 8)).astype(np.float32), g.integers(0, 3, 32)
    losses = []
    for lib, model in ((torch, theirs), (wg, ours)):
        kwargs = {"lr": 0.1, "momentum": 0.9} if optimizer == "SGD" else {"lr": 1e-2}
        opt = getattr(lib.optim, optimizer)(model.parameters(), **kwargs)
        xs, ys, run = lib.tensor(x).to(lib.bfloat16), lib.tensor(y), []
        for _ in range(20):
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(model(xs), ys)
            loss.backward()
            opt.step()
            run.append(loss.item())
        assert str(loss.dtype).endswith("bfloat16") and str(model[0].weight.grad.dtype).endswith("bfloat16")
        losses.append(run)
    assert losses[1][-1] < losses[1][0] - 0.2  # it learns
    np.testing.assert_allclose(losses[1], losses[0], rtol=2 ** -6, atol=0)  # within a bfloat16 step or two


def test_module_and_default_dtype_forms():
    model = wg.nn.Sequential(wg.nn.Linear(3, 2), wg.nn.BatchNorm1d(2))
    assert all(t.dtype is wg.bfloat16 for t in (*model.bfloat16().parameters(), model[1].running_mean))
    assert not model[1].num_batches_tracked.dtype.is_floating_point  # integer buffers stay
    assert model(wg.randn(4, 3).bfloat16()).dtype is wg.bfloat16
    assert all(p.dtype is wg.float16 for p in wg.nn.Linear(2, 2).half().parameters())
    try:
        for lib in (wg, torch):
            lib.set_default_dtype(lib.bfloat16)
            made = (lib.tensor([1.3]), lib.randn(2), lib.tensor([1, 2]) * 2.5, lib.zeros(1))
            assert [str(t.dtype).split(".")[-1] for t in made] == ["bfloat16"] * 4
    finally:
        wg.set_default_dtype(wg.float32)
        torch.set_default_dtype(torch.float32)


def test_autocast_cpu_defaults_to_bfloat16_as_torch():
    assert wg.get_autocast_dtype("cpu") is wg.bfloat16 and torch.get_autocast_dtype("cpu") is torch.bfloat16
    torch.manual_seed(0)
    lin = torch.nn.Linear(6, 4)
    ours = wg.nn.Linear(6, 4)
    ours.load_state_dict({k: wg.tensor(v.detach().numpy()) for k, v in lin.state_dict().items()})
    x = torch.randn(3, 6)
    with torch.autocast("cpu"):
        ty = lin(x)
        tsoft, tloss = ty.softmax(1), torch.nn.functional.mse_loss(ty, torch.zeros(3, 4))
    with wg.autocast("cpu"):
        y = ours(wg.tensor(x.numpy()))
        soft, loss = y.softmax(1), wg.nn.functional.mse_loss(y, wg.zeros(3, 4))
    for got, want in ((y, ty), (soft, tsoft), (loss, tloss)):
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        np.testing.assert_allclose(_values(got), _values(want.detach()), rtol=2 ** -7, atol=1e-5)
    loss.backward()
    assert ours.weight.grad.dtype is wg.float32  # the gradient reaches the float32 parameter
    with wg.autocast("cpu", dtype=wg.float16):
        assert ours(wg.ones(1, 6)).dtype is wg.float16
    with pytest.warns(UserWarning, match="Disabling autocast"):
        ctx = wg.autocast("cpu", dtype=wg.float64)
    with ctx:
        assert ours(wg.ones(1, 6)).dtype is wg.float32


# ===================================================================== checkpoints, byte for byte
def _state():
    torch.manual_seed(0)
    return {"w": torch.randn(3, 4).bfloat16(), "edges": torch.tensor(EDGES, dtype=torch.bfloat16)}


def test_torch_save_files_load_as_bfloat16_and_save_back_as_torch_reads_them():
    state = _state()
    buf = io.BytesIO()
    torch.save(state, buf)
    loaded = wg.load(io.BytesIO(buf.getvalue()))
    for name, t in state.items():
        assert loaded[name].dtype is wg.bfloat16
        _same(loaded[name], t)
    from webgrad.io import torch_format
    out = io.BytesIO()
    torch_format.save(loaded, out)
    back = torch.load(io.BytesIO(out.getvalue()))
    for name, t in state.items():
        assert back[name].dtype is torch.bfloat16
        assert back[name].untyped_storage().tolist() == t.untyped_storage().tolist()  # the same bytes


def test_safetensors_bytes_match_the_reference():
    safetensors_torch = pytest.importorskip("safetensors.torch")
    state = dict(_state(), half=torch.tensor([0.1, 2.0], dtype=torch.float16), f=torch.ones(2),
                 i=torch.arange(3, dtype=torch.int32))
    blob = safetensors_torch.save(state)
    loaded = wg.load(io.BytesIO(blob))
    assert loaded["w"].dtype is wg.bfloat16 and loaded["half"].dtype is wg.float16
    buf = io.BytesIO()
    wg.save(loaded, buf)
    assert buf.getvalue() == blob


def test_canonical_bytes_are_the_top_half_of_float32():
    t = torch.tensor(EDGES, dtype=torch.bfloat16)
    raw = bytes(t.untyped_storage())
    ours = wg.tensor(EDGES, dtype=wg.bfloat16)
    assert ours._bytes() == raw
    assert wg.frombuffer(bytearray(raw), dtype=wg.bfloat16).tolist() == t.tolist()
    assert dtypes.bf16_unpack(raw) == t.float().numpy().tobytes()
    # without NumPy (Pyodide) the same rounding
    import array
    with np.errstate(over="ignore"):
        f32 = np.asarray(EDGES + [float("nan")], dtype=np.float32).tobytes()
    words = array.array("I")
    words.frombytes(f32)
    python = array.array("H", [dtypes._round_bits_python(b) for b in words]).tobytes()
    assert python == dtypes.bf16_pack(f32)


def test_bfloat16_checkpoints_load_onto_webgpu_as_bfloat16():
    pytest.importorskip("wgpu")
    if not wg.webgpu.is_available():
        pytest.skip("no WebGPU adapter")
    state = _state()
    buf = io.BytesIO()
    torch.save(state, buf)
    loaded = wg.load(io.BytesIO(buf.getvalue()), map_location="webgpu")
    assert loaded["w"].dtype is wg.bfloat16 and loaded["w"].tolist() == state["w"].tolist()
