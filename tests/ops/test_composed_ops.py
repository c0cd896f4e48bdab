"""The ops composed of other ops (ops/joining.py, movement.py, products.py, creation.py, webgrad.linalg, fft,
signal.windows) and the modes added to pooling, padding, interpolation and losses: values against torch on
every device, gradients against finite differences (helpers.gradcheck) and torch, and the random fills'
distributions and device agreement. The OpInfo samples of the same ops run in tests/compat (cpu in full,
webgpu in test_opinfo_added.py); these cases go beyond them."""

import math

import numpy as np
import pytest

import webgrad as wg
import webgrad.nn.functional as F
from helpers import gradcheck

torch = pytest.importorskip("torch")


def _wg(a, device, grad=False):
    return wg.tensor(np.asarray(a, dtype=np.float32), device=device, requires_grad=grad)


def _close(got, ref, atol=1e-4, rtol=1e-4):
    got = got.detach().to("cpu").numpy() if isinstance(got, wg.Tensor) else np.asarray(got)
    ref = ref.detach().numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref)
    assert got.shape == ref.shape, f"shape {got.shape}, torch {ref.shape}"
    np.testing.assert_allclose(got, ref, atol=atol, rtol=rtol)


def _against_torch(device, wg_fn, torch_fn, *shapes, seed=0, atol=1e-4):
    """Forward and every input's gradient of wg_fn against torch_fn on random inputs of `shapes`."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    ws = [_wg(a, device, True) for a in arrays]
    ref, got = torch_fn(*ts), wg_fn(*ws)
    _close(got, ref, atol=atol)
    cot = rng.standard_normal(tuple(ref.shape)).astype(np.float32)
    ref.backward(torch.tensor(cot))
    got.backward(_wg(cot, device))
    for t, w in zip(ts, ws):
        _close(w.grad, t.grad, atol=atol)


# ---------------------------------------------------------------------------- einsum
EINSUM = [
    ("ii->i", [(4, 4)]), ("ii", [(4, 4)]), ("ij->ji", [(2, 3)]), ("i,i", [(5,), (5,)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("bij,jk", [(2, 3, 4), (4, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]), ("i,j,k->ijk", [(2,), (3,), (4,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("iij->j", [(3, 3, 4)]), ("iji->j", [(2, 3, 2)]),
    ("ijk,ikj->i", [(2, 3, 4), (2, 4, 3)]), ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ab,cd->", [(2, 3), (4, 5)]), ("...,...->...", [(2, 3), (3,)]), ("ij,kj->ik", [(2, 1), (4, 3)]),
    ("aab,bc->ac", [(3, 3, 4), (4, 2)]), ("Ab,bA", [(2, 3), (3, 2)]), ("bn,anm,bm->ba", [(2, 3), (5, 3, 4), (2, 4)]),
]


@pytest.mark.parametrize("equation,shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum_matches_torch(device, equation, shapes):
    _against_torch(device, lambda *xs: wg.einsum(equation, *xs), lambda *xs: torch.einsum(equation, *xs), *shapes)


def test_einsum_list_form_and_errors():
    a, b = wg.randn(2, 3), wg.randn(3, 4)
    _close(wg.einsum("ij,jk", [a, b]), a.numpy() @ b.numpy())
    with pytest.raises(RuntimeError, match="does not match the number of dimensions"):
        wg.einsum("ijk,jk", a, b)
    with pytest.raises(RuntimeError, match="does not appear in the equation"):
        wg.einsum("ij,jk->iz", a, b)
    with pytest.raises(RuntimeError, match="operands do not broadcast"):
        wg.einsum("ij,ij->ij", a, wg.randn(2, 4))


def test_einsum_gradcheck():
    rng = np.random.default_rng(1)
    gradcheck(lambda a, b: wg.einsum("bij,bjk->bik", a, b), rng.standard_normal((2, 3, 4)),
              rng.standard_normal((2, 4, 2)))
    gradcheck(lambda a: wg.einsum("iij->j", a), rng.standard_normal((3, 3, 2)))


# ---------------------------------------------------------------------------- products
@pytest.mark.parametrize("name,shapes,wg_fn,torch_fn", [
    ("kron", [(2, 3), (3, 2)], wg.kron, torch.kron),
    ("tensordot", [(2, 3, 4), (4, 3, 5)], lambda a, b: wg.tensordot(a, b, ([1, 2], [1, 0])),
     lambda a, b: torch.tensordot(a, b, ([1, 2], [1, 0]))),
    ("addbmm", [(3, 4), (5, 3, 2), (5, 2, 4)], lambda i, a, b: wg.addbmm(i, a, b, beta=0.5, alpha=2.0),
     lambda i, a, b: torch.addbmm(i, a, b, beta=0.5, alpha=2.0)),
    ("baddbmm", [(5, 3, 4), (5, 3, 2), (5, 2, 4)], lambda i, a, b: wg.baddbmm(i, a, b, alpha=0.3),
     lambda i, a, b: torch.baddbmm(i, a, b, alpha=0.3)),
    ("addr", [(3, 4), (3,), (4,)], wg.addr, torch.addr),
    ("cross", [(4, 3), (1, 3)], lambda a, b: wg.cross(a, b, dim=1), lambda a, b: torch.cross(a, b, dim=1)),
    ("block_diag", [(2, 3), (1,), (2, 2)], wg.block_diag, torch.block_diag),
    ("cartesian_prod", [(3,), (2,)], wg.cartesian_prod, torch.cartesian_prod),
    ("combinations", [(4,)], lambda a: wg.combinations(a, 3, with_replacement=True),
     lambda a: torch.combinations(a, 3, with_replacement=True)),
    ("inner", [(2, 3), (4, 3)], wg.inner, torch.inner),
])
def test_products_match_torch(device, name, shapes, wg_fn, torch_fn):
    _against_torch(device, wg_fn, torch_fn, *shapes)


@pytest.mark.parametrize("p", [0.5, 1.0, 2.0, 3.0, math.inf])
def test_cdist_matches_torch_and_finite_differences(device, p):
    _against_torch(device, lambda a, b: wg.cdist(a, b, p), lambda a, b: torch.cdist(a, b, p), (2, 4, 3), (2, 5, 3))
    if device == "cpu" and p not in (math.inf,):
        rng = np.random.default_rng(2)
        gradcheck(lambda a, b: wg.cdist(a, b, p), rng.standard_normal((3, 2)), rng.standard_normal((4, 2)))


# ---------------------------------------------------------------------------- joining and rearranging
@pytest.mark.parametrize("name,shapes,wg_fn,torch_fn", [
    ("roll", [(3, 4, 5)], lambda x: wg.roll(x, (2, -7), (0, 2)), lambda x: torch.roll(x, (2, -7), (0, 2))),
    ("roll_flat", [(3, 4)], lambda x: x.roll(5), lambda x: x.roll(5)),
    ("rot90", [(3, 4, 2)], lambda x: wg.rot90(x, 3, (2, 0)), lambda x: torch.rot90(x, 3, (2, 0))),
    ("tile", [(2, 3)], lambda x: x.tile(2, 1, 3), lambda x: x.tile(2, 1, 3)),
    ("repeat_interleave", [(3, 2)], lambda x: x.repeat_interleave(wg.tensor([2, 0, 3]), dim=0),
     lambda x: x.repeat_interleave(torch.tensor([2, 0, 3]), dim=0)),
    ("diag_embed", [(2, 3)], lambda x: wg.diag_embed(x, -1, 0, 2), lambda x: torch.diag_embed(x, -1, 0, 2)),
    ("unfold", [(4, 7)], lambda x: x.unfold(1, 3, 2), lambda x: x.unfold(1, 3, 2)),
    ("as_strided", [(3, 4)], lambda x: x.as_strided((3, 3), (1, 2), 1), lambda x: x.as_strided((3, 3), (1, 2), 1)),
    ("column_stack", [(3,), (3, 2)], lambda a, b: wg.column_stack([a, b]), lambda a, b: torch.column_stack([a, b])),
    ("dstack", [(2, 3), (2, 3)], lambda a, b: wg.dstack([a, b]), lambda a, b: torch.dstack([a, b])),
    ("sum_to_size", [(2, 3, 4)], lambda x: x.sum_to_size(3, 1), lambda x: x.sum_to_size(3, 1)),
])
def test_rearranging_matches_torch(device, name, shapes, wg_fn, torch_fn):
    _against_torch(device, wg_fn, torch_fn, *shapes)


def test_tensor_split_follows_python_slices():
    x, t = wg.arange(10.0), torch.arange(10.0)
    for spec in ([4, 2], [-3, 8], [2, -1, 20], [0], 3, 4, 11):
        assert [p.tolist() for p in wg.tensor_split(x, spec)] == [p.tolist() for p in torch.tensor_split(t, spec)]
    with pytest.raises(RuntimeError, match="not divisible"):
        wg.hsplit(wg.zeros(2, 5), 2)


def test_meshgrid_xy_and_broadcast_tensors():
    a, b, c = wg.arange(3.0), wg.arange(2.0), wg.arange(4.0)
    ta, tb, tc = torch.arange(3.0), torch.arange(2.0), torch.arange(4.0)
    for got, ref in zip(wg.meshgrid(a, b, c, indexing="xy"), torch.meshgrid(ta, tb, tc, indexing="xy")):
        _close(got, ref)
    shapes = [tuple(t.shape) for t in wg.broadcast_tensors(wg.zeros(3, 1), wg.zeros(2, 1, 4))]
    assert shapes == [(2, 3, 4), (2, 3, 4)]


def test_as_strided_refuses_storage_outside_the_input():
    with pytest.raises(RuntimeError, match="outside the input"):
        wg.zeros(4).as_strided((3,), (2,))


# ---------------------------------------------------------------------------- creation and random fills
def test_creation_forms():
    assert wg.empty_strided((2, 3), (1, 2)).stride() == (1, 2)
    assert wg.empty_permuted((2, 3, 4), (2, 0, 1)).stride() == torch.empty_permuted((2, 3, 4), (2, 0, 1)).stride()
    assert wg.scalar_tensor(3).dtype is wg.float32 and wg.scalar_tensor(3).item() == 3.0
    _close(wg.logspace(-2, 3, 7, base=2.0), torch.logspace(-2, 3, 7, base=2.0))
    x = wg.zeros(2, 3)
    x.resize_(4, 2)
    assert tuple(x.shape) == (4, 2)
    assert wg.full((2,), 7.0).resize_(1).tolist() == [7.0]


@pytest.mark.parametrize("name,args,mean,var", [
    ("exponential_", (2.0,), 0.5, 0.25),
    ("geometric_", (0.25,), 4.0, 12.0),
    ("log_normal_", (0.0, 0.5), math.exp(0.125), (math.exp(0.25) - 1) * math.exp(0.25)),
    ("bernoulli_", (0.3,), 0.3, 0.21),
])
def test_random_fills_have_their_distribution_and_agree_across_devices(name, args, mean, var):
    from helpers import DEVICES
    n = 200_000
    draws = []
    for device in DEVICES:
        wg.manual_seed(7)
        draws.append(getattr(wg.empty(n, device=device), name)(*args).to("cpu").numpy().astype(np.float64))
    sample = draws[0]
    assert abs(sample.mean() - mean) < 5 * math.sqrt(var / n), (sample.mean(), mean)
    assert abs(sample.var() - var) < 0.05 * var
    for other in draws[1:]:
        np.testing.assert_allclose(other, sample, rtol=1e-4, atol=1e-5)


def test_cauchy_quartiles():
    wg.manual_seed(3)
    x = wg.empty(100_000).cauchy_(1.0, 2.0).numpy()
    q1, q2, q3 = np.percentile(x, [25, 50, 75])
    assert abs(q2 - 1.0) < 0.05 and abs(q1 - (-1.0)) < 0.05 and abs(q3 - 3.0) < 0.05


def test_normal_forms_and_gradients(device):
    mean = _wg(np.zeros((3, 4)), device, True)
    std = _wg(np.full((4,), 2.0), device, True)
    wg.manual_seed(0)
    out = wg.normal(mean, std)
    out.sum().backward()
    assert tuple(out.shape) == (3, 4)
    _close(mean.grad, np.ones((3, 4)))
    _close(std.grad, (out.detach().to("cpu").numpy() / 2.0).sum(0), atol=1e-4)
    assert tuple(wg.normal(0.0, 1.0, (2, 5), device=device).shape) == (2, 5)
    p = _wg(np.full((5,), 0.5), device, True)
    wg.bernoulli(p).sum().backward()
    _close(p.grad, np.zeros(5))


def test_fill_gradients(device):
    x = _wg(np.ones(3), device, True)
    v = _wg(2.0, device, True)
    out = wg.fill(x, v)
    (out * _wg([1.0, 2.0, 3.0], device)).sum().backward()
    _close(out, [2.0, 2.0, 2.0])
    _close(x.grad, np.zeros(3))
    _close(v.grad, 6.0)


# ---------------------------------------------------------------------------- linalg, fft, windows
@pytest.mark.parametrize("ord", ["fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf])
def test_matrix_norm_matches_torch(device, ord):
    _against_torch(device, lambda a: wg.linalg.matrix_norm(a, ord), lambda a: torch.linalg.matrix_norm(a, ord),
                   (3, 4, 5), atol=2e-4)


def test_singular_value_norms_gradcheck():
    rng = np.random.default_rng(4)
    for ord in ("nuc", 2, -2):
        gradcheck(lambda a: wg.linalg.matrix_norm(a, ord), rng.standard_normal((4, 3)), atol=1e-5)


def test_linalg_products(device):
    _against_torch(device, lambda a, b, c: wg.linalg.multi_dot([a, b, c]),
                   lambda a, b, c: torch.linalg.multi_dot([a, b, c]), (3,), (3, 4), (4,))
    _against_torch(device, lambda a: wg.linalg.matrix_power(a, 5), lambda a: torch.linalg.matrix_power(a, 5),
                   (2, 3, 3), atol=1e-3)
    _against_torch(device, lambda x: wg.linalg.vander(x, N=4), lambda x: torch.linalg.vander(x, N=4), (2, 3))
    _against_torch(device, lambda a: wg.linalg.matrix_power(a + 3 * wg.eye(3, device=a.device), -2),
                   lambda a: torch.linalg.matrix_power(a + 3 * torch.eye(3), -2), (2, 3, 3), atol=1e-4)


def test_fftshift(device):
    x = wg.arange(30.0, device=device).reshape(5, 6)
    t = torch.arange(30.0).reshape(5, 6)
    _close(wg.fft.fftshift(x), torch.fft.fftshift(t))
    _close(wg.fft.ifftshift(wg.fft.fftshift(x)), t)


@pytest.mark.parametrize("name,kwargs", [("bartlett", {}), ("blackman", {}), ("cosine", {}), ("exponential", {}),
                                         ("gaussian", {"std": 2.5}), ("general_cosine", {"a": [0.5, 0.3, 0.2]}),
                                         ("general_hamming", {"alpha": 0.6}), ("hamming", {}), ("hann", {}),
                                         ("kaiser", {"beta": 5.0}), ("nuttall", {})])
@pytest.mark.parametrize("M", [1, 8, 33])
def test_windows_match_torch(name, kwargs, M):
    for sym in (True, False):
        _close(getattr(wg.signal.windows, name)(M, sym=sym, **kwargs),
               getattr(torch.signal.windows, name)(M, sym=sym, **kwargs), atol=1e-6)


# ---------------------------------------------------------------------------- modes
@pytest.mark.parametrize("kwargs", [dict(kernel_size=3, stride=2, ceil_mode=True),
                                    dict(kernel_size=(2, 3), stride=(2, 2), padding=(1, 1), ceil_mode=True),
                                    dict(kernel_size=3, stride=2, dilation=2, ceil_mode=True)])
def test_max_pool2d_ceil_mode(device, kwargs):
    _against_torch(device, lambda x: F.max_pool2d(x, **kwargs), lambda x: torch.nn.functional.max_pool2d(x, **kwargs),
                   (2, 3, 8, 9))
    x = np.random.default_rng(5).standard_normal((1, 2, 8, 9)).astype(np.float32)
    _, idx = F.max_pool2d(_wg(x, device), return_indices=True, **kwargs)
    _, ref = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **kwargs)
    assert idx.tolist() == ref.tolist()


@pytest.mark.parametrize("kwargs", [dict(kernel_size=3, stride=2, ceil_mode=True),
                                    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
                                    dict(kernel_size=2, stride=3, ceil_mode=True, divisor_override=3),
                                    dict(kernel_size=2, divisor_override=-2)])
def test_avg_pool2d_ceil_mode_and_divisor(device, kwargs):
    _against_torch(device, lambda x: F.avg_pool2d(x, **kwargs), lambda x: torch.nn.functional.avg_pool2d(x, **kwargs),
                   (2, 3, 8, 9))


def test_pooling_modes_gradcheck():
    x = np.random.default_rng(6).standard_normal((1, 1, 5, 6))
    gradcheck(lambda t: F.avg_pool2d(t, 3, 2, 1, ceil_mode=True, count_include_pad=False), x)
    gradcheck(lambda t: F.max_pool2d(t, 2, 2, ceil_mode=True), x)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("pads", [(-1, 2, 1, -2), (2, -1, -1, 0), (0, -3, 0, 0)])
def test_pad_with_negative_pads(device, mode, pads):
    _against_torch(device, lambda x: F.pad(x, pads, mode=mode), lambda x: torch.nn.functional.pad(x, pads, mode=mode),
                   (1, 2, 4, 5))


@pytest.mark.parametrize("mode,size,align", [("bicubic", (5, 7), False), ("bicubic", (3, 2), True),
                                             ("area", (3, 5), None), ("area", (7, 2), None)])
def test_interpolate_bicubic_and_area(device, mode, size, align):
    _against_torch(device, lambda x: F.interpolate(x, size=size, mode=mode, align_corners=align),
                   lambda x: torch.nn.functional.interpolate(x, size=size, mode=mode, align_corners=align),
                   (2, 2, 4, 5))
    if device == "cpu":
        gradcheck(lambda t: F.interpolate(t, size=size, mode=mode, align_corners=align),
                  np.random.default_rng(7).standard_normal((1, 1, 4, 5)))


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("size,align", [((3, 2), False), ((9, 11), False), ((4, 7), True), (None, False)])
def test_interpolate_antialias(device, mode, size, align):
    """ATen's antialiased filters (torchvision's Resize on tensors), as two products with [out, in] matrices."""
    kw = dict(size=size, mode=mode, antialias=True, align_corners=align) if size else \
        dict(scale_factor=0.45, mode=mode, antialias=True)
    _against_torch(device, lambda x: F.interpolate(x, **kw), lambda x: torch.nn.functional.interpolate(x, **kw),
                   (2, 2, 10, 13))
    if device == "cpu":
        gradcheck(lambda t: F.interpolate(t, **kw), np.random.default_rng(7).standard_normal((1, 1, 10, 13)))
    with pytest.raises(ValueError, match="Anti-alias"):
        F.interpolate(wg.ones(1, 1, 4), size=2, mode="linear", antialias=True)


@pytest.mark.parametrize("stride,padding,output_padding,dilation", [((3, 2), (1, 2), (2, 3), (4, 4)),
                                                                     (2, 0, 2, 3), (2, 3, 1, 1)])
def test_conv_transpose2d_output_padding_past_the_stride(device, stride, padding, output_padding, dilation):
    kw = dict(stride=stride, padding=padding, output_padding=output_padding, dilation=dilation, groups=2)
    _against_torch(device, lambda x, w, b: F.conv_transpose2d(x, w, b, **kw),
                   lambda x, w, b: torch.nn.functional.conv_transpose2d(x, w, b, **kw), (2, 4, 4, 3), (4, 2, 3, 2),
                   (4,), atol=2e-4)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
def test_cross_entropy_with_probability_targets(device, reduction, label_smoothing):
    target = torch.softmax(torch.randn(3, 4, 2), 1).numpy()

    def ours(x, w):
        return F.cross_entropy(x, _wg(target, device), weight=w, reduction=reduction, label_smoothing=label_smoothing)

    def theirs(x, w):
        return torch.nn.functional.cross_entropy(x, torch.tensor(target), weight=w, reduction=reduction,
                                                 label_smoothing=label_smoothing)
    _against_torch(device, ours, theirs, (3, 4, 2), (4,))


LEGACY_OVERLOADS = {
    "x.add_(alpha, other)": lambda L, x, y: x.clone().add_(-0.5, y),
    "x.add(alpha, other)": lambda L, x, y: x.add(2, y),
    "torch.add(x, alpha, other)": lambda L, x, y: L.add(x, 3, y),
    "x.sub_(alpha, other)": lambda L, x, y: x.clone().sub_(2, y),
    "torch.sub(x, alpha, other)": lambda L, x, y: L.sub(x, 0.5, y),
    "x.addcmul_(value, t1, t2)": lambda L, x, y: x.clone().addcmul_(0.1, y, y),
    "torch.addcdiv(x, value, t1, t2)": lambda L, x, y: L.addcdiv(x, 2, y, y + 3),
}


@pytest.mark.parametrize("case", list(LEGACY_OVERLOADS), ids=list(LEGACY_OVERLOADS))
def test_deprecated_number_first_overloads_compute_as_torch_and_warn(case):
    """Scripts from before PyTorch 1.5 write p.data.add_(-lr, p.grad.data) and exp_avg_sq.addcmul_(1 - b2, g, g):
    PyTorch still runs them (with a deprecation warning), and so does webgrad."""
    x, y = np.linspace(-1, 1, 6, dtype=np.float32), np.linspace(0.5, 2, 6, dtype=np.float32)
    with pytest.warns(UserWarning, match="This overload of .* is deprecated"):
        got = LEGACY_OVERLOADS[case](wg, wg.tensor(x), wg.tensor(y))
    ref = LEGACY_OVERLOADS[case](torch, torch.tensor(x), torch.tensor(y))
    _close(got, ref, atol=1e-6, rtol=1e-6)
