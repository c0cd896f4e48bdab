"""The op table (webgrad/ops/table.py) is the single source of elementwise ops: a record added there, and
nowhere else, is dispatched on the CPU and on WebGPU, differentiated, exposed, and checked by the shared
parity rows; every record's exposure matches PyTorch's names, signatures and Module reprs."""

import inspect

import numpy as np
import pytest

import webgrad
import webgrad.nn as nn
import webgrad.nn.functional as F
from helpers import DEVICES, check_parity, gradcheck
from op_cases import make_inputs, table_case, table_cases
from webgrad.ops import api, table
from webgrad._backends import kernels  # noqa: E402

torch = pytest.importorskip("torch")


@pytest.fixture
def cube():
    """A new op that exists only as a record registered here, at test time."""
    op = table.Unary("cube", "x * x * x", lambda x, a, b: x ** 3, "3.0 * g * x * x", lambda x, y, a, b: 3.0 * x * x,
                     result=table.SAME, int_wgsl="x * x * x", expose=("function", "method", "inplace"))
    api.register(op)
    if "webgpu" in DEVICES:
        webgrad.webgpu.reset()  # the next WebGPU device compiles elementwise.wgsl from the new table
    yield op
    table.unregister("cube")
    for owner, name in ((webgrad.Tensor, "cube"), (webgrad.Tensor, "cube_"), (webgrad, "cube")):
        if hasattr(owner, name):
            delattr(owner, name)
    api.FUNCTIONS.pop("cube", None)
    if "webgpu" in DEVICES:
        webgrad.webgpu.reset()


def test_a_record_is_the_whole_op(cube, device):
    # picked up by the parity rows with no other file touched
    assert "cube" in [name for name, _, _ in table_cases()]
    name, fn, specs = table_case(cube)
    arrays = make_inputs(specs)
    gradcheck(lambda *xs: fn(webgrad, F, *xs), *arrays, device=device)
    if device != "cpu":
        check_parity(lambda *xs: fn(webgrad, F, *xs), *arrays, device=device)
    # exposed as the record says, with an exact integer form and an in-place method
    x = webgrad.tensor([[1, -2, 3]], dtype=webgrad.int32, device=device)
    assert webgrad.cube(x).tolist() == [[1, -8, 27]] and webgrad.cube(x).dtype is webgrad.int32
    y = webgrad.tensor([0.5, -2.0], device=device)
    y.cube_()
    assert y.tolist() == [0.125, -8.0]


# --------------------------------------------------------------------------- the table against PyTorch
_UNARY_EXPOSED = [op for op in table.UNARY.values() if op.expose]


def _torch_function(op):
    """PyTorch's callable for a record's most specific exposure."""
    if "functional" in op.expose:
        return getattr(torch.nn.functional, op.name)
    if op.expose == {"special"}:
        return getattr(torch.special, op.name)
    return getattr(torch, op.name)


@pytest.mark.parametrize("op", [op for op in _UNARY_EXPOSED if "functional" in op.expose], ids=lambda op: op.name)
def test_functional_signature_matches_torch(op):
    ours = list(inspect.signature(getattr(F, op.name)).parameters)
    try:
        theirs = list(inspect.signature(getattr(torch.nn.functional, op.name)).parameters)
    except ValueError:  # a C builtin (softplus, logsigmoid): its documented signature
        theirs = ["input"] + [n for n, _ in op.params]
    assert ours == theirs


@pytest.mark.parametrize("op", [op for op in table.UNARY.values() if op.module], ids=lambda op: op.name)
def test_module_matches_torch(op):
    args = op.test_args
    ours, theirs = getattr(nn, op.module)(*args), getattr(torch.nn, op.module)(*args)
    assert repr(ours) == repr(theirs)
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32) * 3
    np.testing.assert_allclose(ours(webgrad.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)
    if "inplace_arg" in op.expose:
        assert repr(getattr(nn, op.module)(*args, inplace=True)) == repr(getattr(torch.nn, op.module)(*args, inplace=True))


@pytest.mark.parametrize("op", [op for op in _UNARY_EXPOSED if {"inplace", "inplace_arg"} & op.expose],
                         ids=lambda op: op.name)
def test_inplace_forms(op, device):
    x = np.random.default_rng(1).uniform(0.5, 2.0, (3, 4)).astype(np.float32)
    expected = _torch_function(op)(torch.tensor(x), *op.test_args).numpy()
    t = webgrad.tensor(x, device=device)
    if "inplace" in op.expose:
        getattr(t, op.name + "_")(*op.test_args)
    else:
        getattr(F, op.name)(t, *op.test_args, inplace=True)
    np.testing.assert_allclose(t.numpy(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", [op for op in table.UNARY.values()
                                if op.int_exact and op.expose and op.result != table.BOOL], ids=lambda op: op.name)
def test_integer_forms_are_exact(op, device):
    values = [-7, -3, -1, 0, 1, 2, 5, 1000]
    x = webgrad.tensor(values, dtype=webgrad.int32, device=device)
    out = webgrad.ops.elementwise.apply_unary(op, x, *op.test_args)
    expected = _torch_function(op)(torch.tensor(values, dtype=torch.int32), *op.test_args)
    assert out.dtype is webgrad.int32 and out.tolist() == expected.tolist()


_SPECIALS = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-30, -1e-30, 88.0, -88.0, 1e-4, -1e-4, 0.7, -2.5]


@pytest.mark.parametrize("op", _UNARY_EXPOSED, ids=lambda op: op.name)
def test_special_values_on_every_device(op, device):
    specials = _SPECIALS
    if True:
        expected = _torch_function(op)(torch.tensor(specials), *op.test_args).numpy()
        ours = webgrad.ops.elementwise.apply_unary(op, webgrad.tensor(specials, device=device), *op.test_args).numpy()
        np.testing.assert_allclose(ours.astype(np.float64), expected.astype(np.float64), rtol=2e-5, atol=1e-6,
                                   err_msg=f"{op.name} on {device}")


def test_unknown_op_names_the_table(device):
    backend = webgrad.device(device).backend
    x = webgrad.ones(2, device=device)
    with pytest.raises(ValueError, match="op table"):
        kernels.unary(backend, "no_such_op", x._view, x._view)
