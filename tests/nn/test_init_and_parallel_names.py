"""torch.nn names that training scripts call, against PyTorch's: nn.init.eye_ and dirac_, the deprecated
initialisers without the underscore, nn.SyncBatchNorm (and convert_sync_batchnorm) and nn.DataParallel."""

import warnings

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES

RNG = np.random.default_rng(0)


def _np(x):
    return np.asarray(x.detach().cpu().tolist(), dtype=np.float64).reshape(tuple(x.shape)) \
        if isinstance(x, wg.Tensor) else x.detach().numpy().astype(np.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape,groups", [((6, 4, 3), 2), ((4, 6, 3, 3), 1), ((6, 2, 3, 3, 3), 3), ((2, 2, 2, 4), 1)])
def test_dirac_matches_torch(device, shape, groups):
    got = wg.nn.init.dirac_(wg.empty(shape, device=device), groups)
    want = torch.nn.init.dirac_(torch.empty(shape), groups)
    np.testing.assert_array_equal(_np(got), _np(want))


@pytest.mark.parametrize("device", DEVICES)
def test_eye_matches_torch(device):
    for shape in ((3, 5), (5, 3), (4, 4)):
        weight = wg.nn.Parameter(wg.empty(shape, device=device))
        assert wg.nn.init.eye_(weight) is weight and weight.requires_grad
        np.testing.assert_array_equal(_np(weight), _np(torch.nn.init.eye_(torch.empty(shape))))


def test_init_errors_match_torch():
    for lib in (wg, torch):
        with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
            lib.nn.init.eye_(lib.empty(2, 2, 2))
        with pytest.raises(ValueError, match="Only tensors with 3, 4, or 5 dimensions"):
            lib.nn.init.dirac_(lib.empty(2, 2))
        with pytest.raises(ValueError, match="divisible by groups"):
            lib.nn.init.dirac_(lib.empty(5, 2, 3), 2)


@pytest.mark.parametrize("name,args", [("uniform", (-0.1, 0.1)), ("normal", (0.0, 0.02)), ("constant", (0.5,)),
                                       ("xavier_uniform", ()), ("xavier_normal", ()), ("kaiming_uniform", ()),
                                       ("kaiming_normal", ()), ("orthogonal", ()), ("eye", ()), ("dirac", ())])
def test_deprecated_initialisers_warn_and_initialise(name, args):
    """Each warns as PyTorch's, then does what the underscore version does (the same draws from the same seed)."""
    shape = (4, 4, 3) if name == "dirac" else (4, 6)
    message = f"`nn.init.{name}` is now deprecated in favor of `nn.init.{name}_`."
    with pytest.warns(FutureWarning) as record_torch:
        torch.nn.init.__dict__[name](torch.empty(shape), *args)
    assert str(record_torch[0].message) == message
    wg.manual_seed(3)
    with pytest.warns(FutureWarning) as record:
        got = getattr(wg.nn.init, name)(wg.empty(shape), *args)
    assert str(record[0].message) == message
    wg.manual_seed(3)
    want = getattr(wg.nn.init, name + "_")(wg.empty(shape), *args)
    np.testing.assert_array_equal(_np(got), _np(want))


def _bn_pair(cls_w, cls_t, features):
    w, t = cls_w(features), cls_t(features)
    weight, bias = RNG.standard_normal(features).astype(np.float32), RNG.standard_normal(features).astype(np.float32)
    with torch.no_grad():
        t.weight.copy_(torch.tensor(weight))
        t.bias.copy_(torch.tensor(bias))
    w.weight.data = wg.tensor(weight)
    w.bias.data = wg.tensor(bias)
    return w, t


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 4, 4), (2, 3, 2, 2, 2)])
def test_sync_batch_norm_matches_torch(shape):
    """Without a world of several processes PyTorch's SyncBatchNorm is the batch norm of any input of 2+ dims."""
    w, t = _bn_pair(wg.nn.SyncBatchNorm, torch.nn.SyncBatchNorm, shape[1])
    x = RNG.standard_normal(shape).astype(np.float32)
    for training in (True, False):
        w.train(training), t.train(training)
        xw, xt = wg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        yw, yt = w(xw), t(xt)
        np.testing.assert_allclose(_np(yw), _np(yt), rtol=1e-4, atol=1e-5)
        (yw * yw).sum().backward()
        (yt * yt).sum().backward()
        np.testing.assert_allclose(_np(xw.grad), _np(xt.grad), rtol=1e-4, atol=1e-4)
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            np.testing.assert_allclose(_np(getattr(w, name)), _np(getattr(t, name)), rtol=1e-5, atol=1e-6)
    for lib in (wg, torch):
        with pytest.raises(ValueError, match="expected at least 2D input"):
            lib.nn.SyncBatchNorm(3)(lib.ones(3))
        with pytest.raises(ValueError, match="channels should be non-zero"):
            lib.nn.SyncBatchNorm(0)(lib.ones(2, 0))


def test_convert_sync_batchnorm_matches_torch():
    def model(lib):
        return lib.nn.Sequential(lib.nn.Conv2d(3, 4, 3), lib.nn.BatchNorm2d(4),
                                 lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.BatchNorm1d(2, affine=False)),
                                 lib.nn.InstanceNorm2d(4))

    converted = {}
    for lib in (wg, torch):
        original = model(lib)
        original.eval()
        bn = original[1]
        out = lib.nn.SyncBatchNorm.convert_sync_batchnorm(original)
        assert out is original
        assert type(out[1]) is lib.nn.SyncBatchNorm and out[1].weight is bn.weight
        assert out[1].running_mean is bn.running_mean and not out[1].training
        converted[lib] = [type(m).__name__ for m in out.modules()]
        single = lib.nn.SyncBatchNorm.convert_sync_batchnorm(lib.nn.BatchNorm1d(5))
        assert type(single) is lib.nn.SyncBatchNorm
    assert converted[wg] == converted[torch]
    state = {k: tuple(v.shape) for k, v in model(wg).state_dict().items()}
    assert state == {k: tuple(v.shape) for k, v in wg.nn.SyncBatchNorm.convert_sync_batchnorm(model(wg))
                     .state_dict().items()}  # the same keys: checkpoints load either way


def test_data_parallel_at_nn():
    """nn.DataParallel(model) without CUDA devices runs the model and holds it as .module, as PyTorch's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch_keys = list(torch.nn.DataParallel(torch.nn.Linear(3, 2)).state_dict())
    model = wg.nn.Linear(3, 2)
    wrapped = wg.nn.DataParallel(model)
    assert wrapped.module is model and wg.nn.DataParallel is wg.nn.parallel.DataParallel
    assert list(wrapped.state_dict()) == torch_keys == ["module.weight", "module.bias"]
    x = wg.ones(4, 3)
    np.testing.assert_array_equal(_np(wrapped(x)), _np(model(x)))
