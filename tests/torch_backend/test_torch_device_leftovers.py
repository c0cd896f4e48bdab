"""What PyTorch's OpInfo samples found on the webgpu torch device, each against PyTorch on the CPU: zero gradients,
empty indices, Python numbers in the CPU fallback, the strides of copies between devices."""

import warnings

import pytest

from helpers import import_torch_device

torch, td = import_torch_device()


DEV = "webgpu"


def test_sgn_backward_of_a_real_tensor_is_zeros_on_the_device():
    """ATen's gradient of sgn for real inputs is an efficient ZeroTensor: made on the device, no fallback."""
    x = torch.randn(4, 5)
    gx = x.to(DEV).requires_grad_()
    with td.strict():
        (grad,) = torch.autograd.grad(gx.sgn().sum(), gx)
    assert grad.device.type == DEV
    torch.testing.assert_close(grad.cpu(), torch.zeros(4, 5))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int64])
def test_gather_backward_with_an_empty_index(dtype):
    """An empty index of any shape and integer dtype is accepted by gather, and its backward scatters nothing."""
    x = torch.randn(5, requires_grad=True)
    gx = x.detach().to(DEV).requires_grad_()
    index = torch.zeros(2, 0, dtype=dtype)
    out = x.gather(0, index)
    gout = gx.gather(0, index.to(DEV))
    assert gout.shape == out.shape
    (grad,) = torch.autograd.grad(out.sum(), x, allow_unused=True, materialize_grads=True)
    (ggrad,) = torch.autograd.grad(gout.sum(), gx, allow_unused=True, materialize_grads=True)
    torch.testing.assert_close(ggrad.cpu(), grad)
    # scatter_add_ and scatter_ with an empty index leave self as it is, as on the CPU
    target = torch.arange(5.0)
    for fn in (lambda t, i, s: t.scatter_add_(0, i, s), lambda t, i, s: t.scatter_(0, i, s)):
        expected = fn(target.clone(), index, torch.zeros(2, 0))
        got = fn(target.to(DEV), index.to(DEV), torch.zeros(2, 0, device=DEV))
        torch.testing.assert_close(got.cpu(), expected)


@pytest.mark.parametrize("call", [
    lambda x, out: torch.special.zeta(x, 2.0, out=out),
    lambda x, out: torch.special.zeta(2.0, x, out=out),
    lambda x, out: torch.special.chebyshev_polynomial_t(x, 3, out=out),
    lambda x, out: torch.special.hermite_polynomial_h(x, 2, out=out),
], ids=["zeta_other", "zeta_self", "chebyshev_t", "hermite_h"])
def test_the_cpu_fallback_takes_python_numbers_for_tensor_arguments_of_out_overloads(call):
    """PyTorch hands the boxed fallback a wrapped number as a Python number; the out= overload wants a Tensor."""
    x = torch.rand(6) + 1
    expected = call(x, torch.empty(6))
    out = torch.empty(6, device=DEV)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the fallback's one warning per op)
        got = call(x.to(DEV), out)
    assert got is out
    torch.testing.assert_close(out.cpu(), expected)


CASES = {
    "transposed": lambda: torch.randn(3, 4).t(),
    "permuted": lambda: torch.randn(2, 3, 4).permute(2, 0, 1),
    "channels_last": lambda: torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last),
    "strided": lambda: torch.randn(3, 8)[:, ::2],
    "transposed_strided": lambda: torch.randn(4, 6).t()[::2],
    "expanded": lambda: torch.randn(3, 1).expand(3, 4),
    "offset": lambda: torch.randn(5)[1:4],
}


@pytest.mark.parametrize("case", list(CASES))
def test_copies_between_devices_keep_strides_as_preserve_format_does(case):
    """.to("webgpu"), .cpu(), .to(dtype) and .clone() keep a non-overlapping and dense tensor's strides (a
    transposed one's too), and give other tensors dense strides in the order of theirs, as on the CPU."""
    t = CASES[case]()
    g = t.to(DEV)
    assert g.stride() == t.clone().stride()
    back = g.cpu()
    assert back.stride() == t.clone().stride()
    torch.testing.assert_close(back, t)
    for copy, reference in ((g.to(torch.int32), t.to(torch.int32)), (g.clone(), t.clone()),
                            (g.contiguous(), t.contiguous())):
        assert copy.device.type == DEV and copy.stride() == reference.stride()
        torch.testing.assert_close(copy.cpu(), reference)


def test_copies_take_the_memory_format_asked_for():
    t = torch.randn(2, 3, 4, 5)
    g = t.to(DEV)
    for fmt in (torch.channels_last, torch.contiguous_format):
        got = g.contiguous(memory_format=fmt)
        assert got.stride() == t.contiguous(memory_format=fmt).stride()
        torch.testing.assert_close(got.cpu(), t)
        assert g.to(torch.float32, memory_format=fmt, copy=True).stride() == t.to(memory_format=fmt).stride()
    v = torch.randn(2, 3, 4, 5, 6)
    assert torch.empty(2, 3, 4, 5, 6, device=DEV, memory_format=torch.channels_last_3d).stride() == \
        v.contiguous(memory_format=torch.channels_last_3d).stride()


def _leaf(t, device):
    return t.detach().to(device).requires_grad_()


def _grads_match(fn, x, strict=True):
    """fn(x) and x's gradient on the CPU and on the device (strict: wholly on the device)."""
    out = {}
    for device in ("cpu", DEV):
        leaf = _leaf(x, device)
        with td.strict(strict):
            y = fn(leaf)
            (g,) = torch.autograd.grad((y * torch.linspace(-1, 1, y.numel()).reshape(y.shape).to(device)).sum(), leaf)
        out[device] = (y.detach().cpu(), g.cpu())
    torch.testing.assert_close(out[DEV][0], out["cpu"][0], atol=1e-4, rtol=1e-3)
    torch.testing.assert_close(out[DEV][1], out["cpu"][1], atol=1e-4, rtol=1e-3)


def test_pinv_matrix_rank_and_renorm_run_on_the_device():
    """ATen's decompositions ask for float64 tolerances (pinv, matrix_rank) and float64 norms (renorm's backward);
    webgrad's own ops run instead, gradients included."""
    a = torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
    _grads_match(lambda t: torch.linalg.pinv(t), a)
    _grads_match(lambda t: torch.pinverse(t), a)
    _grads_match(lambda t: torch.linalg.pinv(t, rtol=0.1), a)
    _grads_match(lambda t: t.renorm(2, 1, 0.5), torch.randn(3, 4, 5))
    square = torch.randn(5, 5, generator=torch.Generator().manual_seed(1))
    square[:, -1] = square[:, 0]  # rank 4
    with td.strict():
        for kwargs in ({}, {"hermitian": True}, {"atol": 0.5}, {"atol": None, "rtol": 0.3}, {"tol": 0.5}):
            m = square @ square.T if kwargs.get("hermitian") else square
            expected = torch.linalg.matrix_rank(m, **kwargs)
            got = torch.linalg.matrix_rank(m.to(DEV), **kwargs)
            assert got.device.type == DEV and got.dtype == expected.dtype and got.item() == expected.item()


def test_an_empty_batch_norm_makes_its_float64_placeholders():
    """ATen's batch norm of an empty input makes empty float64 statistics; a float64 tensor with elements still
    raises the device's TypeError naming the dtype."""
    x = torch.randn(0, 3)
    out = torch.nn.functional.batch_norm(x.to(DEV), None, None, torch.ones(3, device=DEV), torch.zeros(3, device=DEV),
                                         training=True)
    assert out.shape == (0, 3) and out.device.type == DEV
    empty = torch.empty(0, dtype=torch.float64, device=DEV)
    assert empty.dtype == torch.float64 and empty.cpu().shape == (0,)
    with pytest.raises(TypeError, match="float64"):
        torch.ones(2, dtype=torch.float64, device=DEV)


def test_ffts_with_complex_insides():
    """irfft / hfft / stft(return_complex=False) of a real input give a real result through complex tensors in
    ATen's decomposition: they run on the device as webgrad's real products (ops/fft_real.py), gradients included.
    A complex result raises TypeError naming the dtype."""
    x = torch.randn(4, 6)
    _grads_match(lambda t: torch.fft.irfft(t, n=8), x)
    _grads_match(lambda t: torch.fft.hfftn(t, s=(3, 8)), x)
    signal = torch.randn(2, 40)
    window = torch.hann_window(7)
    _grads_match(lambda t: torch.stft(t, 8, 3, 7, window.to(t.device), return_complex=False), signal)
    _grads_match(lambda t: torch.stft(t, 8, center=False, normalized=True, onesided=False, return_complex=False),
                 signal)
    with pytest.raises(TypeError, match="complex64"):
        torch.fft.rfft(x.to(DEV))
    with pytest.raises(TypeError, match="complex64"):
        torch.stft(signal.to(DEV), 8, return_complex=True)


@pytest.mark.parametrize("fn", [
    lambda t: torch.nn.functional.hardshrink(t, 0.3),
    lambda t: torch.nn.functional.softshrink(t, 0.3),
    lambda t: torch.nn.functional.threshold(t, 0.1, -2.0),
    lambda t: torch.nn.functional.glu(t, 1),
    lambda t: torch.logit(torch.sigmoid(t), eps=0.2),
    lambda t: torch.nn.functional.channel_shuffle(t.reshape(1, 4, 3), 2),
    lambda t: torch.nn.functional.binary_cross_entropy(torch.sigmoid(t), torch.linspace(0, 1, 12).reshape(3, 4).to(
        t.device)),
    lambda t: torch.trace(t[:, :3]),
], ids=["hardshrink", "softshrink", "threshold", "glu", "logit", "channel_shuffle", "binary_cross_entropy", "trace"])
def test_ops_with_webgrad_kernels_and_their_gradients(fn):
    torch.manual_seed(0)
    _grads_match(fn, torch.randn(3, 4) * 2)


def test_lookups_and_histograms_on_the_device():
    x = torch.randn(20)
    boundaries = torch.tensor([-1.0, 0.0, 0.5, 2.0])
    with td.strict():
        for fn in (lambda t, b: torch.histc(t, 5, -2, 2), lambda t, b: torch.bucketize(t, b, right=True),
                   lambda t, b: torch.searchsorted(b, t), lambda t, b: torch.logical_xor(t > 0, t < 1)):
            expected, got = fn(x, boundaries), fn(x.to(DEV), boundaries.to(DEV))
            assert got.device.type == DEV and got.dtype == expected.dtype
            torch.testing.assert_close(got.cpu(), expected)


def _module_grads_match(module, x, loss):
    """A module's output, input gradient and parameter gradients on the CPU and, strict, on the device."""
    import copy
    results = []
    for device in ("cpu", DEV):
        m = copy.deepcopy(module).to(device)
        leaf = _leaf(x, device)
        with td.strict(device == DEV):
            y = m(leaf)
            grads = torch.autograd.grad(loss(y), [leaf] + list(m.parameters()))
        results.append([y.detach().cpu()] + [g.cpu() for g in grads])
    for a, b in zip(*results):
        torch.testing.assert_close(b, a, atol=1e-4, rtol=1e-3)


def test_group_norm_prelu_and_2d_nll_loss_train_on_the_device():
    torch.manual_seed(0)
    x = torch.randn(2, 6, 5, 4)
    weighted = lambda y: (y * torch.linspace(-1, 1, y.numel()).reshape(y.shape).to(y.device)).sum()  # noqa: E731
    _module_grads_match(torch.nn.GroupNorm(3, 6), x, weighted)
    _module_grads_match(torch.nn.PReLU(6, 0.2), x, weighted)
    _module_grads_match(torch.nn.PReLU(), x, weighted)
    target = torch.randint(0, 6, (2, 5, 4))
    target[0, 0, :2] = -100
    for reduction in ("mean", "sum", "none"):
        for weight in (None, torch.rand(6)):
            def loss(y, reduction=reduction, weight=weight):
                w = weight.to(y.device) if weight is not None else None
                logp = torch.nn.functional.log_softmax(y, 1)  # (nll_loss2d: F.cross_entropy runs fused)
                return weighted(torch.nn.functional.nll_loss(logp, target.to(y.device), w, reduction=reduction)
                                .reshape(-1, 1))
            _module_grads_match(torch.nn.Identity(), x, loss)


def test_random_distributions_draw_on_the_device():
    """exponential_, geometric_, log_normal_, cauchy_ and normal with tensor arguments: webgrad's generator, the
    distribution's support and rough moments, no fallback."""
    n = 20000
    with td.strict():
        e = torch.empty(n, device=DEV).exponential_(2.0).cpu()
        g = torch.empty(n, device=DEV).geometric_(0.25).cpu()
        ln = torch.empty(n, device=DEV).log_normal_(0.0, 0.5).cpu()
        c = torch.empty(n, device=DEV).cauchy_(1.0, 2.0).cpu()
        mean = torch.linspace(-3, 3, n, device=DEV)
        nm = torch.normal(mean, 0.5).cpu()
        ns = torch.normal(mean, torch.full((n,), 0.5, device=DEV)).cpu()
        nf = torch.normal(2.0, torch.full((n,), 0.5, device=DEV)).cpu()
    assert e.min() >= 0 and abs(e.mean() - 0.5) < 0.05
    assert g.min() >= 1 and torch.equal(g, g.round()) and abs(g.mean() - 4.0) < 0.3
    assert ln.min() > 0 and abs(ln.log().std() - 0.5) < 0.05
    assert abs(c.median() - 1.0) < 0.2
    for x, m in ((nm, mean.cpu()), (ns, mean.cpu()), (nf, torch.full((n,), 2.0))):
        assert abs((x - m).std() - 0.5) < 0.05 and abs((x - m).mean()) < 0.05
