"""torch.* forms of nn ops (ATen's signatures: int reductions, weight-first embedding, torch.batch_norm's order, the
rnn cells), F's in-place activations, the math/utility functions (gcd, unravel_index, asarray, the *_copy views,
the deprecated norms), the process-wide switches (anomaly, autocast state, warn-always) and nn.init.sparse_, each
checked against PyTorch: values, gradients, dtypes, defaults and exception types."""

import warnings

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.nn.functional as F
from helpers import DEVICES

RNG = np.random.default_rng(0)


def _arr(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, shape).astype(np.float32)


def _convert(value, lib, device, grad):
    if isinstance(value, np.ndarray):
        floating = value.dtype.kind == "f"
        if lib is torch:
            return torch.tensor(value, requires_grad=grad and floating)
        return wg.tensor(value, device=device, requires_grad=grad and floating)
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], np.ndarray):
        return type(value)(_convert(v, lib, device, grad) for v in value)
    return value


def _outputs(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _compare(name, *args, device="cpu", grad=True, atol=1e-5, lib_name=None, **kwargs):
    """Calls torch.<name> and webgrad.<name> on the same inputs: equal outputs and, with grad, equal gradients of a
    weighted sum of the floating outputs."""
    results = {}
    for lib in (torch, wg):
        inputs = [_convert(a, lib, device, grad) for a in args]
        out = getattr(lib, lib_name or name)(*inputs, **kwargs)
        leaves = [t for a in inputs for t in (a if isinstance(a, (list, tuple)) else [a])
                  if getattr(t, "requires_grad", False)]
        grads = []
        floating = [o for o in _outputs(out) if o.dtype.is_floating_point]
        if grad and leaves and floating:
            total = sum(((o * (torch.arange if lib is torch else wg.arange)(o.numel(), dtype=o.dtype,
                                                                                device=o.device).reshape(o.shape)
                          .mul(0.1).add(1)).sum()) for o in floating)
            grads = (torch.autograd.grad if lib is torch else wg.autograd.grad)(total, leaves, allow_unused=True)
        results[lib] = (_outputs(out), grads)
    (t_out, t_grads), (w_out, w_grads) = results[torch], results[wg]
    assert len(t_out) == len(w_out)
    for t, w in zip(t_out, w_out):
        assert tuple(t.shape) == tuple(w.shape), name
        assert str(t.dtype).split(".")[-1] == str(w.dtype).split(".")[-1], name
        np.testing.assert_allclose(np.asarray(w.detach().cpu().tolist()), t.detach().numpy(), atol=atol, rtol=1e-4,
                                   err_msg=name)
    for t, w in zip(t_grads, w_grads):
        if t is None:
            continue
        np.testing.assert_allclose(np.asarray(w.cpu().tolist()), t.numpy(), atol=atol * 10, rtol=1e-4,
                                   err_msg=f"{name} gradient")
    return w_out


def _raises_like(torch_call, wg_call):
    with pytest.raises(Exception) as expected:
        torch_call()
    with pytest.raises(type(expected.value)):
        wg_call()


# ================================================================ activations
def test_activations_match_torch():
    x = _arr(3, 4)
    _compare("celu", x)
    _compare("celu", x, 0.5)
    _compare("selu", x)
    _compare("threshold", x, 0.1, 20.0)
    _compare("hardshrink", x)
    _compare("hardshrink", x, 1.0)
    _compare("prelu", _arr(2, 3, 4), np.array([0.25, 0.5, 0.1], np.float32))
    _compare("rrelu", x)  # training=False: the mean slope, deterministic
    _compare("rrelu", x, 0.1, 0.3)


def test_inplace_activations_return_their_input():
    for name, args in (("celu_", ()), ("selu_", ()), ("threshold_", (0.0, 5.0)), ("rrelu_", ())):
        data = _arr(5)
        t, w = torch.tensor(data), wg.tensor(data)
        assert getattr(torch, name)(t, *args) is t
        assert getattr(wg, name)(w, *args) is w
        np.testing.assert_allclose(w.tolist(), t.numpy(), atol=1e-6)
    for name, args in (("relu_", ()), ("elu_", (0.5,)), ("leaky_relu_", (0.2,)), ("hardtanh_", (-0.5, 0.5)),
                       ("selu_", ()), ("celu_", (2.0,))):
        data = _arr(6)
        t, w = torch.tensor(data), wg.tensor(data)
        assert getattr(torch.nn.functional, name)(t, *args) is t
        assert getattr(F, name)(w, *args) is w, name
        np.testing.assert_allclose(w.tolist(), t.numpy(), atol=1e-6, err_msg=name)


def test_inplace_activation_in_the_graph():
    data = _arr(4)
    t = torch.tensor(data, requires_grad=True)
    w = wg.tensor(data, requires_grad=True)
    (torch.nn.functional.elu_(t * 2) * 3).sum().backward()
    (F.elu_(w * 2) * 3).sum().backward()
    np.testing.assert_allclose(w.grad.tolist(), t.grad.numpy(), atol=1e-6)


# ==================================================================== dropout
def test_dropout_forms():
    x = np.ones((4, 6, 5), np.float32)
    for name in ("dropout", "alpha_dropout", "feature_dropout", "feature_alpha_dropout"):
        _compare(name, x, 0.5, False)  # not training: the input itself
        _compare(name, x, 0.0, True)
        with pytest.raises(TypeError):
            getattr(wg, name)(wg.tensor(x), 0.5)  # train has no default, as in PyTorch
    out = wg.dropout(wg.tensor(x), 0.5, True)
    assert set(np.unique(out.tolist())) <= {0.0, 2.0}
    channels = np.asarray(wg.feature_dropout(wg.tensor(x), 0.5, True).tolist())
    assert set(np.unique(channels)) <= {0.0, 2.0}
    assert (channels.min(axis=2) == channels.max(axis=2)).all()  # whole channels kept or dropped
    for name in ("dropout_", "alpha_dropout_", "feature_dropout_", "feature_alpha_dropout_"):
        w = wg.tensor(x)
        assert getattr(wg, name)(w, 0.3, True) is w
    for name in ("dropout", "alpha_dropout", "feature_dropout"):
        _raises_like(lambda: getattr(torch, name)(torch.ones(3, 2), 1.5, False),
                     lambda: getattr(wg, name)(wg.ones(3, 2), 1.5, False))
    _raises_like(lambda: torch.feature_dropout(torch.ones(3), 0.5, True), lambda: wg.feature_dropout(wg.ones(3), 0.5, True))


# ============================================================== normalization
def test_norms_in_aten_order():
    x = _arr(4, 6, 5)
    weight, bias = _arr(6), _arr(6)
    _compare("layer_norm", x, [5])
    _compare("layer_norm", x, [6, 5], _arr(6, 5), _arr(6, 5), 1e-3)
    _compare("group_norm", x, 3, weight, bias)
    _compare("rms_norm", x, [5], _arr(5))
    _compare("rms_norm", x, [5], None, 1e-3)
    for training in (True, False):
        mean, var = np.zeros(6, np.float32), np.ones(6, np.float32) * 2
        t_mean, t_var, w_mean, w_var = torch.tensor(mean), torch.tensor(var), wg.tensor(mean), wg.tensor(var)
        t = torch.batch_norm(torch.tensor(x), torch.tensor(weight), torch.tensor(bias), t_mean, t_var, training, 0.2,
                             1e-5, False)
        w = wg.batch_norm(wg.tensor(x), wg.tensor(weight), wg.tensor(bias), w_mean, w_var, training, 0.2, 1e-5,
                          False)
        np.testing.assert_allclose(w.tolist(), t.numpy(), atol=1e-5)
        np.testing.assert_allclose(w_mean.tolist(), t_mean.numpy(), atol=1e-6)
        np.testing.assert_allclose(w_var.tolist(), t_var.numpy(), atol=1e-5)
    _compare("batch_norm", x, weight, bias, None, None, True, 0.1, 1e-5, True)
    _compare("instance_norm", x, weight, bias, None, None, True, 0.1, 1e-5, False)
    with pytest.raises(TypeError):
        wg.batch_norm(wg.tensor(x), None, None, None, None, True)  # every argument, as ATen's


# ================================================================ embeddings
def test_embedding_weight_first():
    weight = _arr(7, 3)
    idx = np.array([[0, 2, 6], [1, 1, 4]], np.int64)
    _compare("embedding", weight, idx)
    _compare("embedding", weight, idx, 1)  # padding_idx 1: no gradient into row 1
    _compare("embedding", weight, idx, -1)  # ATen's -1: no padding


@pytest.mark.parametrize("mode", [1, 2])
def test_embedding_bag_outputs(mode):
    weight = _arr(6, 3)
    idx = np.array([0, 2, 4, 1, 3, 5, 5], np.int64)
    offsets = np.array([0, 2, 2, 5], np.int64)  # one empty bag
    _compare("embedding_bag", weight, idx, offsets, False, mode)
    _compare("embedding_bag", weight, idx, np.array([0, 2, 7], np.int64), False, mode, False, None, True)


def test_embedding_bag_sum_output():
    weight, idx, offsets = _arr(6, 3), np.array([0, 2, 4, 1], np.int64), np.array([0, 1], np.int64)
    t = torch.embedding_bag(torch.tensor(weight), torch.tensor(idx), torch.tensor(offsets), False, 0)
    w = wg.embedding_bag(wg.tensor(weight), wg.tensor(idx), wg.tensor(offsets), False, 0)
    np.testing.assert_allclose(w[0].tolist(), t[0].numpy(), atol=1e-6)
    assert w[1].tolist() == [0, 1, 1, 1] and w[2].tolist() == [1, 3]  # filled, where PyTorch's CPU leaves them empty
    with pytest.raises(RuntimeError):
        wg.embedding_bag(wg.tensor(weight), wg.tensor(idx), wg.tensor(offsets), False, 3)


# =========================================================== shuffles, bilinear
def test_shuffles_and_bilinear():
    _compare("pixel_shuffle", _arr(2, 8, 3, 3), 2)
    _compare("pixel_unshuffle", _arr(2, 2, 4, 6), 2)
    _compare("channel_shuffle", _arr(2, 6, 3), 3, grad=False)
    _compare("native_channel_shuffle", _arr(2, 6, 3), 2, grad=False)
    data = _arr(1, 4, 2)
    np.testing.assert_array_equal(F.native_channel_shuffle(wg.tensor(data), 2).tolist(),
                                  torch.nn.functional.native_channel_shuffle(torch.tensor(data), 2).numpy())
    _compare("bilinear", _arr(4, 3), _arr(4, 5), _arr(2, 3, 5), _arr(2))
    _compare("bilinear", _arr(4, 3), _arr(4, 5), _arr(2, 3, 5))


# ===================================================================== losses
@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_losses_with_int_reductions(reduction):
    a, b = _arr(4, 5), _arr(4, 5)
    sign = np.array([1, -1, 1, -1], np.float32)
    if reduction == 0:  # the default of PyTorch's top-level losses (its binding reads ATen's Mean as 0)
        _compare("kl_div", a, np.abs(b))
        _compare("cosine_embedding_loss", a, b, sign)
        _compare("hinge_embedding_loss", a, np.sign(b))
        _compare("margin_ranking_loss", a[:, 0], b[:, 0], sign)
        _compare("triplet_margin_loss", a, b, _arr(4, 5))
    _compare("kl_div", a, np.abs(b), reduction)
    _compare("kl_div", a, b, reduction, log_target=True)
    _compare("cosine_embedding_loss", a, b, sign, 0.1, reduction)
    _compare("hinge_embedding_loss", a, np.sign(b), 0.5, reduction)
    _compare("margin_ranking_loss", a[:, 0], b[:, 0], sign, 0.2, reduction)
    _compare("triplet_margin_loss", a, b, _arr(4, 5), 1.0, 2.0, 1e-6, True, reduction)
    _compare("poisson_nll_loss", a, np.abs(b), True, False, 1e-8, reduction)
    _compare("poisson_nll_loss", np.abs(a), np.abs(b), False, True, 1e-8, reduction)


def test_ctc_loss_and_bad_reduction():
    log_probs = torch.randn(6, 2, 4).log_softmax(2).detach().numpy()
    targets = np.array([[1, 2, 1], [3, 1, 0]], np.int64)
    _compare("ctc_loss", log_probs, targets, [6, 5], [3, 2])  # PyTorch's default here: unreduced
    _compare("ctc_loss", log_probs, targets, [6, 5], [3, 2], 0, 1)
    _compare("ctc_loss", log_probs, targets, [6, 5], [3, 2], 0, 2)
    _compare("ctc_loss", log_probs, targets, [6, 5], [3, 2], 0, 0, True)
    with pytest.raises(RuntimeError):
        wg.kl_div(wg.zeros(2), wg.zeros(2), 3)


# ================================================================ convolutions
def test_convolution_entry_and_conv_tbc():
    _compare("convolution", _arr(2, 3, 7, 6), _arr(4, 3, 3, 3), _arr(4), [1, 2], [1, 0], [1, 1], False, [0, 0], 1)
    _compare("convolution", _arr(2, 4, 9), _arr(4, 1, 3), None, [2], [1], [1], False, [0], 4)
    _compare("convolution", _arr(2, 3, 5), _arr(3, 2, 3), _arr(2), [2], [1], [1], True, [1], 1)
    _compare("convolution", _arr(1, 2, 3, 4, 4), _arr(3, 2, 2, 2, 2), None, [1, 1, 1], [0, 0, 0], [1, 1, 1], False,
             [0, 0, 0], 1)
    _compare("conv_tbc", _arr(7, 2, 3), _arr(3, 3, 4), _arr(4))
    _compare("conv_tbc", _arr(7, 2, 3), _arr(3, 3, 4), _arr(4), 2)
    _raises_like(lambda: torch.conv_tbc(torch.zeros(7, 2, 3), torch.zeros(3, 5, 4), torch.zeros(4)),
                 lambda: wg.conv_tbc(wg.zeros(7, 2, 3), wg.zeros(3, 5, 4), wg.zeros(4)))


def test_grid_sampler_and_affine_grid_generator():
    theta = np.array([[[0.9, 0.1, 0.05], [-0.1, 1.1, 0.0]]] * 2, np.float32)
    _compare("affine_grid_generator", theta, [2, 3, 4, 5], False)
    _compare("affine_grid_generator", theta, [2, 3, 4, 5], True)
    grid = _arr(2, 3, 4, 2, low=-1.1, high=1.1)
    for interpolation in (0, 1):
        for padding in (0, 1, 2):
            _compare("grid_sampler", _arr(2, 3, 5, 6), grid, interpolation, padding, False,
                     grad=interpolation == 0)
    with pytest.raises(RuntimeError):
        wg.grid_sampler(wg.zeros(1, 1, 2, 2), wg.zeros(1, 1, 1, 2), 5, 0, False)


# ================================================================== rnn cells
def test_rnn_cells_torch_argument_order():
    x, h, c = _arr(3, 4), _arr(3, 5), _arr(3, 5)
    _compare("lstm_cell", x, [h, c], _arr(20, 4), _arr(20, 5), _arr(20), _arr(20))
    _compare("lstm_cell", x, [h, c], _arr(20, 4), _arr(20, 5))
    _compare("gru_cell", x, h, _arr(15, 4), _arr(15, 5), _arr(15), _arr(15))
    _compare("rnn_tanh_cell", x, h, _arr(5, 4), _arr(5, 5), _arr(5), _arr(5))
    _compare("rnn_relu_cell", x, h, _arr(5, 4), _arr(5, 5))
    _raises_like(lambda: torch.gru_cell(torch.zeros(4), torch.zeros(5), torch.zeros(15, 4), torch.zeros(15, 5)),
                 lambda: wg.gru_cell(wg.zeros(4), wg.zeros(5), wg.zeros(15, 4), wg.zeros(15, 5)))  # batched only


# ================================================================ gcd and lcm
def test_gcd_lcm():
    a = np.array([12, -18, 0, 7, 0, 100, 2 ** 40], np.int64)
    b = np.array([8, 4, 0, 0, 5, -75, 3 * 2 ** 20], np.int64)
    _compare("gcd", a, b)
    _compare("lcm", a, b)
    _compare("gcd", a.astype(np.int32), b[:1])  # broadcast and promotion
    _compare("lcm", a[5:6], b.reshape(7, 1))
    t, w = torch.tensor(a), wg.tensor(a)
    assert wg.gcd_(w, wg.tensor(b)) is w
    torch.gcd_(t, torch.tensor(b))
    assert w.tolist() == t.tolist()
    _raises_like(lambda: torch.gcd(torch.ones(2), torch.ones(2)), lambda: wg.gcd(wg.ones(2), wg.ones(2)))
    _raises_like(lambda: torch.lcm(torch.tensor([True]), torch.tensor([True])),
                 lambda: wg.lcm(wg.tensor([True]), wg.tensor([True])))


# ============================================================ predicates, names
def test_predicates():
    x = torch.randn(3)
    w = wg.tensor(x.numpy())
    for data in ([1.0], [1], [True]):
        assert wg.is_signed(wg.tensor(data)) == torch.is_signed(torch.tensor(data))
    assert wg.is_signed(wg.tensor([1], dtype=wg.uint8)) is False
    _compare("isreal", np.array([1.0, np.nan, -np.inf], np.float32))
    _compare("isreal", np.array([1, 2], np.int64))
    z = wg.complex(wg.tensor([1.0, 2.0]), wg.tensor([0.0, 3.0]))
    assert wg.isreal(z).tolist() == [True, False]
    assert wg.is_same_size(w, w) and not wg.is_same_size(w, w[None])
    assert wg.is_inference(w) is torch.is_inference(x) is False
    assert wg.is_distributed(w) is torch.is_distributed(x) is False
    assert wg.get_device(w) == torch.get_device(x) == -1
    assert wg.is_storage(w.untyped_storage()) and not wg.is_storage(w)
    assert wg.typename(w) == torch.typename(x) == "torch.FloatTensor"
    assert wg.typename(wg.tensor([1])) == torch.typename(torch.tensor([1])) == "torch.LongTensor"
    assert wg.typename(3) == torch.typename(3) == "int"
    assert wg.typename(wg.nn.Linear(2, 2)) == "webgrad.nn.linear.Linear"
    assert wg.typename(wg.nn.Linear) == "webgrad.nn.linear.Linear"


def test_can_cast():
    names = ("bool", "uint8", "int32", "int64", "float16", "float32", "float64", "complex64")
    for a in names:
        for b in names:
            assert wg.can_cast(getattr(wg, a), getattr(wg, b)) == torch.can_cast(getattr(torch, a),
                                                                                  getattr(torch, b)), (a, b)
    _raises_like(lambda: torch.can_cast(1, torch.float32), lambda: wg.can_cast(1, wg.float32))


def test_unravel_index():
    for idx, shape in (([4, 1, 0, 5], (2, 3)), ([[7, 23], [0, 11]], (2, 3, 4)), (5, (6,)), ([6, -7, -1], (2, 3)),
                       ([3], 4)):
        t = torch.unravel_index(torch.tensor(idx), shape)
        w = wg.unravel_index(wg.tensor(idx), shape)
        assert isinstance(w, tuple) and len(w) == len(t)
        for a, b in zip(w, t):
            assert a.tolist() == b.tolist() and str(a.dtype).endswith("int64")
    _raises_like(lambda: torch.unravel_index(torch.tensor([1.0]), (2, 3)),
                 lambda: wg.unravel_index(wg.tensor([1.0]), (2, 3)))
    _raises_like(lambda: torch.unravel_index(torch.tensor([1]), (2, -3)),
                 lambda: wg.unravel_index(wg.tensor([1]), (2, -3)))


# ========================================================== norms and products
def test_adjoint_chain_matmul_and_deprecated_norms():
    a = _arr(3, 4)
    _compare("adjoint", a)
    _compare("adjoint", _arr(2, 3, 4))
    _raises_like(lambda: torch.adjoint(torch.zeros(3)), lambda: wg.adjoint(wg.zeros(3)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _compare("chain_matmul", _arr(2, 3), _arr(3, 4), _arr(4, 2))
        _compare("chain_matmul", _arr(2, 3))
        _raises_like(lambda: torch.chain_matmul(), lambda: wg.chain_matmul())
        _raises_like(lambda: torch.chain_matmul(torch.zeros(2, 2, 2)), lambda: wg.chain_matmul(wg.zeros(2, 2, 2)))
        _compare("frobenius_norm", a, (0, 1))
        _compare("frobenius_norm", a, 0)
        _compare("frobenius_norm", a, (1,), True)
        _raises_like(lambda: torch.frobenius_norm(torch.zeros(2, 2, 2), (0, 1, 2)),
                     lambda: wg.frobenius_norm(wg.zeros(2, 2, 2), (0, 1, 2)))
        _compare("nuclear_norm", a, atol=1e-4)
        _compare("nuclear_norm", _arr(2, 3, 4), (1, 2), atol=1e-4)
        _compare("nuclear_norm", a, True, atol=1e-4)
    with pytest.warns(UserWarning, match="deprecated"):
        wg.chain_matmul(wg.zeros(2, 2))


# ============================================================= detach and copies
def test_detach_and_copy_forms():
    t = torch.randn(2, 3, requires_grad=True)
    w = wg.tensor(t.detach().numpy(), requires_grad=True)
    assert not wg.detach(w).requires_grad
    y = w * 2
    assert wg.detach_(y) is y and not y.requires_grad and y.grad_fn is None
    copy = wg.detach_copy(w)
    assert not copy.requires_grad and copy.tolist() == w.tolist()
    data = np.arange(12).reshape(3, 4)
    _compare("select_copy", data, 1, 2)
    _compare("select_copy", data, 0, -1)
    _compare("slice_copy", data, 1, 1, 4, 2)
    _compare("slice_copy", data[0], 0, -3)
    _compare("slice_copy", data)
    _compare("split_copy", data, 2, 1)
    _compare("split_with_sizes_copy", data, [1, 2])
    _raises_like(lambda: torch.split_copy(torch.arange(3), [1, 2]), lambda: wg.split_copy(wg.arange(3), [1, 2]))
    _raises_like(lambda: torch.select_copy(torch.arange(3), 0, 5), lambda: wg.select_copy(wg.arange(3), 0, 5))
    source = wg.arange(6.0)
    piece = wg.select_copy(source.reshape(2, 3), 0, 1)
    piece += 100
    assert source.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]  # a copy, not a view
    z = wg.view_as_complex_copy(wg.tensor([[1.0, 2.0], [3.0, -4.0]]))
    assert str(z.dtype).endswith("complex64")
    assert wg.view_as_real_copy(z).tolist() == [[1.0, 2.0], [3.0, -4.0]]


def test_inplace_forms():
    t, w = torch.zeros(3), wg.zeros(3)
    assert wg.addmv_(w, wg.ones(3, 2), wg.ones(2), beta=1, alpha=2) is w
    torch.addmv_(t, torch.ones(3, 2), torch.ones(2), beta=1, alpha=2)
    assert w.tolist() == t.tolist()
    t, w = torch.arange(6.0), wg.arange(6.0)
    assert wg.as_strided_(w, (2, 2), (1, 2)) is w
    torch.as_strided_(t, (2, 2), (1, 2))
    assert w.tolist() == t.tolist() and tuple(w.stride()) == tuple(t.stride())
    torch.as_strided_(t, (3,), (1,), 3)
    wg.as_strided_(w, (3,), (1,), 3)
    assert w.tolist() == t.tolist()
    _raises_like(lambda: torch.as_strided_(torch.arange(6.0), (4,), (2,)),
                 lambda: wg.as_strided_(wg.arange(6.0), (4,), (2,)))
    r = wg.tensor([1.0, -2.0])
    assert wg.conj_physical_(r) is r and r.tolist() == [1.0, -2.0]
    z = wg.complex(wg.tensor([1.0]), wg.tensor([2.0]))
    assert wg.conj_physical_(z) is z and wg.view_as_real(z).tolist() == [[1.0, -2.0]]


# =================================================================== samplers
def test_poisson_and_binomial():
    wg.manual_seed(1)
    rate = wg.tensor([0.0, 0.5, 3.0, 40.0] * 4000, requires_grad=True)
    draws = wg.poisson(rate)
    values = np.asarray(draws.tolist()).reshape(4000, 4)
    assert str(draws.dtype).endswith("float32") and (values == np.round(values)).all() and (values[:, 0] == 0).all()
    np.testing.assert_allclose(values.mean(0)[1:], [0.5, 3.0, 40.0], rtol=0.1)
    draws.sum().backward()
    assert rate.grad.tolist() == [0.0] * 16000  # PyTorch's: a zero gradient
    _raises_like(lambda: torch.poisson(torch.tensor([-1.0])), lambda: wg.poisson(wg.tensor([-1.0])))
    _raises_like(lambda: torch.poisson(torch.tensor([1])), lambda: wg.poisson(wg.tensor([1])))
    count, prob = wg.tensor([10.0, 5.0, 20.0] * 400), wg.tensor([0.5, 0.0, 0.9] * 400)
    values = np.asarray(wg.binomial(count, prob).tolist()).reshape(400, 3)
    assert (values[:, 1] == 0).all() and (values <= [10, 5, 20]).all()
    np.testing.assert_allclose(values.mean(0)[[0, 2]], [5.0, 18.0], rtol=0.1)
    _raises_like(lambda: torch.binomial(torch.tensor([10]), torch.tensor([0.5])),
                 lambda: wg.binomial(wg.tensor([10]), wg.tensor([0.5])))


# ==================================================================== asarray
def test_asarray():
    for obj in ([1, 2], [1.0, 2.0], 3.0, [[True, False]]):
        t, w = torch.asarray(obj), wg.asarray(obj)
        assert str(w.dtype).split(".")[-1] == str(t.dtype).split(".")[-1] and w.tolist() == t.tolist()
    array = np.arange(3.0)
    w = wg.asarray(array)
    w[0] = 9
    assert array[0] == 9 and str(w.dtype).endswith("float64")  # shares the array, as PyTorch's
    array = np.arange(3.0)
    w = wg.asarray(array, dtype=wg.float32)
    w[0] = 9
    assert array[0] == 0  # a dtype change copies
    _raises_like(lambda: torch.asarray(np.arange(3.0), dtype=torch.float32, copy=False),
                 lambda: wg.asarray(np.arange(3.0), dtype=wg.float32, copy=False))
    base = wg.arange(3.0)
    assert wg.asarray(base) is base and wg.asarray(base, copy=True) is not base
    assert str(wg.asarray(base, dtype=wg.float64).dtype).endswith("float64")
    shared = wg.asarray(base, requires_grad=True)
    assert shared is base and base.requires_grad
    assert wg.asarray([1.5], requires_grad=True).requires_grad


# ================================================================= switches
def test_warn_always_flush_denormal_threads():
    assert wg.is_warn_always_enabled() is False
    wg.set_warn_always(True)
    assert wg.is_warn_always_enabled() is True
    wg.set_warn_always(False)
    assert wg.set_flush_denormal(True) is False and wg.set_flush_denormal(False) is False
    _raises_like(lambda: torch.set_flush_denormal(1), lambda: wg.set_flush_denormal(1))  # RuntimeError: not a bool
    assert wg.init_num_threads() is None


def test_anomaly_switch_ties_to_autograd():
    assert wg.is_anomaly_enabled() is False and wg.is_anomaly_check_nan_enabled() is True
    try:
        wg.set_anomaly_enabled(True)
        assert wg.is_anomaly_enabled() and wg.autograd.is_anomaly_enabled()
        x = wg.tensor([0.0], requires_grad=True)
        with pytest.raises(RuntimeError, match="nan"):
            (x * 0).sqrt().mul(0).sum().backward()  # a NaN gradient, caught by anomaly mode
        wg.set_anomaly_enabled(True, False)
        assert wg.is_anomaly_check_nan_enabled() is False
    finally:
        wg.set_anomaly_enabled(False)
    assert not wg.autograd.is_anomaly_enabled() and wg.is_anomaly_check_nan_enabled()


def test_autocast_state_functions():
    assert wg.is_autocast_cache_enabled() is True
    try:
        wg.set_autocast_cache_enabled(False)
        assert not wg.is_autocast_cache_enabled()
        with wg.autocast("cpu", cache_enabled=True):
            assert wg.is_autocast_cache_enabled()
        assert not wg.is_autocast_cache_enabled()  # the region restores the switch
    finally:
        wg.set_autocast_cache_enabled(True)
    try:
        wg.set_autocast_enabled("cpu", True)
        assert wg.is_autocast_enabled("cpu")
        a = wg.ones(2, 3)
        assert str(wg.mm(a, a.t()).dtype).endswith("bfloat16")  # autocast on: mm runs in bfloat16, the CPU's
    finally:
        wg.set_autocast_enabled("cpu", False)
    assert not wg.is_autocast_enabled("cpu")
    wg.set_autocast_dtype("cpu", wg.float16)
    assert wg.get_autocast_dtype("cpu") is wg.float16
    with pytest.warns(UserWarning, match="float16"):
        wg.set_autocast_dtype("cpu", wg.float64)  # (bfloat16 and float16 are the CPU's)
    wg.set_autocast_dtype("cpu", wg.bfloat16)  # PyTorch's CPU default
    with pytest.warns(DeprecationWarning):
        wg.set_autocast_cpu_dtype(wg.bfloat16)  # (leaves PyTorch's CPU default for the tests after)
    with pytest.warns(DeprecationWarning):
        wg.set_autocast_cpu_enabled(False)
    assert wg.autocast_increment_nesting() == 1 and wg.autocast_decrement_nesting() == 0
    wg.clear_autocast_cache()
    assert wg.GradScaler is wg.amp.GradScaler
    with pytest.raises(ValueError):
        wg.set_autocast_enabled("tpu", True)


def test_get_device_module():
    assert wg.get_device_module("cpu") is wg.cpu and wg.get_device_module(wg.device("cpu")) is wg.cpu
    assert wg.get_device_module("cuda") is wg.cuda and wg.get_device_module("webgpu") is wg.cuda
    assert wg.cpu.is_available() and wg.cpu.device_count() == 1 and wg.cpu.synchronize() is None
    assert wg.get_device_module() in (wg.cpu, wg.cuda)
    _raises_like(lambda: torch.get_device_module("foo"), lambda: wg.get_device_module("foo"))


def test_init_sparse():
    w = wg.empty(20, 7)
    assert wg.nn.init.sparse_(w, 0.3, std=0.5) is w
    zeros = np.asarray((w == 0).sum(0).tolist())
    assert (zeros == 6).all()  # ceil(0.3 * 20) zeros in every column
    assert abs(float(w[w != 0].std()) - 0.5) < 0.15
    with pytest.warns(FutureWarning):
        wg.nn.init.sparse(wg.empty(4, 3), 0.5)
    _raises_like(lambda: torch.nn.init.sparse_(torch.empty(3), 0.1), lambda: wg.nn.init.sparse_(wg.empty(3), 0.1))


# ====================================================== one WebGPU case a family
@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
def test_webgpu_nn_forms():
    x, h, c = _arr(3, 4), _arr(3, 5), _arr(3, 5)
    _compare("lstm_cell", x, [h, c], _arr(20, 4), _arr(20, 5), _arr(20), _arr(20), device="webgpu", atol=1e-4)
    _compare("layer_norm", _arr(2, 3, 5), [5], _arr(5), _arr(5), device="webgpu", atol=1e-4)
    _compare("kl_div", _arr(4, 5), np.abs(_arr(4, 5)), 1, device="webgpu", atol=1e-4)
    _compare("conv_tbc", _arr(7, 2, 3), _arr(3, 3, 4), _arr(4), 1, device="webgpu", atol=1e-4)
    w = wg.tensor(_arr(6), device="webgpu")
    assert F.relu_(w) is w and min(w.tolist()) >= 0


@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
def test_webgpu_math_forms():
    a, b = np.array([12, -18, 0, 7], np.int32), np.array([8, 4, 0, 21], np.int32)
    assert wg.gcd(wg.tensor(a, device="webgpu"), wg.tensor(b, device="webgpu")).tolist() == [4, 2, 0, 7]
    rows, cols = wg.unravel_index(wg.tensor([4, 1, 5], device="webgpu"), (2, 3))
    assert rows.device.type == "webgpu" and rows.tolist() == [1, 0, 1] and cols.tolist() == [1, 1, 2]
    w = wg.zeros(2, 3, device="webgpu")
    assert wg.get_device(w) == 0 and wg.get_device_module(w.device) is wg.cuda
    weight = wg.empty(10, 4, device="webgpu")
    wg.nn.init.sparse_(weight, 0.2)
    assert (weight == 0).sum(0).tolist() == [2, 2, 2, 2]


@pytest.mark.parametrize("name", ["inf", "nan", "pi", "e", "newaxis"])
def test_module_constants_as_torchs(name):
    """torch.inf (masked_fill(mask, -torch.inf)), torch.nan, torch.pi, torch.e are Python floats; torch.newaxis None."""
    ours, theirs = getattr(wg, name), getattr(torch, name)
    assert type(ours) is type(theirs) and (ours == theirs or (ours != ours and theirs != theirs))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    if name == "newaxis":
        assert wg.tensor(x)[:, wg.newaxis].shape == torch.tensor(x)[:, torch.newaxis].shape
    else:
        mask = x > 2
        got = wg.tensor(x).masked_fill(wg.tensor(mask), -ours).numpy()
        np.testing.assert_array_equal(got, torch.tensor(x).masked_fill(torch.tensor(mask), -theirs).numpy())


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "uint8"])
@pytest.mark.parametrize("shapes", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                                    ((5, 2, 3), (3, 4)), ((5, 2, 3), (5, 3, 4)), ((2, 0), (0, 3))])
def test_integer_matmul_as_torchs_cpu(dtype, shapes):
    """torch.dot/mm/matmul of integer tensors (torch.dot(torch.tensor([1, 2, 3]), ...)) are exact, in the dtype."""
    a, b = (RNG.integers(0, 40, s).astype(dtype) for s in shapes)
    ours, theirs = wg.matmul(wg.tensor(a), wg.tensor(b)), torch.matmul(torch.tensor(a), torch.tensor(b))
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.") and ours.tolist() == theirs.tolist()
    if len(shapes[0]) == len(shapes[1]) == 1:
        assert wg.dot(wg.tensor(a), wg.tensor(b)).item() == torch.dot(torch.tensor(a), torch.tensor(b)).item()


def test_matmul_refusals_as_torchs():
    for lib in (wg, torch):
        with pytest.raises(NotImplementedError):  # torch: "addmm_impl_cpu_" not implemented for 'Bool'
            lib.mm(lib.ones(2, 2, dtype=lib.bool), lib.ones(2, 2, dtype=lib.bool))
        with pytest.raises(RuntimeError):
            lib.mm(lib.ones(2, 2, dtype=lib.int64), lib.ones(2, 2, dtype=lib.int32))
        with pytest.raises(RuntimeError):
            lib.mm(lib.ones(2, 2), lib.ones(2, 2, dtype=lib.int64))


def test_ndimension_as_torchs():
    for shape in [(), (3,), (2, 0, 4)]:
        assert wg.zeros(shape).ndimension() == torch.zeros(shape).ndimension() == len(shape)
