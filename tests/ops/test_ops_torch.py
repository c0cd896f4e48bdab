"""Every op against PyTorch (the reference for names and numerics): forward values and gradients, in
float64 on the CPU, from the same expression written once for both libraries (tests/op_cases.py)."""

import numpy as np
import pytest

import webgrad
import webgrad.nn.functional as F
from op_cases import CASES, make_inputs

torch = pytest.importorskip("torch")


def _run(lib, functional, fn, arrays):
    if lib is torch:
        xs = [torch.tensor(a, dtype=torch.float64 if a.dtype.kind == "f" else torch.int64,
                           requires_grad=a.dtype.kind == "f") for a in arrays]
    else:
        xs = [webgrad.tensor(a, dtype=webgrad.float64 if a.dtype.kind == "f" else None,
                             requires_grad=a.dtype.kind == "f") for a in arrays]
    out = fn(lib, functional, *xs)
    weight = np.random.default_rng(1).standard_normal(tuple(out.shape))
    (out * lib.tensor(weight, dtype=lib.float64)).sum().backward()
    grads = [x.grad for x in xs if a_is_float(x)]
    to_np = (lambda t: t.detach().numpy()) if lib is torch else (lambda t: t.numpy())
    return to_np(out.detach()), [to_np(g) if g is not None else None for g in grads]


def a_is_float(x):
    return x.dtype.is_floating_point if hasattr(x.dtype, "is_floating_point") else x.dtype.is_floating


@pytest.mark.parametrize("name,fn,specs", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(name, fn, specs):
    arrays = make_inputs(specs)
    ours, our_grads = _run(webgrad, F, fn, arrays)
    ref, ref_grads = _run(torch, torch.nn.functional, fn, arrays)
    assert ours.shape == tuple(ref.shape)
    np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-9, err_msg=f"{name}: forward")
    for i, (g, rg) in enumerate(zip(our_grads, ref_grads)):
        assert (g is None) == (rg is None), f"{name}: input {i} gradient presence differs"
        if g is not None:
            np.testing.assert_allclose(g, rg, rtol=1e-6, atol=1e-9, err_msg=f"{name}: gradient of input {i}")


@pytest.mark.parametrize("case", ["zero-dim", "empty list", "shapes"])
def test_cat_refuses_what_torch_refuses_with_its_exception(case):
    def args(lib):
        return {"zero-dim": [lib.tensor(1.0), lib.tensor(2.0)], "empty list": [],
                "shapes": [lib.ones(2, 3), lib.ones(2, 4)]}[case]
    with pytest.raises(Exception) as ref:
        torch.cat(args(torch))
    with pytest.raises(type(ref.value)) as ours:
        webgrad.cat(args(webgrad))
    if case == "zero-dim":
        assert str(ours.value) == str(ref.value)
