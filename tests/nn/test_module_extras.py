"""nn.Module.get_parameter / get_buffer / set_submodule / to_empty / compile, nn.Softmax2d and
nn.utils.parametrizations.orthogonal against PyTorch's: values, gradients, state_dict keys, and the exception
types and messages of bad input."""

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import webgpu_available

RNG = np.random.default_rng(0)


def _np(x):
    return np.asarray(x.detach().cpu().tolist(), dtype=np.float64).reshape(tuple(x.shape)) \
        if isinstance(x, wg.Tensor) else x.detach().numpy().astype(np.float64)


def _net(lib):
    """The same nested model in either library: Sequential(Linear, Sequential(BatchNorm1d, Linear))."""
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Sequential(lib.nn.BatchNorm1d(4), lib.nn.Linear(4, 2)))


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (the type and message are what is compared)
        return type(e).__name__, str(e)
    return None


# ----------------------------------------------------------------- get_parameter, get_buffer, set_submodule
@pytest.mark.parametrize("target", ["0.weight", "1.1.bias", "1.0.running_mean"])
def test_get_parameter_and_get_buffer_find_what_torch_finds(target):
    got, want = _net(wg), _net(torch)
    for method in ("get_parameter", "get_buffer"):
        assert _error(lambda: getattr(got, method)(target)) == _error(lambda: getattr(want, method)(target))
    found = got.get_buffer(target) if "running" in target else got.get_parameter(target)
    assert found is dict(got.named_buffers() if "running" in target else got.named_parameters())[target]


@pytest.mark.parametrize("target", ["0.nope", "2.weight", "0.weight.x", "1", "1.0.num_batches_tracked", "0.training"])
def test_get_parameter_and_get_buffer_refuse_as_torch(target):
    for method in ("get_parameter", "get_buffer"):
        got = _error(lambda: getattr(_net(wg), method)(target))
        want = _error(lambda: getattr(_net(torch), method)(target))
        assert (got is None) == (want is None), (method, target, got, want)
        if want is not None:
            assert got[0] == want[0] == "AttributeError", (method, target, got, want)


def test_set_submodule_replaces_and_adds_as_torch():
    for lib in (wg, torch):
        net = _net(lib)
        net.set_submodule("1.1", lib.nn.Linear(4, 5))
        net.set_submodule("1.extra", lib.nn.ReLU())
        assert net[1][1].out_features == 5 and isinstance(net[1].extra, lib.nn.ReLU)
    for args in [("1.missing", "ReLU", True), ("", "ReLU", False), ("0", None, False), ("0.weight", "ReLU", False),
                 ("9.x", "ReLU", False)]:
        target, layer, strict = args
        got = _error(lambda: _net(wg).set_submodule(target, wg.nn.ReLU() if layer else 3, strict=strict))
        want = _error(lambda: _net(torch).set_submodule(target, torch.nn.ReLU() if layer else 3, strict=strict))
        assert got[0] == want[0], (args, got, want)
        if want[0] == "ValueError":
            assert got[1].split(",")[0] == want[1].split(",")[0]


# ----------------------------------------------------------------- to_empty
def test_to_empty_keeps_shapes_dtypes_and_objects_then_loads_a_state_dict():
    got, want = _net(wg).double(), _net(torch)
    params_before = list(got.parameters())
    layout_before = [(k, tuple(t.shape), t.dtype, t.device) for k, t in got.state_dict().items()]
    assert got.to_empty(device="cpu") is got
    assert [p is q for p, q in zip(got.parameters(), params_before)] == [True] * len(params_before)
    assert [(k, tuple(t.shape), t.dtype, t.device) for k, t in got.state_dict().items()] == layout_before
    assert got[0].weight.dtype == wg.float64 and got[0].weight.requires_grad
    got.float().load_state_dict({k: wg.tensor(v.numpy()) for k, v in want.state_dict().items()})
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(_np(got(wg.tensor(x))), _np(want(torch.tensor(x))), rtol=1e-5, atol=1e-6)


def test_to_empty_recurse_false_leaves_the_children():
    net = _net(wg)
    with wg.no_grad():
        net[0].weight.fill_(7.0)
    net.register_buffer("own", wg.full((2,), 3.0))
    net.to_empty(device=None, recurse=False)
    assert float(net[0].weight.min()) == 7.0 == float(net[0].weight.max())
    assert tuple(net.own.shape) == (2,)
    with pytest.raises(TypeError):
        net.to_empty("cpu")  # device is keyword-only, as in PyTorch
    with pytest.raises(TypeError):
        net.to_empty()


# ----------------------------------------------------------------- compile
def test_module_compile_checks_arguments_as_torch_and_keeps_running():
    got, want = _net(wg).eval(), _net(torch).eval()
    got.load_state_dict({k: wg.tensor(v.numpy()) for k, v in want.state_dict().items()})
    keys = list(got.state_dict())
    assert got.compile(mode="reduce-overhead") is None
    assert got.compile(backend="eager", fullgraph=True, dynamic=False) is None
    assert list(got.state_dict()) == keys  # no _orig_mod. prefix: the module compiles in place
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(_np(got(wg.tensor(x))), _np(want(torch.tensor(x))), rtol=1e-5, atol=1e-6)
    got_error = _error(lambda: got.compile(mode="fastest"))
    want_error = _error(lambda: want.compile(mode="fastest"))
    assert got_error[0] == want_error[0] == "RuntimeError" and "fastest" in got_error[1]
    assert _error(lambda: got.compile(mode="default", options={}))[0] == "RuntimeError"
    assert _error(lambda: got.compile("inductor"))[0] == "TypeError"  # torch.compile takes the callable only


# ----------------------------------------------------------------- Softmax2d
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (3, 4, 5)])
def test_softmax2d_matches_torch_with_gradients(shape):
    x = RNG.standard_normal(shape)
    g = RNG.standard_normal(shape)
    xw, xt = wg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    yw, yt = wg.nn.Softmax2d()(xw), torch.nn.Softmax2d()(xt)
    np.testing.assert_allclose(_np(yw), _np(yt), rtol=1e-10, atol=1e-12)
    yw.backward(wg.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(_np(xw.grad), _np(xt.grad), rtol=1e-9, atol=1e-12)
    assert repr(wg.nn.Softmax2d()) == repr(torch.nn.Softmax2d())


@pytest.mark.parametrize("shape", [(4,), (2, 3), (1, 2, 3, 4, 5)])
def test_softmax2d_refuses_other_ranks_as_torch(shape):
    got = _error(lambda: wg.nn.Softmax2d()(wg.zeros(*shape)))
    want = _error(lambda: torch.nn.Softmax2d()(torch.zeros(*shape)))
    assert got == want


@pytest.mark.skipif(not webgpu_available(), reason="no WebGPU adapter")
def test_softmax2d_on_webgpu():
    x = RNG.standard_normal((2, 3, 4, 4)).astype(np.float32)
    got = wg.nn.Softmax2d()(wg.tensor(x, device="webgpu"))
    assert got.device.type == "webgpu"
    np.testing.assert_allclose(_np(got), _np(torch.nn.Softmax2d()(torch.tensor(x))), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------- parametrizations.orthogonal
def _orthogonal_linear(lib, weight, **kwargs):
    layer = lib.nn.Linear(weight.shape[1], weight.shape[0], bias=False).double()
    with lib.no_grad():
        layer.weight.copy_(lib.tensor(weight))
    return lib.nn.utils.parametrizations.orthogonal(layer, **kwargs)


ORTHOGONAL_CASES = [(shape, orthogonal_map, trivial) for shape in [(5, 5), (7, 4), (3, 6)]
                    for orthogonal_map in ["matrix_exp", "cayley", "householder", None] for trivial in [True, False]]


@pytest.mark.parametrize("shape,orthogonal_map,use_trivialization", ORTHOGONAL_CASES)
def test_orthogonal_weight_gradient_and_state_dict_match_torch(shape, orthogonal_map, use_trivialization):
    weight = RNG.standard_normal(shape)
    kwargs = {"orthogonal_map": orthogonal_map, "use_trivialization": use_trivialization}
    got, want = _orthogonal_linear(wg, weight, **kwargs), _orthogonal_linear(torch, weight, **kwargs)
    assert type(got).__name__ == type(want).__name__ == "ParametrizedLinear"
    assert [(k, tuple(v.shape)) for k, v in got.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in want.state_dict().items()]
    # a wide or tall base completes the matrix with random columns: take PyTorch's, so gradients compare
    got.load_state_dict({k: wg.tensor(v.numpy()) for k, v in want.state_dict().items()})
    q = _np(got.weight)
    np.testing.assert_allclose(q, _np(want.weight), atol=1e-12)
    small = min(shape)
    np.testing.assert_allclose(q.T @ q if shape[0] >= shape[1] else q @ q.T, np.eye(small), atol=1e-12)
    x = RNG.standard_normal((2, shape[1]))
    got(wg.tensor(x)).pow(2).sum().backward()
    want(torch.tensor(x)).pow(2).sum().backward()
    np.testing.assert_allclose(_np(got.parametrizations.weight.original.grad),
                               _np(want.parametrizations.weight.original.grad), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("shape,orthogonal_map,use_trivialization",
                         [c for c in ORTHOGONAL_CASES if c[1] is not None])
def test_orthogonal_assignment_as_torch(shape, orthogonal_map, use_trivialization):
    kwargs = {"orthogonal_map": orthogonal_map, "use_trivialization": use_trivialization}
    got = _orthogonal_linear(wg, RNG.standard_normal(shape), **kwargs)
    want = _orthogonal_linear(torch, RNG.standard_normal(shape), **kwargs)
    q = np.linalg.qr(RNG.standard_normal((max(shape), min(shape))))[0]
    q = q if shape[0] >= shape[1] else q.T
    got_error = _error(lambda: setattr(got, "weight", wg.tensor(q)))
    want_error = _error(lambda: setattr(want, "weight", torch.tensor(q)))
    assert got_error == want_error
    if want_error is None:
        np.testing.assert_allclose(_np(got.weight), q, atol=1e-12)
        np.testing.assert_allclose(_np(got.parametrizations.weight.original),
                                   _np(want.parametrizations.weight.original), atol=1e-12)


def test_orthogonal_batch_of_matrices_and_training_keeps_it_orthogonal():
    weight = RNG.standard_normal((3, 4, 4))
    got, want = wg.nn.Module(), torch.nn.Module()
    got.register_parameter("w", wg.nn.Parameter(wg.tensor(weight)))
    want.register_parameter("w", torch.nn.Parameter(torch.tensor(weight)))
    wg.nn.utils.parametrizations.orthogonal(got, "w", "householder")
    torch.nn.utils.parametrizations.orthogonal(want, "w", "householder")
    np.testing.assert_allclose(_np(got.w), _np(want.w), atol=1e-12)
    opt = wg.optim.SGD(got.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        (got.w[:, 0, :] * wg.tensor(RNG.standard_normal((3, 4)))).sum().backward()
        opt.step()
    q = _np(got.w)
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(4), (3, 4, 4)), atol=1e-12)


@pytest.mark.parametrize("make,kwargs", [
    (lambda lib: lib.nn.Linear(3, 3), {"orthogonal_map": "svd"}),
    (lambda lib: lib.nn.LayerNorm(3), {}),
    (lambda lib: lib.nn.Linear(3, 3), {"name": "nope"}),
])
def test_orthogonal_refuses_as_torch(make, kwargs):
    got = _error(lambda: wg.nn.utils.parametrizations.orthogonal(make(wg), **kwargs))
    want = _error(lambda: torch.nn.utils.parametrizations.orthogonal(make(torch), **kwargs))
    assert got[0] == want[0] == "ValueError"
    assert got[1].split("'")[0] == want[1].split("'")[0]
    layer = wg.nn.utils.parametrizations.orthogonal(wg.nn.Linear(3, 3))
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices of shape"):
        layer.weight = wg.eye(4)


@pytest.mark.skipif(not webgpu_available(), reason="no WebGPU adapter")
def test_orthogonal_on_webgpu_matches_torch():
    weight = RNG.standard_normal((6, 4)).astype(np.float32)
    want = torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(4, 6, bias=False))
    got = wg.nn.utils.parametrizations.orthogonal(wg.nn.Linear(4, 6, bias=False))
    with torch.no_grad():
        want.weight = torch.tensor(weight)
    got.load_state_dict({k: wg.tensor(v.numpy()) for k, v in want.state_dict().items()})
    got.to("webgpu")
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    y = got(wg.tensor(x, device="webgpu"))
    assert y.device.type == "webgpu"
    np.testing.assert_allclose(_np(y), _np(want(torch.tensor(x))), rtol=1e-4, atol=1e-5)
    y.pow(2).sum().backward()
    want(torch.tensor(x)).pow(2).sum().backward()
    np.testing.assert_allclose(_np(got.parametrizations.weight.original.grad),
                               _np(want.parametrizations.weight.original.grad), rtol=1e-4, atol=1e-5)
