"""Every call form torch accepts for the creation functions (zeros/ones/empty/rand/randn/full/randint), the
Tensor conveniences scripts use (new_*, norm, is_cuda ...), against the real torch: shapes, dtypes,
values where they are defined, and the exception type of what torch refuses."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import webgrad as wg  # noqa: E402
from helpers import DEVICES  # noqa: E402

SIZE_FORMS = ["2, 3", "(2, 3)", "[2, 3]", "size=(2, 3)", "size=[4]", "{S}([2, 3])", "()", "{T}(3)",
              "2, 3, requires_grad=True", "(2, 3), dtype={M}.float64", "2, layout={M}.strided", "2, pin_memory=False"]
BAD_SIZE_FORMS = ["2.0", "size=2", "-1", "(2,), 3", "2, size=(3,)", "2, [3]"]


def _call(module, fn, form):
    names = {"M": "module", "S": "module.Size", "T": "module.tensor"}
    if module is wg:
        form = form.replace("{M}.strided", "'strided'")  # webgrad has no layout objects: the name is accepted
    return eval(f"module.{fn}({form.format(**names)})", {"module": module})


def _dtype(t):
    return str(t.dtype).split(".")[-1]


@pytest.mark.parametrize("fn", ["zeros", "ones", "empty", "rand", "randn"])
@pytest.mark.parametrize("form", SIZE_FORMS)
def test_size_forms_as_torch(fn, form):
    ours, theirs = _call(wg, fn, form), _call(torch, fn, form)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert _dtype(ours) == _dtype(theirs) and ours.requires_grad == theirs.requires_grad
    if fn in ("zeros", "ones"):
        assert ours.tolist() == theirs.tolist()


@pytest.mark.parametrize("fn", ["zeros", "ones", "empty", "rand", "randn"])
@pytest.mark.parametrize("form", BAD_SIZE_FORMS)
def test_bad_sizes_get_torchs_exception_type(fn, form):
    with pytest.raises(Exception) as theirs:
        _call(torch, fn, form)
    with pytest.raises(theirs.type):
        _call(wg, fn, form)


def test_out_and_layout_arguments():
    out = wg.empty(2, 3)
    assert wg.ones(2, 3, out=out) is out and out.tolist() == [[1.0] * 3] * 2
    assert wg.zeros(size=(4,), out=out) is out and out.tolist() == [0.0] * 4  # resized, as torch resizes
    with pytest.raises(RuntimeError, match="layout"):
        wg.zeros(2, layout="sparse_coo")
    with pytest.raises(RuntimeError, match="pin_memory"):
        wg.ones(2, pin_memory=True)


RANDINT_FORMS = [("5, (3,)", 0, 5), ("0, 5, (3,)", 0, 5), ("5, size=(3,)", 0, 5), ("low=0, high=5, size=(3,)", 0, 5),
                 ("high=5, size=(3,)", 0, 5), ("3, 10, (2, 2)", 3, 10), ("5, [3]", 0, 5), ("5, {M}.Size([3])", 0, 5),
                 ("-3, 0, (4,)", -3, 0), ("0, 5, size=(2,)", 0, 5), ("5, (3,), dtype={M}.int32", 0, 5),
                 ("5, (3,), dtype={M}.float32", 0, 5), ("2, high=7, size=(5,)", 2, 7)]
BAD_RANDINT_FORMS = ["5", "5, 3", "5., (3,)", "5, 2, (3,)", "5, (3,), requires_grad=True", "1, 2, 3, 4",
                     "5, (3,), high=6"]


@pytest.mark.parametrize("form,low,high", RANDINT_FORMS)
def test_randint_forms_as_torch(form, low, high):
    ours, theirs = _call(wg, "randint", form), _call(torch, "randint", form)
    assert tuple(ours.shape) == tuple(theirs.shape)
    if _dtype(theirs) == "int64":
        assert ours.dtype is wg.long
    else:
        assert _dtype(ours) == _dtype(theirs)
    values = np.asarray(ours.tolist()).ravel()
    assert values.min() >= low and values.max() < high


@pytest.mark.parametrize("form", BAD_RANDINT_FORMS)
def test_bad_randint_gets_torchs_exception_type(form):
    with pytest.raises(Exception) as theirs:
        _call(torch, "randint", form)
    with pytest.raises(theirs.type):
        _call(wg, "randint", form)


def test_randint_is_reproducible_and_takes_a_generator():
    wg.manual_seed(3)
    a = wg.randint(0, 100, (50,)).tolist()
    wg.manual_seed(3)
    assert wg.randint(100, (50,)).tolist() == a
    g = wg.Generator().manual_seed(1)
    assert wg.randint(100, (5,), generator=g).tolist() == wg.randint(100, (5,), generator=wg.Generator().manual_seed(1)).tolist()


@pytest.mark.parametrize("form", ["(2,), 3", "[2], 3.", "size=(2,), fill_value=1", "(2,), True", "(), 1.5",
                                  "{S}([2]), 1"])
def test_full_forms_as_torch(form):
    ours, theirs = _call(wg, "full", form), _call(torch, "full", form)
    assert tuple(ours.shape) == tuple(theirs.shape) and ours.tolist() == theirs.tolist()
    assert _dtype(ours) == _dtype(theirs) or (_dtype(theirs) == "int64" and ours.dtype is wg.long)


# ----------------------------------------------------------------- Tensor conveniences
@pytest.mark.parametrize("device", DEVICES)
def test_new_methods_as_torch(device):
    x, r = wg.ones(3, device=device), torch.ones(3)
    xi, ri = wg.tensor([1, 2], device=device), torch.tensor([1, 2])
    cases = [("new_zeros", (2, 3), {}), ("new_zeros", ((2, 3),), {}), ("new_ones", (4,), {}),
             ("new_zeros", (), {"size": (2,)}), ("new_empty", (2,), {}), ("new_full", ((2,), 5), {}),
             ("new_tensor", ([1, 2],), {}), ("new_ones", (2,), {"dtype": "float64" if device == "cpu" else "float16"})]
    for name, args, kwargs in cases:
        for a, b in ((x, r), (xi, ri)):
            if "dtype" in kwargs and a is xi:
                continue
            if "dtype" in kwargs and kwargs["dtype"] == "float16" and not _has_f16(device):
                continue
            k_ours = {k: getattr(wg, v) if k == "dtype" else v for k, v in kwargs.items()}
            k_theirs = {k: getattr(torch, v) if k == "dtype" else v for k, v in kwargs.items()}
            ours, theirs = getattr(a, name)(*args, **k_ours), getattr(b, name)(*args, **k_theirs)
            assert tuple(ours.shape) == tuple(theirs.shape), name
            assert ours.device == a.device, name
            assert _dtype(ours) == _dtype(theirs) or (_dtype(theirs) == "int64" and ours.dtype is wg.long), name
            if name != "new_empty":
                assert ours.tolist() == theirs.tolist(), name
    assert x.new_zeros(2, requires_grad=True).requires_grad
    assert not wg.ones(3, requires_grad=True).new_ones(2).requires_grad
    assert xi.new_full((2,), 5.5).tolist() == ri.new_full((2,), 5.5).tolist()  # cast to the integer dtype
    with pytest.warns(UserWarning, match="sourceTensor"):
        x.new_tensor(x)


def _has_f16(device):
    return device == "cpu" or wg.device("webgpu").backend.runtime.has_f16


def test_device_questions_as_torch():
    x, r = wg.ones(2), torch.ones(2)
    for name in ("is_cuda", "is_cpu", "is_mps", "is_xpu", "is_meta"):
        assert getattr(x, name) == getattr(r, name), name


NORM_CASES = [(p, dim, keepdim) for p in ("fro", 2, 1, 0, math.inf, -math.inf, 3, 0.5, 1.5)
              for dim, keepdim in ((None, False), (1, False), ((0, 2), True), (-1, True))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("p,dim,keepdim", NORM_CASES)
def test_norm_values_and_gradients_as_torch(device, p, dim, keepdim):
    a = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    a[1] = 0.0  # whole slices of zeros: torch's gradient is 0 there (sqrt's derivative would be inf)
    a[0, 0, :2] = 5.0  # ties for the inf-norm share its gradient
    t, r = wg.tensor(a, requires_grad=True, device=device), torch.tensor(a, requires_grad=True)
    ours, theirs = t.norm(p, dim, keepdim), r.norm(p, dim, keepdim)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-5, atol=1e-5)
    g = np.random.default_rng(1).standard_normal(tuple(theirs.shape)).astype(np.float32)
    ours.backward(wg.tensor(g, device=device))
    theirs.backward(torch.tensor(g))
    if r.grad is None:  # p=0 counts non-zeros: no gradient reaches the input
        assert t.grad is None
    else:
        np.testing.assert_allclose(t.grad.numpy(), r.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_torch_norm_function_and_errors():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    s, r = wg.tensor(3.0, requires_grad=True), torch.tensor(3.0, requires_grad=True)
    s.norm(2, 0).backward()  # a 0-d input reduced over dim 0
    r.norm(2, 0).backward()
    assert s.grad.tolist() == r.grad.tolist()
    assert np.allclose(wg.norm(wg.tensor(a)).item(), torch.norm(torch.tensor(a)).item())
    assert np.allclose(wg.norm(wg.tensor(a), dim=1).tolist(), torch.norm(torch.tensor(a), dim=1).tolist())
    assert np.allclose(wg.tensor(a).norm(2, 1, keepdim=True).tolist(), torch.tensor(a).norm(2, 1, keepdim=True).tolist())
    out = wg.empty(())
    assert wg.norm(wg.tensor(a), out=out) is out
    with pytest.raises(RuntimeError):
        torch.tensor([1, 2]).norm()
    with pytest.raises(RuntimeError, match="floating point"):
        wg.tensor([1, 2]).norm()
    assert np.allclose(wg.tensor(a).norm("nuc").item(), torch.tensor(a).norm("nuc").item())  # singular values


@pytest.mark.parametrize("make", [
    lambda np: [np.int64(1), 2], lambda np: [np.int32(3)], lambda np: [np.int32(3), 5], lambda np: [np.float64(1.5), 2],
    lambda np: [np.float32(1.5), 2.0], lambda np: [np.bool_(True), False], lambda np: [[np.int64(1)], [2]],
    lambda np: [np.float16(1), 2], lambda np: [np.uint8(3), 4]])
def test_numpy_scalars_in_a_list_carry_their_dtype_as_torchs(make):
    """torch.tensor([np.int64(1), 2]) is int64 (a list of NumPy integers indexes, as gather's index), not float32."""
    ours, theirs = wg.tensor(make(np)), torch.tensor(make(np))
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.") and ours.tolist() == theirs.tolist()


ARRAY_LISTS = {"one-hot rows": lambda np: [np.eye(3)[0], np.eye(3)[2]],
               "int rows": lambda np: [np.asarray([1, 2]), np.asarray([3, 4])],
               "a float32 matrix": lambda np: [np.eye(2, dtype=np.float32)],
               "bool rows, nested": lambda np: [[np.zeros(2, dtype=np.bool_)], [np.ones(2, np.bool_)]]}


@pytest.mark.parametrize("ctor, data", [(c, d) for c in ("tensor", "Tensor", "FloatTensor") for d in ARRAY_LISTS]
                         + [("LongTensor", "int rows")])
@pytest.mark.filterwarnings("ignore:Creating a tensor from a list of numpy.ndarrays")
def test_lists_of_numpy_arrays_as_torchs(ctor, data):
    """torch.Tensor([np.eye(n)[i], ...]) (one-hot rows built in a loop): the arrays are rows, their dtype carried."""
    ours, theirs = getattr(wg, ctor)(ARRAY_LISTS[data](np)), getattr(torch, ctor)(ARRAY_LISTS[data](np))
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
    assert tuple(ours.shape) == tuple(theirs.shape) and ours.tolist() == theirs.tolist()
