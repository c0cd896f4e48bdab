"""F.embedding_bag, index_reduce and bincount on the webgpu torch device, wholly on webgrad's kernels (strict mode:
no CPU fallback), values and gradients against PyTorch on the CPU."""

import pytest

from helpers import import_torch_device

torch, td = import_torch_device()

import torch.nn.functional as F  # noqa: E402


DEV = "webgpu"


def _both(fn, *tensors):
    """fn on CPU leaves and on their webgpu copies (strict: no fallback); (cpu result, grads), (device ...)."""
    out = []
    for device in ("cpu", DEV):
        leaves = [t.detach().to(device).requires_grad_(t.requires_grad) for t in tensors]
        with td.strict():
            y = fn(*leaves)
            seed = torch.linspace(-1, 1, y.numel()).reshape(y.shape).to(device)
            wanted = [t for t in leaves if t.requires_grad]
            grads = torch.autograd.grad((y * seed).sum(), wanted) if wanted else ()
        out.append((y.detach().cpu(), [g.cpu() for g in grads]))
    return out


def _check(fn, *tensors):
    (y, grads), (gy, ggrads) = _both(fn, *tensors)
    torch.testing.assert_close(gy, y, atol=1e-5, rtol=1e-4)
    for g, gg in zip(grads, ggrads):
        torch.testing.assert_close(gg, g, atol=1e-5, rtol=1e-4)


WEIGHT = torch.randn(12, 5, generator=torch.Generator().manual_seed(0))
INDICES = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 5])
@pytest.mark.parametrize("offsets", [[0, 3, 3, 7], [0, 12], [0]], ids=["empty_bag", "one_bag", "all_in_first"])
def test_embedding_bag_with_offsets(mode, padding_idx, offsets):
    w = WEIGHT.clone().requires_grad_()
    off = torch.tensor(offsets)
    _check(lambda w, i, o: F.embedding_bag(i, w, o, mode=mode, padding_idx=padding_idx), w, INDICES, off)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_input_and_include_last_offset(mode):
    w = WEIGHT.clone().requires_grad_()
    _check(lambda w, i: F.embedding_bag(i, w, mode=mode), w, INDICES.reshape(3, 4))
    # (the last offset is the number of indices, as the CSR layout include_last_offset means has it)
    _check(lambda w, i, o: F.embedding_bag(i, w, o, mode=mode, include_last_offset=True), w, INDICES,
           torch.tensor([0, 2, 7, 12]))


def test_embedding_bag_per_sample_weights():
    w = WEIGHT.clone().requires_grad_()
    psw = torch.rand(12).requires_grad_()
    _check(lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p, padding_idx=1), w, INDICES,
           torch.tensor([0, 4, 4, 9]), psw)



@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_scale_grad_by_freq_divides_by_each_index_count(mode):
    """The reference is F.embedding's scale_grad_by_freq summed per bag: ATen's CPU embedding_bag divides each
    row's gradient by the count of another index (its sorted-position lookup mixes the group number with the
    position), which CUDA and the documentation do not."""
    bags = [(0, 5), (5, 12)]

    def reference(w, i):
        rows = F.embedding(i, w, scale_grad_by_freq=True)
        sums = [rows[a:b].sum(0) / (1 if mode == "sum" else b - a) for a, b in bags]
        return torch.stack(sums)

    (y, grads), _ = _both(reference, WEIGHT.clone().requires_grad_(), INDICES)
    (_, _), (gy, ggrads) = _both(lambda w, i, o: F.embedding_bag(i, w, o, mode=mode, scale_grad_by_freq=True),
                                 WEIGHT.clone().requires_grad_(), INDICES, torch.tensor([0, 5]))
    torch.testing.assert_close(gy, y, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(ggrads[0], grads[0], atol=1e-5, rtol=1e-4)


def test_embedding_bag_module_trains_on_the_device():
    bag = torch.nn.EmbeddingBag(20, 4, mode="mean").to(DEV)
    opt = torch.optim.SGD(bag.parameters(), lr=0.1)
    text = torch.randint(0, 20, (30,), device=DEV)
    offsets = torch.tensor([0, 7, 15, 22], device=DEV)
    with td.strict():
        before = bag(text, offsets).pow(2).sum().item()
        for _ in range(3):
            opt.zero_grad()
            bag(text, offsets).pow(2).sum().backward()
            opt.step()
        assert bag(text, offsets).pow(2).sum().item() < before


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce(reduce, include_self):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 5, 3, generator=g).requires_grad_()
    source = torch.randn(4, 6, 3, generator=g).requires_grad_()
    index = torch.tensor([0, 4, 2, 0, 4, 0])
    _check(lambda x, s, i: x.index_reduce(1, i, s, reduce, include_self=include_self), x, source, index)


def test_bincount():
    x = torch.tensor([1, 3, 3, 0, 7, 3])
    w = torch.rand(6)
    with td.strict():
        for args, kwargs in (((x,), {}), ((x,), {"minlength": 10}), ((x, w), {}), ((x.int(),), {}),
                             ((x.to(torch.uint8),), {}), ((x[:0],), {"minlength": 3})):
            got = torch.bincount(*[a.to(DEV) for a in args], **kwargs)
            expected = torch.bincount(*args, **kwargs)
            assert got.device.type == DEV and got.dtype == expected.dtype
            torch.testing.assert_close(got.cpu(), expected)
        with pytest.raises(RuntimeError, match="non-negative"):
            torch.bincount(torch.tensor([2, -1], device=DEV))
        with pytest.raises(RuntimeError, match="same length"):
            torch.bincount(x.to(DEV), w[:3].to(DEV))
