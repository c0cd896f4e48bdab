"""Top-level torch names training scripts call: predicates, torch.compile, global flags, bitwise ops and shifts,
bincount / tril_indices / triu_indices / vander, testing.assert_close, random.fork_rng, absent devices,
nn.attention.sdpa_kernel, gumbel_softmax and alpha dropout, parameters_to_vector, functional_call. Each is checked
against PyTorch: values, dtypes, defaults and exception types."""

import math

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.nn as nn
import webgrad.nn.functional as F
from helpers import DEVICES


def _raises_like(torch_call, wg_call):
    """Both calls raise, with the same exception type (and message where webgrad words it as PyTorch)."""
    with pytest.raises(Exception) as expected:
        torch_call()
    with pytest.raises(type(expected.value)) as got:
        wg_call()
    return str(expected.value), str(got.value)


def _same(wg_tensor, torch_tensor):
    assert str(wg_tensor.dtype).split(".")[-1] == str(torch_tensor.dtype).split(".")[-1]
    assert tuple(wg_tensor.shape) == tuple(torch_tensor.shape)
    if torch_tensor.numel() == 0:
        return
    np.testing.assert_array_equal(np.asarray(wg_tensor.cpu().tolist()), np.asarray(torch_tensor.tolist()))


# ----------------------------------------------------------------------------- predicates
def test_predicates_as_torch():
    for data in ([1.5, 2.0], [1, 2], [True], [[1, 2], [3, 4]]):
        w, t = wg.tensor(data), torch.tensor(data)
        assert wg.is_tensor(w) and torch.is_tensor(t)
        assert wg.numel(w) == torch.numel(t)
        assert wg.is_floating_point(w) == torch.is_floating_point(t)
    assert wg.is_tensor(nn.Parameter(wg.zeros(2))) and not wg.is_tensor([1.0]) and not wg.is_tensor(3.0)
    for value in ([0.0], [2], [True], [False], [[0.5]]):
        assert wg.is_nonzero(wg.tensor(value)) == torch.is_nonzero(torch.tensor(value))
    for value in ([1, 2], []):
        t_msg, w_msg = _raises_like(lambda: torch.is_nonzero(torch.tensor(value)),
                                    lambda: wg.is_nonzero(wg.tensor(value)))
        assert t_msg == w_msg
    for fn in ("numel", "is_floating_point", "is_nonzero"):
        t_msg, w_msg = _raises_like(lambda: getattr(torch, fn)([1.0]), lambda: getattr(wg, fn)([1.0]))
        assert w_msg == t_msg


# ----------------------------------------------------------------------------- torch.compile
def test_compile_forms_run_eagerly_and_check_arguments():
    model = nn.Linear(3, 2)
    compiled = wg.compile(model)
    x = wg.randn(4, 3)
    np.testing.assert_allclose(compiled(x).tolist(), model(x).tolist())

    @wg.compile
    def f(a):
        return a * 2

    @wg.compile(mode="max-autotune", fullgraph=True, dynamic=False)
    def g(a):
        return a + 1
    assert f(wg.tensor([1.0])).item() == 2.0 and g(wg.tensor([1.0])).item() == 2.0
    assert wg.compile(backend="eager")(f) is f and wg.compile(f, disable=True) is f
    cases = [dict(mode="foo"), dict(mode="default", options={})]
    for kwargs in cases:
        _raises_like(lambda: torch.compile(lambda a: a, **kwargs), lambda: wg.compile(lambda a: a, **kwargs))
    t_msg, w_msg = _raises_like(lambda: torch.compile(lambda a: a, mode="foo"), lambda: wg.compile(lambda a: a, mode="foo"))
    assert t_msg == w_msg
    _raises_like(lambda: torch.compile(5), lambda: wg.compile(5))
    with pytest.raises(RuntimeError, match="Invalid backend"):
        wg.compile(lambda a: a, backend="nonexistent")


def test_a_compiled_checkpoint_has_torchs_keys_and_loads_through_orig_mod(tmp_path):
    """torch.compile(module) is an OptimizedModule, as torch's: its state_dict keys carry the _orig_mod. prefix
    (scripts strip it, as nanoGPT does), loading a plain checkpoint into it raises as torch's does, and its
    _orig_mod takes a plain checkpoint from the real torch."""
    wg.manual_seed(0)
    model = wg.compile(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)))
    theirs = torch.compile(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)))
    assert list(model.state_dict()) == list(theirs.state_dict())
    path = tmp_path / "ckpt.pt"
    wg.save({k.removeprefix("_orig_mod."): v for k, v in model.state_dict().items()}, str(path))
    plain = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    plain.load_state_dict(torch.load(str(path)))  # strict: every key matches
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(plain(torch.tensor(x)).detach().numpy(), model(wg.tensor(x)).detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    back = wg.compile(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)))
    torch.save(plain.state_dict(), str(tmp_path / "torch.pt"))
    with pytest.raises(RuntimeError, match="Missing key"):
        back.load_state_dict(wg.load(str(tmp_path / "torch.pt")))
    back._orig_mod.load_state_dict(wg.load(str(tmp_path / "torch.pt")))
    np.testing.assert_allclose(back(wg.tensor(x)).tolist(), model(wg.tensor(x)).tolist())


# ----------------------------------------------------------------------------- global flags
def test_matmul_precision_and_determinism_flags():
    try:
        for p in ("high", "medium", "highest"):
            wg.set_float32_matmul_precision(p)
            torch.set_float32_matmul_precision(p)
            assert wg.get_float32_matmul_precision() == torch.get_float32_matmul_precision() == p
        with pytest.warns(UserWarning):
            wg.set_float32_matmul_precision("fastest")
        assert wg.get_float32_matmul_precision() == "highest"
        _raises_like(lambda: torch.set_float32_matmul_precision(3), lambda: wg.set_float32_matmul_precision(3))

        for mode, warn_only in ((True, False), (True, True), (False, True), (False, False)):
            wg.use_deterministic_algorithms(mode, warn_only=warn_only)
            torch.use_deterministic_algorithms(mode, warn_only=warn_only)
            assert wg.are_deterministic_algorithms_enabled() == torch.are_deterministic_algorithms_enabled()
            assert (wg.is_deterministic_algorithms_warn_only_enabled()
                    == torch.is_deterministic_algorithms_warn_only_enabled())
        for args, kwargs in (((1,), {}), (("yes",), {}), ((True,), {"warn_only": 1})):
            t_msg, w_msg = _raises_like(lambda: torch.use_deterministic_algorithms(*args, **kwargs),
                                        lambda: wg.use_deterministic_algorithms(*args, **kwargs))
            assert t_msg == w_msg
    finally:
        torch.set_float32_matmul_precision("highest")
        torch.use_deterministic_algorithms(False)
        wg.use_deterministic_algorithms(False)


# ----------------------------------------------------------------------------- bitwise ops and shifts
_INTS = {"int32": ([5, -7, 1, 3, -2147483648, 2147483647], [1, 2, 31, 40, 3, 0]),
         "int64": ([5, -7, 1, 3, 0, -1], [1, 2, 30, 64, 63, 65]),
         "uint8": ([5, 100, 1, 3, 255, 0], [1, 2, 7, 8, 40, 3])}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", sorted(_INTS))
def test_bitwise_and_shifts_match_torch(device, dtype):
    xs, ys = _INTS[dtype]
    tx, ty = torch.tensor(xs, dtype=getattr(torch, dtype)), torch.tensor(ys, dtype=getattr(torch, dtype))
    wx, wy = wg.tensor(xs, dtype=getattr(wg, dtype), device=device), wg.tensor(ys, dtype=getattr(wg, dtype), device=device)
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_right_shift"):
        _same(getattr(wg, name)(wx, wy), getattr(torch, name)(tx, ty))
        _same(getattr(wx, name)(wy), getattr(tx, name)(ty))
    if not (device == "webgpu" and dtype == "int64"):  # WebGPU's int64 holds int32 values: test below
        _same(wg.bitwise_left_shift(wx, wy), torch.bitwise_left_shift(tx, ty))
        _same(wx << wy, tx << ty)
    _same(wg.bitwise_not(wx), torch.bitwise_not(tx))
    _same(wx & wy, tx & ty), _same(wx | wy, tx | ty), _same(wx ^ wy, tx ^ ty), _same(~wx, ~tx)
    _same(wx >> wy, tx >> ty)
    _same(wx & 6, tx & 6), _same(6 | wx, 6 | tx), _same(3 ^ wx, 3 ^ tx), _same(wx >> 1, tx >> 1)
    _same(wg.bitwise_xor(5, wy), torch.bitwise_xor(5, ty)), _same(1 << wy.clamp(max=6), 1 << ty.clamp(max=6))
    # broadcasting and a strided operand
    mx, mt = wg.arange(12, device=device).reshape(3, 4).to(getattr(wg, dtype)), torch.arange(12).reshape(3, 4).to(getattr(torch, dtype))
    _same(mx.t() & mx[0, :3], mt.t() & mt[0, :3])
    # in place
    a, b = wx.clone(), tx.clone()
    a &= wy
    b &= ty
    a |= 8
    b |= 8
    a ^= wy
    b ^= ty
    a >>= 1
    b >>= 1
    _same(a, b)
    a.bitwise_not_(), b.bitwise_not_()
    _same(a, b)


@pytest.mark.parametrize("device", DEVICES)
def test_left_shift_int64(device):
    x, s = [5, -7, 1, 3, 0, -1, -2147483648], [1, 2, 64, 100, 40, -1, 33]
    _same(wg.tensor(x, device=device) << wg.tensor(s, device=device), torch.tensor(x) << torch.tensor(s))
    _same(wg.tensor([-1, 3, 1 << 20], device=device) << wg.tensor([31, 1, 10], device=device),
          torch.tensor([-1, 3, 1 << 20]) << torch.tensor([31, 1, 10]))
    if device == "cpu":
        _same(wg.tensor([1, 3]) << 40, torch.tensor([1, 3]) << 40)
    else:  # an exact int64 result outside int32 is refused rather than wrapped (int64 in 32-bit words)
        with pytest.raises(RuntimeError, match="int32 range"):
            (wg.tensor([1, 3], device=device) << 40).tolist()


@pytest.mark.parametrize("device", DEVICES)
def test_bitwise_bool_and_refusals(device):
    p, q = [True, False, True, False], [True, True, False, False]
    wp, wq, tp, tq = wg.tensor(p, device=device), wg.tensor(q, device=device), torch.tensor(p), torch.tensor(q)
    for op in ("__and__", "__or__", "__xor__"):
        _same(getattr(wp, op)(wq), getattr(tp, op)(tq))
        _same(getattr(wp, op)(True), getattr(tp, op)(True))
    _same(~wp, ~tp), _same(wg.bitwise_not(wp), torch.bitwise_not(tp))
    _same(wg.bitwise_and(wp, wg.tensor([3, 3, 3, 3], device=device)), torch.bitwise_and(tp, torch.tensor([3, 3, 3, 3])))
    _same(wp & 1, tp & 1)
    wf, tf = wg.tensor([1.0, 2.0], device=device), torch.tensor([1.0, 2.0])
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift"):
        t_msg, w_msg = _raises_like(lambda: getattr(torch, name)(tf, tf), lambda: getattr(wg, name)(wf, wf))
        assert t_msg == w_msg
    _raises_like(lambda: tp << tq, lambda: wp << wq)
    _raises_like(lambda: torch.tensor([1, 2]) & 1.5, lambda: wg.tensor([1, 2], device=device) & 1.5)
    t_msg, w_msg = _raises_like(lambda: ~tf, lambda: ~wf)
    assert t_msg == w_msg
    t_msg, w_msg = _raises_like(lambda: torch.bitwise_not(tf), lambda: wg.bitwise_not(wf))
    assert t_msg == w_msg


# ----------------------------------------------------------------------------- bincount and friends
@pytest.mark.parametrize("device", DEVICES)
def test_bincount(device):
    data = [1, 2, 2, 5, 0, 2]
    _same(wg.bincount(wg.tensor(data, device=device)), torch.bincount(torch.tensor(data)))
    _same(wg.tensor(data, device=device).bincount(minlength=9), torch.tensor(data).bincount(minlength=9))
    _same(wg.bincount(wg.tensor([], dtype=wg.int64, device=device)), torch.bincount(torch.tensor([], dtype=torch.long)))
    _same(wg.bincount(wg.tensor(data, dtype=wg.uint8, device=device)), torch.bincount(torch.tensor(data, dtype=torch.uint8)))
    w = [0.5, 1.0, 2.0, -1.0, 3.0, 0.25]
    for wdt, tdt in ((wg.float32, torch.float32),) + (
            ((wg.float64, torch.float64), (wg.int64, torch.int64)) if device == "cpu" else ()):
        out = wg.bincount(wg.tensor(data, device=device), weights=wg.tensor(w, device=device).to(wdt), minlength=3)
        ref = torch.bincount(torch.tensor(data), weights=torch.tensor(w).to(tdt), minlength=3)
        assert str(out.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
        np.testing.assert_allclose(out.cpu().tolist(), ref.tolist())
    for args, kwargs in ((([1, -2, 2],), {}), (([[1]],), {}), (([1.0],), {}), (([True],), {}), (([1],), {"minlength": -1})):
        t_msg, w_msg = _raises_like(lambda: torch.bincount(torch.tensor(*args), **kwargs),
                                    lambda: wg.bincount(wg.tensor(*args, device=device), **kwargs))
        assert t_msg == w_msg
    t_msg, w_msg = _raises_like(lambda: torch.bincount(torch.tensor([1, 2]), torch.tensor([1.0])),
                                lambda: wg.bincount(wg.tensor([1, 2], device=device), wg.tensor([1.0], device=device)))
    assert t_msg == w_msg


@pytest.mark.parametrize("device", DEVICES)
def test_tril_triu_indices(device):
    for row, col, offset in ((3, 4, 0), (3, 4, 1), (4, 3, -1), (5, 5, 2), (0, 3, 0), (3, 3, -5), (2, 6, 9)):
        for name in ("tril_indices", "triu_indices"):
            _same(getattr(wg, name)(row, col, offset, device=device), getattr(torch, name)(row, col, offset))
    _same(wg.tril_indices(3, 3, dtype=wg.int32, device=device), torch.tril_indices(3, 3, dtype=torch.int32))
    assert wg.triu_indices(2, 2, device=device).device.type == device
    t_msg, w_msg = _raises_like(lambda: torch.tril_indices(-1, 4), lambda: wg.tril_indices(-1, 4))
    assert t_msg == w_msg
    t_msg, w_msg = _raises_like(lambda: torch.triu_indices(3, 4, dtype=torch.float32),
                                lambda: wg.triu_indices(3, 4, dtype=wg.float32))
    assert t_msg == w_msg


@pytest.mark.parametrize("device", DEVICES)
def test_vander(device):
    _same(wg.vander(wg.tensor([1, 2, 3], dtype=wg.int32, device=device)), torch.vander(torch.tensor([1, 2, 3], dtype=torch.int32)))
    _same(wg.vander(wg.tensor([True, False], device=device)), torch.vander(torch.tensor([True, False])))
    _same(wg.vander(wg.tensor([1.0, 2.0], device=device), N=0), torch.vander(torch.tensor([1.0, 2.0]), N=0))
    x = [0.5, -1.5, 2.0, 0.0]
    for N, inc in ((None, False), (3, True), (1, False), (5, False)):
        tx = torch.tensor(x, requires_grad=True)
        wx = wg.tensor(x, device=device, requires_grad=True)
        t_out, w_out = torch.vander(tx, N=N, increasing=inc), wg.vander(wx, N=N, increasing=inc)
        np.testing.assert_allclose(w_out.cpu().tolist(), t_out.tolist(), rtol=1e-6)
        if N != 1:  # gradients against the powers written out (torch's own vander backward trips on its in-place
            # cumprod here)
            n = len(x) if N is None else N
            powers = torch.stack([tx ** k for k in (range(n) if inc else reversed(range(n)))], 1)
            weights = torch.arange(t_out.numel(), dtype=torch.float32).reshape(t_out.shape)
            (powers * weights).sum().backward()
            (w_out * wg.tensor(weights.numpy(), device=device)).sum().backward()
            np.testing.assert_allclose(wx.grad.cpu().tolist(), tx.grad.tolist(), rtol=1e-5, atol=1e-5)
    for args, kwargs in ((([[1.0]],), {}), (([1.0],), {"N": -1})):
        t_msg, w_msg = _raises_like(lambda: torch.vander(torch.tensor(*args), **kwargs),
                                    lambda: wg.vander(wg.tensor(*args), **kwargs))
        assert t_msg == w_msg


# ----------------------------------------------------------------------------- testing.assert_close
def _messages(actual, expected, **kwargs):
    """(torch's message, webgrad's message) for the same failing comparison; both AssertionError."""
    def convert(x, mod):
        if isinstance(x, np.ndarray):
            return mod.tensor(x)
        if isinstance(x, (list, tuple)):
            return type(x)(convert(v, mod) for v in x)
        if isinstance(x, dict):
            return {k: convert(v, mod) for k, v in x.items()}
        return x
    return _raises_like(lambda: torch.testing.assert_close(convert(actual, torch), convert(expected, torch), **kwargs),
                        lambda: wg.testing.assert_close(convert(actual, wg), convert(expected, wg), **kwargs))


def test_assert_close_messages_match_torch():
    f32 = lambda *v: np.array(v, dtype=np.float32)  # noqa: E731
    same_text = [
        (f32(1, 2, 3), f32(1, 2.5, 3), {}),
        (np.array([[1.0, 2], [3, 4]], np.float32), np.array([[1.0, 2], [3, 5]], np.float32), {}),
        (np.array([1, 2, 3]), np.array([1, 2, 4]), {}),
        (np.array([True]), np.array([False]), {}),
        (f32(1, np.nan), f32(1, np.nan), {}),
        (f32(1, np.inf), f32(1, -np.inf), {}),
        (f32(0), f32(1), {}),
        (np.array(1.0, np.float32), np.array(2.0, np.float32), {}),
        (f32(1), f32(1.1), {"rtol": 0.01, "atol": 0.0}),
        (1.0, 1.1, {}),
        (1, 2, {}),
        ([f32(1), f32(2)], [f32(1), f32(3)], {}),
        ({"a": f32(1)}, {"a": f32(3)}, {}),
        ({"a": f32(1)}, {"b": f32(3)}, {}),
        ([1, 2], [1, 2, 3], {}),
        (f32(1), f32(1.1), {"msg": "custom"}),
        (f32(1), f32(1.1), {"msg": lambda m: "X" + m[:10]}),
    ]
    for actual, expected, kwargs in same_text:
        t_msg, w_msg = _messages(actual, expected, **kwargs)
        assert t_msg == w_msg, (actual, expected)
    # webgrad's own names for Size and dtype, the rest as torch's
    t_msg, w_msg = _messages(f32(1, 2), f32(1, 2, 3))
    assert w_msg == t_msg.replace("torch", "webgrad")
    t_msg, w_msg = _messages(f32(1, 2), np.array([1, 2], np.float64))
    assert w_msg == t_msg.replace("torch", "webgrad")
    t_msg, w_msg = _messages(np.array([1.0, 2.01], np.float16), np.array([1.0, 2.0], np.float16))
    assert t_msg == w_msg
    _raises_like(lambda: torch.testing.assert_close(torch.tensor([1.0]), 1.0),
                 lambda: wg.testing.assert_close(wg.tensor([1.0]), 1.0))
    _raises_like(lambda: torch.testing.assert_close("a", "a"), lambda: wg.testing.assert_close("a", "a"))
    t_msg, w_msg = _raises_like(lambda: torch.testing.assert_close(torch.tensor([1.0]), torch.tensor([1.0]), rtol=0.1),
                                lambda: wg.testing.assert_close(wg.tensor([1.0]), wg.tensor([1.0]), rtol=0.1))
    assert t_msg == w_msg


@pytest.mark.parametrize("device", DEVICES)
def test_assert_close_passes_as_torch(device):
    close = wg.testing.assert_close
    close(wg.tensor([1.0, 2.0], device=device), wg.tensor([1.0, 2.0 + 1e-6], device=device))
    close(wg.tensor([1.0, math.nan], device=device), wg.tensor([1.0, math.nan], device=device), equal_nan=True)
    close(wg.tensor([1.0, 2.0], device=device), wg.tensor([1, 2], device=device), check_dtype=False)
    close(wg.tensor([1.0, 2.0], device=device).to(wg.float16), wg.tensor([1.0, 2.001], device=device).to(wg.float16))
    close([wg.ones(2, device=device), {"k": (1, 2.0)}], [wg.ones(2, device=device), {"k": (1, 2.0 + 1e-9)}])
    close(nn.Parameter(wg.ones(2, device=device)), wg.ones(2, device=device))
    close(wg.tensor([1.0], device=device), wg.tensor([1.1], device=device), rtol=0.2, atol=0.0)
    with pytest.raises(AssertionError, match="1 / 2"):
        close(wg.tensor([1.0, 2.0], device=device), wg.tensor([1.0, 2.1], device=device))
    if device == "webgpu":
        with pytest.raises(AssertionError, match="attribute 'device'"):
            close(wg.ones(2, device=device), wg.ones(2))
        close(wg.ones(2, device=device), wg.ones(2), check_device=False)


# ----------------------------------------------------------------------------- fork_rng, absent devices
@pytest.mark.parametrize("device", DEVICES)
def test_fork_rng_restores_the_generator(device):
    wg.manual_seed(3)
    with wg.random.fork_rng():
        inside = wg.randn(5, device=device).tolist()
        wg.manual_seed(99)
        wg.rand(3, device=device)
    after = wg.randn(5, device=device).tolist()
    assert inside == after  # the block's draws and reseeding left the state as it was
    wg.manual_seed(3)
    with wg.random.fork_rng(enabled=False):
        wg.randn(5, device=device)
    assert wg.randn(5, device=device).tolist() != after
    with wg.random.fork_rng(devices=[], device_type="cuda"):
        pass


def test_absent_devices_answer_false():
    assert wg.mps.is_available() is False and wg.xpu.is_available() is False
    assert wg.backends.mps.is_built() is False and wg.backends.mps.is_available() is False


# ----------------------------------------------------------------------------- nn.attention.sdpa_kernel
def test_sdpa_kernel_validates_and_runs_attention_as_usual():
    from webgrad.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention import SDPBackend as TorchBackend
    assert {m.name: m.value for m in SDPBackend} == {k: int(v) for k, v in TorchBackend.__members__.items()}
    assert str(SDPBackend.MATH) == str(TorchBackend.MATH)
    q = wg.randn(2, 2, 5, 4)
    ref = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION) as ctx:
        assert ctx == {}
        out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    with sdpa_kernel([SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH], set_priority=True):
        from webgrad.nn import sdpa_backends
        assert sdpa_backends._cur_sdpa_kernel_backends() == [SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION]
    assert len(sdpa_backends._cur_sdpa_kernel_backends()) == 5
    np.testing.assert_array_equal(out.tolist(), ref.tolist())
    t_msg, w_msg = _raises_like(lambda: torch.nn.attention.sdpa_kernel("math").__enter__(),
                                lambda: sdpa_kernel("math").__enter__())
    assert t_msg == w_msg


# ----------------------------------------------------------------------------- gumbel_softmax, alpha dropout
@pytest.mark.parametrize("device", DEVICES)
def test_gumbel_softmax(device):
    logits = wg.tensor([[1.0, 2.0, 0.5, -1.0], [0.0, 0.0, 3.0, 1.0]], device=device, requires_grad=True)
    wg.manual_seed(1)
    soft = F.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(soft.sum(-1).tolist(), [1.0, 1.0], rtol=1e-6)
    wg.manual_seed(1)
    hard = F.gumbel_softmax(logits, tau=0.5, hard=True)
    h = np.array(hard.tolist())
    assert ((h == 0) | (h == 1)).all() and (h.sum(-1) == 1).all()
    assert (h.argmax(-1) == np.array(soft.tolist()).argmax(-1)).all()  # the same draws: one-hot of the soft sample
    weights = wg.tensor([[1.0, -2.0, 3.0, 0.5], [2.0, 0.0, -1.0, 1.0]], device=device)
    (soft * weights).sum().backward()
    g_soft = logits.grad.tolist()
    logits.grad = None
    (hard * weights).sum().backward()
    np.testing.assert_allclose(logits.grad.tolist(), g_soft, rtol=1e-5, atol=1e-6)  # straight-through
    wg.manual_seed(2)
    dim0 = F.gumbel_softmax(logits.detach(), dim=0, hard=True)
    assert (np.array(dim0.tolist()).sum(0) == 1).all()
    with pytest.warns(UserWarning, match="eps"):
        F.gumbel_softmax(logits.detach(), eps=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_alpha_dropout_as_torch(device):
    p = 0.3
    alpha = 1.7580993408473766
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    x = wg.randn(64, 32, device=device)
    out = np.array(F.alpha_dropout(x, p, training=True).tolist())
    xs = np.array(x.tolist())
    kept = np.isclose(out, xs * a + alpha * a * p, rtol=1e-5, atol=1e-6)
    dropped = np.isclose(out, -alpha * a + alpha * a * p, rtol=1e-5, atol=1e-6)
    assert (kept | dropped).all() and 0.2 < dropped.mean() < 0.4
    # torch gives the same two values for the same input (only the draws differ)
    t_out = torch.nn.functional.alpha_dropout(torch.tensor(xs, dtype=torch.float32), p, training=True).numpy()
    t_dropped = np.isclose(t_out, -alpha * a + alpha * a * p, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t_out[~t_dropped], (xs * a + alpha * a * p)[~t_dropped], rtol=1e-5, atol=1e-6)
    assert F.alpha_dropout(x, p) is x and F.alpha_dropout(x, 0.0, training=True) is x
    np.testing.assert_array_equal(F.alpha_dropout(x, 1.0, training=True).tolist(), np.zeros((64, 32)))
    feat = np.array(F.feature_alpha_dropout(wg.randn(8, 16, 5, 3, device=device), p, training=True).tolist())
    dropped = np.isclose(feat, -alpha * a + alpha * a * p, rtol=1e-5, atol=1e-6)
    per_channel = dropped.reshape(8, 16, -1)
    assert (per_channel.all(-1) | ~per_channel.any(-1)).all()  # whole channels
    _raises_like(lambda: torch.nn.functional.alpha_dropout(torch.ones(2), 1.5),
                 lambda: F.alpha_dropout(wg.ones(2, device=device), 1.5))
    _raises_like(lambda: torch.nn.functional.feature_alpha_dropout(torch.ones(2), 0.5, True),
                 lambda: F.feature_alpha_dropout(wg.ones(2, device=device), 0.5, True))
    # gradients: the kept elements' scale a, the dropped ones' 0
    xg = wg.randn(100, device=device, requires_grad=True)
    y = F.alpha_dropout(xg, p, training=True)
    y.sum().backward()
    g = np.array(xg.grad.tolist())
    assert np.isclose(g, a).sum() + np.isclose(g, 0.0).sum() == 100


def test_alpha_dropout_modules():
    for cls in ("AlphaDropout", "FeatureAlphaDropout"):
        w, t = getattr(nn, cls)(0.2, inplace=True), getattr(torch.nn, cls)(0.2, inplace=True)
        assert repr(w) == repr(t) and repr(getattr(nn, cls)()) == repr(getattr(torch.nn, cls)())
        x = wg.randn(4, 3, 2)
        w.eval()
        assert w(x) is x
        w.train()
        assert not np.array_equal(w(x).tolist(), x.tolist())
    _raises_like(lambda: torch.nn.AlphaDropout(2.0), lambda: nn.AlphaDropout(2.0))


# ----------------------------------------------------------------------------- parameters <-> vector
@pytest.mark.parametrize("device", DEVICES)
def test_parameters_to_vector_round_trip(device):
    from webgrad.nn.utils import parameters_to_vector, vector_to_parameters
    wg.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2)).to(device)
    tmodel = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    tmodel.load_state_dict({k: torch.tensor(v.cpu().numpy()) for k, v in model.state_dict().items()})
    vec = parameters_to_vector(model.parameters())
    tvec = torch.nn.utils.parameters_to_vector(tmodel.parameters())
    np.testing.assert_array_equal(vec.cpu().tolist(), tvec.tolist())
    vec.sum().backward()  # differentiable, as torch's
    assert all(np.all(np.array(p.grad.cpu().tolist()) == 1) for p in model.parameters())
    new = wg.arange(vec.numel(), dtype=wg.float32, device=device)
    vector_to_parameters(new, model.parameters())
    torch.nn.utils.vector_to_parameters(torch.arange(tvec.numel(), dtype=torch.float32), tmodel.parameters())
    for (name, p), (_, tp) in zip(model.named_parameters(), tmodel.named_parameters()):
        assert isinstance(p, nn.Parameter) and p.requires_grad
        np.testing.assert_array_equal(p.detach().cpu().tolist(), tp.detach().tolist())
    t_msg, w_msg = _raises_like(lambda: torch.nn.utils.vector_to_parameters([1.0], tmodel.parameters()),
                                lambda: vector_to_parameters([1.0], model.parameters()))
    assert t_msg == w_msg


# ----------------------------------------------------------------------------- functional_call
@pytest.mark.parametrize("device", DEVICES)
def test_functional_call_as_torch(device):
    from torch.func import functional_call as torch_call
    from webgrad.func import functional_call
    from webgrad.nn.utils.stateless import functional_call as stateless_call
    wg.manual_seed(0)
    model = nn.Linear(3, 2).to(device)
    tmodel = torch.nn.Linear(3, 2)
    tmodel.load_state_dict({k: torch.tensor(v.cpu().numpy()) for k, v in model.state_dict().items()})
    xs = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    w_new = np.arange(6, dtype=np.float32).reshape(2, 3) / 10
    tw = torch.tensor(w_new, requires_grad=True)
    ww = wg.tensor(w_new, device=device, requires_grad=True)
    t_out = torch_call(tmodel, {"weight": tw}, (torch.tensor(xs),))
    w_out = functional_call(model, {"weight": ww}, (wg.tensor(xs, device=device),))
    np.testing.assert_allclose(w_out.detach().cpu().tolist(), t_out.detach().numpy(), rtol=1e-5, atol=1e-6)
    t_out.square().sum().backward()
    w_out.square().sum().backward()
    np.testing.assert_allclose(ww.grad.cpu().tolist(), tw.grad.numpy(), rtol=1e-5, atol=1e-5)
    assert model.weight.grad is None and isinstance(model.weight, nn.Parameter)  # the module's own kept
    np.testing.assert_allclose(model.weight.detach().cpu().tolist(), tmodel.weight.detach().numpy())
    # a single argument, kwargs, a sequence of dicts, stateless's spelling
    x1 = wg.tensor(xs, device=device)
    one = functional_call(model, ({"weight": ww}, {"bias": wg.zeros(2, device=device)}), x1)
    two = stateless_call(model, {"weight": ww, "bias": wg.zeros(2, device=device)}, kwargs={"input": x1})
    np.testing.assert_allclose(one.detach().cpu().tolist(), two.detach().cpu().tolist())
    # errors as torch's
    for d in ({"weight": ww},):
        t_msg, w_msg = _raises_like(lambda: torch_call(tmodel, {"weight": tw}, (torch.tensor(xs),), strict=True),
                                    lambda: functional_call(model, d, (x1,), strict=True))
        assert t_msg == w_msg
    t_msg, w_msg = _raises_like(lambda: torch_call(tmodel, ({"weight": tw}, {"weight": tw}), (torch.tensor(xs),)),
                                lambda: functional_call(model, ({"weight": ww}, {"weight": ww}), (x1,)))
    assert t_msg == w_msg
    # a failing call leaves the module's parameters in place
    with pytest.raises(Exception):
        functional_call(model, {"weight": ww}, (wg.ones(4, 5, device=device),))
    assert isinstance(model.weight, nn.Parameter) and model.weight is not ww


def test_functional_call_tied_weights():
    from torch.func import functional_call as torch_call
    from webgrad.func import functional_call

    class Tied(nn.Module):
        def __init__(self, lib):
            super().__init__()
            self.a = lib.nn.Linear(2, 2, bias=False)
            self.b = lib.nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    class TorchTied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(2, 2, bias=False)
            self.b = torch.nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight

        forward = Tied.forward

    w, t = Tied(wg), TorchTied()
    x = [[1.0, 2.0]]
    for tie in (True, False):
        out = functional_call(w, {"a.weight": wg.eye(2) * 2}, (wg.tensor(x),), tie_weights=tie)
        ref = torch_call(t, {"a.weight": torch.eye(2) * 2}, (torch.tensor(x),), tie_weights=tie)
        if tie:
            np.testing.assert_allclose(out.tolist(), ref.tolist())
        else:
            np.testing.assert_allclose(out.tolist(), (wg.tensor(x) @ (wg.eye(2) * 2).t() @ w.a.weight.t()).tolist(),
                                       rtol=1e-6)
    t_msg, w_msg = _raises_like(
        lambda: torch_call(t, {"a.weight": torch.eye(2), "b.weight": torch.eye(2) * 2}, (torch.tensor(x),)),
        lambda: functional_call(w, {"a.weight": wg.eye(2), "b.weight": wg.eye(2) * 2}, (wg.tensor(x),)))
    assert t_msg == w_msg


def test_as_torch_names():
    """The names resolve under torch's spellings in a fresh interpreter (as a script would import them)."""
    import subprocess
    import sys
    from helpers import PACKAGE_DIR
    code = ("import webgrad; webgrad.as_torch(); import torch\n"
            "from torch.nn.attention import sdpa_kernel, SDPBackend\n"
            "from torch.func import functional_call\n"
            "from torch.nn.utils.stateless import functional_call as f2\n"
            "from torch.nn.utils import parameters_to_vector, vector_to_parameters\n"
            "from torch.testing import assert_close\n"
            "assert torch.testing.assert_close is assert_close and torch.random.fork_rng\n"
            "assert not torch.mps.is_available() and not torch.xpu.is_available()\n"
            "assert torch.compile and torch.nn.functional.gumbel_softmax and torch.nn.AlphaDropout\n"
            "print('ok')\n")
    env = {"PYTHONPATH": str(PACKAGE_DIR), "OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.stdout.strip() == "ok", result.stderr
