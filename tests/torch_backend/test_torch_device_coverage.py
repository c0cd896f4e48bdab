"""ATen ops the webgpu torch device runs as compositions of webgrad's ops (3-D and transposed 1-D convolution, segment
reductions, antialiased resampling, linear algebra, special functions, CTC, real-input FFTs, ...): each under
td.strict() (a CPU fallback raises), values and gradients against PyTorch on the CPU."""

import pytest

from helpers import import_torch_device

torch, td = import_torch_device()
F = torch.nn.functional

DEV = "webgpu"


def _compare(fn, *inputs, grad=True, atol=2e-5, rtol=1e-4):
    """fn on the CPU and, strictly, on the device: outputs (a tensor or a tuple) and the float inputs' gradients
    against one random cotangent on the first output."""
    cpu = [x.clone().requires_grad_(grad and x.is_floating_point()) for x in inputs]
    dev = [x.detach().to(DEV).requires_grad_(grad and x.is_floating_point()) for x in inputs]
    out = fn(*cpu)
    with td.strict():
        got = fn(*dev)
    outs, gots = (out, got) if isinstance(out, tuple) else ((out,), (got,))
    for o, g in zip(outs, gots):
        assert g.device.type == DEV and g.dtype == o.dtype and g.shape == o.shape
        torch.testing.assert_close(g.detach().cpu(), o.detach(), atol=atol, rtol=rtol, equal_nan=True)
    if not grad:
        return
    cot = torch.randn_like(outs[0])
    wrt = [(c, d) for c, d in zip(cpu, dev) if c.requires_grad]
    expected = torch.autograd.grad(outs[0], [c for c, _ in wrt], cot, allow_unused=True, materialize_grads=True)
    with td.strict():
        found = torch.autograd.grad(gots[0], [d for _, d in wrt], cot.to(DEV), allow_unused=True,
                                    materialize_grads=True)
    for e, f in zip(expected, found):
        torch.testing.assert_close(f.cpu(), e, atol=atol * 10, rtol=rtol * 10)


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 0, 1, 1), (2, 1, 1, 2), ((1, 2, 1), (1, 0, 2), 2, 1)])
def test_conv3d(stride, padding, dilation, groups):
    x, w, b = torch.randn(2, 4, 6, 7, 5), torch.randn(6, 4 // groups, 3, 2, 3), torch.randn(6)
    _compare(lambda x, w, b: F.conv3d(x, w, b, stride, padding, dilation, groups), x, w, b)


@pytest.mark.parametrize("stride,padding,output_padding,dilation,groups", [
    (1, 0, 0, 1, 1), (2, 1, 1, 1, 2), ((3, 1, 2), (2, 0, 1), (1, 0, 1), (2, 1, 1), 1)])
def test_conv_transpose3d(stride, padding, output_padding, dilation, groups):
    x, w, b = torch.randn(2, 4, 3, 4, 5), torch.randn(4, 6 // groups, 3, 2, 3), torch.randn(6 // groups * groups)
    _compare(lambda x, w, b: F.conv_transpose3d(x, w, b, stride, padding, output_padding, groups, dilation), x, w, b)


def test_conv_transpose1d():
    x, w, b = torch.randn(2, 4, 9), torch.randn(4, 3, 3), torch.randn(3)
    _compare(lambda x, w, b: F.conv_transpose1d(x, w, b, 2, 1, 1, 1, 2), x, w, b)


@pytest.mark.parametrize("reduce", ["sum", "mean", "prod", "max", "min"])
@pytest.mark.parametrize("initial", [None, 2.0])
def test_segment_reduce(reduce, initial):
    """Empty segments, ties in max and min, a zero in a product; offsets that leave elements out."""
    data = torch.tensor([[1.0, 3.0, 3.0, 0.0, -2.0, 5.0, 4.0], [2.0, -1.0, 0.5, 0.5, 7.0, 1.0, 9.0]]).T
    lengths = torch.tensor([1, 0, 3, 3])
    _compare(lambda d: torch.segment_reduce(d, reduce, lengths=lengths.to(d.device), initial=initial), data)
    offsets = torch.tensor([[0, 2, 2, 5], [1, 1, 4, 6]])
    _compare(lambda d: torch.segment_reduce(d, reduce, offsets=offsets.to(d.device), axis=1, initial=initial),
             data.T.contiguous())


def test_segment_reduce_checks_lengths():
    data = torch.randn(5, device=DEV)
    for lengths, message in (([2, 2], "to sum to"), ([6, -1], "negative")):
        with pytest.raises(RuntimeError, match=message), td.strict():
            torch.segment_reduce(data, "sum", lengths=torch.tensor(lengths, device=DEV))


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("size,scale,align_corners", [((5, 7), None, False), ((13, 4), None, True),
                                                      (None, (0.37, 1.6), False)])
def test_antialiased_interpolate(mode, size, scale, align_corners):
    _compare(lambda x: F.interpolate(x, size, scale, mode, align_corners, antialias=True), torch.randn(2, 3, 11, 9))


@pytest.mark.parametrize("shape,size", [((2, 3, 7), (4,)), ((1, 2, 5, 6), (9, 4)), ((1, 2, 3, 4, 5), (5, 2, 7))])
def test_nearest_exact(shape, size):
    _compare(lambda x: F.interpolate(x, size, mode="nearest-exact"), torch.randn(*shape))


@pytest.mark.parametrize("transposed", [False, True])
def test_det_and_slogdet_gradients(transposed):
    """ATen saves the LU of A^T for a contiguous A (and of A otherwise) and its backward solves accordingly."""
    a = torch.randn(3, 4, 4)
    a = a.mT if transposed else a
    _compare(torch.linalg.det, a, atol=1e-4)
    _compare(lambda x: torch.linalg.slogdet(x)[1], a, atol=1e-4)


def test_solve_qr_svdvals_lu():
    a, b = torch.randn(2, 4, 4) + 4 * torch.eye(4), torch.randn(2, 4, 3)
    _compare(torch.linalg.solve, a, b, atol=1e-4)
    _compare(lambda x: torch.linalg.qr(x)[1], torch.randn(5, 3), atol=1e-4)
    _compare(torch.linalg.svdvals, torch.randn(4, 3), atol=1e-4)
    _compare(lambda x: torch.linalg.lu_factor(x), a, grad=False)


def test_eigenvalues_on_the_device_eigenvectors_on_the_cpu():
    """eigvalsh runs on the device, its gradient too (which needs eigenvectors, sign-free there); eigh's
    eigenvectors (whose signs the device would choose differently from LAPACK's) fall back to the CPU."""
    a = torch.randn(4, 4)
    a = a + a.T
    _compare(torch.linalg.eigvalsh, a, atol=1e-4)
    _compare(lambda x: torch.linalg.eigvalsh(x, UPLO="U"), torch.randn(2, 5, 5), atol=1e-4)
    with pytest.raises(Exception, match="_linalg_eigh"), td.strict():
        torch.linalg.eigh(a.to(DEV))


@pytest.mark.parametrize("name", ["bessel_j0", "modified_bessel_k1", "spherical_bessel_j0", "airy_ai"])
def test_special_unary(name):
    _compare(getattr(torch.special, name), torch.rand(20) * 4 + 0.1, grad=False, atol=1e-5, rtol=1e-4)


def test_special_binary():
    x = torch.rand(10) * 2 - 1
    _compare(lambda x: torch.special.chebyshev_polynomial_t(x, 3), x, grad=False)
    _compare(lambda x, n: torch.special.hermite_polynomial_h(x, n), x, torch.arange(10), grad=False, rtol=1e-3)
    _compare(lambda q: torch.special.zeta(2.0, q), torch.rand(10) + 0.5, grad=False)
    _compare(torch.igamma, torch.rand(10) * 3 + 0.1, torch.rand(10) * 3, grad=False)


def test_unique_variants():
    """unique_dim gives the inverse and counts whatever is asked; unique_consecutive leaves out what is not."""
    x = torch.tensor([[1, 2], [0, 5], [1, 2], [1, 2]])
    _compare(lambda x: torch.ops.aten.unique_dim(x, 0), x, grad=False)
    _compare(lambda x: torch.ops.aten.unique_consecutive(x.flatten(), False, True), x, grad=False)
    _compare(lambda x: torch.unique(x, dim=1, return_inverse=True), x, grad=False)


def test_margin_losses_pdist_and_fold():
    x = torch.randn(4, 5)
    _compare(lambda x: F.multi_margin_loss(x, torch.tensor([0, 4, 2, 2], device=x.device), p=2, margin=0.7), x)
    target = torch.tensor([[3, 0, -1, 1, 1], [1, 2, 3, 4, 0], [-1, 0, 0, 0, 0], [2, 2, -1, 0, 0]])
    _compare(lambda x: torch.ops.aten.multilabel_margin_loss_forward(x, target.to(x.device), 0), x)
    _compare(F.pdist, torch.randn(5, 3))
    _compare(lambda x: F.fold(F.unfold(x, (2, 3), padding=1, stride=2), (6, 7), (2, 3), padding=1, stride=2),
             torch.randn(2, 3, 6, 7))


def test_batch_norm_with_update_updates_the_running_statistics():
    """Also for one channel, whose statistics the host knows when made by zeros() on the device."""
    x = torch.randn(4, 1, 5)
    mean, var = torch.zeros(1), torch.ones(1)
    dmean, dvar = torch.zeros(1, device=DEV), torch.ones(1, device=DEV)
    out = torch.ops.aten._batch_norm_with_update(x, None, None, mean, var, 0.1, 1e-5)
    with td.strict():
        got = torch.ops.aten._batch_norm_with_update(x.to(DEV), None, None, dmean, dvar, 0.1, 1e-5)
    for o, g in zip(out, got):
        assert g.dtype == o.dtype
        torch.testing.assert_close(g.cpu(), o)
    assert dmean.item() == pytest.approx(mean.item(), abs=1e-6) and dvar.item() == pytest.approx(var.item())


def test_rrelu_draws_slopes_on_the_device():
    x = torch.randn(2000, device=DEV, requires_grad=True)
    with td.strict():
        y = F.rrelu(x, 0.1, 0.3, training=True)
        (grad,) = torch.autograd.grad(y.sum(), x)
    xc, yc, gc = x.detach().cpu(), y.detach().cpu(), grad.cpu()
    slopes = yc[xc < 0] / xc[xc < 0]
    assert slopes.min() >= 0.1 - 1e-6 and slopes.max() <= 0.3 + 1e-6 and slopes.std() > 0.03
    assert torch.equal(yc[xc > 0], xc[xc > 0]) and torch.equal(gc[xc > 0], torch.ones_like(gc[xc > 0]))
    torch.testing.assert_close(gc[xc < 0], slopes)


def test_put_repeat_interleave_frexp_angle_histogram():
    x = torch.randn(3, 4)
    _compare(lambda x: x.put(torch.tensor([0, 5, 11], device=x.device), torch.ones(3, device=x.device) * 2), x)
    _compare(lambda r: torch.repeat_interleave(r), torch.tensor([2, 0, 3]), grad=False)
    _compare(torch.frexp, x * 100, grad=False)
    _compare(torch.angle, torch.tensor([-1.0, 0.0, 2.0, float("nan"), -0.0]), grad=False)
    _compare(lambda x: torch.histogram(x, 5), x.flatten(), grad=False)
    _compare(lambda x: torch.nonzero_static(x > 0, size=20), x, grad=False)


@pytest.mark.parametrize("shape,kernel,size", [((2, 3, 11, 9), (2, 3), (5, 4)), ((3, 10, 10), (3, 3), (4, 7)),
                                               ((2, 2, 7, 8, 9), (2, 3, 2), (3, 4, 5)), ((1, 2, 5, 6), (2, 2), (1, 1))])
def test_fractional_max_pool(shape, kernel, size):
    """The windows ATen draws from the same random samples: values and indices exactly, and the gradient."""
    d = len(kernel)
    samples = torch.rand(*(shape[:2] if len(shape) == d + 2 else (1, shape[0])), d)
    fn = F.fractional_max_pool2d if d == 2 else F.fractional_max_pool3d
    x = torch.randn(*shape)
    _compare(lambda x: fn(x, kernel, output_size=size, return_indices=True, _random_samples=samples.to(x.device)), x,
             atol=1e-6, rtol=0)


@pytest.mark.parametrize("targets,input_lengths,target_lengths,reduction,zero_infinity", [
    ([[1, 2, 2], [3, 1, 0], [4, 4, 4]], [6, 5, 6], [3, 2, 1], "none", False),  # padded targets, repeats
    ([1, 2, 3, 3, 4], [8, 6, 7], [3, 1, 1], "mean", False),  # concatenated targets
    ([[1, 1, 1], [2, 0, 0], [3, 0, 0]], [4, 2, 8], [3, 0, 1], "sum", True),  # an impossible one, an empty one
])
def test_ctc_loss(targets, input_lengths, target_lengths, reduction, zero_infinity):
    """ATen's gradient (the logits' through log_softmax), not the log-probabilities' own."""
    log_probs = torch.randn(8, 3, 5).log_softmax(2)
    _compare(lambda lp: F.ctc_loss(lp, torch.tensor(targets, device=lp.device), input_lengths, target_lengths,
                                   reduction=reduction, zero_infinity=zero_infinity), log_probs, atol=1e-5)


@pytest.mark.parametrize("shape", [(5, 5), (5, 2), (2, 5), (3, 4, 3), (4, 1)])
def test_geqrf_and_ormqr(shape):
    """LAPACK's packed Householder form, a column already reduced included; ormqr applies its Q four ways."""
    a = torch.randn(*shape)
    a[..., 1:, 0] = 0
    _compare(torch.geqrf, a, grad=False, atol=1e-5)
    packed, tau = torch.geqrf(a)
    m = shape[-2]
    for left in (True, False):
        for transpose in (True, False):
            other = torch.randn(*shape[:-2], m, 3) if left else torch.randn(*shape[:-2], 3, m)
            _compare(lambda p, t, c, lt=(left, transpose): torch.ormqr(p, t, c, *lt), packed, tau, other, atol=1e-5)


@pytest.mark.parametrize("name,kwargs", [
    ("irfft", {}), ("irfft", {"n": 9, "dim": 0}), ("hfft", {"n": 12}), ("irfft2", {"s": (6, 7)}), ("hfft2", {}),
    ("irfftn", {}), ("irfftn", {"s": (3, 4)}), ("hfftn", {"s": (2, 5), "dim": (0, 2)})])
@pytest.mark.parametrize("norm", [None, "forward", "ortho"])
def test_inverse_real_and_hermitian_ffts(name, kwargs, norm):
    """Of a real input: on the device as webgrad's real products (ops/fft_real.py), not the CPU."""
    _compare(lambda x: getattr(torch.fft, name)(x, norm=norm, **kwargs), torch.randn(3, 4, 5), atol=1e-5)
