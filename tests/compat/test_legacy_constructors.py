"""PyTorch's legacy constructors and type names against the real torch: torch.FloatTensor and its kin,
Tensor.type() in its forms, torch.autograd.Variable and torch.bfloat16 in those forms."""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import webgrad as wg  # noqa: E402

NAMES = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ByteTensor", "BoolTensor"]


def _dtype_name(d):
    return str(d).split(".")[-1]


@pytest.mark.parametrize("name", NAMES)
def test_typed_constructors_make_what_torch_makes(name):
    ours, theirs = getattr(wg, name), getattr(torch, name)
    assert _dtype_name(ours.dtype) == _dtype_name(theirs.dtype) or (name == "LongTensor" and ours.dtype is wg.long)
    for args in ((2, 3), (4,), (), (wg.Size([2, 1]),)):
        targs = tuple(torch.Size(a) if isinstance(a, wg.Size) else a for a in args)
        t = ours(*args)
        assert tuple(t.shape) == tuple(theirs(*targs).shape) and t.dtype is ours.dtype
    data = [[1, 0], [3, 2]] if name != "BoolTensor" else [[True, False], [False, True]]
    assert ours(data).tolist() == theirs(data).tolist()
    assert ours(np.array(data)).tolist() == theirs(np.array(data)).tolist()
    assert ours(data).dtype is ours.dtype
    assert not issubclass(ours, wg.Tensor) and not issubclass(theirs, torch.Tensor)  # factories, as in torch


def test_isinstance_asks_for_the_dtype_as_in_torch():
    for name in NAMES:
        for made in NAMES:
            if getattr(wg, name).dtype is getattr(wg, made).dtype and name != made:
                continue  # two legacy names of one webgrad dtype (int64 and int32 while webgrad.long is int32)
            t, r = getattr(wg, made)([1]), getattr(torch, made)([1])
            assert isinstance(t, getattr(wg, name)) == isinstance(r, getattr(torch, name)), (name, made)
    assert isinstance(wg.ones(2), wg.FloatTensor) and not isinstance([1.0], wg.FloatTensor)
    assert isinstance(wg.nn.Parameter(wg.ones(2)), wg.FloatTensor)  # a Parameter is a float tensor too


def test_typed_constructors_refuse_what_torch_refuses():
    with pytest.raises(TypeError):
        torch.FloatTensor(torch.tensor([1, 2]))
    with pytest.raises(TypeError, match="expected a float32 tensor"):
        wg.FloatTensor(wg.tensor([1, 2]))
    x = wg.ones(3)
    assert wg.FloatTensor(x) is x  # a tensor of the type itself comes back (torch shares it)
    for bad in (2.5, "ab"):
        with pytest.raises(TypeError):
            torch.FloatTensor(bad)
        with pytest.raises(TypeError, match="must be a sequence"):
            wg.FloatTensor(bad)


def test_cuda_types_exist_and_refuse_to_make_tensors():
    assert not isinstance(wg.ones(2), wg.cuda.FloatTensor) and not isinstance(torch.ones(2), torch.cuda.FloatTensor)
    with pytest.raises(TypeError):
        torch.cuda.FloatTensor(2)
    with pytest.raises(TypeError, match="no CUDA"):
        wg.cuda.FloatTensor(2)
    with pytest.raises(TypeError, match="no CUDA"):
        wg.cuda.LongTensor([1])
    # the idiom of GAN scripts: the CPU type is taken where CUDA is not available
    assert (wg.cuda.FloatTensor if wg.cuda.is_available() else wg.FloatTensor) is wg.FloatTensor


@pytest.mark.parametrize("name", NAMES)
def test_type_names_the_type_as_torch(name):
    if name == "IntTensor" and wg.IntTensor.dtype is wg.LongTensor.dtype:
        pytest.skip("webgrad.long is int32 here: an int32 tensor answers 'torch.LongTensor'")
    assert getattr(wg, name)([1]).type() == getattr(torch, name)([1]).type()


def test_type_converts_as_torch():
    values = [1.7, -2.2, 0.0]
    t, r = wg.tensor(values), torch.tensor(values)
    for target in ("LongTensor", "IntTensor", "DoubleTensor", "BoolTensor", "ByteTensor"):
        a = t.abs() if target == "ByteTensor" else t
        b = r.abs() if target == "ByteTensor" else r
        assert a.type(getattr(wg, target)).tolist() == b.type(getattr(torch, target)).tolist()
        assert a.type(f"torch.{target}").tolist() == b.type(f"torch.{target}").tolist()
        assert a.type(getattr(wg, target)).dtype is getattr(wg, target).dtype
    assert t.type(wg.float16, non_blocking=True).dtype is wg.float16
    assert t.type(wg.float32) is t and r.type(torch.float32) is r  # no conversion, the same tensor
    assert t.type(wg.Tensor).dtype is wg.float32
    with pytest.raises(RuntimeError):
        r.type("torch.cuda.FloatTensor")
    with pytest.raises(RuntimeError, match="no CUDA"):
        t.type("torch.cuda.FloatTensor")
    with pytest.raises(RuntimeError, match="no CUDA"):
        t.type(wg.cuda.FloatTensor)


def test_variable_is_the_tensor_detached_as_modern_torch():
    a = wg.ones(3, requires_grad=True)
    b = a * 2
    v, rv = wg.autograd.Variable(b), torch.autograd.Variable(torch.ones(3, requires_grad=True) * 2)
    assert v.grad_fn is None and v.requires_grad is False and rv.requires_grad is False
    v2 = wg.autograd.Variable(b, requires_grad=True)
    assert v2.requires_grad and v2.is_leaf
    (v2 * v2).sum().backward()
    assert v2.grad.tolist() == [4.0, 4.0, 4.0] and a.grad is None  # no history back to a
    x = wg.zeros(2)
    wg.autograd.Variable(x).fill_(5.0)  # shares x's data, as torch's
    assert x.tolist() == [5.0, 5.0]
    assert isinstance(wg.ones(1), wg.autograd.Variable) and isinstance(torch.ones(1), torch.autograd.Variable)
    with pytest.raises(TypeError, match="has to be a tensor"):
        wg.autograd.Variable([1, 2])
    with pytest.raises(RuntimeError):
        wg.autograd.Variable(wg.tensor([1, 2]), requires_grad=True)  # integers take no gradient, as in torch
    with pytest.warns(UserWarning, match="volatile was removed"):
        wg.autograd.Variable(wg.ones(1), volatile=True)


def test_bfloat16_in_its_legacy_forms():
    assert repr(wg.bfloat16) == "webgrad.bfloat16" and wg.bfloat16 != wg.float16
    for make in (lambda: wg.zeros(2, dtype=wg.bfloat16), lambda: wg.ones(2).to(wg.bfloat16),
                 lambda: wg.ones(2).type(wg.bfloat16), lambda: wg.FloatTensor(2).type("torch.bfloat16")):
        assert make().dtype is wg.bfloat16
    assert wg.FloatTensor(2).type("torch.bfloat16").type() == torch.FloatTensor(2).type(torch.bfloat16).type()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with wg.autocast("cpu", dtype=wg.float64) as ctx:  # PyTorch's behaviour for a dtype a device lacks
            assert not ctx._enabled
    assert any("not supported" in str(w.message) for w in caught)
    assert wg.cuda.is_bf16_supported() is False


def test_legacy_tensor_constructor_forms():
    for args in ((2, 3), ([1, 2],), ((1.5, 2),)):
        assert tuple(wg.Tensor(*args).shape) == tuple(torch.Tensor(*args).shape)
    assert wg.Tensor([1, 2]).tolist() == torch.Tensor([1, 2]).tolist()
