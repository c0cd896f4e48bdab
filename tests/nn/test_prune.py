"""nn.utils.prune against torch.nn.utils.prune: the same masks from the same weights (L1, Ln, global, custom,
iterative), random methods checked by counts and structure, the reparametrization (weight_orig, weight_mask, the
hook), state dicts, remove(), and torch's exception types for bad amounts and dims."""

import numpy as np
import pytest
import torch
from torch.nn.utils import prune as tprune

import webgrad as wg
from webgrad.nn.utils import prune as wprune
from helpers import webgpu_available

needs_webgpu = pytest.mark.skipif(not webgpu_available(), reason="needs a WebGPU adapter")


def _pair(kind, device="cpu"):
    """(torch module, webgrad module) of one kind with the same weights."""
    torch.manual_seed(0)
    make = {"linear": lambda nn: nn.Linear(12, 8), "conv": lambda nn: nn.Conv2d(3, 6, 3)}[kind]
    t = make(torch.nn)
    w = make(wg.nn).to(device)
    w.load_state_dict({k: wg.tensor(v.detach().numpy(), device=device) for k, v in t.state_dict().items()})
    return t, w


def _np(x):
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x.detach().numpy()


def _same_mask(t, w, name="weight"):
    np.testing.assert_array_equal(_np(getattr(t, name + "_mask")), _np(getattr(w, name + "_mask")))
    np.testing.assert_allclose(_np(getattr(t, name)), _np(getattr(w, name)), rtol=0, atol=0)


@pytest.mark.parametrize("amount", [0.3, 5, 0, 0.0, 1.0])
def test_l1_unstructured_matches_torch(amount):
    t, w = _pair("linear")
    original = w.weight
    tprune.l1_unstructured(t, "weight", amount)
    out = wprune.l1_unstructured(w, "weight", amount)
    assert out is w
    _same_mask(t, w)
    assert w.weight_orig is original  # the parameter itself moves: an optimizer holding it keeps training it
    assert list(w.state_dict()) == list(t.state_dict()) == ["bias", "weight_orig", "weight_mask"]
    assert [n for n, _ in w.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert not isinstance(w.weight, wg.nn.Parameter) and "weight" not in w._parameters


@pytest.mark.parametrize("n", [1, 2, float("inf"), float("-inf")])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_ln_structured_matches_torch(n, dim):
    t, w = _pair("conv")
    tprune.ln_structured(t, "weight", amount=0.5, n=n, dim=dim)
    wprune.ln_structured(w, "weight", amount=0.5, n=n, dim=dim)
    _same_mask(t, w)


def test_importance_scores_rank_the_entries():
    t, w = _pair("linear")
    scores = np.random.default_rng(1).standard_normal((8, 12)).astype(np.float32)
    tprune.l1_unstructured(t, "weight", 40, importance_scores=torch.tensor(scores))
    wprune.l1_unstructured(w, "weight", 40, importance_scores=wg.tensor(scores))
    _same_mask(t, w)
    tprune.ln_structured(t, "weight", 3, n=1, dim=0, importance_scores=torch.tensor(scores))
    wprune.ln_structured(w, "weight", 3, n=1, dim=0, importance_scores=wg.tensor(scores))
    _same_mask(t, w)


def test_iterative_pruning_composes_masks_as_torch():
    t, w = _pair("conv")
    for lib, m in ((tprune, t), (wprune, w)):
        lib.l1_unstructured(m, "weight", 0.2)
        lib.ln_structured(m, "weight", 2, n=2, dim=0)
        lib.l1_unstructured(m, "weight", 10)
        lib.ln_structured(m, "weight", 0.5, n=1, dim=1)
        lib.custom_from_mask(m, "bias", torch.tensor([1, 0, 1, 1, 0, 1]) if lib is tprune
                             else wg.tensor([1, 0, 1, 1, 0, 1]))
    _same_mask(t, w)
    _same_mask(t, w, "bias")
    hooks = [h for h in w._forward_pre_hooks.values()]
    assert [type(h).__name__ for h in hooks] == ["PruningContainer", "CustomFromMask"]
    assert [type(m).__name__ for m in hooks[0]] == ["L1Unstructured", "LnStructured", "L1Unstructured",
                                                    "LnStructured"]
    assert len(hooks[0]) == 4 and hooks[0][1].n == 2


def test_forward_and_gradients_use_the_masked_weight():
    t, w = _pair("conv")
    tprune.l1_unstructured(t, "weight", 0.5)
    wprune.l1_unstructured(w, "weight", 0.5)
    x = np.random.default_rng(2).standard_normal((2, 3, 7, 7)).astype(np.float32)
    yt, yw = t(torch.tensor(x)), w(wg.tensor(x))
    np.testing.assert_allclose(_np(yw), _np(yt), rtol=1e-5, atol=1e-5)
    yt.square().sum().backward()
    yw.square().sum().backward()
    np.testing.assert_allclose(_np(w.weight_orig.grad), _np(t.weight_orig.grad), rtol=1e-4, atol=1e-4)
    assert (_np(w.weight_orig.grad)[_np(w.weight_mask) == 0] == 0).all()


def test_training_keeps_pruned_entries_zero():
    _, w = _pair("linear")
    wprune.random_unstructured(w, "weight", 0.5)
    opt = wg.optim.SGD(w.parameters(), lr=0.1)
    x = wg.randn(4, 12)
    for _ in range(2):
        opt.zero_grad()
        w(x).square().sum().backward()
        opt.step()
    w(x)  # the hook recomputes weight from the trained weight_orig
    assert (_np(w.weight)[_np(w.weight_mask) == 0] == 0).all()
    np.testing.assert_allclose(_np(w.weight), _np(w.weight_orig) * _np(w.weight_mask))


def test_random_unstructured_prunes_the_amount_of_what_is_left():
    _, w = _pair("linear")
    wprune.random_unstructured(w, "weight", 0.25)
    assert (_np(w.weight_mask) == 0).sum() == 24
    wprune.random_unstructured(w, "weight", 0.5)  # half of the 72 left
    assert (_np(w.weight_mask) == 0).sum() == 24 + 36
    wprune.random_unstructured(w, "weight", 6)
    mask = _np(w.weight_mask)
    assert (mask == 0).sum() == 66 and set(np.unique(mask)) <= {0.0, 1.0}


def test_random_structured_prunes_whole_channels():
    _, w = _pair("conv")
    wprune.random_structured(w, "weight", 2, dim=0)
    per_channel = _np(w.weight_mask).reshape(6, -1)
    assert (per_channel.sum(1) == 0).sum() == 2 and (per_channel.min(1) == per_channel.max(1)).all()
    wprune.random_structured(w, "weight", 0.5, dim=0)  # half of the 4 channels left
    assert (_np(w.weight_mask).reshape(6, -1).sum(1) == 0).sum() == 4
    wprune.random_structured(w, "weight", 1, dim=1)
    assert (_np(w.weight_mask).transpose(1, 0, 2, 3).reshape(3, -1).sum(1) == 0).sum() == 1


def test_global_unstructured_matches_torch():
    (t1, w1), (t2, w2) = _pair("conv"), _pair("linear")
    tprune.l1_unstructured(t2, "weight", 0.3)  # an already pruned tensor keeps its mask inside the global one
    wprune.l1_unstructured(w2, "weight", 0.3)
    scores_t = {(t1, "bias"): torch.arange(6.0)}
    scores_w = {(w1, "bias"): wg.arange(6.0)}
    tprune.global_unstructured([(t1, "weight"), (t1, "bias"), (t2, "weight")], tprune.L1Unstructured,
                               importance_scores=scores_t, amount=0.4)
    assert wprune.global_unstructured(((m, n) for m, n in [(w1, "weight"), (w1, "bias"), (w2, "weight")]),
                                      wprune.L1Unstructured, importance_scores=scores_w, amount=0.4) is None
    for t, w, name in ((t1, w1, "weight"), (t1, w1, "bias"), (t2, w2, "weight")):
        _same_mask(t, w, name)


def test_global_unstructured_refuses_what_torch_refuses():
    _, w = _pair("linear")
    with pytest.raises(TypeError, match="not an Iterable"):
        wprune.global_unstructured(5, wprune.L1Unstructured, amount=0.1)
    with pytest.raises(TypeError, match="must be of type dict"):
        wprune.global_unstructured([(w, "weight")], wprune.L1Unstructured, importance_scores=[1], amount=0.1)
    with pytest.raises(TypeError, match='Only "unstructured"'):
        wprune.global_unstructured([(w, "weight")], wprune.LnStructured, amount=0.1, n=2, dim=0)


def test_identity_custom_from_mask_and_prune_method():
    t, w = _pair("linear")
    tprune.identity(t, "weight")
    wprune.identity(w, "weight")
    _same_mask(t, w)
    mask = (np.arange(96).reshape(8, 12) % 3 != 0).astype(np.float32)
    tprune.custom_from_mask(t, "weight", torch.tensor(mask))
    wprune.custom_from_mask(w, "weight", wg.tensor(mask))
    _same_mask(t, w)
    x = np.random.default_rng(3).standard_normal((5, 7)).astype(np.float32)
    np.testing.assert_array_equal(_np(wprune.L1Unstructured(0.4).prune(wg.tensor(x))),
                                  _np(tprune.L1Unstructured(0.4).prune(torch.tensor(x))))


def test_remove_makes_pruning_permanent():
    t, w = _pair("conv")
    for lib, m in ((tprune, t), (wprune, w)):
        lib.l1_unstructured(m, "weight", 0.5)
        lib.ln_structured(m, "weight", 1, n=2, dim=0)
        assert lib.is_pruned(m)
        assert lib.remove(m, "weight") is m
        assert not lib.is_pruned(m)
    assert list(w.state_dict()) == list(t.state_dict())
    assert isinstance(w.weight, wg.nn.Parameter) and w.weight.requires_grad
    np.testing.assert_array_equal(_np(w.weight), _np(t.weight))
    assert not hasattr(w, "weight_orig") and not hasattr(w, "weight_mask") and not w._forward_pre_hooks
    with pytest.raises(ValueError, match="has to be pruned before pruning can be removed"):
        wprune.remove(w, "weight")


def test_is_pruned_looks_into_submodules():
    model = wg.nn.Sequential(wg.nn.Linear(3, 3), wg.nn.Sequential(wg.nn.Linear(3, 2)))
    assert not wprune.is_pruned(model)
    wprune.l1_unstructured(model[1][0], "bias", 1)
    assert wprune.is_pruned(model)


def test_state_dict_of_a_pruned_torch_model_loads():
    t, w = _pair("linear")
    tprune.l1_unstructured(t, "weight", 0.5)
    wprune.random_unstructured(w, "weight", 0.1)
    w.load_state_dict({k: wg.tensor(_np(v)) for k, v in t.state_dict().items()})
    x = np.ones((2, 12), np.float32)
    np.testing.assert_allclose(_np(w(wg.tensor(x))), _np(t(torch.tensor(x))), rtol=1e-5, atol=1e-5)


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 (the type is what is compared)
        return type(e)
    return None


@pytest.mark.parametrize("call", [
    lambda lib, m: lib.l1_unstructured(m, "weight", -1),
    lambda lib, m: lib.l1_unstructured(m, "weight", 1.5),
    lambda lib, m: lib.l1_unstructured(m, "weight", "half"),
    lambda lib, m: lib.l1_unstructured(m, "weight", 97),
    lambda lib, m: lib.random_unstructured(m, "bias", 9),
    lambda lib, m: lib.ln_structured(m, "bias", 1, n=2, dim=0),
    lambda lib, m: lib.ln_structured(m, "weight", 1, n=2, dim=2),
    lambda lib, m: lib.random_structured(m, "weight", 9, dim=0),
    lambda lib, m: lib.l1_unstructured(m, "nonexistent", 1),
])
def test_bad_arguments_raise_torch_s_exception_types(call):
    t, w = _pair("linear")
    expected = _error(lambda: call(tprune, t))
    assert expected is not None
    assert _error(lambda: call(wprune, w)) is expected
    # a failed first pruning puts the parameter back (at the end, as torch's rollback does)
    assert list(w.state_dict()) == list(t.state_dict()) and not wprune.is_pruned(w)
    assert isinstance(w.weight, wg.nn.Parameter)


def test_user_defined_method_joins_a_container():
    """The pattern of PyTorch's pruning tutorial: a subclass that prunes every other entry still alive."""

    def every_other(lib):
        class EveryOther(lib.BasePruningMethod):
            PRUNING_TYPE = "unstructured"

            def compute_mask(self, t, default_mask):
                mask = default_mask.clone()
                mask.view(-1)[::2] = 0
                return mask
        return EveryOther

    t, w = _pair("linear")
    for lib, m in ((tprune, t), (wprune, w)):
        lib.l1_unstructured(m, "weight", 0.5)
        every_other(lib).apply(m, "weight")
    _same_mask(t, w)


@needs_webgpu
def test_pruning_on_webgpu_matches_torch():
    (t1, w1), (t2, w2) = _pair("conv", "webgpu"), _pair("linear", "webgpu")
    for lib, m1, m2 in ((tprune, t1, t2), (wprune, w1, w2)):
        lib.l1_unstructured(m1, "weight", 0.3)
        lib.ln_structured(m1, "weight", 2, n=2, dim=0)
        lib.global_unstructured([(m1, "weight"), (m2, "weight")], lib.L1Unstructured, amount=0.25)
        lib.random_structured(m2, "weight", 2, dim=1)
    assert w1.weight_mask.device.type == "webgpu"
    _same_mask(t1, w1)
    mask = _np(w2.weight_mask)
    assert (mask.sum(0) == 0).sum() >= 2
    x = np.random.default_rng(4).standard_normal((2, 3, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(_np(w1(wg.tensor(x, device="webgpu"))), _np(t1(torch.tensor(x))), rtol=1e-4,
                               atol=1e-4)
    wprune.remove(w1, "weight")
    np.testing.assert_array_equal(_np(w1.weight), _np(t1.weight))
