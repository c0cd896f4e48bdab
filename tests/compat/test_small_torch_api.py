"""Small parts of torch's API real scripts use: inference_mode, nn.init.orthogonal_, softmax without dim,
get/set_default_dtype, get/set_num_threads, torch.multiprocessing (and what it refuses). Each against torch."""

import os
import warnings

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.multiprocessing as wmp
import webgrad.nn.functional as F
from helpers import DEVICES
from webgrad.nn import init


# ------------------------------------------------------------------ inference_mode
@pytest.mark.parametrize("lib", [torch, wg], ids=["torch", "webgrad"])
def test_inference_mode_as_torch(lib):
    x = lib.ones(2, requires_grad=True)
    assert lib.is_inference_mode_enabled() is False
    with lib.inference_mode():
        assert lib.is_inference_mode_enabled() and not lib.is_grad_enabled()
        assert (x * 2).requires_grad is False
        with lib.inference_mode(False):  # grad mode back on, as torch's
            assert not lib.is_inference_mode_enabled() and lib.is_grad_enabled()
            assert (x * 2).requires_grad is True
        assert not lib.is_grad_enabled()
    assert lib.is_grad_enabled() and not lib.is_inference_mode_enabled()

    @lib.inference_mode()
    def called():
        return (x * 2).requires_grad, lib.is_inference_mode_enabled()

    @lib.inference_mode
    def bare():
        return (x * 2).requires_grad

    assert called() == (False, True) and bare() is False and called.__name__ == "called"
    assert (x * 2).requires_grad


# ------------------------------------------------------------------ orthogonal_
def _torch_q(a):
    q, r = torch.linalg.qr(torch.tensor(a, dtype=torch.float64))
    return (q * torch.sign(torch.diag(r))).numpy()


@pytest.mark.parametrize("shape", [(7, 4), (5, 5), (12, 1)])
def test_orthogonal_q_is_torchs(shape, monkeypatch):
    """The host QR gives torch's Q (columns signed by R's diagonal), with NumPy and in pure Python (Pyodide)."""
    a = np.random.default_rng(0).standard_normal(shape)
    np.testing.assert_allclose(init._orthonormal_columns(a.tolist()), _torch_q(a), atol=1e-12)
    import builtins
    real = builtins.__import__

    def no_numpy(name, *args, **kwargs):
        if name == "numpy":
            raise ImportError("no NumPy here")
        return real(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_numpy)
    pure = init._orthonormal_columns(a.tolist())
    monkeypatch.setattr(builtins, "__import__", real)
    np.testing.assert_allclose(pure, _torch_q(a), atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(6, 2, 3, 3), (30, 5), (4, 9)])
def test_orthogonal_fills_as_torch(device, shape):
    w = wg.empty(*shape, device=device)
    assert init.orthogonal_(w, gain=2.0) is w
    m = w.detach().to("cpu").numpy().reshape(shape[0], -1).astype(np.float64)
    small = min(m.shape)
    gram = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
    np.testing.assert_allclose(gram, 4.0 * np.eye(small), atol=1e-5)
    # the same normal draws give torch's values: draw in webgrad, hand them to torch's QR
    wg.manual_seed(3)
    w2 = wg.empty(*shape, device=device)
    init.orthogonal_(w2)
    wg.manual_seed(3)
    drawn = wg.empty(shape[0], int(np.prod(shape[1:])), device=device).normal_(0, 1).to("cpu").numpy()
    ref = _torch_q(drawn.T).T if shape[0] < drawn.shape[1] else _torch_q(drawn)
    np.testing.assert_allclose(w2.detach().to("cpu").numpy().reshape(ref.shape), ref, atol=1e-6)


def test_orthogonal_errors_and_empty():
    with pytest.raises(ValueError, match="Only tensors with 2 or more dimensions are supported"):
        init.orthogonal_(wg.empty(3))
    with pytest.raises(ValueError, match="Only tensors with 2 or more dimensions are supported"):
        torch.nn.init.orthogonal_(torch.empty(3))
    assert tuple(init.orthogonal_(wg.empty(0, 3)).shape) == (0, 3)


# ------------------------------------------------------------------ softmax without dim
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", [(), (5,), (2, 5), (2, 3, 4), (2, 3, 4, 5)])
def test_softmax_without_dim_as_torch(name, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        ref = getattr(torch.nn.functional, name)(torch.tensor(x))
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        out = getattr(F, name)(wg.tensor(x))
    np.testing.assert_allclose(out.numpy(), ref.numpy(), atol=1e-6)
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]
    assert ours[0].filename == __file__  # the warning points at the caller's line, as torch's


# ------------------------------------------------------------------ default dtype, threads
def test_default_dtype_as_torch():
    assert wg.get_default_dtype() == wg.float32
    calls = [lambda L: L.tensor([1.5]), lambda L: L.zeros(2), lambda L: L.ones(2), lambda L: L.empty(2),
             lambda L: L.rand(2), lambda L: L.randn(2), lambda L: L.arange(0.0, 3), lambda L: L.linspace(0, 1, 3),
             lambda L: L.full((2,), 1.5), lambda L: L.eye(2), lambda L: L.tensor([1, 2]) * 0.5,
             lambda L: L.nn.Linear(2, 2).weight, lambda L: L.arange(3), lambda L: L.tensor([1, 2])]
    try:
        for lib in (torch, wg):
            lib.set_default_dtype(lib.float64)
        assert wg.get_default_dtype() == wg.float64 and torch.get_default_dtype() == torch.float64
        for call in calls:
            assert str(call(wg).dtype).split(".")[-1] == str(call(torch).dtype).split(".")[-1]
    finally:
        torch.set_default_dtype(torch.float32)
        wg.set_default_dtype(wg.float32)
    assert wg.zeros(2).dtype == wg.float32 and wg.tensor([0.5]).dtype == wg.float32
    for lib in (torch, wg):
        with pytest.raises(TypeError, match="only floating-point types are supported as the default type"):
            lib.set_default_dtype(lib.int64)


def test_num_threads_as_torch():
    before = wg.get_num_threads()
    assert isinstance(before, int) and before >= 1
    try:
        wg.set_num_threads(1)
        assert wg.get_num_threads() == 1
    finally:
        wg.set_num_threads(before)
    for lib in (torch, wg):
        with pytest.raises(RuntimeError, match="set_num_threads expects a positive integer"):
            lib.set_num_threads(0)


# ------------------------------------------------------------------ multiprocessing
def test_multiprocessing_runs_plain_processes_and_refuses_tensors():
    assert wmp.cpu_count() >= 1 and wmp.get_sharing_strategy() in wmp.get_all_sharing_strategies()
    p = wmp.Process(target=os.getpid)
    p.start()
    p.join()
    assert p.exitcode == 0
    model = wg.nn.Linear(2, 2)
    with pytest.raises(RuntimeError, match="webgrad cannot share tensors between processes.*Module.share_memory"):
        model.share_memory()
    with pytest.raises(RuntimeError, match="Tensor.share_memory_"):
        wg.ones(2).share_memory_()
    assert wg.ones(2).is_shared() is False
    with pytest.raises(RuntimeError, match="Process.*was given a tensor or a module.*Hogwild"):
        wmp.Process(target=print, args=(0, {"model": model}))
    with pytest.raises(RuntimeError, match="spawn"):
        wmp.spawn(print, args=(wg.ones(1),), nprocs=1)


def test_torch_multiprocessing_imports_under_as_torch():
    import subprocess
    import sys
    from helpers import PACKAGE_DIR
    code = ("import webgrad; webgrad.as_torch()\nimport torch.multiprocessing as mp\n"
            "mp.set_start_method('spawn', force=True)\nprint(mp.get_start_method(), mp.Process.__module__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(PACKAGE_DIR)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["spawn", "webgrad.multiprocessing"]


# ------------------------------------------------------------------ where(cond), Module.to(memory_format), version
@pytest.mark.parametrize("device", DEVICES)
def test_where_with_the_condition_alone_is_nonzero_as_tuple(device):
    a = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]], np.float32)
    want = torch.where(torch.from_numpy(a) != 0)
    got = wg.where(wg.tensor(a, device=device) != 0)
    assert isinstance(got, tuple) and len(got) == len(want) == 2
    for g, w in zip(got, want):
        assert g.dtype == wg.int64 and g.tolist() == w.tolist()
    with pytest.raises(TypeError):
        wg.where(wg.tensor(a) > 0, wg.tensor(a))


def test_module_to_memory_format_as_torch():
    for lib in (torch, wg):
        conv = lib.nn.Conv2d(3, 2, 1)
        assert conv.to(memory_format=lib.channels_last) is conv
        assert conv.to("cpu", memory_format=lib.contiguous_format) is conv
        with pytest.raises(TypeError):
            conv.to(memory_format="channels_last")


def test_torch_version_fields_as_a_cpu_only_build():
    assert set(torch.version.__all__) <= set(dir(wg.version))
    assert wg.version.cuda is None and wg.version.hip is None and wg.version.__version__ == wg.__version__


# ------------------------------------------------------------------ nn.Buffer, torch.Size arithmetic, torch.compiler
def test_nn_buffer_registers_as_torch():
    for lib in (torch, wg):
        m = lib.nn.Module()
        m.kept = lib.nn.Buffer(lib.ones(2))
        m.scratch = lib.nn.Buffer(lib.zeros(3), persistent=False)
        assert list(m.state_dict()) == ["kept"]
        assert [n for n, _ in m.named_buffers()] == ["kept", "scratch"]
        assert m.kept.tolist() == [1.0, 1.0] and not list(m.parameters())


def test_size_slices_and_sums_are_sizes_as_torch():
    for lib in (torch, wg):
        s = lib.ones(2, 3, 4).shape
        for got in (s[1:], s[:-1] + (5,), (1,) + s, s * 2):
            assert isinstance(got, lib.Size), got
        assert isinstance(s[0], int) and s[::2] == (2, 4)
    assert repr(wg.ones(2, 3).shape[1:]).endswith("Size([3])")


def test_compiler_and_dynamo_switches_scripts_set():
    import webgrad._dynamo as dynamo
    for lib, dyn in ((torch, torch._dynamo), (wg, dynamo)):
        assert lib.compiler.is_compiling() is False
        f = lib.compiler.disable(lambda x: x + 1)
        assert f(1) == 2
        dyn.reset()
        before = dyn.config.cache_size_limit
        with dyn.config.patch(cache_size_limit=before + 56):
            assert dyn.config.cache_size_limit == before + 56
        assert dyn.config.cache_size_limit == before
        assert "inductor" in dyn.list_backends()
        dyn.mark_dynamic(lib.ones(2, 3), 0)


def test_is_contiguous_in_a_memory_format_as_torch():
    """Tensor.is_contiguous(memory_format=...): row-major, channels_last (4-D) and channels_last_3d (5-D) read from
    the strides (size-1 dims take any), as torch's."""
    def answers(lib):
        x, y = lib.randn(2, 3, 4, 5), lib.randn(2, 3, 4, 5, 6)
        nhwc = x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
        ndhwc = y.permute(0, 2, 3, 4, 1).contiguous().permute(0, 4, 1, 2, 3)
        return [x.is_contiguous(memory_format=lib.channels_last), nhwc.is_contiguous(memory_format=lib.channels_last),
                nhwc.is_contiguous(), lib.randn(3, 4).is_contiguous(memory_format=lib.contiguous_format),
                lib.randn(3, 4).is_contiguous(memory_format=lib.channels_last),
                y.is_contiguous(memory_format=lib.channels_last_3d),
                ndhwc.is_contiguous(memory_format=lib.channels_last_3d),
                lib.randn(2, 1, 4, 5).is_contiguous(memory_format=lib.channels_last),
                lib.randn(2, 3, 1, 1).is_contiguous(memory_format=lib.channels_last)]
    assert answers(wg) == answers(torch)
