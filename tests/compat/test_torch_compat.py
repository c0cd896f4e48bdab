"""PyTorch scripts' surface: device discovery with PyTorch's meaning (issue 13)."""

import pytest

import webgrad as wg
from helpers import webgpu_available


def test_cuda_and_mps_are_absent():
    assert wg.cuda.is_available() is False
    assert wg.cuda.device_count() == 0
    assert wg.backends.mps.is_available() is False
    # the idiom of pytorch/examples picks the CPU
    assert wg.device("cuda" if wg.cuda.is_available() else "cpu") == "cpu"


def test_cudnn_flags_accept_assignment():
    before = (wg.backends.cudnn.benchmark, wg.backends.cudnn.deterministic)
    try:
        wg.backends.cudnn.benchmark = True
        wg.backends.cudnn.deterministic = True
        assert wg.backends.cudnn.benchmark is True and wg.backends.cudnn.deterministic is True
    finally:
        wg.backends.cudnn.benchmark, wg.backends.cudnn.deterministic = before


def test_accelerator_is_webgpu_when_there_is_an_adapter():
    has = webgpu_available()
    assert wg.accelerator.is_available() is has
    acc = wg.accelerator.current_accelerator()
    if has:
        assert acc == wg.device("webgpu") and acc.type == "webgpu"
        assert wg.zeros(2, device=acc).device == "webgpu"
    else:
        assert acc is None


def test_cuda_devices_are_made_and_refuse_memory_naming_webgpu():
    # as a torch without CUDA: the device object exists (scripts compare with it, read its index), memory
    # placed on it raises torch's AssertionError (also a RuntimeError), naming webgpu
    d = wg.device("cuda:1")
    assert (d.type, d.index, str(d), wg.device("cuda").index) == ("cuda", 1, "cuda:1", None)
    assert d != wg.device("cuda:0") and wg.device("webgpu:0") == "webgpu"
    lin = wg.nn.Linear(2, 2)
    for place in (lambda: wg.zeros(2, device="cuda"), lambda: wg.ones(2).to(d), lambda: wg.ones(2).cuda(),
                  lambda: lin.cuda()):
        with pytest.raises(AssertionError, match="webgpu"):
            place()
    assert lin.weight.device == "cpu"
    with pytest.raises(ValueError, match="unknown device"):
        wg.device("tpu")


# ----------------------------------------------------------------- conversions and constructors
def test_legacy_tensor_constructor_as_torch():
    import torch
    for args in ((3, 4), (3,), ()):
        assert tuple(wg.Tensor(*args).shape) == tuple(torch.Tensor(*args).shape)
        assert wg.Tensor(*args).dtype is wg.float32
    assert tuple(wg.Tensor(wg.Size([2, 3])).shape) == (2, 3)
    assert wg.Tensor([1, 2]).tolist() == [1.0, 2.0] and wg.Tensor([1, 2]).dtype is wg.float32  # float, as torch
    assert wg.Tensor((2, 3)).tolist() == [2.0, 3.0]
    assert wg.Tensor(wg.tensor([1, 2])).dtype is wg.int64  # a tensor keeps its dtype
    assert isinstance(wg.Tensor(2, 2), wg.Tensor)


def test_format_spec_on_0d_tensor():
    import torch
    value = 1.23456789
    for spec in (".4f", ".2e", "", "8.3f"):
        assert format(wg.tensor(value), spec) == format(torch.tensor(value), spec)
    assert f"{wg.tensor(7)}" == "7"
    with pytest.raises(TypeError):
        f"{wg.ones(2):.2f}"


def test_double_and_long():
    x = wg.tensor([1.5, 2.0])
    assert x.double().dtype is wg.float64 and x.double().tolist() == [1.5, 2.0]
    if webgpu_available():
        with pytest.raises(TypeError, match="64-bit floats"):
            x.to("webgpu").double()
    # long() is int64, as PyTorch's (on WebGPU in the int32 range: see tests/core/test_int64.py)
    y = x.long()
    assert y.dtype is wg.int64 and y.dtype == wg.long and wg.long is wg.int64 and y.tolist() == [1, 2]


def test_from_numpy_shares_memory_on_cpu():
    import numpy as np
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = wg.from_numpy(a)
    assert t.device == "cpu"
    a[0, 0] = 9
    t[1, 1] = -1
    assert t.tolist() == [[9, 1, 2], [3, -1, 5]] and a[1, 1] == -1
    strided = wg.from_numpy(a[:, ::2])  # a strided array shares too
    a[1, 2] = 42
    assert strided.tolist() == [[9, 2], [3, 42]] and strided.stride() == (3, 2)
    shared = wg.from_numpy(np.array([1, 2], dtype=np.int64))  # int64 shares too
    assert shared.dtype is wg.int64 and shared.tolist() == [1, 2]
    copied = wg.from_numpy(np.array([1, 2], dtype=np.uint16))  # uint16 widens to int32: a copy
    assert copied.dtype is wg.int32 and copied.tolist() == [1, 2]
    small = wg.from_numpy(np.array([1, -2], dtype=np.int16))  # int16 (and int8) share, as torch's
    assert small.dtype is wg.int16 and small.tolist() == [1, -2]


# ----------------------------------------------------------------- arguments PyTorch scripts pass
def test_out_keyword():
    a, b = wg.ones(2, 3), wg.full((3, 2), 2.0)
    c = wg.zeros(2, 2)
    assert wg.matmul(a, b, out=c) is c and c.tolist() == [[6.0, 6.0], [6.0, 6.0]]
    d = wg.empty(0)
    wg.add(a, 1, out=d)  # resized, as PyTorch resizes an empty out
    assert d.tolist() == [[2.0] * 3] * 2
    e = wg.zeros(2, 3, dtype=wg.float64)
    wg.mul(a, 3, out=e)
    assert e.dtype is wg.float64 and e.tolist() == [[3.0] * 3] * 2
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        wg.mul(wg.ones(2, requires_grad=True), 2, out=wg.zeros(2))


def test_memory_formats_and_addcmul():
    import torch
    x = wg.randn(2, 3)
    for fmt in (wg.preserve_format, wg.contiguous_format, wg.channels_last):
        assert x.clone(memory_format=fmt).tolist() == x.tolist()
    assert x.to(memory_format=wg.contiguous_format) is x
    t = [torch.ones(3), torch.tensor([1.0, 2.0, 3.0]), torch.tensor([2.0, 4.0, 8.0])]
    w = [wg.ones(3), wg.tensor([1.0, 2.0, 3.0]), wg.tensor([2.0, 4.0, 8.0])]
    assert w[0].addcmul(w[1], w[2], value=0.5).tolist() == t[0].addcmul(t[1], t[2], value=0.5).tolist()
    assert w[0].addcdiv_(w[1], w[2], value=2).tolist() == t[0].addcdiv_(t[1], t[2], value=2).tolist()


def test_dataloader_sampler_arguments_as_torch():
    import torch
    from torch.utils import data as tdata
    from webgrad.utils import data as wdata
    ds = wdata.TensorDataset(wg.arange(10))
    batches = [b[0].tolist() for b in wdata.DataLoader(ds, batch_size=3, sampler=[9, 8, 7, 1, 0])]
    assert batches == [[9, 8, 7], [1, 0]]
    bs = wdata.BatchSampler(wdata.SequentialSampler(range(10)), 4, drop_last=True)
    assert [b[0].tolist() for b in wdata.DataLoader(ds, batch_sampler=bs)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(wdata.DataLoader(ds, batch_sampler=bs)) == 2
    sub = wdata.SubsetRandomSampler([2, 4, 6])
    assert sorted(i for b in wdata.DataLoader(ds, batch_size=2, sampler=sub) for i in b[0].tolist()) == [2, 4, 6]
    assert sorted(wdata.RandomSampler(range(5))) == [0, 1, 2, 3, 4]
    assert all(w != 0 for w in (list(wdata.WeightedRandomSampler([0, 1, 1], 20))))
    calls = []
    loader = wdata.DataLoader(ds, batch_size=5, num_workers=2, persistent_workers=True, prefetch_factor=2,
                              worker_init_fn=calls.append, pin_memory=True)
    assert [b[0].tolist() for b in loader] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]] and calls == []
    # the same argument checks as torch's, with its messages
    tds = tdata.TensorDataset(torch.arange(10))
    for kwargs in (dict(sampler=[1], shuffle=True), dict(persistent_workers=True), dict(prefetch_factor=2),
                   dict(batch_sampler=bs, batch_size=2)):
        with pytest.raises(ValueError) as expected:
            tdata.DataLoader(tds, **kwargs)
        with pytest.raises(ValueError) as got:
            wdata.DataLoader(ds, **kwargs)
        assert str(got.value) == str(expected.value)


def test_default_seed_differs_per_process():
    import subprocess
    import sys
    code = "import webgrad; print(webgrad.initial_seed(), webgrad.rand(2).tolist())"
    import os
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
            for _ in range(2)]
    assert runs[0] != runs[1]
    assert wg.Generator().initial_seed() == 67280421310721  # a new Generator starts where torch's does
    wg.manual_seed(5)
    a = wg.rand(3).tolist()
    wg.manual_seed(5)
    assert wg.rand(3).tolist() == a


# ----------------------------------------------------------------- printing, as PyTorch prints
def test_repr_matches_torch_and_summarises():
    import numpy as np
    import torch
    rng = np.random.default_rng(0)
    cases = [np.arange(2000, dtype=np.float32) / 7, np.arange(2000, dtype=np.float32).reshape(50, 40) / 7,
             rng.standard_normal((4, 5, 60)).astype(np.float32), np.arange(1001, dtype=np.float32),
             rng.standard_normal((3, 400)).astype(np.float32), rng.standard_normal((5, 30)).astype(np.float32),
             np.array([1.0, 2000.0], np.float32), np.array([1e-5, 1.0], np.float32),
             np.array([0.0, 1.5, np.nan, np.inf], np.float32), rng.standard_normal((40, 40)) > 0,
             rng.standard_normal((2, 3, 4, 300)).astype(np.float32), np.zeros((100, 100), np.float32),
             np.array(3.5, np.float32)]
    for a in cases:
        assert repr(wg.tensor(a)) == repr(torch.tensor(a)), a.shape


def test_repr_pads_to_the_nonzero_finite_values_as_torch():
    # nan, inf and zeros do not widen the column torch pads to: tensor([-0., 1.]), tensor([nan, 1.])
    import torch
    nan, inf = float("nan"), float("inf")
    cases = [[-0.0, 1.0], [nan, 1.0], [-inf, 1.0], [-0.0, 0.0], [[nan, 1.0], [2.0, 3.0]], [nan, 100.0, -0.0],
             [inf, 2.5], [0.0, -1.5, 2.25], [1e9, -inf, 0.0], [nan, inf], [1e-5, nan]]
    for values in cases:
        assert repr(wg.tensor(values)) == repr(torch.tensor(values)), values


def test_repr_suffixes_wrap_at_the_line_width_as_torchs():
    # grad_fn=, requires_grad=, size= go on a line of their own where they would pass 80 columns
    import numpy as np
    import torch
    values = [np.full(8, 0.25, np.float32), np.full(9, 3.25, np.float32), np.full((2, 8), -1.5, np.float32),
              np.full(5, 2.0, np.float32)]
    for a in values:
        for lib in (torch, wg):
            leaf = lib.tensor(a, requires_grad=True)
            made = leaf * 2
            text = [repr(leaf), repr(made)]
            if lib is torch:
                expected = text
        assert text == expected, a.shape
    shapes = [(2, 3, 10, 10), (2048, 3, 65536, 65536)]
    for shape in shapes:
        texts = [repr(lib.nn.Conv2d(3, 5, 2, device="meta")(lib.zeros(shape, device="meta"))) for lib in (torch, wg)]
        assert texts[1] == texts[0], shape


def test_summarised_repr_reads_only_the_shown_entries(monkeypatch):
    big = wg.zeros(50000, 784)
    read = []
    original = wg.Tensor._bytes
    monkeypatch.setattr(wg.Tensor, "_bytes", lambda self: read.append(self.numel()) or original(self))
    text = repr(big)
    assert "..." in text and len(text) < 1000
    assert max(read) == 36  # 6 x 6 entries, not 39 million


def test_half_is_float16():  # float16 itself: tests/ops/test_amp.py
    assert wg.ones(2).half().dtype is wg.float16 is wg.half


def test_reprs_say_torch_under_as_torch():
    import subprocess
    import sys
    code = ("import webgrad; print(webgrad.float32, webgrad.ones(2).shape); webgrad.as_torch(); import torch; "
            "print(torch.float32, torch.ones(2).shape, repr(torch.ones(1, dtype=torch.float64)), torch.int64)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["webgrad.float32 webgrad.Size([2])",
                   "torch.float32 torch.Size([2]) tensor([1.], dtype=torch.float64) torch.int64"]
