"""Tensor subclasses and the __torch_function__ protocol (webgrad/overrides.py), each snippet run on the real
torch and on webgrad: as_subclass and _make_subclass, results of the subclass, the documentation's examples
(a logging subclass, ScalarTensor, a metadata wrapper, __new__ patterns), dispatch order, the switches,
TorchFunctionMode, autograd through a subclass and parameters of a subclass."""

import functools
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import webgrad as wg  # noqa: E402
from webgrad import overrides  # noqa: E402

LIBS = (torch, wg)


@pytest.fixture(autouse=True, scope="module")
def _leave_webgrad_as_found():
    """The subclasses below install the dispatching wrappers for this process: take them off afterwards."""
    yield
    overrides._uninstall()


def _both(snippet):
    """snippet(lib) on torch and on webgrad: the two answers."""
    return snippet(torch), snippet(wg)


def _names(values):
    return [type(v).__name__ for v in values]


def test_results_of_methods_functions_operators_and_indexing_are_the_subclass():
    def snippet(lib):
        class Sub(lib.Tensor):
            pass
        x = lib.arange(6.0).reshape(2, 3).as_subclass(Sub)
        y = lib.ones(2, 3)
        results = [x + 1, 1 + x, x * y, y - x, -x, x @ y.T, x[0], x[:, 1:], x.sum(), x.exp(), x.view(3, 2), x.T,
                   x.detach(), x.clone(), x.data, x.float(), lib.add(x, y), lib.cat([y, x]), lib.stack([x, x]),
                   lib.nn.functional.relu(x), lib.nn.functional.softmax(x, dim=1), x.max(1).values, x.max(1).indices,
                   *x.split(1), *lib.chunk(x, 3, dim=1), x == 1, lib.where(x > 2, x, y)]
        z = lib.zeros(3).as_subclass(Sub)
        same = [z.add_(1) is z, z.mul_(2) is z]
        z[0] = 7.0
        return _names(results), same, z.tolist(), x.max(1).values.tolist(), type(x.tolist()).__name__
    theirs, ours = _both(snippet)
    assert ours == theirs
    assert set(theirs[0]) == {"Sub"}


def test_a_subclass_prints_under_its_name():
    def snippet(lib):
        class Sub(lib.Tensor):
            pass
        a = lib.tensor([[1.0, 2.5], [3.0, 4.0]]).as_subclass(Sub)
        return repr(a), repr(lib.tensor([1.0, 2.0], requires_grad=True).as_subclass(Sub) * 1)
    theirs, ours = _both(snippet)
    assert ours[0] == theirs[0]
    assert ours[1].split("grad_fn")[0] == theirs[1].split("grad_fn")[0]


def test_as_subclass_shares_data_and_autograd_history(device):
    got = {}
    for lib in LIBS:
        class Sub(lib.Tensor):
            pass
        dev = device if lib is wg else "cpu"
        a = lib.tensor([1.0, -2.0, 3.0], device=dev, requires_grad=True)
        b = a.as_subclass(Sub)
        node = type(b.grad_fn).__name__
        c = (b * b).sum()
        c.backward()
        with lib.no_grad():
            b[0] = 10.0  # the same storage
        got[lib] = (type(b).__name__, b.is_leaf, node, type(c).__name__, a.grad.tolist(),
                    type(a.grad).__name__, a.tolist())
    assert got[wg] == got[torch]
    with pytest.raises(TypeError, match="does not inherit from Tensor"):
        wg.ones(2).as_subclass(int)


def test_make_subclass_is_a_leaf_whose_grad_is_a_plain_tensor():
    def snippet(lib):
        class Sub(lib.Tensor):
            pass
        data = lib.tensor([1.0, 2.0])
        z = lib.Tensor._make_subclass(Sub, data, True)
        (z * 3).sum().backward()
        y = lib.tensor([1.0, 2.0], requires_grad=True).as_subclass(Sub)
        y.retain_grad()
        (y * 2).sum().backward()
        return (type(z).__name__, z.is_leaf, z.requires_grad, z.grad.tolist(), type(z.grad).__name__,
                type(y.grad).__name__, data.requires_grad, lib.Tensor._make_subclass(Sub, data).requires_grad)
    theirs, ours = _both(snippet)
    assert ours == theirs
    for lib in LIBS:
        with pytest.raises(TypeError, match="must be Tensor"):
            lib.Tensor._make_subclass(lib.Tensor, [1.0])


def test_logging_subclass_sees_each_call_as_torch_names_it():
    def snippet(lib):
        log = []

        class LoggingTensor(lib.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                if func is not lib.Tensor.__repr__:
                    log.append(func.__name__)
                return super().__torch_function__(func, types, args, kwargs or {})
        t = lib.tensor([1.0, 2.0]).as_subclass(LoggingTensor)
        out = (t * 2 + 1).exp().sum()
        lib.nn.functional.softmax(t, dim=0)
        t[0]
        t.view(2, 1)
        lib.mean(t)
        t.add_(1)
        len(t)
        return log, type(out).__name__, func_identity(lib, LoggingTensor)

    def func_identity(lib, cls):
        seen = []

        class Spy(cls):
            @classmethod
            def __torch_function__(c, func, types, args=(), kwargs=None):
                seen.append(func)
                return super().__torch_function__(func, types, args, kwargs)
        s = lib.ones(2).as_subclass(Spy)
        s + 1, lib.add(s, 1), s.sum(), lib.nn.functional.relu(s)
        return [seen[0] is lib.Tensor.add, seen[1] is lib.add, seen[2] is lib.Tensor.sum,
                seen[3] is lib.nn.functional.relu]
    theirs, ours = _both(snippet)
    assert ours == theirs
    assert all(theirs[2])


def test_the_docs_logging_tensor_prints_its_arguments():
    def snippet(lib):
        out = []

        class LoggingTensor(lib.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                # logging calls Tensor.__repr__, so __repr__ is not logged (the docs' note)
                if func is not lib.Tensor.__repr__:
                    out.append(f"func: {func.__name__}, args: {args!r}, kwargs: {kwargs!r}")
                if kwargs is None:
                    kwargs = {}
                return super().__torch_function__(func, types, args, kwargs)
        t = lib.tensor([1.0, 2.0]).as_subclass(LoggingTensor)
        r = t.mul(3).unsqueeze(0)
        return out, repr(r), lib.is_tensor(t), isinstance(t, lib.Tensor)
    theirs, ours = _both(snippet)
    assert ours == theirs


def _scalar_tensor_example(lib):
    """PyTorch's "Extending torch with a Tensor-like type" example, as the docs write it."""
    handled = {}

    class ScalarTensor(object):
        def __init__(self, N, value):
            self._N = N
            self._value = value

        def __repr__(self):
            return "ScalarTensor(N={}, value={})".format(self._N, self._value)

        def tensor(self):
            return self._value * lib.eye(self._N)

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if kwargs is None:
                kwargs = {}
            if func not in handled or not all(issubclass(t, (lib.Tensor, ScalarTensor)) for t in types):
                return NotImplemented
            return handled[func](*args, **kwargs)

    def implements(torch_function):
        def decorator(func):
            functools.update_wrapper(func, torch_function)
            handled[torch_function] = func
            return func
        return decorator

    @implements(lib.mean)
    def mean(input):
        return float(input._value) / input._N

    def ensure_tensor(data):
        if isinstance(data, ScalarTensor):
            return data.tensor()
        return lib.as_tensor(data)

    @implements(lib.add)
    def add(input, other):
        try:
            if input._N == other._N:
                return ScalarTensor(input._N, input._value + other._value)
            raise ValueError("Shape mismatch!")
        except AttributeError:
            return lib.add(ensure_tensor(input), ensure_tensor(other))
    return ScalarTensor


def test_the_docs_scalar_tensor_works_with_torch_functions():
    def snippet(lib):
        ScalarTensor = _scalar_tensor_example(lib)
        d = ScalarTensor(5, 2)
        with pytest.raises(TypeError, match="Multiple dispatch failed for 'torch.exp'|webgrad.exp"):
            lib.exp(d)
        return (lib.mean(d), repr(lib.add(d, d)), lib.add(d, lib.ones(5, 5)).tolist(),
                lib.overrides.is_tensor_like(d), lib.overrides.has_torch_function((d,)),
                lib.overrides.has_torch_function((lib.ones(1), 2)), lib.overrides.is_tensor_like(lib.ones(1)))
    theirs, ours = _both(snippet)
    assert ours == theirs


def test_a_metadata_wrapper_type_from_the_docs():
    def snippet(lib):
        class MetadataTensor(object):
            def __init__(self, data, metadata=None, **kwargs):
                self._t = lib.as_tensor(data, **kwargs)
                self._metadata = metadata

            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                if kwargs is None:
                    kwargs = {}
                metadatas = tuple(a._metadata for a in args if hasattr(a, "_metadata"))
                args = [getattr(a, "_t", a) for a in args]
                ret = func(*args, **kwargs)
                return MetadataTensor(ret, metadata=metadatas[0])
        m = MetadataTensor([[1.0, 2.0], [3.0, 4.0]], metadata={"owner": "Ministry of Silly Walks"})
        t = lib.tensor([[1.0, 2.0], [1.0, 2.0]])
        out = lib.add(t, m)
        return type(out).__name__, out._metadata, out._t.tolist()
    theirs, ours = _both(snippet)
    assert ours == theirs


def test_subclasses_built_with_new_and_carrying_metadata():
    def snippet(lib):
        class Meta(lib.Tensor):
            @staticmethod
            def __new__(cls, x, extra_data, *args, **kwargs):
                return super().__new__(cls, x, *args, **kwargs)

            def __init__(self, x, extra_data):
                self.extra_data = extra_data

        class TensorBase(lib.Tensor):  # fastai's pattern: as_subclass, then attributes from the keywords
            def __new__(cls, x, **kwargs):
                res = lib.as_tensor(x).as_subclass(cls)
                for k, v in kwargs.items():
                    setattr(res, k, v)
                return res

        class TensorImage(TensorBase):
            pass

        class SubTensor(lib.Tensor):
            pass
        m = Meta([1.0, 2.0], "info")
        base = lib.ones(2, dtype=lib.float64, requires_grad=True)
        aliased = Meta(base, "alias")
        node = type(aliased.grad_fn).__name__
        with lib.no_grad():
            aliased.add_(1)  # the same storage: super().__new__(cls, tensor) aliases it, in its graph
        alias_facts = (base.tolist(), aliased.dtype == lib.float64, node)
        im = TensorImage(lib.ones(2, 2), img_size=(2, 2))
        return (type(m).__name__, m.extra_data, m.tolist(), type(m + 1).__name__, hasattr(m + 1, "extra_data"),
                type(im).__name__, im.img_size, type(im.sum()).__name__,
                type(lib.add(SubTensor([0]), SubTensor([1]))).__name__,
                type(lib.add(SubTensor([0]), lib.tensor([1]))).__name__, SubTensor([0]).tolist(),
                SubTensor(2, 3).shape == (2, 3), alias_facts)
    theirs, ours = _both(snippet)
    assert ours == theirs


def test_subclasses_go_before_their_superclasses_then_left_to_right():
    def snippet(lib):
        order = []

        def handler(name, answer=NotImplemented):
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                order.append((name, [t.__name__ for t in types]))
                return answer
            return classmethod(__torch_function__)

        A = type("A", (lib.Tensor,), {"__torch_function__": handler("A")})
        B = type("B", (A,), {"__torch_function__": handler("B")})
        C = type("C", (lib.Tensor,), {"__torch_function__": handler("C", "C answered")})
        x = lib.ones(2)
        answers = [lib.cat([x.as_subclass(C), x.as_subclass(A)]), lib.add(x.as_subclass(A), x.as_subclass(C)),
                   lib.add(x, other=x.as_subclass(C))]
        with pytest.raises(TypeError, match="Multiple dispatch failed"):
            lib.add(x.as_subclass(A), x.as_subclass(B))
        with pytest.raises(TypeError, match="unsupported operand"):
            x.as_subclass(A) + x.as_subclass(B)
        return answers, order
    theirs, ours = _both(snippet)
    assert ours == theirs


def test_the_switches_and_handle_torch_function():
    def snippet(lib):
        class Sub(lib.Tensor):
            pass
        t = lib.ones(2).as_subclass(Sub)
        with lib._C.DisableTorchFunctionSubclass():
            off = [type(t + 1).__name__, type(t.sum()).__name__, lib._C._is_torch_function_enabled()]
        with lib._C.DisableTorchFunction():
            off.append(type(lib.add(t, 1)).__name__)
        calls = []

        def public(a, b=2):
            if lib.overrides.has_torch_function((a,)):
                return lib.overrides.handle_torch_function(public, (a,), a, b=b)
            calls.append("plain")
            return a * b

        class Answer(lib.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                calls.append((func.__name__, [t.__name__ for t in types], sorted(kwargs)))
                return "answered"
        return (off, type(t + 1).__name__, public(lib.ones(1)).tolist(), public(lib.ones(1).as_subclass(Answer)),
                calls, lib.Tensor.grad.__get__ in lib.overrides.get_default_nowrap_functions())
    theirs, ours = _both(snippet)
    assert ours == theirs


def test_torch_function_mode_sees_factories_and_ops():
    def snippet(lib):
        class Logger(lib.overrides.TorchFunctionMode):
            def __init__(self):
                super().__init__()
                self.names = []

            def __torch_function__(self, func, types, args=(), kwargs=None):
                self.names.append(func.__name__)
                return func(*args, **(kwargs or {}))
        with Logger() as log:
            z = lib.zeros(2) + lib.ones(2)
            z.sum()
        after = lib.ones(1) + 1  # the mode has gone
        return log.names, z.tolist(), after.tolist()
    theirs, ours = _both(snippet)
    assert ours == theirs


def test_a_module_with_parameters_of_a_subclass_trains():
    def snippet(lib):
        lib.manual_seed(0)

        class Sub(lib.Tensor):
            pass
        lin = lib.nn.Linear(3, 2)
        w = lib.nn.Parameter(lib.tensor([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]]).as_subclass(Sub))
        lin.weight = w
        opt = lib.optim.SGD(lin.parameters(), lr=0.1)
        x = lib.tensor([[1.0, 2.0, 3.0]]).as_subclass(Sub)
        out = lin(x)
        out.sum().backward()
        opt.step()
        plain = lib.nn.Parameter(lib.ones(2))
        return (type(w).__name__, isinstance(w, lib.nn.Parameter), w.requires_grad, w.is_leaf,
                [n for n, _ in lin.named_parameters()], type(out).__name__, type(w.grad).__name__,
                np.round(np.array(lin.weight.tolist()), 5).tolist(), type(plain * 2).__name__,
                type(lin(lib.ones(1, 3))).__name__)
    theirs, ours = _both(snippet)
    assert ours == theirs


def test_dispatch_is_installed_only_when_a_class_can_take_calls():
    """Importing webgrad (and a real torch beside it) installs nothing and leaves the builtins alone: ops stay plain
    functions until the first Tensor subclass or Tensor-like is created; a Tensor-like is noticed by the class hook
    that as_torch() turns on (watch_tensor_likes), which takes itself out when it fires."""
    code = """
import builtins
build_class = builtins.__build_class__
import webgrad, torch
from webgrad import overrides
from webgrad.ops import api
plain = webgrad.Tensor.add
assert not overrides._installed and webgrad.Tensor.add is api.FUNCTIONS["add"], "installed at import"
assert builtins.__build_class__ is build_class, "a plain import patched the builtins"
overrides.watch_tensor_likes()  # (as webgrad.as_torch() does; it refuses beside the real torch imported here)
class NotATensorLike:
    pass
class Mode(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))
assert not overrides._installed, "installed by an unrelated class or by real torch's"
class Like:
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return "like"
assert overrides._installed and webgrad.Tensor.add is not plain
assert builtins.__build_class__ is build_class, "the hook stayed after it fired"
assert webgrad.add(Like(), 1) == "like" and webgrad.ones(1).add(Like()) == "like"
"""
    as_torch = """
import builtins
build_class = builtins.__build_class__
import webgrad
torch = webgrad.as_torch()
class Like:
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return "like"
assert torch.mean(Like()) == "like" and builtins.__build_class__ is build_class
"""
    for source in (code, as_torch):
        done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=120,
                              env={"PYTHONPATH": wg.__path__[0].rsplit("/", 1)[0], "OPENBLAS_NUM_THREADS": "1"})
        assert done.returncode == 0, done.stderr


def test_save_and_load_keep_a_subclass_and_its_attributes(tmp_path):
    def snippet(lib):
        # pickle finds a class by module and name: made here (not at import, which would install the wrappers
        # while pytest collects), kept in this module's namespace
        Meta = type(f"Meta_{lib.__name__}", (lib.Tensor,), {"__module__": __name__})
        globals()[Meta.__name__] = Meta
        t = lib.tensor([1.0, 2.0, 3.0]).as_subclass(Meta)
        t.unit = "m"
        lin = lib.nn.Linear(2, 1)
        lin.weight = lib.nn.Parameter(lib.ones(1, 2).as_subclass(Meta))
        path = tmp_path / f"{lib.__name__}.pt"
        lib.save({"x": t, "n": 3, "model": lin}, path)
        back = lib.load(path, weights_only=False)
        with pytest.raises(Exception, match="(?i)weights_only|not allowed|unsupported global"):
            lib.load(path)  # the class is not allowlisted: a weights-only load refuses it, as torch's
        weight = back["model"].weight
        return (type(back["x"]).__name__.split("_")[0], back["x"].unit, back["x"].tolist(), back["n"],
                type(weight) is Meta, isinstance(weight, lib.nn.Parameter), weight.requires_grad, weight.tolist())
    theirs, ours = _both(snippet)
    assert ours == theirs


def test_whole_modules_pickle_while_the_wrappers_are_in_place(tmp_path):
    """A module holding a public function from before the wrappers (a default argument: the encoder layer's
    activation=F.relu) pickles under that function's public name."""
    wg.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)  # made while plain
    layer = wg.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)

    class Sub(wg.Tensor):
        pass
    assert overrides._installed
    wg.save(layer, tmp_path / "layer.pt")
    back = wg.load(tmp_path / "layer.pt", weights_only=False)
    x = wg.randn(3, 1, 8)
    np.testing.assert_allclose(back(x).tolist(), layer(x).tolist(), rtol=1e-6)
    assert type(layer(x.as_subclass(Sub))).__name__ == "Sub"
