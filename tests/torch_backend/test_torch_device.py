"""torch.device("webgpu") in real PyTorch (webgrad.torch_device): eager ops, autograd, optimizers, checkpoints,
errors and the CPU fallback, each against PyTorch on the CPU."""

import copy
import io
import warnings

import pytest

from helpers import import_torch_device

torch, td = import_torch_device()

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


DEV = "webgpu"
RECORDS = td.storage.webgrad_device().backend.supports_capture  # WebGPU records and replays; the CPU does not


def close(a, b, atol=1e-5, rtol=1e-4):
    assert a.device.type == "cpu" and b.device.type == "cpu"
    torch.testing.assert_close(a, b, atol=atol, rtol=rtol)


def training_step(forward, opt):
    """A step as scripts write it: zero_grad, cross-entropy of forward(x) against y, backward, optimizer step."""
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(forward(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def test_device_basics():
    assert torch.device(DEV).type == DEV
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    g = x.to(DEV)
    assert g.device == torch.device("webgpu", 0) and g.dtype is torch.float32 and type(g) is torch.Tensor
    close(g.cpu(), x)
    close((g * 2 + 1).relu().cpu(), (x * 2 + 1).relu())
    assert (g.sum()).item() == 15.0
    r = torch.randn(4, 5, device=DEV)
    assert r.device.type == DEV and r.shape == (4, 5)
    assert "device='webgpu:0'" in repr(g) and "grad_fn" not in repr(g)
    labels = torch.tensor([3, 1, 2]).to(DEV)
    assert labels.dtype is torch.int64 and labels.cpu().tolist() == [3, 1, 2]
    z = torch.zeros(3, device=DEV)
    z[1] = 5.0
    assert z.cpu().tolist() == [0.0, 5.0, 0.0]


@pytest.mark.parametrize("args", [(5,), (2, 9), (1, 10, 3), (0.5, 3.0, 0.5), (10, 0, -2), (3, 3)])
@pytest.mark.parametrize("dtype", [None, torch.int64, torch.float32])
def test_arange_is_made_on_the_device_without_the_fallback(args, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (the CPU fallback warns)
        try:
            expected = torch.arange(*args, dtype=dtype)
        except (RuntimeError, ValueError) as e:  # (an integer arange whose step truncates to 0)
            with pytest.raises(type(e), match="step must be nonzero"):
                torch.arange(*args, dtype=dtype, device=DEV)
            return
        got = torch.arange(*args, dtype=dtype, device=DEV)
        out = torch.empty(1, dtype=expected.dtype, device=DEV)
        torch.arange(*args, out=out)
    assert got.device.type == DEV and got.dtype is expected.dtype
    assert torch.equal(got.cpu(), expected) and torch.equal(out.cpu(), expected)


def test_views_and_in_place_ops_write_through():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    g = x.to(DEV)
    t = g.t()
    assert t.stride() == (1, 4) and t.untyped_storage().data_ptr() == g.untyped_storage().data_ptr()
    close(t.contiguous().cpu(), x.t().contiguous())
    g[1] += 10  # select view, in-place add through it
    x[1] += 10
    close(g.cpu(), x)
    g.data.mul_(2)  # .data shares the memory
    close(g.cpu(), x * 2)
    close(g[:, 1:3].sum(0).cpu(), (x * 2)[:, 1:3].sum(0))


def test_memory_is_released_with_the_last_tensor():
    before = td.live_storages()
    x = torch.ones(64, device=DEV)
    y = x[10:20]
    del x
    assert td.live_storages() == before + 1  # the view keeps the storage
    del y
    assert td.live_storages() == before


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1, bias=False)  # (Adam would amplify its noise gradient)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(F.dropout(x.flatten(1), 0.0, self.training))


@pytest.mark.parametrize("make_opt", [
    lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    lambda p: torch.optim.Adam(p, lr=0.01),                    # foreach (the default on a device)
    lambda p: torch.optim.AdamW(p, lr=0.01, fused=True),       # webgrad's fused update kernel
], ids=["sgd", "adam-foreach", "adamw-fused"])
def test_training_matches_cpu(make_opt):
    torch.manual_seed(0)
    ref = _Net()
    dev = copy.deepcopy(ref).to(DEV)
    x, y = torch.randn(4, 1, 8, 8), torch.randint(0, 10, (4,))
    got = {}
    for model, xx, yy in ((ref, x, y), (dev, x.to(DEV), y.to(DEV))):
        opt = make_opt(model.parameters())
        for _ in range(2):
            opt.zero_grad()
            loss = F.cross_entropy(model(xx), yy)
            loss.backward()
            grads = {n: p.grad.cpu() for n, p in model.named_parameters()}
            opt.step()
        got[model is ref] = (loss.detach().cpu(), grads, {k: v.cpu() for k, v in model.state_dict().items()})
    (lr, gr, sr), (ld, gd, sd) = got[True], got[False]
    close(ld, lr)
    for k in gr:
        close(gd[k], gr[k])
    for k in sr:
        close(sd[k].to(sr[k].dtype), sr[k])  # BatchNorm's running statistics and num_batches_tracked too
    for p in dev.parameters():
        assert p.device.type == DEV and p.grad.device.type == DEV


def test_state_dict_save_and_load():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).to(DEV)
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    for where, want in ((None, DEV), ("cpu", "cpu"), (DEV, DEV)):
        buf.seek(0)
        state = torch.load(buf, map_location=where)
        for k, v in state.items():
            assert v.device.type == want
            close(v.cpu(), model.state_dict()[k].cpu())
    fresh = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    buf.seek(0)
    fresh.load_state_dict(torch.load(buf, map_location="cpu"))
    close(fresh[0].weight, model[0].weight.cpu())


def test_device_mismatch_raises_pytorchs_error():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(2, device=DEV) + torch.ones(2)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(2, 2, device=DEV) @ torch.ones(2, 2)
    # a 0-dim CPU tensor is a number, as PyTorch allows for device tensors
    assert (torch.ones(2, device=DEV) + torch.tensor(3.0)).cpu().tolist() == [4.0, 4.0]


def test_unsupported_dtype_names_it():
    with pytest.raises(TypeError, match="torch.bfloat16"):
        torch.ones(2, device=DEV, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="torch.float64"):
        torch.ones(2, dtype=torch.float64).to(DEV)


def test_fallback_warns_once_and_strict_mode_raises(monkeypatch):
    """An op with no webgrad kernel (LAPACK's Bunch-Kaufman LDL^T) runs on the CPU with one warning."""
    from webgrad.torch_device import fallback

    monkeypatch.setattr(fallback, "_warned", set())  # one warning per op and process: earlier tests ran it too
    td.reset_fallback_counts()
    x = torch.tensor([[4.0, 1.0, 2.0], [1.0, -3.0, 0.5], [2.0, 0.5, 5.0]])
    name = "aten.linalg_ldl_factor_ex"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a = torch.linalg.ldl_factor(x.to(DEV))
        b = torch.linalg.ldl_factor(x.to(DEV))
    messages = [str(w.message) for w in caught if name in str(w.message)]
    assert len(messages) == 1 and "runs on the CPU" in messages[0]
    assert sum(n for op, n in td.fallback_counts().items() if op.startswith(name)) == 2
    assert a.LD.device.type == DEV
    close(b.LD.cpu(), torch.linalg.ldl_factor(x).LD)
    with td.strict(), pytest.raises(NotImplementedError, match=name):
        torch.linalg.ldl_factor(x.to(DEV))
    assert td.get_fallback() == "cpu"


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU], ids=["lstm", "gru"])
def test_recurrent_layers_run_their_fused_cells_on_the_device(cls, bias):
    """On an accelerator nn.LSTM and nn.GRU call ATen's fused cells (_thnn_fused_lstm_cell, _thnn_fused_gru_cell)
    and their backward, which have no CPU kernel to fall back to: webgrad's run them. Outputs and every gradient
    match the CPU, strict mode (no fallback) on."""
    torch.manual_seed(0)
    ref = cls(5, 7, num_layers=2, batch_first=True, bias=bias)
    model = copy.deepcopy(ref).to(DEV)
    x, h0 = torch.randn(3, 4, 5), torch.randn(2, 3, 7)
    state = (h0, torch.randn(2, 3, 7)) if cls is nn.LSTM else h0
    out, _ = ref(x, state)
    (out.square().sum()).backward()
    dev_state = tuple(t.to(DEV) for t in state) if cls is nn.LSTM else state.to(DEV)
    with td.strict():
        got, _ = model(x.to(DEV), dev_state)
        (got.square().sum()).backward()
    close(got.cpu(), out)
    for (name, p), q in zip(ref.named_parameters(), model.parameters()):
        close(q.grad.cpu(), p.grad, atol=1e-4, rtol=1e-3)


def test_cross_entropy_gradient_with_ignored_targets_uploads_nothing():
    torch.manual_seed(0)
    logits, target = torch.randn(6, 9, requires_grad=True), torch.randint(0, 9, (6,))
    target[2] = -100
    F.cross_entropy(logits, target).backward()
    on_dev = logits.detach().to(DEV).requires_grad_()
    dev_target = target.to(DEV)
    rt = td.storage.webgrad_device().backend
    writes = rt.runtime.stats["writes"] if RECORDS else 0
    F.cross_entropy(on_dev, dev_target).backward()
    if RECORDS:
        assert rt.runtime.stats["writes"] == writes  # (its backward made a class index list on the host before)
    close(on_dev.grad.cpu(), logits.grad)


@pytest.mark.parametrize("shape", [(6, 5), (5,), (4, 3, 2, 2)], ids=["rows", "one-sample", "spatial"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("options", [{}, {"label_smoothing": 0.1}, {"ignore_index": 1}, {"weight": True}],
                         ids=["plain", "smoothing", "ignore", "weight"])
def test_cross_entropy_runs_webgrads_fused_op_in_eager_mode(shape, reduction, options):
    """F.cross_entropy on webgpu tensors is webgrad's fused op forward and backward (fused_autograd.py), not
    PyTorch's log_softmax + nll_loss decomposition: values and gradients match the CPU, no CPU fallback."""
    torch.manual_seed(0)
    classes = shape[1] if len(shape) > 1 else shape[0]
    x = torch.randn(*shape, requires_grad=True)
    target = torch.randint(0, classes, (shape[0], *shape[2:]) if len(shape) > 1 else ())
    options = dict(options, weight=torch.rand(classes)) if options.get("weight") else options
    loss = F.cross_entropy(x, target, reduction=reduction, **options)
    seed = torch.randn_like(loss)
    loss.backward(seed)
    on_dev = x.detach().to(DEV).requires_grad_()
    dev_options = {k: v.to(DEV) if isinstance(v, torch.Tensor) else v for k, v in options.items()}
    with td.strict():
        got = F.cross_entropy(on_dev, target.to(DEV), reduction=reduction, **dev_options)
        got.backward(seed.to(DEV))
    if RECORDS:
        assert type(got.grad_fn).__name__ == "_WebgradOpBackward"
    torch.testing.assert_close(got.cpu(), loss.detach(), atol=1e-5, rtol=1e-4, equal_nan=True)
    close(on_dev.grad.cpu(), x.grad)


@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 5), (5,)], ids=["rows", "batched", "vector"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("wants", ["all", "input", "weight"])
def test_linear_runs_webgrads_fused_op_in_eager_mode(shape, bias, wants):
    """nn.Linear / F.linear on webgpu tensors is webgrad's linear (bias fused into the product) forward and
    backward, not PyTorch's t + addmm and AddmmBackward: values and the gradients asked for match the CPU."""
    torch.manual_seed(0)
    ref = nn.Linear(5, 7, bias=bias)
    model = copy.deepcopy(ref).to(DEV)
    for p, q in zip(ref.parameters(), model.parameters()):
        p.requires_grad_(wants != "input")
        q.requires_grad_(wants != "input")
    x = torch.randn(*shape, requires_grad=wants != "weight")
    x_dev = x.detach().to(DEV).requires_grad_(x.requires_grad)
    y = ref(x)
    seed = torch.randn_like(y)
    y.backward(seed)
    with td.strict():
        got = model(x_dev)
        got.backward(seed.to(DEV))
    if RECORDS:
        assert type(got.grad_fn).__name__ == "_WebgradOpBackward"
    close(got.cpu(), y.detach())
    for a, b in [(x, x_dev), *zip(ref.parameters(), model.parameters())]:
        assert (a.grad is None) == (b.grad is None)
        if a.grad is not None:
            close(b.grad.cpu(), a.grad)


def _check_fused_op(fn, *inputs, atol=1e-5, rtol=1e-4):
    """fn on CPU tensors and on their webgpu copies (strict: no fallback): the value and every input's gradient
    match, and the webgpu result's node is fused_autograd's."""
    out = fn(*inputs)
    seed = torch.randn_like(out)
    out.backward(seed)
    on_dev = [t.detach().to(DEV).requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor) else t
              for t in inputs]
    with td.strict():
        got = fn(*on_dev)
        got.backward(seed.to(DEV))
    if RECORDS:
        assert type(got.grad_fn).__name__ == "_WebgradOpBackward"
    close(got.cpu(), out.detach(), atol, rtol)
    for a, b in zip(inputs, on_dev):
        if isinstance(a, torch.Tensor) and a.requires_grad:
            close(b.grad.cpu(), a.grad, atol, rtol)


@pytest.mark.parametrize("geometry", [(1, 0, 1, 1), (2, 1, 1, 1), (1, 2, 2, 1), (1, 1, 1, 2)],
                         ids=["plain", "strided", "dilated", "grouped"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_conv2d_runs_webgrads_fused_op_in_eager_mode(geometry, bias):
    stride, padding, dilation, groups = geometry
    torch.manual_seed(0)
    x = torch.randn(2, 4, 9, 9, requires_grad=True)
    w = torch.randn(6, 4 // groups, 3, 3, requires_grad=True)
    b = torch.randn(6, requires_grad=True) if bias else None
    _check_fused_op(lambda x, w, b: F.conv2d(x, w, b, stride, padding, dilation, groups), x, w, b, atol=1e-4)


@pytest.mark.parametrize("pool", [(2, None, 0, 1, False), (3, 2, 1, 1, True), (3, 1, 1, 2, False)],
                         ids=["plain", "padded-ceil", "dilated"])
def test_max_pool2d_runs_webgrads_fused_op_in_eager_mode(pool):
    torch.manual_seed(0)
    _check_fused_op(lambda x: F.max_pool2d(x, *pool), torch.randn(2, 3, 9, 9, requires_grad=True))


@pytest.mark.parametrize("normalized", [(6,), (3, 6)], ids=["last", "last-two"])
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
def test_layer_norm_runs_webgrads_fused_op_in_eager_mode(normalized, affine):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 6, requires_grad=True)
    w = torch.randn(*normalized, requires_grad=True) if affine else None
    b = torch.randn(*normalized, requires_grad=True) if affine else None
    _check_fused_op(lambda x, w, b: F.layer_norm(x, normalized, w, b, eps=1e-4), x, w, b)


@pytest.mark.parametrize("normalized", [(6,), (3, 6)], ids=["last", "last-two"])
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
def test_rms_norm_runs_webgrads_fused_op_in_eager_mode(normalized, affine):
    torch.manual_seed(0)
    for eps in (1e-4, None):  # None: the dtype's epsilon
        x = torch.randn(2, 3, 6, requires_grad=True)
        w = torch.randn(*normalized, requires_grad=True) if affine else None
        _check_fused_op(lambda x, w: F.rms_norm(x, normalized, w, eps=eps), x, w)


@pytest.mark.parametrize("mask", [None, "causal", "bool", "float"])
@pytest.mark.parametrize("heads", [(4, 4), (4, 2)], ids=["mha", "gqa"])
def test_attention_runs_webgrads_fused_op_in_eager_mode(mask, heads):
    torch.manual_seed(0)
    q = torch.randn(2, heads[0], 5, 8, requires_grad=True)
    k, v = (torch.randn(2, heads[1], 7, 8, requires_grad=True) for _ in range(2))
    attn_mask = {"bool": torch.rand(5, 7) > 0.3, "float": torch.randn(2, 1, 5, 7)}.get(mask)
    if mask == "bool":
        attn_mask[:, 0] = True  # every query attends to a key
    _check_fused_op(lambda q, k, v, m: F.scaled_dot_product_attention(
        q, k, v, m, is_causal=mask == "causal", scale=0.3, enable_gqa=heads[0] != heads[1]), q, k, v, attn_mask)


ACTIVATIONS = [nn.LeakyReLU(0.2), nn.LeakyReLU(0.2, inplace=True), nn.ELU(), nn.ELU(0.7, inplace=True), nn.SELU(),
               nn.CELU(0.5), nn.Softplus(), nn.Softplus(2, 1.0), nn.Hardtanh(-0.5, 0.7, inplace=True), nn.ReLU6(),
               nn.Mish(), nn.Hardswish(), nn.Hardsigmoid(), nn.Softsign(), nn.LogSigmoid()]


@pytest.mark.parametrize("module", ACTIVATIONS, ids=[repr(m) for m in ACTIVATIONS])
def test_activations_run_on_the_device(module):
    """The activations scripts use (DCGAN's LeakyReLU(inplace=True) among them) and their ATen backward formulas
    run on webgrad's kernels, no CPU fallback, matching the CPU at and around their kinks."""
    torch.manual_seed(0)
    x = torch.randn(5, 6) * 3
    x[0, :6] = torch.tensor([0.0, -3.0, 3.0, 1.0, -0.5, 0.7])  # the kinks of hardswish, hardtanh, ...
    a, b = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
    with td.strict():
        expected, got = module(a * 1), module(b * 1)
        seed = torch.randn_like(expected)
        expected.backward(seed)
        got.backward(seed.to(DEV))
    close(got.cpu(), expected.detach())
    close(b.grad.cpu(), a.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
def test_read_into_writes_a_tensor_read_back_into_given_memory(dtype):
    """storage.read_into (what DDP's hook reads each bucket with, into its shared-memory slot): the values land in
    the given CPU tensor, a strided source included; a mismatched target is refused."""
    x = (torch.randn(6, 5) * 4).to(dtype)
    on_dev = x.to(DEV)
    out = torch.empty(6, 5, dtype=dtype)
    assert td.storage.read_into(on_dev, out) is out
    assert torch.equal(out, x)
    strided = torch.empty(5, 6, dtype=dtype)
    td.storage.read_into(on_dev.t(), strided)
    assert torch.equal(strided, x.t())
    with pytest.raises(ValueError, match="contiguous CPU tensor"):
        td.storage.read_into(on_dev, torch.empty(29, dtype=dtype))


SCATTERS = {
    "index_add": lambda x, i, s: x.index_add(0, i, s, alpha=2),
    "index_add_": lambda x, i, s: (x * 1).index_add_(0, i, s),
    "index_copy": lambda x, i, s: x.index_copy(0, i[1:] + torch.tensor([-2, 0, 0]).to(i.device), s[1:]),
    "index_fill": lambda x, i, s: x.index_fill(1, i[:2], -1.5),
    "scatter_add": lambda x, i, s: x.scatter_add(0, i[:, None].expand(4, 3), s),
    "scatter_reduce": lambda x, i, s: x.scatter_reduce(0, i[:, None].expand(4, 3), s, "amax", include_self=False),
    "nonzero": lambda x, i, s: (x > 0).nonzero(),
    "amin, min.dim": lambda x, i, s: x.amin(1) + x.min(0).values.sum() + x.min(0).indices.sum(),
}


@pytest.mark.parametrize("name", SCATTERS)
def test_scatters_by_index_run_on_the_device(name):
    """What graph networks and sparse products are made of (index_add, scatter_add...) runs on webgrad's kernels,
    values and gradients as on the CPU."""
    torch.manual_seed(0)
    x, s = torch.randn(5, 3, requires_grad=True), torch.randn(4, 3, requires_grad=True)
    i = torch.tensor([0, 2, 2, 4])
    xd, sd = (t.detach().to(DEV).requires_grad_() for t in (x, s))
    expected = SCATTERS[name](x, i, s)
    with td.strict():
        got = SCATTERS[name](xd, i.to(DEV), sd)
        if expected.dtype.is_floating_point:
            seed = torch.randn_like(expected)
            expected.backward(seed)
            got.backward(seed.to(DEV))
    close(got.detach().cpu(), expected.detach())
    for cpu, dev in ((x, xd), (s, sd)):
        assert (cpu.grad is None) == (dev.grad is None)
        if cpu.grad is not None:
            close(dev.grad.cpu(), cpu.grad)


def test_in_place_activations_after_fused_ops_are_legal():
    """DCGAN's and the siamese network's pattern: an in-place activation right after a convolution, a batch norm or
    a linear layer. Their backward does not read their output, so PyTorch allows it, and so does the device; the
    gradients match the CPU."""
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Conv2d(3, 4, 3), nn.LeakyReLU(0.2, inplace=True), nn.Conv2d(4, 4, 3),
                        nn.BatchNorm2d(4), nn.ReLU(inplace=True), nn.Flatten(), nn.Linear(4 * 4 * 4, 5),
                        nn.ReLU(inplace=True), nn.Linear(5, 2))
    model = copy.deepcopy(ref).to(DEV)
    x = torch.randn(2, 3, 8, 8)
    ref(x).square().sum().backward()
    with td.strict():
        model(x.to(DEV)).square().sum().backward()
    for p, q in zip(ref.parameters(), model.parameters()):
        close(q.grad.cpu(), p.grad, atol=1e-4, rtol=1e-3)


def test_cross_entropy_with_probabilities_and_its_limits():
    torch.manual_seed(0)
    x, p = torch.randn(4, 5, requires_grad=True), torch.softmax(torch.randn(4, 5), 1)
    F.cross_entropy(x, p, label_smoothing=0.2).backward()
    on_dev = x.detach().to(DEV).requires_grad_()
    F.cross_entropy(on_dev, p.to(DEV), label_smoothing=0.2).backward()
    close(on_dev.grad.cpu(), x.grad)
    with torch.no_grad():  # no record: a plain result
        assert F.cross_entropy(on_dev, p.to(DEV)).grad_fn is None
    # a gradient through its gradient: PyTorch's error, never a silent zero
    (g,) = torch.autograd.grad(F.cross_entropy(on_dev, p.to(DEV)), on_dev, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|does not require grad"):
        g.sum().backward()
    # what the record reads, written in place before the backward: PyTorch's error, never a stale gradient
    h = on_dev * 1
    y = F.linear(h, torch.randn(3, 5, device=DEV, requires_grad=True))
    h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    q = torch.randn(1, 2, 4, 8, device=DEV, requires_grad=True)
    out = F.scaled_dot_product_attention(q, q, q)
    out.mul_(2)  # (the attention's backward reads its output)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
    # a weight that wants a gradient takes PyTorch's decomposition, and its error
    target = torch.randint(0, 5, (4,))
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument 'weight'"):
        F.cross_entropy(on_dev, target.to(DEV), weight=torch.rand(5, device=DEV, requires_grad=True))


def test_a_pinning_data_loader_feeds_the_device():
    """DataLoader(pin_memory=True), as scripts make one whenever an accelerator is there: webgpu is the accelerator,
    and pin_memory() hands the batch over as it is (PyTorch asks a device for pinned memory through a C++ hook)."""
    assert torch.accelerator.current_accelerator().type == DEV
    data = torch.utils.data.TensorDataset(torch.arange(12.0).reshape(6, 2), torch.arange(6))
    loader = torch.utils.data.DataLoader(data, batch_size=4, pin_memory=True, num_workers=1)
    seen = [x.to(DEV, non_blocking=True).sum().item() for x, _ in loader]
    assert seen == [28.0, 38.0]
    x = torch.ones(3)
    assert x.pin_memory() is x


@pytest.mark.parametrize("mode", ["eager", "compile"])
@pytest.mark.parametrize("model", ["mlp", "cnn", "gpt"])
def test_parity_suite_on_the_device(model, mode):
    """The parity harness's rows for the webgpu device: forward, every gradient and an SGD step against
    PyTorch on the CPU, with no op on the CPU fallback."""
    from webgrad.torch_backend import parity
    row = parity.run_model(model, "torch:webgpu", mode=mode)
    assert row["fallback"] == {}
    assert row["ok"], {k: v for k, v in row["compared"].items() if not v["ok"]}


def test_compiled_training_stays_on_the_device():
    """torch.compile(backend="webgrad") on webgpu tensors: graphs take and return device tensors (nothing
    uploaded or read back), are recorded and replayed, and a result the caller still holds keeps its value
    when the next replay rewrites the memory it came from."""
    from webgrad import torch_backend
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    model = copy.deepcopy(ref).to(DEV)
    stats = {}
    f = torch_backend.compile(model, stats=stats, fallback="error")
    torch._dynamo.reset()
    x, y = torch.randn(5, 6), torch.randint(0, 3, (5,))
    xd, yd = x.to(DEV), y.to(DEV)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    kept, want = [], []
    for _ in range(5):
        for m, o, fn, xx, yy, out in ((ref, opt_ref, ref, x, y, want), (model, opt, f, xd, yd, kept)):
            o.zero_grad()
            loss = F.cross_entropy(fn(xx), yy)
            loss.backward()
            o.step()
            out.append(loss.detach())
    assert stats["uploads"] == 0 and stats["reads"] == 0, stats
    if RECORDS:  # forward and backward graphs: run, recorded, then replayed three times each
        assert stats["replays"] == 6, stats
    assert all(t.device.type == DEV for t in kept)
    close(torch.stack([t.cpu() for t in kept]), torch.stack(want))
    for p, q in zip(model.parameters(), ref.parameters()):
        close(p.detach().cpu(), q.detach())


@pytest.mark.parametrize("compiled,make_opt", [
    (False, lambda p: torch.optim.Adam(p, lr=0.01, capturable=True)),  # foreach, step count on the device
    (True, lambda p: torch.optim.Adam(p, lr=0.01, capturable=True)),
    (True, lambda p: torch.optim.Adam(p, lr=0.01, fused=True)),  # webgrad's kernel, step from a dynamic scalar
    (True, lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, fused=True)),
], ids=["eager-adam", "compiled-adam", "compiled-fused-adam", "compiled-fused-sgd"])
def test_whole_step_recorded_and_replayed(compiled, make_opt):
    """A training step (zero_grad, forward, backward, optimizer step) on webgpu tensors, recorded once and
    replayed: the losses and the parameters follow PyTorch on the CPU step for step."""
    from webgrad import torch_backend
    from webgrad.torch_backend.parity import CNN
    torch.manual_seed(0)
    ref = CNN()
    model = copy.deepcopy(ref).to(DEV)

    stats = {}
    train = training_step(model, make_opt(model.parameters()))
    step = torch_backend.compile(train, stats=stats, whole_step=True) if compiled else td.replayable(train)
    torch._dynamo.reset()
    ref_opt = make_opt(ref.parameters())
    for group in ref_opt.param_groups:  # the same update on the CPU, by PyTorch's own code
        group["fused"], group["capturable"] = False, False
    ref_step = training_step(ref, ref_opt)
    got, want = [], []
    for _ in range(5):
        x, y = torch.randn(4, 1, 16, 16), torch.randint(0, 10, (4,))
        got.append(step(x.to(DEV), y.to(DEV)).item())
        want.append(ref_step(x, y).item())
    if RECORDS:
        assert step.replays == 3
    assert stats.get("fallback", {}) == {}
    close(torch.tensor(got), torch.tensor(want))
    for p, q in zip(model.parameters(), ref.parameters()):
        close(p.detach().cpu(), q.detach())


@pytest.mark.skipif(not RECORDS, reason="the device records no steps")
def test_a_call_that_compiled_is_warm_up_even_if_it_printed_tensors():
    """What torch.compile does on PyTorch 2.11 when a step recompiles on its second call (an optimizer's state now
    exists): Dynamo counts a new graph and takes repr() of every parameter it guards on, reading them back. That
    call is warm-up, and the step records on the next one; a read-back of the step's own (no compile) still makes
    it eager, with the warning."""
    import torch._dynamo.utils as dynamo_utils
    model = nn.Linear(3, 2).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    calls = [0]

    def step(x, read_own=False):
        calls[0] += 1
        if calls[0] == 2:  # the recording call, as a recompiling Dynamo makes it
            dynamo_utils.counters["stats"]["unique_graphs"] += 1
            repr(model.weight)
        if read_own:
            model.weight.sum().item()
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        return loss

    replayed = td.replayable(step)
    x = torch.randn(4, 3).to(DEV)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "read ... back" warning for the compiler's reads
        for _ in range(5):
            replayed(x)
    assert replayed.recompiles == 1 and replayed.replays == 2  # warm-up, compiled (warm-up), recorded, 2 replays

    calls[0] = 10
    own = td.replayable(lambda x: step(x, read_own=True))
    own(x)
    with pytest.warns(RuntimeWarning, match="read 1 value"):
        own(x)
    own(x)
    assert own.recompiles == 0 and own.replays == 0


@pytest.mark.parametrize("replayed", [False, True], ids=["eager", "replayed"])
def test_eager_batch_norm_counts_and_statistics_follow_the_cpu(replayed):
    """ResNet-8 in eager PyTorch on webgpu tensors, as it is and recorded whole (td.replayable): BatchNorm's fused
    op updates the running statistics in place, and num_batches_tracked, a counter the host knows, is written when
    something reads it (a replay hook advances it): the state dict follows PyTorch on the CPU step by step."""
    from webgrad.torch_backend.parity import ResNet8
    torch.manual_seed(0)
    ref = ResNet8(width=4)
    model = copy.deepcopy(ref).to(DEV)

    step = training_step(model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, fused=True))
    if replayed:
        step = td.replayable(step)
    ref_step = training_step(ref, torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9))
    for _ in range(5):
        x, y = torch.randn(2, 3, 32, 32), torch.randint(0, 10, (2,))
        close(step(x.to(DEV), y.to(DEV)).cpu(), ref_step(x, y).detach(), atol=1e-4, rtol=1e-3)
    if replayed and RECORDS:
        assert step.replays == 3
    for (name, a), b in zip(model.state_dict().items(), ref.state_dict().values()):
        close(a.cpu().to(b.dtype), b, atol=1e-4, rtol=1e-3)
    counters = [v.item() for k, v in model.state_dict().items() if k.endswith("num_batches_tracked")]
    assert counters and set(counters) == {5}


def test_step_counts_are_written_when_read():
    """Fused Adam's per-parameter step counts advance on the host each eager step, with no kernel; whatever reads
    one (item, a kernel, torch.save, a recorded step taking over) sees the count, as on the CPU."""
    torch.manual_seed(0)
    ref = nn.Linear(4, 3)
    model = copy.deepcopy(ref).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=0.1, fused=True)
    ref_opt = torch.optim.Adam(ref.parameters(), lr=0.1)
    step = training_step(model, opt)
    ref_step = training_step(ref, ref_opt)
    x, y = torch.randn(5, 4), torch.randint(0, 3, (5,))
    for _ in range(3):
        step(x.to(DEV), y.to(DEV))
        ref_step(x, y)
    counts = [s["step"] for s in opt.state.values()]
    pending = td.storage._deferred
    assert all(c.untyped_storage().data_ptr() in pending for c in counts)  # no kernel has written them yet
    buffer = io.BytesIO()
    torch.save(opt.state_dict(), buffer)
    assert [float(v["step"]) for v in torch.load(io.BytesIO(buffer.getvalue()))["state"].values()] == [3.0, 3.0]
    assert (counts[0] * 2).item() == 6.0  # a kernel reading it
    replayed = td.replayable(step)
    for _ in range(4):
        replayed(x.to(DEV), y.to(DEV))
        ref_step(x, y)
    assert [c.item() for c in counts] == [7.0, 7.0]
    close(model.weight.detach().cpu(), ref.weight.detach(), atol=1e-5, rtol=1e-4)


@pytest.mark.skipif(not RECORDS, reason="the CPU backend submits nothing")
@pytest.mark.parametrize("opt_class", [torch.optim.Adam, torch.optim.SGD])
def test_fused_optimizer_step_submits_its_work(opt_class):
    """Each eager fused step starts the GPU on what was queued (as webgrad's optimizers do): the GPU runs step i while
    the host issues step i + 1, and Adam's new step count is written without staging it behind unsubmitted work."""
    torch.manual_seed(0)
    model = nn.Linear(5, 3).to(DEV)
    opt = opt_class(model.parameters(), lr=0.01, fused=True)
    x, y = torch.randn(4, 5, device=DEV), torch.randint(0, 3, (4,), device=DEV)
    stats = td.storage.webgrad_device().backend.runtime.stats
    for _ in range(2):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        before = dict(stats)
        opt.step()
        assert stats["submits"] == before["submits"] + 1
        assert stats["copies"] == before["copies"]  # (no staged write of the step count)


@pytest.mark.skipif(not RECORDS, reason="the CPU backend submits nothing")
@pytest.mark.parametrize("opt_class", [torch.optim.Adam, torch.optim.SGD, torch.optim.RMSprop])
@pytest.mark.parametrize("foreach", [True, False])
def test_any_optimizer_step_submits_its_work(opt_class, foreach):
    """torch.optim's for-loop and foreach steps (what a script gets without fused=True) start the GPU on the step's
    queued work too: through a global step post-hook, one submit a step."""
    torch.manual_seed(0)
    model = nn.Linear(5, 3).to(DEV)
    opt = opt_class(model.parameters(), lr=0.01, foreach=foreach)
    x, y = torch.randn(4, 5, device=DEV), torch.randint(0, 3, (4,), device=DEV)
    stats = td.storage.webgrad_device().backend.runtime.stats
    for _ in range(2):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        before = stats["submits"]
        opt.step()
        assert stats["submits"] == before + 1


@pytest.mark.parametrize("opt_class", [torch.optim.Adam, torch.optim.AdamW])
def test_fused_adam_with_parameters_at_different_step_counts(opt_class):
    """A parameter that first gets a gradient late has taken fewer steps than the others: each update's bias
    correction uses its own count, as on the CPU (an eager step whose counts agree reads one step scalar)."""
    torch.manual_seed(0)
    ref = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 3)])
    model = copy.deepcopy(ref).to(DEV)
    opt, ref_opt = opt_class(model.parameters(), lr=0.05, fused=True), opt_class(ref.parameters(), lr=0.05)
    x, y = torch.randn(5, 4), torch.randint(0, 3, (5,))
    for i in range(5):
        for net, o, xx, yy in ((model, opt, x.to(DEV), y.to(DEV)), (ref, ref_opt, x, y)):
            o.zero_grad()
            h = net[0](xx)
            F.cross_entropy(net[1](h) if i >= 2 else h[:, :3], yy).backward()  # net[1] joins at the third step
            o.step()
    assert [float(s["step"]) for s in opt.state.values()] == [5.0, 5.0, 3.0, 3.0]
    for p, q in zip(model.parameters(), ref.parameters()):
        close(p.detach().cpu(), q.detach())


@pytest.mark.parametrize("fill", [torch.ones_like, torch.zeros_like, lambda t, **kw: torch.full_like(t, -2.5, **kw)],
                         ids=["ones_like", "zeros_like", "full_like"])
def test_filled_like_keeps_pytorchs_strides_and_dtypes(fill):
    x = torch.rand(3, 4)
    for t in (x, x.t(), x[:, ::2], torch.tensor(2.0)):
        got, want = fill(t.to(DEV)), fill(t)
        assert got.device.type == DEV and got.stride() == want.stride() and got.dtype is want.dtype
        close(got.cpu(), want)
    got = fill(x.t().to(DEV), dtype=torch.int64, memory_format=torch.contiguous_format)
    assert got.dtype is torch.int64 and got.is_contiguous()
    close(got.cpu(), fill(x.t(), dtype=torch.int64, memory_format=torch.contiguous_format))
    got = fill(x.t().to(DEV), device="cpu")  # another device named: the tensor is made there
    assert got.device.type == "cpu" and got.stride() == x.t().stride()
    close(got, fill(x.t()))


def test_full_like_casts_its_value_as_pytorch():
    x = torch.rand(2, 3)
    for value, dtype in ((2.7, torch.int64), (-2.7, torch.int32), (0.5, torch.bool), (True, torch.float16)):
        got, want = torch.full_like(x.to(DEV), value, dtype=dtype), torch.full_like(x, value, dtype=dtype)
        assert got.dtype is want.dtype and torch.equal(got.cpu(), want)
    with pytest.raises(RuntimeError, match="without overflow"):
        torch.full_like(x.to(DEV), float("inf"), dtype=torch.int64)


def test_integer_counters_added_in_place():
    t = torch.tensor(7, device=DEV)
    t.add_(2)
    t += 3
    t.add_(torch.tensor(1), alpha=2)
    assert t.item() == 14
    t.mul_(2)  # written by a kernel: the host's copy is forgotten, the next add computes on the device
    t.add_(1)
    assert t.item() == 29
    t.add_(-30)
    assert t.item() == -1
    big = torch.tensor(2 ** 24 - 1, device=DEV)  # past float32's exact integers: added on the device
    big.add_(1)
    big.add_(1)
    assert big.item() == 2 ** 24 + 1
    row = torch.zeros(3, dtype=torch.int64, device=DEV)
    row[1].add_(4)
    assert row.cpu().tolist() == [0, 4, 0]


@pytest.mark.parametrize("whole_step", [False, True], ids=["graphs", "whole-step"])
def test_compiled_batch_norm_replayed(whole_step):
    """ResNet-8 (BatchNorm in training mode, residual adds) compiled on webgpu tensors and replayed: its
    running statistics, updated in place by the batch-norm kernel, and its parameters follow PyTorch on the CPU."""
    from webgrad import torch_backend
    from webgrad.torch_backend.parity import ResNet8
    torch.manual_seed(0)
    ref = ResNet8(width=4)
    model = copy.deepcopy(ref).to(DEV)
    stats = {}

    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, fused=True)
    if whole_step:
        step = torch_backend.compile(training_step(model, opt), stats=stats, whole_step=True)
    else:
        step = training_step(torch_backend.compile(model, stats=stats, fallback="error"), opt)
    torch._dynamo.reset()
    ref_step = training_step(ref, torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9))
    for _ in range(4):
        x, y = torch.randn(2, 3, 32, 32), torch.randint(0, 10, (2,))
        close(step(x.to(DEV), y.to(DEV)).cpu(), ref_step(x, y).detach(), atol=1e-4, rtol=1e-3)
    assert stats.get("fallback", {}) == {}
    for (name, a), b in zip(model.state_dict().items(), ref.state_dict().values()):
        close(a.cpu().to(b.dtype), b, atol=1e-4, rtol=1e-3)


def test_accelerator_synchronize_and_the_benchmark_timer():
    """torch.accelerator.synchronize() with webgpu as the accelerator waits for webgrad's queue, so
    torch.utils.benchmark's Timer (which synchronizes before each clock read) works once the device is registered."""
    from torch.utils import benchmark
    assert torch.accelerator.current_accelerator().type == DEV
    x = torch.ones(64, device=DEV)
    torch.accelerator.synchronize()
    m = benchmark.Timer(stmt="x * 2 + 1", globals={"x": x}).timeit(5)
    assert m.number_per_run == 5 and m.median > 0
