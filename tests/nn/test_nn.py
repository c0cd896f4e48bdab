"""webgrad.nn: the Module API, containers, layers against torch.nn (outputs, gradients, reprs,
state_dicts in both directions), BatchNorm running statistics, Dropout, and initialisation."""

import copy
import math
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import webgrad as wg
from webgrad import nn
import webgrad.nn.functional as F

torch = pytest.importorskip("torch")


def to_torch(t):
    return torch.from_numpy(t.detach().cpu().numpy().copy())


def state_to_torch(module):
    return {k: to_torch(v) for k, v in module.state_dict().items()}


# ===================================================================== the Module API
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.scale = nn.Parameter(wg.ones(4))
        self.register_buffer("steps", wg.zeros(1))
        self.register_buffer("cache", wg.zeros(2), persistent=False)
        self.block = nn.Sequential(nn.ReLU(), nn.Linear(4, 2, bias=False))

    def forward(self, x):
        return self.block(self.fc(x) * self.scale)


def test_registration_and_traversal():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == ["scale", "fc.weight", "fc.bias", "block.1.weight"]
    assert [n for n, _ in net.named_buffers()] == ["steps", "cache"]
    assert list(net.state_dict()) == ["scale", "steps", "fc.weight", "fc.bias", "block.1.weight"]  # cache: not persistent
    assert [n for n, _ in net.named_children()] == ["fc", "block"]
    assert [n for n, _ in net.named_modules()] == ["", "fc", "block", "block.0", "block.1"]
    assert net.get_submodule("block.1") is net.block[1]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in net.parameters())
    # plain tensors are attributes, not parameters; reassigning a registered name keeps it registered
    net.plain = wg.zeros(2)
    assert "plain" not in dict(net.named_parameters()) and "plain" not in dict(net.named_buffers())
    net.steps = wg.ones(1)
    assert net.state_dict()["steps"].tolist() == [1.0]
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'scale'"):
        net.scale = wg.ones(4)
    with pytest.raises(KeyError, match="attribute 'fc' already exists"):
        net.register_buffer("fc", wg.zeros(1))
    with pytest.raises(KeyError, match='contain ".", got: a.b'):
        net.register_parameter("a.b", None)
    with pytest.raises(TypeError, match="is not a Module subclass"):
        net.add_module("x", 3)
    with pytest.raises(AttributeError, match="'Net' object has no attribute 'nope'"):
        net.nope
    del net.scale
    assert "scale" not in dict(net.named_parameters())


def test_shared_parameters_and_modules_are_listed_once():
    shared = nn.Linear(2, 2)
    seq = nn.Sequential(shared, nn.ReLU(), shared)
    assert len(list(seq.parameters())) == 2
    assert len(list(seq.modules())) == 3
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]  # as torch: both paths


def test_assignment_before_init_is_refused():
    class Broken(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(wg.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Broken()


def test_train_eval_apply_zero_grad_requires_grad():
    net = Net()
    assert net.training and net.block[0].training
    net.eval()
    assert not net.training and not net.block[1].training
    net.train()
    assert net.block[1].training
    with pytest.raises(ValueError, match="boolean"):
        net.train("yes")
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "ReLU", "Linear", "Sequential", "Net"]  # children first, as PyTorch

    net(wg.randn(5, 3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.detach().numpy().any() for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


def test_parameter():
    p = nn.Parameter(wg.tensor([1.0, 2.0]))
    assert p.requires_grad and p.is_leaf and isinstance(p, wg.Tensor)
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"
    assert repr(p) == repr(torch.nn.Parameter(torch.tensor([1.0, 2.0])))
    assert type(p * 2) is wg.Tensor  # ops return plain tensors
    assert not nn.Parameter(wg.ones(1), requires_grad=False).requires_grad
    with pytest.raises(RuntimeError, match="only floating point"):
        nn.Parameter(wg.tensor([1, 2]))
    for clone in (copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert isinstance(clone, nn.Parameter) and clone.requires_grad and clone.tolist() == [1.0, 2.0]


def test_deepcopy_module_is_independent():
    net = Net()
    twin = copy.deepcopy(net)
    assert all(isinstance(p, nn.Parameter) for p in twin.parameters())
    with wg.no_grad():
        twin.fc.weight.fill_(0.0)
    assert net.fc.weight.detach().numpy().any()


def test_to_moves_in_place_and_keeps_parameter_identity(device):
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    params = list(net.parameters())
    net(wg.randn(5, 3)).sum().backward()
    net.to(device)
    assert [id(p) for p in net.parameters()] == [id(p) for p in params]
    assert all(p.device == device and p.grad.device == device for p in params)
    assert all(b.device == device for b in net.buffers())
    out = net(wg.randn(5, 3, device=device))
    assert out.device == device
    net.to("cpu")
    assert all(p.device == "cpu" for p in params)


def test_to_dtype_casts_floating_tensors_only():
    net = nn.BatchNorm1d(3)
    weight = net.weight
    net.double()
    assert net.weight is weight and weight.dtype is wg.float64 and net.running_var.dtype is wg.float64
    assert net.num_batches_tracked.dtype is wg.int32
    net.float()
    assert weight.dtype is wg.float32
    with pytest.raises(TypeError, match="floating point"):
        net.to(wg.int32)


# ===================================================================== containers
def test_sequential():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    seq = nn.Sequential(a, b)
    assert len(seq) == 2 and seq[0] is a and seq[-1] is b and list(seq) == [a, b]
    seq.append(c)
    assert seq[2] is c and isinstance(seq[1:], nn.Sequential) and list(seq[1:]) == [b, c]
    assert seq(wg.randn(4, 2)).shape == (4, 1)
    del seq[0]
    assert list(seq._modules) == ["0", "1"] and seq[0] is b  # renumbered, as PyTorch
    seq.insert(0, a)
    assert list(seq) == [a, b, c]
    with pytest.raises(IndexError, match="out of range"):
        seq[3]
    named = nn.Sequential(OrderedDict([("enc", nn.Linear(2, 2)), ("act", nn.Tanh())]))
    assert list(named.state_dict()) == ["enc.weight", "enc.bias"] and isinstance(named.act, nn.Tanh)


def test_module_list_and_dict():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    layers.append(nn.ReLU())
    layers += [nn.Tanh()]
    assert len(layers) == 5 and isinstance(layers[-1], nn.Tanh) and isinstance(layers[1:3], nn.ModuleList)
    assert len(list(layers.parameters())) == 6
    layers.insert(1, nn.Sigmoid())
    assert isinstance(layers[1], nn.Sigmoid) and list(layers._modules) == [str(i) for i in range(6)]
    del layers[1]
    assert isinstance(layers[1], nn.Linear) and len(layers) == 5
    with pytest.raises(NotImplementedError, match="missing the required \"forward\""):
        layers(wg.ones(1))
    d = nn.ModuleDict({"a": nn.Linear(2, 2), "b": nn.ReLU()})
    d["c"] = nn.Tanh()
    assert list(d) == ["a", "b", "c"] and "b" in d and len(d) == 3 and list(d.keys()) == ["a", "b", "c"]
    assert list(d.state_dict()) == ["a.weight", "a.bias"]
    assert isinstance(d.pop("b"), nn.ReLU) and "b" not in d


# ===================================================================== reprs, exactly PyTorch's
REPR_CASES = [
    ("Linear", (3, 4), {}), ("Linear", (3, 4), {"bias": False}),
    ("Conv2d", (3, 8, 3), {}), ("Conv2d", (4, 8, (3, 5)), {"stride": 2, "padding": 1, "dilation": 2, "groups": 2}),
    ("Conv2d", (3, 8, 3), {"padding": "same", "bias": False, "padding_mode": "reflect"}),
    ("MaxPool2d", (2,), {}), ("MaxPool2d", (3, 2, 1), {}), ("AvgPool2d", ((2, 3),), {"padding": 1}),
    ("AdaptiveAvgPool2d", (1,), {}), ("AdaptiveAvgPool2d", ((5, 7),), {}),
    ("Flatten", (), {}), ("Unflatten", (1, (2, 5)), {}),
    ("Dropout", (), {}), ("Dropout", (0.2, True), {}),
    ("BatchNorm1d", (4,), {}), ("BatchNorm2d", (8,), {"momentum": None, "affine": False}),
    ("BatchNorm2d", (8,), {"eps": 1e-3, "track_running_stats": False}),
    ("LayerNorm", (4,), {}), ("LayerNorm", ((3, 4),), {"elementwise_affine": False}),
    ("Embedding", (10, 3), {}), ("Embedding", (10, 3), {"padding_idx": 0}),
    ("ReLU", (), {}), ("ReLU", (True,), {}), ("LeakyReLU", (), {}), ("LeakyReLU", (0.2, True), {}),
    ("GELU", (), {}), ("GELU", ("tanh",), {}), ("Sigmoid", (), {}), ("Tanh", (), {}), ("SiLU", (), {}),
    ("Softplus", (), {}), ("Softplus", (2.0, 10.0), {}), ("Softmax", (1,), {}), ("LogSoftmax", (-1,), {}),
    ("Identity", (), {}), ("CrossEntropyLoss", (), {}), ("MSELoss", (), {}), ("BCEWithLogitsLoss", (), {}),
]


@pytest.mark.parametrize("name,args,kwargs", REPR_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(REPR_CASES)])
def test_layer_repr_matches_torch(name, args, kwargs):
    assert repr(getattr(nn, name)(*args, **kwargs)) == repr(getattr(torch.nn, name)(*args, **kwargs))


def test_nested_repr_matches_torch():
    def build(m):
        class Block(m.Module):
            def __init__(self):
                super().__init__()
                self.convs = m.ModuleList([m.Conv2d(3, 3, 3, padding=1) for _ in range(3)] + [m.ReLU()])
                self.heads = m.ModuleDict({"cls": m.Linear(3, 10), "box": m.Sequential(m.Linear(3, 4), m.Sigmoid())})
                self.empty = m.ModuleList()
                self.none = None
        return Block()
    assert repr(build(nn)) == repr(build(torch.nn))


# ===================================================================== state dicts, both directions
def build_model(m):
    return m.Sequential(
        m.Conv2d(2, 4, 3, padding=1), m.BatchNorm2d(4), m.ReLU(), m.MaxPool2d(2),
        m.Conv2d(4, 4, 3, padding="same", groups=2, bias=False), m.AdaptiveAvgPool2d(1), m.Flatten(),
        m.Linear(4, 6), m.LayerNorm(6), m.GELU(), m.Linear(6, 3),
    )


def test_state_dict_from_torch_to_webgrad():
    torch.manual_seed(0)
    ref = build_model(torch.nn)
    ref.train()
    ref(torch.randn(5, 2, 8, 8))  # non-trivial running statistics
    ref.eval()
    ours = build_model(nn).eval()
    result = ours.load_state_dict(ref.state_dict())  # torch tensors are accepted directly
    assert result.missing_keys == [] and result.unexpected_keys == [] and repr(result) == "<All keys matched successfully>"
    assert list(ours.state_dict()) == list(ref.state_dict())
    assert ours[1].num_batches_tracked.item() == 1
    x = np.random.default_rng(0).standard_normal((3, 2, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(ours(wg.tensor(x)).detach().numpy(), ref(torch.tensor(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)


def test_state_dict_from_webgrad_to_torch():
    wg.manual_seed(1)
    ours = build_model(nn)
    ours(wg.randn(4, 2, 8, 8))
    ours.eval()
    ref = build_model(torch.nn).eval()
    ref.load_state_dict(state_to_torch(ours), strict=True)
    for k, v in ref.state_dict().items():
        assert tuple(v.shape) == tuple(ours.state_dict()[k].shape), k
    x = np.random.default_rng(1).standard_normal((2, 2, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(ours(wg.tensor(x)).detach().numpy(), ref(torch.tensor(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)


def snapshot(module):
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def assert_unchanged(module, before):
    after = snapshot(module)
    assert after.keys() == before.keys()
    for k in before:
        np.testing.assert_array_equal(after[k], before[k], err_msg=k)


def test_strict_errors_name_the_keys_and_leave_the_model_untouched():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    before = snapshot(model)
    good = {k: v * 0 + 7 for k, v in model.state_dict().items()}

    missing = dict(good)
    del missing["1.running_var"]
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "1.running_var"'):
        model.load_state_dict(missing)
    assert_unchanged(model, before)

    extra = dict(good, **{"2.weight": wg.ones(1)})
    with pytest.raises(RuntimeError, match=r'Unexpected key\(s\) in state_dict: "2.weight"'):
        model.load_state_dict(extra)
    assert_unchanged(model, before)

    for strict in (True, False):  # a shape mismatch is an error even when not strict
        bad = dict(good, **{"0.weight": wg.ones(4, 4)})
        with pytest.raises(RuntimeError) as info:
            model.load_state_dict(bad, strict=strict)
        assert ("size mismatch for 0.weight: copying a param with shape webgrad.Size([4, 4]) from checkpoint, "
                "the shape in current model is webgrad.Size([4, 3]).") in str(info.value)
        assert str(info.value).startswith("Error(s) in loading state_dict for Sequential:")
        assert_unchanged(model, before)

    with pytest.raises(RuntimeError, match='parameter named "0.bias".*received str'):
        model.load_state_dict(dict(good, **{"0.bias": "oops"}))
    assert_unchanged(model, before)


def test_non_strict_loads_what_matches():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    partial = {"0.weight": wg.ones(4, 3), "9.bias": wg.ones(2)}
    result = model.load_state_dict(partial, strict=False)
    assert result.unexpected_keys == ["9.bias"]
    assert result.missing_keys == ["0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
                                   "1.num_batches_tracked"]
    assert model[0].weight.tolist() == [[1.0] * 3] * 4


def test_load_swapped_tensors_of_the_same_model():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    a, b = (model[i].weight.detach().numpy().copy() for i in (0, 1))
    sd = model.state_dict()
    sd["0.weight"], sd["1.weight"] = sd["1.weight"], sd["0.weight"]  # values alias the model's own storage
    model.load_state_dict(sd)
    np.testing.assert_array_equal(model[0].weight.detach().numpy(), b)
    np.testing.assert_array_equal(model[1].weight.detach().numpy(), a)


def test_load_keeps_parameter_objects_and_converts_values():
    model = nn.Linear(2, 2)
    weight = model.weight
    model.load_state_dict({"weight": np.eye(2), "bias": torch.tensor([1.0, 2.0], dtype=torch.float64)})
    assert model.weight is weight and weight.dtype is wg.float32 and weight.requires_grad
    assert weight.tolist() == [[1.0, 0.0], [0.0, 1.0]] and model.bias.tolist() == [1.0, 2.0]
    model.load_state_dict({"weight": wg.zeros(2, 2), "bias": wg.zeros(2)}, assign=True)
    assert model.weight is not weight and isinstance(model.weight, nn.Parameter) and model.weight.requires_grad


# ===================================================================== layers against torch.nn
LAYER_CASES = [
    ("Linear", (4, 3), {}, (2, 5, 4)),
    ("Conv2d", (3, 4, 3), {"stride": 2, "padding": 1}, (2, 3, 7, 6)),
    ("Conv2d", (4, 6, (2, 3)), {"dilation": (2, 1), "groups": 2, "padding": "same"}, (1, 4, 6, 5)),
    ("Conv2d", (2, 3, 3), {"padding": 1, "padding_mode": "reflect"}, (2, 2, 5, 5)),
    ("Conv2d", (2, 3, 3), {"padding": (1, 2), "padding_mode": "circular", "bias": False}, (1, 2, 4, 5)),
    ("Conv2d", (2, 3, 3), {"padding": "valid", "padding_mode": "replicate"}, (2, 4, 4)),
    ("MaxPool2d", (3,), {"stride": 2, "padding": 1}, (2, 3, 7, 7)),
    ("AvgPool2d", (2,), {"count_include_pad": False, "padding": 1}, (2, 3, 5, 5)),
    ("AdaptiveAvgPool2d", ((2, 3),), {}, (2, 3, 5, 7)),
    ("Flatten", (), {}, (2, 3, 4)),
    ("Unflatten", (1, (2, 3)), {}, (4, 6)),
    ("LayerNorm", ((3, 4),), {}, (2, 3, 4)),
    ("BatchNorm1d", (3,), {}, (4, 3, 5)),
    ("ReLU", (), {}, (3, 4)), ("LeakyReLU", (0.2,), {}, (3, 4)), ("GELU", ("tanh",), {}, (3, 4)),
    ("Sigmoid", (), {}, (3, 4)), ("Tanh", (), {}, (3, 4)), ("SiLU", (), {}, (3, 4)),
    ("Softplus", (2.0, 1.0), {}, (3, 4)), ("Softmax", (0,), {}, (3, 4)), ("LogSoftmax", (1,), {}, (3, 4)),
    ("Identity", (54,), {"unused": 1}, (3, 4)),
]


@pytest.mark.parametrize("name,args,kwargs,shape", LAYER_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(LAYER_CASES)])
def test_layer_matches_torch(name, args, kwargs, shape):
    ref = getattr(torch.nn, name)(*args, **kwargs).double()
    ours = getattr(nn, name)(*args, **kwargs).double()
    ours.load_state_dict(ref.state_dict())
    x = np.random.default_rng(0).standard_normal(shape)
    xt = torch.tensor(x, requires_grad=True)
    xw = wg.tensor(x, dtype=wg.float64, requires_grad=True)
    yt, yw = ref(xt), ours(xw)
    g = np.random.default_rng(1).standard_normal(tuple(yt.shape))
    (yt * torch.tensor(g)).sum().backward()
    (yw * wg.tensor(g, dtype=wg.float64)).sum().backward()
    np.testing.assert_allclose(yw.detach().numpy(), yt.detach().numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(xw.grad.detach().numpy(), xt.grad.detach().numpy(), rtol=1e-9, atol=1e-12)
    for (n, p), (_, pt) in zip(ours.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(p.grad.detach().numpy(), pt.grad.detach().numpy(), rtol=1e-9, atol=1e-12, err_msg=n)


def test_embedding_padding_idx_gets_no_gradient():
    ref = torch.nn.Embedding(5, 3, padding_idx=1).double()
    ours = nn.Embedding(5, 3, padding_idx=1).double()
    assert not ours.weight[1].detach().numpy().any()
    ours.load_state_dict(ref.state_dict())
    idx = [[1, 2, 1], [4, 0, 1]]
    yt, yw = ref(torch.tensor(idx)), ours(wg.tensor(idx))
    np.testing.assert_array_equal(yw.detach().numpy(), yt.detach().numpy())
    (yt * yt).sum().backward()
    (yw * yw).sum().backward()
    np.testing.assert_allclose(ours.weight.grad.detach().numpy(), ref.weight.grad.detach().numpy(), rtol=1e-12)
    assert not ours.weight.grad[1].detach().numpy().any()
    frozen = nn.Embedding.from_pretrained(wg.eye(3))
    assert not frozen.weight.requires_grad and frozen(wg.tensor([2])).tolist() == [[0.0, 0.0, 1.0]]


def test_layer_errors_name_the_problem():
    with pytest.raises(RuntimeError, match=r"conv2d\(\): input of shape \[1, 2, 5, 5\] has 2 channels.*expects 3"):
        nn.Conv2d(3, 4, 3)(wg.randn(1, 2, 5, 5))
    with pytest.raises(RuntimeError, match="too small"):
        nn.Conv2d(1, 1, 5)(wg.randn(1, 1, 3, 3))
    with pytest.raises(ValueError, match="strided convolutions"):
        nn.Conv2d(1, 1, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.BatchNorm2d(3)(wg.randn(2, 3))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(wg.randn(1, 3))
    with pytest.raises(RuntimeError, match=r"normalized_shape=\[4\].*input of size \[2, 3\]"):
        nn.LayerNorm(4)(wg.randn(2, 3))
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.max_pool2d(wg.randn(1, 1, 4, 4), 2, padding=2)
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        F.avg_pool2d(wg.randn(1, 1, 4, 4), 2, divisor_override=0)
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


# ===================================================================== BatchNorm running statistics
@pytest.mark.parametrize("name,kwargs,shape", [
    ("BatchNorm2d", {}, (4, 3, 5, 5)),
    ("BatchNorm2d", {"momentum": None}, (3, 3, 2, 4)),
    ("BatchNorm1d", {"affine": False, "momentum": 0.3}, (6, 3)),
    ("BatchNorm1d", {"eps": 1e-3}, (4, 3, 7)),
    ("BatchNorm2d", {"track_running_stats": False}, (2, 3, 3, 3)),
])
def test_batchnorm_matches_torch_over_steps(name, kwargs, shape):
    ref = getattr(torch.nn, name)(3, **kwargs).double()
    ours = getattr(nn, name)(3, **kwargs).double()
    rng = np.random.default_rng(0)
    with torch.no_grad():  # non-trivial affine parameters
        if ref.affine:
            ref.weight.uniform_(0.5, 1.5)
            ref.bias.uniform_(-0.5, 0.5)
    ours.load_state_dict(ref.state_dict())
    for step in range(4):
        if step == 3:
            ref.eval()
            ours.eval()
        x = rng.standard_normal(shape) * 2 + 1
        xt, xw = torch.tensor(x, requires_grad=True), wg.tensor(x, dtype=wg.float64, requires_grad=True)
        yt, yw = ref(xt), ours(xw)
        (yt ** 3).sum().backward()
        (yw ** 3).sum().backward()
        np.testing.assert_allclose(yw.detach().numpy(), yt.detach().numpy(), rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(xw.grad.detach().numpy(), xt.grad.detach().numpy(), rtol=1e-8, atol=1e-9)
        for k, v in ref.state_dict().items():
            np.testing.assert_allclose(ours.state_dict()[k].detach().numpy(), v.detach().numpy(), rtol=1e-12,
                                       err_msg=f"{k} at step {step}")
    assert list(ours.state_dict()) == list(ref.state_dict())


# ===================================================================== Dropout
def test_dropout_statistics_and_eval_identity(device):
    wg.manual_seed(0)
    layer = nn.Dropout(0.3)
    x = wg.ones(200000, device=device, requires_grad=True)
    y = layer(x)
    values = y.detach().cpu().numpy()
    kept = values != 0
    assert abs(1 - kept.mean() - 0.3) < 0.005
    np.testing.assert_allclose(values[kept], 1 / 0.7, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.detach().cpu().numpy(), values)  # the same mask, same scale
    assert (layer(x).detach().cpu().numpy() != values).any()  # a fresh mask every call
    layer.eval()
    assert layer(x) is x
    assert F.dropout(x, 0.0) is x and not F.dropout(x, 1.0).detach().cpu().numpy().any()


# ===================================================================== initialisation
def test_default_init_bounds_match_pytorch_rules():
    wg.manual_seed(0)
    lin = nn.Linear(50, 40)
    bound = 1 / math.sqrt(50)
    w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound and np.abs(b).max() <= bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound  # uniform(-b, b) has std b / sqrt(3)
    conv = nn.Conv2d(4, 6, 3)
    bound = 1 / math.sqrt(4 * 9)
    assert np.abs(conv.weight.detach().numpy()).max() <= bound and np.abs(conv.bias.detach().numpy()).max() <= bound
    emb = nn.Embedding(100, 50).weight.detach().numpy()
    assert abs(emb.mean()) < 0.03 and abs(emb.std() - 1) < 0.03
    bn = nn.BatchNorm2d(3)
    assert bn.weight.tolist() == [1.0] * 3 and bn.bias.tolist() == [0.0] * 3 and bn.running_var.tolist() == [1.0] * 3
    wg.manual_seed(0)
    again = nn.Linear(50, 40)
    np.testing.assert_array_equal(again.weight.detach().numpy(), w)  # seeded: reproducible


def test_init_functions():
    wg.manual_seed(0)
    t = wg.empty(200, 300)
    fan_in, fan_out = 300, 200
    assert nn.init._calculate_fan_in_and_fan_out(wg.empty(6, 4, 3, 3)) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(6, 4, 3, 3))
    for name, param in [("relu", None), ("tanh", None), ("leaky_relu", 0.2), ("linear", None), ("selu", None)]:
        assert nn.init.calculate_gain(name, param) == torch.nn.init.calculate_gain(name, param)
    bound = math.sqrt(6 / (fan_in + fan_out))
    a = nn.init.xavier_uniform_(t).detach().numpy()
    assert np.abs(a).max() <= bound and np.abs(a).max() > 0.99 * bound
    assert abs(nn.init.xavier_normal_(t).detach().numpy().std() - math.sqrt(2 / (fan_in + fan_out))) < 0.002
    bound = math.sqrt(2) * math.sqrt(3 / fan_in)
    a = nn.init.kaiming_uniform_(t, nonlinearity="relu").detach().numpy()
    assert np.abs(a).max() <= bound and np.abs(a).max() > 0.99 * bound
    a = nn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu").detach().numpy()
    assert abs(a.std() - math.sqrt(2 / fan_out)) < 0.002
    a = nn.init.normal_(t, 2.0, 0.5).detach().numpy()
    assert abs(a.mean() - 2) < 0.01 and abs(a.std() - 0.5) < 0.01
    a = nn.init.uniform_(t, -3, -1).detach().numpy()
    assert a.min() >= -3 and a.max() < -1
    assert nn.init.constant_(wg.empty(2), 0.5).tolist() == [0.5, 0.5]
    assert nn.init.ones_(wg.empty(2)).tolist() == [1, 1] and nn.init.zeros_(wg.empty(2)).tolist() == [0, 0]
    # truncated normal: inside [a, b], with the truncated distribution's std (torch's, sampled large)
    a = nn.init.trunc_normal_(t, mean=0.5, std=1.0, a=-1.0, b=1.5).detach().numpy()
    ref = torch.nn.init.trunc_normal_(torch.empty(200, 300), mean=0.5, std=1.0, a=-1.0, b=1.5).detach().numpy()
    assert a.min() >= -1.0 and a.max() <= 1.5
    assert abs(a.mean() - ref.mean()) < 0.01 and abs(a.std() - ref.std()) < 0.01
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.xavier_uniform_(wg.empty(3))
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        nn.init.calculate_gain("swish")
    p = nn.Parameter(wg.empty(3, 3))
    nn.init.kaiming_uniform_(p)  # parameters are leaves that require grad: init runs under no_grad
    assert p.requires_grad and p.grad is None


# ===================================================================== training end to end
def test_small_cnn_learns(device):
    wg.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Dropout(0.1), nn.Linear(4 * 3 * 3, 2)).to(device)
    # class 1 images are bright in the top half, class 0 in the bottom half
    x = wg.rand(32, 1, 6, 6, device=device) * 0.5
    y = (wg.rand(32, device=device) > 0.5).int()
    top = wg.cat([wg.ones(1, 1, 3, 6), wg.zeros(1, 1, 3, 6)], dim=2).to(device)
    x = x + y.float().reshape(32, 1, 1, 1) * top + (1 - y.float()).reshape(32, 1, 1, 1) * (1 - top)
    loss_fn = nn.CrossEntropyLoss()
    first = None
    for _ in range(30):
        loss = loss_fn(model(x), y)
        first = first if first is not None else loss.item()
        model.zero_grad()
        loss.backward()
        with wg.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
    model.eval()
    assert loss.item() < 0.3 * first
    assert (model(x).argmax(1) == y).float().mean().item() == 1.0


# ===================================================================== small functional pieces
def test_one_hot_matches_torch():
    idx = [[0, 3], [2, 1]]
    ours = F.one_hot(wg.tensor(idx), 5)
    assert ours.dtype is wg.int64 and ours.tolist() == torch.nn.functional.one_hot(torch.tensor(idx), 5).tolist()
    assert F.one_hot(wg.tensor([1, 0, 2])).shape == (3, 3)  # num_classes read from the data
    with pytest.raises(RuntimeError, match="index tensor"):
        F.one_hot(wg.ones(2))


def test_inplace_activations_write_into_their_input():
    for name, args in (("ReLU", ()), ("LeakyReLU", (0.5,)), ("SiLU", ())):
        layer = getattr(nn, name)(*args, inplace=True)
        x = wg.tensor([-2.0, 3.0])
        expected = getattr(torch.nn, name)(*args)(torch.tensor([-2.0, 3.0])).tolist()
        assert layer(x) is x
        np.testing.assert_allclose(x.tolist(), expected, rtol=1e-6)


def test_softmax_without_dim_uses_pytorch_legacy_choice():
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    with pytest.warns(UserWarning, match="Implicit dimension"):
        ours = nn.Softmax()(wg.tensor(x))
    np.testing.assert_allclose(ours.numpy(), torch.softmax(torch.tensor(x), dim=0).numpy(), rtol=1e-6)


def test_pickled_module_round_trips():
    net = Net()
    twin = pickle.loads(pickle.dumps(net))
    assert list(twin.state_dict()) == list(net.state_dict())
    assert isinstance(twin.fc.weight, nn.Parameter) and "cache" in dict(twin.named_buffers())
    x = wg.randn(2, 3)
    np.testing.assert_array_equal(twin(x).detach().numpy(), net(x).detach().numpy())
