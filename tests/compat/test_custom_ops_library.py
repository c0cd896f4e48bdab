"""torch.library's Python custom operators and torch.ops' namespaces, each checked against torch itself:
custom_op with register_autograd / register_kernel, Library.define + impl, torch.ops.<ns>.<name>.default,
torch.ops.aten.<name>.<overload>, and the errors PyTorch raises (no autograd formula, an output aliasing an
input, a missing namespace or annotation)."""

import itertools

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES

_count = itertools.count()


def _name(lib):
    return f"wgtest{next(_count)}::{'t' if lib is torch else 'w'}sin"


def _define_sin(lib, with_autograd=True):
    @lib.library.custom_op(_name(lib), mutates_args=())
    def mysin(x: lib.Tensor, scale: float = 1.0) -> lib.Tensor:
        return x.sin() * scale

    if with_autograd:
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.scale = inputs[1]

        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * x.cos() * ctx.scale, None
        mysin.register_autograd(backward, setup_context=setup_context)
    return mysin


@pytest.mark.parametrize("device", DEVICES)
def test_custom_op_forward_backward_and_torch_ops_name(device):
    a = np.linspace(-1, 1, 6, dtype=np.float32)
    got, want = [], []
    for lib, out, dev in ((torch, want, "cpu"), (wg, got, device)):
        op = _define_sin(lib)
        x = lib.tensor(a, device=dev, requires_grad=True)
        y = op(x, scale=2.0)
        ns, name = op._qualname.split("::")
        z = getattr(getattr(lib.ops, ns), name).default(x, 2.0)
        (y.sum() + z.sum()).backward()
        out += [y.detach().cpu().numpy(), x.grad.cpu().numpy(), type(y.grad_fn).__name__.split("For_")[0]]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
    assert got[2] == want[2] == "GeneratedBackward"


def test_backward_without_autograd_formula_raises_runtime_error_as_torch():
    for lib in (torch, wg):
        op = _define_sin(lib, with_autograd=False)
        x = lib.ones(3, requires_grad=True)
        y = op(x)
        assert y.requires_grad
        with pytest.raises(RuntimeError, match="no autograd formula was registered"):
            y.sum().backward()
        assert not op(x.detach()).requires_grad


def test_errors_as_torch():
    for lib in (torch, wg):
        def annotated(x: lib.Tensor) -> lib.Tensor:
            return x.clone()
        with pytest.raises(ValueError):
            lib.library.custom_op("nonamespace", mutates_args=())(annotated)
        with pytest.raises(ValueError, match="type annotation"):
            lib.library.custom_op(_name(lib), mutates_args=())(lambda x: x)

        @lib.library.custom_op(_name(lib), mutates_args=())
        def same(x: lib.Tensor) -> lib.Tensor:
            return x
        with pytest.raises(RuntimeError, match="must not also be an input"):
            same(lib.ones(2))
        with pytest.raises(AttributeError):
            lib.ops.aten.no_such_op_anywhere
    with pytest.raises(TypeError):
        wg.library.custom_op(_name(wg))(lambda x: x)  # mutates_args is required, as torch's


def test_register_kernel_picks_the_device_and_mutation_is_seen():
    for lib in (torch, wg):
        @lib.library.custom_op(_name(lib), mutates_args=("out",))
        def fill_twice(x: lib.Tensor, out: lib.Tensor) -> None:
            out.copy_(x * 2)

        @fill_twice.register_kernel("cpu")
        def _(x, out):
            out.copy_(x * 3)
        out = lib.zeros(2)
        fill_twice(lib.ones(2), out)
        assert out.tolist() == [3.0, 3.0]


def test_library_define_and_impl_composite_is_differentiated_through_its_ops():
    got = []
    for lib in (torch, wg):
        ns = f"wgtestlib{next(_count)}"
        library = lib.library.Library(ns, "DEF")
        library.define("cube(Tensor x) -> Tensor")
        library.impl("cube", lambda x: x * x * x, "CompositeImplicitAutograd")
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        getattr(lib.ops, ns).cube(x).sum().backward()
        got.append(x.grad.tolist())
    assert got[0] == got[1] == [3.0, 12.0]


@pytest.mark.parametrize("device", DEVICES)
def test_aten_overloads_call_the_same_functions(device):
    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    for call in (lambda L, x: L.ops.aten.add.Tensor(x, x, alpha=2),
                 lambda L, x: L.ops.aten.sum.dim_IntList(x, [1]),
                 lambda L, x: L.ops.aten.mm.default(x, x.t()),
                 lambda L, x: L.ops.aten.view.default(x, [4, 3]),
                 lambda L, x: L.ops.aten._softmax.default(x, 1, False),
                 lambda L, x: L.ops.aten.relu(x - 0.5),
                 lambda L, x: L.ops.aten.slice.Tensor(x, 1, 1, 3),
                 lambda L, x: L.ops.aten.embedding.default(x, L.tensor([2, 0], device=x.device)),
                 lambda L, x: L.ops.aten._to_copy.default(x, dtype=L.float16),
                 lambda L, x: L.ops.aten.index.Tensor(x, [L.tensor([0, 2], device=x.device)])):
        want = call(torch, torch.from_numpy(a))
        got = call(wg, wg.tensor(a, device=device))
        assert got.dtype.__repr__().split(".")[-1] == str(want.dtype).split(".")[-1]
        np.testing.assert_allclose(got.float().cpu().numpy(), want.float().numpy(), rtol=1e-3, atol=1e-5)
    assert repr(wg.ops.aten.add) == repr(torch.ops.aten.add) == "<OpOverloadPacket(op='aten.add')>"
    assert wg.ops.aten.add.Tensor.name() == torch.ops.aten.add.Tensor.name() == "aten::add.Tensor"


def test_load_library_is_refused_with_the_reason():
    with pytest.raises(OSError, match="compiled operator libraries"):
        wg.ops.load_library("libcustom.so")


def test_op_families_still_import_as_submodules():
    from webgrad.ops import table, namespaces
    assert hasattr(table, "OPS") or table.__name__ == "webgrad.ops.table"
    assert namespaces.__name__ == "webgrad.ops.namespaces"
    with pytest.raises(AttributeError):
        wg.ops.not_a_namespace_anyone_defined
