"""Lazy modules (nn.LazyLinear, LazyConv*, LazyConvTranspose*, LazyBatchNorm*, LazyInstanceNorm*) and their
placeholders (nn.UninitializedParameter, UninitializedBuffer) against PyTorch's: shapes and class after the
first forward, outputs from PyTorch's initialised weights, state_dict round trips, errors, and a d2l-style
network trained with an optimizer made after the dry run."""

import copy

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.nn.modules  # noqa: F401  (torch.nn.modules: PyTorch's module paths)
from helpers import webgpu_available

RNG = np.random.default_rng(0)


def _np(x):
    return np.asarray(x.detach().cpu().tolist(), dtype=np.float64).reshape(tuple(x.shape)) \
        if isinstance(x, wg.Tensor) else x.detach().numpy().astype(np.float64)


# (name, args, kwargs, input shape): the same constructor call in both libraries
LAYERS = [
    ("LazyLinear", (5,), {}, (3, 4)),
    ("LazyLinear", (5,), {"bias": False}, (2, 3, 6)),
    ("LazyConv1d", (4, 3), {"padding": 1}, (2, 3, 8)),
    ("LazyConv2d", (4, 3), {"stride": 2, "groups": 2}, (2, 6, 7, 7)),
    ("LazyConv2d", (3, 3), {"padding": "same", "padding_mode": "reflect"}, (4, 6, 6)),
    ("LazyConv3d", (2, 2), {"bias": False}, (1, 3, 4, 4, 4)),
    ("LazyConvTranspose1d", (4, 3), {"stride": 2}, (2, 3, 5)),
    ("LazyConvTranspose2d", (4, 3), {"stride": 2, "output_padding": 1}, (2, 6, 4, 4)),
    ("LazyConvTranspose3d", (2, 2), {}, (1, 3, 3, 3, 3)),
    ("LazyBatchNorm1d", (), {}, (8, 5)),
    ("LazyBatchNorm1d", (), {"affine": False}, (4, 5, 3)),
    ("LazyBatchNorm2d", (), {"momentum": None}, (4, 3, 5, 5)),
    ("LazyBatchNorm3d", (), {"track_running_stats": False}, (2, 3, 3, 3, 3)),
    ("LazyInstanceNorm1d", (), {}, (2, 3, 6)),
    ("LazyInstanceNorm2d", (), {"affine": False, "track_running_stats": False}, (2, 3, 5, 5)),
    ("LazyInstanceNorm3d", (), {}, (2, 2, 3, 3, 3)),
]


def _pair(name, args, kwargs):
    return getattr(wg.nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)


@pytest.mark.filterwarnings("ignore:input's size at dim=1 does not match num_features")  # both warn, affine=False
@pytest.mark.parametrize("name,args,kwargs,shape", LAYERS, ids=lambda v: v if isinstance(v, str) else None)
def test_first_forward_infers_sizes_and_becomes_the_regular_class(name, args, kwargs, shape):
    got, want = _pair(name, args, kwargs)
    assert repr(got) == repr(want)
    assert got.has_uninitialized_params() == want.has_uninitialized_params()
    assert [(k, repr(v)) for k, v in got.state_dict().items() if wg.nn.parameter.is_lazy(v)] == \
        [(k, repr(v)) for k, v in want.state_dict().items() if torch.nn.parameter.is_lazy(v)]
    x = RNG.standard_normal(shape).astype(np.float32)
    want(torch.tensor(x))
    got(wg.tensor(x))
    assert type(got).__name__ == type(want).__name__ == name[4:]
    assert isinstance(got, getattr(wg.nn, name[4:])) and not got.__dict__.get("_forward_pre_hooks")
    assert repr(got) == repr(want)
    assert {k: tuple(v.shape) for k, v in got.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in want.state_dict().items()}
    assert all(type(p) is wg.nn.Parameter for p in got.parameters())
    # from PyTorch's initialised state (running statistics updated by the dry run included), the same results
    got.load_state_dict(want.state_dict())
    np.testing.assert_allclose(_np(got(wg.tensor(x))), _np(want(torch.tensor(x))), rtol=1e-5, atol=1e-5)
    for key, value in want.state_dict().items():
        np.testing.assert_allclose(_np(got.state_dict()[key]), _np(value), rtol=1e-5, atol=1e-6, err_msg=key)


@pytest.mark.parametrize("lazy,regular,shape", [
    (lambda: wg.nn.LazyLinear(6), lambda: wg.nn.Linear(4, 6), (3, 4)),
    (lambda: wg.nn.LazyConv2d(6, 3, groups=3), lambda: wg.nn.Conv2d(3, 6, 3, groups=3), (1, 3, 5, 5)),
    (lambda: wg.nn.LazyConvTranspose1d(6, 3), lambda: wg.nn.ConvTranspose1d(4, 6, 3), (1, 4, 5)),
    (lambda: wg.nn.LazyBatchNorm2d(), lambda: wg.nn.BatchNorm2d(3), (2, 3, 4, 4)),
])
def test_initialised_as_the_regular_layer(lazy, regular, shape):
    """The regular class's reset_parameters, from the same random state: the same values."""
    wg.manual_seed(7)
    want = regular()
    wg.manual_seed(7)
    got = lazy().eval()  # in eval, so that the dry run leaves the running statistics as initialised
    got(wg.zeros(shape))
    for (key, value), (want_key, want_value) in zip(got.state_dict().items(), want.state_dict().items()):
        assert key == want_key and value.dtype == want_value.dtype
        np.testing.assert_array_equal(_np(value), _np(want_value), err_msg=key)


def test_unbatched_instance_norm_reads_the_channel_dim():
    """[C, L] gives num_features C (PyTorch reads shape[1] and then refuses its own affine layer)."""
    x = RNG.standard_normal((3, 7)).astype(np.float32)
    got = wg.nn.LazyInstanceNorm1d()
    out = got(wg.tensor(x))
    assert got.num_features == 3 and tuple(got.weight.shape) == (3,)
    want = torch.nn.InstanceNorm1d(3, affine=True, track_running_stats=True)
    np.testing.assert_allclose(_np(out), _np(want(torch.tensor(x))), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(got.running_mean), _np(want.running_mean), rtol=1e-5, atol=1e-6)


def test_placeholders_match_torch():
    for lib in (wg, torch):
        p = lib.nn.UninitializedParameter()
        assert repr(p) == "<UninitializedParameter>" and p.requires_grad and p.grad is None and p.is_leaf
        assert isinstance(p, lib.nn.Parameter) and lib.nn.parameter.is_lazy(p)
        assert p.dtype == lib.float32 and p.device.type == "cpu" and p.float() is p and tuple(p.size()) == (0,)
        with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter or buffer"):
            p.shape
        for use in (lambda t: t + 1, lambda t: t.sum(), lambda t: t.detach(), lambda t: t.numel(),
                    lambda t: lib.nn.functional.linear(lib.ones(2, 3), t)):
            with pytest.raises(ValueError, match="Attempted to use an uninitialized parameter in .*"
                                                 "nn.parameter.UninitializedParameter"):
                use(p)
        with pytest.raises(RuntimeError, match="Can't share memory on an uninitialized parameter"):
            p.share_memory_()
        q = copy.deepcopy(p)
        assert type(q) is type(p) and q is not p
        p.materialize((2, 3), dtype=lib.float64)
        assert type(p) is lib.nn.Parameter and tuple(p.shape) == (2, 3) and p.dtype == lib.float64
        assert p.requires_grad and not lib.nn.parameter.is_lazy(p)
        b = lib.nn.UninitializedBuffer()
        assert repr(b) == "<UninitializedBuffer>" and not b.requires_grad
        with pytest.raises(ValueError, match="nn.parameter.UninitializedBuffer"):
            b * 2
        b.materialize(4)
        assert type(b) is lib.Tensor and tuple(b.shape) == (4,)


def test_to_and_dtype_before_the_first_forward_are_remembered():
    for lib in (wg, torch):
        net = lib.nn.Sequential(lib.nn.LazyLinear(3), lib.nn.LazyBatchNorm1d()).double()
        assert net[0].weight.dtype == lib.float64 and lib.nn.parameter.is_lazy(net[0].weight)
        out = net(lib.ones(4, 2, dtype=lib.float64))
        assert out.dtype == lib.float64 and net[0].weight.dtype == lib.float64
        assert net[1].running_mean.dtype == lib.float64 and net[1].num_batches_tracked.item() == 1
        p = lib.nn.UninitializedParameter(dtype=lib.float64)
        assert p.dtype == lib.float64 and type(p.to(lib.float32)) is lib.Tensor


def test_state_dict_round_trips_match_torch():
    for lib in (wg, torch):
        lazy_state = lib.nn.LazyLinear(3).state_dict()
        assert all(lib.nn.parameter.is_lazy(v) for v in lazy_state.values())
        # placeholders into a lazy module: nothing to copy, still uninitialised
        still = lib.nn.LazyLinear(3)
        still.load_state_dict(lazy_state)
        assert still.has_uninitialized_params()
        # placeholders into an initialised module: PyTorch's RuntimeError
        with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter"):
            lib.nn.Linear(4, 3).load_state_dict(lazy_state)
        # initialised values into a lazy module: materialised with their shapes; the first forward checks the input
        source = lib.nn.Linear(4, 3)
        loaded = lib.nn.LazyLinear(3)
        assert repr(loaded.load_state_dict(source.state_dict())) == "<All keys matched successfully>"
        assert not loaded.has_uninitialized_params() and type(loaded).__name__ == "LazyLinear"
        np.testing.assert_array_equal(_np(loaded.weight), _np(source.weight))
        with pytest.raises(AssertionError, match="The in_features inferred from input: 5 is not equal to "
                                                 "in_features from self.weight: 4"):
            loaded(lib.ones(1, 5))
        fits = lib.nn.LazyLinear(3)
        fits.load_state_dict(source.state_dict())
        np.testing.assert_allclose(_np(fits(lib.ones(2, 4))), _np(source(lib.ones(2, 4))), rtol=1e-6)
        assert type(fits).__name__ == "Linear" and fits.in_features == 4
        # a lazy batch norm's state: placeholders, and num_batches_tracked known
        state = lib.nn.LazyBatchNorm2d().state_dict()
        assert list(state) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
        assert [repr(v) for v in list(state.values())[:4]] == ["<UninitializedParameter>"] * 2 + \
            ["<UninitializedBuffer>"] * 2 and state["num_batches_tracked"].item() == 0


def test_errors_match_torch():
    for lib in (wg, torch):
        with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
            lib.nn.LazyConv2d(4, 3, groups=2)(lib.ones(1, 3, 5, 5))
        with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input to LazyConv2d, "
                                               "but got input of size"):
            lib.nn.LazyConv2d(4, 3)(lib.ones(3, 5))
        with pytest.raises(TypeError):
            lib.nn.LazyLinear(2).initialize_parameters(lib.ones(1, 2), lib.ones(1))
        with pytest.raises(ValueError, match="expected 4D input"):
            lib.nn.LazyBatchNorm2d()(lib.ones(2, 3, 4))


def test_module_paths_and_foreign_devices():
    assert wg.nn.modules.lazy.LazyModuleMixin is wg.nn.lazy.LazyModuleMixin
    assert wg.nn.modules.conv.LazyConvTranspose3d is wg.nn.LazyConvTranspose3d
    assert wg.nn.modules.batchnorm.LazyBatchNorm1d is wg.nn.LazyBatchNorm1d
    assert issubclass(wg.nn.LazyInstanceNorm2d, wg.nn.modules.lazy.LazyModuleMixin)
    assert wg.nn.parameter.UninitializedParameter is wg.nn.UninitializedParameter
    lazy = wg.nn.LazyLinear(3)
    with pytest.raises(wg.devices.DeviceUnavailableError, match="webgpu"):  # as a regular module's .cuda()
        lazy.cuda()
    assert lazy.weight.device.type == "cpu" and lazy.has_uninitialized_params()


def test_deepcopy_before_the_first_forward_gives_an_independent_lazy_module():
    net = wg.nn.Sequential(wg.nn.LazyConv2d(2, 3), wg.nn.LazyBatchNorm2d())
    twin = copy.deepcopy(net)
    net(wg.ones(1, 3, 5, 5))
    assert type(net[0]).__name__ == "Conv2d" and type(twin[0]).__name__ == "LazyConv2d"
    twin(wg.ones(1, 4, 5, 5))
    assert tuple(twin[0].weight.shape) == (2, 4, 3, 3) and tuple(net[0].weight.shape) == (2, 3, 3, 3)


def test_optimizer_made_before_the_dry_run_holds_the_materialised_parameters():
    """Discouraged (make it after the dry run), but as in PyTorch the parameter objects are the same ones."""
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    nets = {torch: torch.nn.LazyLinear(2), wg: wg.nn.LazyLinear(2)}
    optimizers = {lib: lib.optim.SGD(net.parameters(), lr=0.5) for lib, net in nets.items()}
    for lib, net in nets.items():
        net(lib.tensor(x))  # dry run
    nets[wg].load_state_dict(nets[torch].state_dict())
    losses = []
    for lib, net in nets.items():
        opt = optimizers[lib]
        for _ in range(2):
            opt.zero_grad()
            loss = (net(lib.tensor(x)) ** 2).mean()
            loss.backward()
            opt.step()
        losses.append(loss.item())
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)


def _d2l_net(lib):
    nn = lib.nn
    return nn.Sequential(nn.LazyConv2d(6, kernel_size=5, padding=2), nn.LazyBatchNorm2d(), nn.Sigmoid(),
                         nn.AvgPool2d(kernel_size=2, stride=2), nn.LazyConv2d(16, kernel_size=5),
                         nn.LazyBatchNorm2d(), nn.Sigmoid(), nn.AvgPool2d(kernel_size=2, stride=2), nn.Flatten(),
                         nn.LazyLinear(32), nn.LazyBatchNorm1d(), nn.Sigmoid(), nn.LazyLinear(10))


def test_d2l_style_network_trains_as_torch():
    """d2l's LeNet with batch norm: a dry run, PyTorch's initialised weights copied, the optimizer made after the
    dry run, three SGD steps with PyTorch's losses."""
    x = RNG.standard_normal((8, 1, 28, 28)).astype(np.float32)
    y = RNG.integers(0, 10, 8)
    want_net, got_net = _d2l_net(torch), _d2l_net(wg)
    want_net(torch.tensor(x[:2]))
    got_net(wg.tensor(x[:2]))
    assert [type(m).__name__ for m in got_net] == [type(m).__name__ for m in want_net]
    got_net.load_state_dict(want_net.state_dict())
    losses = {}
    for lib, net in ((torch, want_net), (wg, got_net)):
        opt = lib.optim.SGD(net.parameters(), lr=0.9)
        loss_fn = lib.nn.CrossEntropyLoss()
        losses[lib.__name__] = []
        for _ in range(3):
            opt.zero_grad()
            loss = loss_fn(net(lib.tensor(x)), lib.tensor(y))
            loss.backward()
            opt.step()
            losses[lib.__name__].append(loss.item())
    np.testing.assert_allclose(losses["webgrad"], losses["torch"], rtol=1e-4, atol=1e-5)
    assert losses["torch"][2] < losses["torch"][0]


@pytest.mark.skipif(not webgpu_available(), reason="no WebGPU adapter")
def test_lazy_modules_moved_to_webgpu_before_the_dry_run():
    x = RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)
    want = torch.nn.Sequential(torch.nn.LazyConv2d(4, 3), torch.nn.LazyBatchNorm2d(), torch.nn.Flatten(),
                               torch.nn.LazyLinear(5))
    got = wg.nn.Sequential(wg.nn.LazyConv2d(4, 3), wg.nn.LazyBatchNorm2d(), wg.nn.Flatten(),
                           wg.nn.LazyLinear(5)).to("webgpu")
    assert got[0].weight.device.type == "webgpu"
    want(torch.tensor(x))
    got(wg.tensor(x, device="webgpu"))
    assert all(t.device.type == "webgpu" for t in got.state_dict().values())
    got.load_state_dict(want.state_dict())
    np.testing.assert_allclose(_np(got(wg.tensor(x, device="webgpu"))), _np(want(torch.tensor(x))),
                               rtol=1e-4, atol=1e-5)


def test_a_whole_lazy_module_saves_and_loads_before_its_first_forward(tmp_path):
    """webgrad.save of a module that has not run yet writes its placeholders as torch reduces them
    (torch.nn.parameter.UninitializedParameter(requires_grad)); loading gives a lazy module that initialises on its
    first forward."""
    m = wg.nn.Sequential(wg.nn.LazyLinear(4), wg.nn.ReLU(), wg.nn.LazyBatchNorm1d())
    path = str(tmp_path / "lazy.pt")
    wg.save(m, path)
    loaded = wg.load(path, weights_only=False)
    assert type(loaded[0].weight).__name__ == "UninitializedParameter"
    assert type(loaded[2].running_mean).__name__ == "UninitializedBuffer"
    assert loaded(wg.randn(5, 3)).shape == (5, 4)
    assert type(loaded[0]) is wg.nn.Linear and loaded[0].weight.shape == (4, 3)
