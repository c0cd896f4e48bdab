"""int64 (torch.long) as a real dtype: what makes it, how it promotes, what takes it, against PyTorch; exact on
the CPU; on WebGPU held in 32 bits under one rule (webgrad/dtypes.py): values outside the int32 range are an
error (at the upload, or at the next read-back for a result computed on the device), never a wrapped number.
Also float64 and bfloat16's rules."""

import sys

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.nn.functional as F
from webgrad import dtypes

from helpers import DEVICES

BIG = 2**31  # the first int64 value WebGPU cannot hold


def _torch_dtype(d):
    return getattr(torch, d.name)


def _same(ours, theirs):
    assert ours.dtype is getattr(wg, str(theirs.dtype).removeprefix("torch.")), (ours.dtype, theirs.dtype)
    assert ours.tolist() == theirs.tolist()


# ===================================================================== the dtype and its names
def test_long_is_int64_and_compares_as_torch():
    assert wg.long is wg.int64 and wg.int is wg.int32 and wg.int64 is not wg.int32
    assert wg.tensor([1, 2]).dtype == wg.long and wg.tensor([1, 2]).dtype != wg.int32
    assert wg.zeros(2, dtype=int).dtype is wg.int64  # Python int is torch.int64
    assert dtypes.to_dtype(torch.int64) is wg.int64 and dtypes.to_dtype("long") is wg.int64
    assert wg.int64.itemsize == 8 and wg.int64.is_signed and not wg.int64.is_floating_point
    assert repr(wg.int64) == "webgrad.int64"


# ===================================================================== what gives int64, as PyTorch
_MAKERS = {
    "tensor of ints": lambda m, d: m.tensor([[1, 2], [-3, 4]], device=d),
    "tensor of a numpy int64 array": lambda m, d: m.tensor(np.array([5, -6], np.int64), device=d),
    "arange": lambda m, d: m.arange(5, device=d),
    "arange with start and step": lambda m, d: m.arange(-4, 7, 3, device=d),
    "full of an int": lambda m, d: m.full((2,), 7, device=d),
    ".long()": lambda m, d: m.tensor([1.7, -2.7, 0.2], device=d).long(),
    "argmax": lambda m, d: m.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 9.0]], device=d).argmax(1),
    "argmin of all": lambda m, d: m.tensor([[1.0, 5.0], [-7.0, 0.0]], device=d).argmin(),
    "max indices": lambda m, d: m.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 9.0]], device=d).max(1)[1],
    "sum of bools": lambda m, d: (m.tensor([1.0, 2.0, 3.0], device=d) > 1.5).sum(),
    "sum of int32": lambda m, d: m.tensor([[1, 2], [3, 4]], dtype=m.int32, device=d).sum(0),
    "sum of uint8": lambda m, d: m.tensor([200, 100], dtype=m.uint8, device=d).sum(),
    "prod of int32": lambda m, d: m.tensor([3, -4], dtype=m.int32, device=d).prod(),
    "cumsum of bools": lambda m, d: m.tensor([True, False, True], device=d).cumsum(0),
    "where of int scalars": lambda m, d: m.where(m.tensor([True, False], device=d), 1, 0),
    "bool + int": lambda m, d: m.tensor([True, False], device=d) + 1,
    "int32 + int64": lambda m, d: m.tensor([1, 2], dtype=m.int32, device=d) + m.tensor([3, 4], device=d),
    "floor division": lambda m, d: m.div(m.tensor([7, -7], device=d), 2, rounding_mode="floor"),
    "trunc division": lambda m, d: m.div(m.tensor([7, -7], device=d), 2, rounding_mode="trunc"),
    "one_hot": lambda m, d: (torch.nn.functional if m is torch else F).one_hot(m.tensor([0, 2], device=d), 3),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(_MAKERS))
def test_int64_results_match_torch(device, name):
    _same(_MAKERS[name](wg, device), _MAKERS[name](torch, "cpu"))


@pytest.mark.parametrize("device", DEVICES)
def test_randint_randperm_and_pool_indices_are_int64(device):
    assert wg.randint(0, 5, (3,), device=device).dtype is wg.int64
    assert wg.randint(5, (3,), device=device).dtype is wg.int64
    assert wg.randperm(4, device=device).dtype is wg.int64
    _, idx = F.max_pool2d(wg.randn(1, 1, 4, 4, device=device), 2, return_indices=True)
    assert idx.dtype is wg.int64


@pytest.mark.parametrize("device", DEVICES)
def test_int32_keeps_its_dtype_and_wraps_as_torch(device):
    i32 = wg.tensor([2**31 - 1, 5], dtype=wg.int32, device=device)
    _same(i32 + 1, torch.tensor([2**31 - 1, 5], dtype=torch.int32) + 1)  # wraps, as PyTorch's int32
    _same(i32 * wg.tensor(2, device=device), torch.tensor([2**31 - 1, 5], dtype=torch.int32) * torch.tensor(2))
    if device == "cpu":  # widened first, the sum is exact
        _same(i32.long() + 1, torch.tensor([2**31 - 1, 5], dtype=torch.int32).long() + 1)


# ===================================================================== promotion: torch.result_type
_DTYPES = [wg.bool, wg.uint8, wg.int32, wg.int64, wg.float16, wg.float32, wg.float64]


def _operand(kind, dtype):
    if kind == "dims":
        return torch.zeros(2, dtype=_torch_dtype(dtype)), wg.zeros(2, dtype=dtype)
    return torch.zeros((), dtype=_torch_dtype(dtype)), wg.zeros((), dtype=dtype)


@pytest.mark.parametrize("kinds", [("dims", "dims"), ("dims", "0-d"), ("0-d", "0-d")])
def test_result_type_matches_torch(kinds):
    for a in _DTYPES:
        for b in _DTYPES:
            ta, wa = _operand(kinds[0], a)
            tb, wb = _operand(kinds[1], b)
            expected = torch.result_type(ta, tb)
            assert _torch_dtype(dtypes.result_type(wa, wb)) is expected, (a, b, kinds)
            for scalar in (True, 3, 2**40, 2.5):
                assert _torch_dtype(dtypes.result_type(wa, scalar)) is torch.result_type(ta, scalar), (a, scalar)


def test_public_promotion_functions():
    assert wg.result_type(wg.tensor([1], dtype=wg.int32), 5) is wg.int32
    assert wg.result_type(wg.tensor([1]), wg.tensor(1.5)) is wg.float32
    assert wg.promote_types(wg.int32, wg.int64) is wg.int64 and wg.promote_types("uint8", torch.bool) is wg.uint8
    assert wg.promote_types(wg.int64, wg.float16) is wg.float16


@pytest.mark.parametrize("device", DEVICES)
def test_binary_ops_promote_as_torch(device):
    i32 = wg.tensor([1, 2], dtype=wg.int32, device=device)
    t32 = torch.tensor([1, 2], dtype=torch.int32)
    _same(i32 + wg.tensor(5, device=device), t32 + torch.tensor(5))  # a 0-d int64 does not widen int32
    _same(i32 * 3, t32 * 3)  # nor does a Python int
    _same(wg.tensor([1, 2], device=device) + wg.tensor([0.5, 1.5], device=device),
          torch.tensor([1, 2]) + torch.tensor([0.5, 1.5]))
    _same(i32 + wg.tensor(2.5, device=device), t32 + torch.tensor(2.5))
    _same(wg.tensor([3, 4], device=device) == wg.tensor([3, 5], dtype=wg.int32, device=device),
          torch.tensor([3, 4]) == torch.tensor([3, 5], dtype=torch.int32))
    _same(wg.cat([wg.tensor([1], dtype=wg.int32, device=device), wg.tensor([2], device=device)]),
          torch.cat([torch.tensor([1], dtype=torch.int32), torch.tensor([2])]))


# ===================================================================== indices and targets take int64 and int32
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index_dtype", [wg.int64, wg.int32])
def test_indices_and_targets(device, index_dtype):
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    tx, wx = torch.tensor(x), wg.tensor(x, device=device)
    idx = [3, 0, 3]
    ti, wi = torch.tensor(idx), wg.tensor(idx, dtype=index_dtype, device=device)
    np.testing.assert_allclose(wx.index_select(0, wi).tolist(), tx.index_select(0, ti).tolist())
    np.testing.assert_allclose(wx[wi].tolist(), tx[ti].tolist())
    np.testing.assert_allclose(F.embedding(wi, wx).tolist(), torch.nn.functional.embedding(ti, tx).tolist())
    g = [[1, 0, 3, 3, 2]]
    np.testing.assert_allclose(wx.gather(0, wg.tensor(g, dtype=index_dtype, device=device)).tolist(),
                               tx.gather(0, torch.tensor(g)).tolist())
    target = [4, 0, 2, 1]
    tt, wt = torch.tensor(target), wg.tensor(target, dtype=index_dtype, device=device)
    assert abs(F.cross_entropy(wx, wt).item() - torch.nn.functional.cross_entropy(tx, tt).item()) < 1e-5
    assert abs(F.nll_loss(wx, wt).item() - torch.nn.functional.nll_loss(tx, tt).item()) < 1e-5
    wl = wg.tensor(x, device=device, requires_grad=True)
    F.cross_entropy(wl, wt).backward()
    tl = torch.tensor(x, requires_grad=True)
    torch.nn.functional.cross_entropy(tl, tt).backward()
    np.testing.assert_allclose(wl.grad.tolist(), tl.grad.tolist(), atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_int64_tensors_are_indexed_and_masked(device):
    labels = wg.tensor([7, 8, 9, 10], device=device)
    assert labels[wg.tensor([3, 1], device=device)].tolist() == [10, 8]
    labels[wg.tensor([0, 2], device=device)] = wg.tensor([-1, -2], device=device)
    assert labels.tolist() == [-1, 8, -2, 10] and labels.dtype is wg.int64
    assert labels[labels > 0].tolist() == [8, 10]
    assert wg.where(labels > 0, labels, 0).tolist() == [0, 8, 0, 10]


# ===================================================================== exact on the CPU
def test_cpu_int64_is_exact_over_64_bits():
    x = wg.tensor([2**40, -(2**62), 3])
    assert x.tolist() == [2**40, -(2**62), 3]
    assert (x + 2**40).tolist() == [2**41, -(2**62) + 2**40, 2**40 + 3]
    assert (x * 2).tolist() == [2**41, -(2**63), 6]
    assert x.sum().item() == 2**40 - 2**62 + 3 and x.cumsum(0).tolist()[-1] == 2**40 - 2**62 + 3
    assert (x // 7).tolist() == [2**40 // 7, -(2**62) // 7, 0]
    a = np.array([2**50, -5], np.int64)
    t = wg.from_numpy(a)  # shares the memory, as torch.from_numpy
    a[1] = 6
    assert t.dtype is wg.int64 and t.tolist() == [2**50, 6]
    assert wg.tensor(np.array([2**33], np.uint64)).tolist() == [2**33]
    with pytest.raises(RuntimeError, match="value cannot be converted to type int32 without overflow"):
        wg.tensor([2**40], dtype=wg.int32)


def test_canonical_bytes_need_no_numpy(monkeypatch):
    """The page has no NumPy: tensors of int64 are packed and read, and WebGPU's words narrowed and widened,
    by the array module."""
    monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` raises ImportError
    raw = dtypes.widen_int32(np.array([5, -6, 2**31 - 1], np.int32).tobytes())
    assert raw == np.array([5, -6, 2**31 - 1], np.int64).tobytes()
    assert dtypes.narrow_int64(raw) == np.array([5, -6, 2**31 - 1], np.int32).tobytes()
    with pytest.raises(RuntimeError, match="int64 value -2147483649 is outside the range WebGPU stores"):
        dtypes.narrow_int64(np.array([1, -BIG - 1], np.int64).tobytes())
    from webgrad import _tensor
    assert _tensor._pack([2**40, -1], wg.int64) == np.array([2**40, -1], np.int64).tobytes()


# ===================================================================== WebGPU: the int32 range, checked
webgpu = pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
RANGE = "outside the int32 range|outside the range WebGPU stores"


@webgpu
def test_webgpu_uploads_beyond_int32_are_refused():
    with pytest.raises(RuntimeError, match="int64 value 2147483648 is outside the range WebGPU stores"):
        wg.tensor([1, BIG], device="webgpu")
    with pytest.raises(RuntimeError, match=RANGE):
        wg.from_numpy(np.array([-BIG - 1], np.int64)).to("webgpu")
    with pytest.raises(RuntimeError, match=RANGE):
        wg.tensor([2**40]).to("webgpu")
    with pytest.raises(IndexError, match="index 1099511627776 is out of bounds"):  # PyTorch's exception type
        wg.zeros(3, device="webgpu")[[0, 2**40]]
    edge = wg.tensor([-BIG, BIG - 1], device="webgpu")  # the ends of the range fit
    assert edge.tolist() == [-BIG, BIG - 1] and edge.to("cpu").dtype is wg.int64


def _raises_at_read(fn):
    with pytest.raises(RuntimeError, match=RANGE):
        fn().tolist()


@webgpu
def test_webgpu_int64_results_beyond_int32_raise_at_the_read_back():
    top = wg.tensor([BIG - 1, 5], device="webgpu")
    low = wg.tensor([-BIG, 5], device="webgpu")
    one = wg.tensor([1, 1], device="webgpu")
    _raises_at_read(lambda: top + one)
    _raises_at_read(lambda: low - one)
    _raises_at_read(lambda: top * wg.tensor([2, 1], device="webgpu"))
    _raises_at_read(lambda: top + 1)
    _raises_at_read(lambda: top * 3)
    _raises_at_read(lambda: 1 - low)
    _raises_at_read(lambda: -low)
    _raises_at_read(lambda: low.abs())
    _raises_at_read(lambda: low // -1)
    _raises_at_read(lambda: wg.tensor([2, 3], device="webgpu") ** 40)
    _raises_at_read(lambda: wg.tensor([46341, 3], device="webgpu").square())
    _raises_at_read(lambda: top.sum())
    _raises_at_read(lambda: wg.tensor([65536, 65536, 3], device="webgpu").prod())
    _raises_at_read(lambda: top.cumsum(0))
    _raises_at_read(lambda: wg.tensor([3e9, 1.0], device="webgpu").long())
    _raises_at_read(lambda: wg.tensor([float("nan")], device="webgpu").long())
    with pytest.raises(RuntimeError, match="the scalar 1099511627776 is outside the int32 range"):
        top + 2**40  # a scalar beyond int32 is refused on the host
    with pytest.raises(RuntimeError, match=RANGE):
        wg.randint(0, 2**40, (2,), device="webgpu")
    assert (top - 5).tolist() == [BIG - 6, 0]  # the error was raised once; the runtime goes on


@webgpu
def test_webgpu_int64_results_within_int32_are_exact():
    """Intermediate values are exact too: a sum or product whose partial results leave the range but whose
    total does not is right, as on the CPU."""
    cases = [
        lambda m, d: m.tensor([BIG - 1, 1, -5], device=d).sum(),
        lambda m, d: m.tensor([BIG - 1, -5, 1], device=d).cumsum(0),
        lambda m, d: m.tensor([-BIG, 1], device=d).sum(),
        lambda m, d: m.tensor([65536, 65536, 0], device=d).prod(),
        lambda m, d: m.tensor([65536, -32768], device=d).prod(),
        lambda m, d: m.tensor([46340, -46341], device=d) * m.tensor([46340, 46340], device=d),
        lambda m, d: m.tensor([BIG - 10, 7], device=d) + m.tensor([9, -8], device=d),
        lambda m, d: m.tensor([-BIG + 1, 7], device=d).abs(),
        lambda m, d: m.tensor([-2, 3], device=d) ** m.tensor([31, 19], device=d),
        lambda m, d: m.tensor([-BIG, 9], device=d) // 2,
        lambda m, d: m.tensor([2.0e9, -2.1e9], device=d).long(),
        lambda m, d: m.tensor([7, 8], device=d).clamp(max=2**40),
    ]
    for case in cases:
        _same(case(wg, "webgpu"), case(torch, "cpu"))


@webgpu
@pytest.mark.parametrize("software", [False, True], ids=["gpu", "software"])
def test_webgpu_int64_sums_in_every_kernel_shape(software, monkeypatch):
    """reduce.wgsl's exact int64 sums through one pass and through chunks, and scan.wgsl's int64 prefix sums
    (a row a workgroup, a thread a column), on GPU-shaped and software-shaped plans."""
    from webgrad._backends.webgpu import runtime
    monkeypatch.setattr(runtime.default_runtime(), "software", software)
    rng = np.random.default_rng(1)
    for shape, dim in [((200_003,), 0), ((3, 70_001), 1), ((40_000, 2), 0), ((5, 7), 1)]:
        a = rng.integers(-(2**20), 2**20, shape, dtype=np.int64)
        t = wg.tensor(a, device="webgpu")
        assert t.sum(dim).tolist() == a.sum(dim).tolist()
        assert t.cumsum(dim).tolist() == a.cumsum(dim).tolist()
    big = wg.full((70_001,), 2**16, dtype=wg.long, device="webgpu")
    _raises_at_read(lambda: big.sum())  # 2**16 * 70001 > 2**31, found through the chunks
    _raises_at_read(lambda: big.cumsum(0))
    assert (big - 2**16).sum().item() == 0


# ===================================================================== float64 and bfloat16
@webgpu
def test_float64_to_webgpu_says_to_convert():
    with pytest.raises(TypeError, match=r"no float64.*\.float\(\)"):
        wg.from_numpy(np.zeros(3)).to("webgpu")
    assert wg.from_numpy(np.zeros(3)).float().to("webgpu").dtype is wg.float32


@webgpu
def test_bfloat16_goes_to_webgpu_as_it_is():
    assert wg.zeros(2, dtype=dtypes.bfloat16).to("webgpu").dtype is wg.bfloat16
    assert wg.zeros(2, dtype=dtypes.bfloat16).float().to("webgpu").dtype is wg.float32


# ===================================================================== printing
@pytest.mark.parametrize("make", [lambda m: m.tensor([1, 2]), lambda m: m.tensor([1, 2], dtype=m.int32),
                                  lambda m: m.tensor([], dtype=m.long), lambda m: m.tensor(3)])
def test_repr_as_torch(make):
    assert repr(make(wg)) == repr(make(torch)).replace("torch.", "webgrad.")
