"""webgrad.transforms: batched on the device, the same draws on every backend, torchvision's semantics."""

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.transforms as T
from webgrad.transforms import functional as TF

from helpers import DEVICES


def _lowbias32(x):
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


def _uniform(seed, counter):
    """The stream of webgrad.rand at one counter, in plain Python integers (independent of the backends)."""
    k = _lowbias32(seed & 0xFFFFFFFF)
    return (_lowbias32((_lowbias32((counter & 0xFFFFFFFF) ^ k) + k) & 0xFFFFFFFF) >> 8) * 2.0 ** -24


def _seed32(seed):
    return (seed ^ (seed >> 32)) & 0xFFFFFFFF


def _reference(images, size, pad, mode, fill, flip_p, seed, offset):
    """torchvision's RandomCrop then RandomHorizontalFlip, image by image, on torch tensors: F.pad with the
    mode (torch's own pad for constant/reflect/edge, NumPy's for symmetric, as torchvision's _pad_symmetric),
    crop at (i, j) = randint(0, h - th + 1), randint(0, w - tw + 1), flip when rand < p."""
    left, top, right, bottom = pad
    th, tw = size
    out = []
    for n, img in enumerate(torch.from_numpy(images)):
        if mode == "symmetric":
            padded = torch.from_numpy(np.pad(img.numpy(), ((0, 0), (top, bottom), (left, right)), mode="symmetric"))
        elif mode == "constant":
            padded = torch.nn.functional.pad(img, (left, right, top, bottom), mode="constant", value=fill)
        else:
            torch_mode = {"edge": "replicate", "reflect": "reflect"}[mode]
            padded = torch.nn.functional.pad(img[None].double(), (left, right, top, bottom), mode=torch_mode)[0].to(img.dtype)
        h, w = padded.shape[-2:]
        i = int(_uniform(seed, offset + 3 * n) * (h - th + 1))
        j = int(_uniform(seed, offset + 3 * n + 1) * (w - tw + 1))
        crop = padded[:, i:i + th, j:j + tw]
        if _uniform(seed, offset + 3 * n + 2) < np.float32(flip_p):
            crop = torch.flip(crop, dims=[-1])
        out.append(crop.numpy())
    return np.stack(out)


CASES = [  # size, padding (torchvision's forms), padding_mode, fill
    ((32, 32), 4, "constant", 0),
    ((32, 32), 4, "reflect", 0),
    ((28, 30), (3, 5), "edge", 0),
    ((30, 32), (1, 2, 3, 4), "symmetric", 0),
    ((36, 36), 2, "constant", 7),
    ((16, 16), None, "constant", 0),
]


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
@pytest.mark.parametrize("size, padding, mode, fill", CASES)
def test_crop_and_flip_match_torchvision_semantics_on_every_device(size, padding, mode, fill, dtype):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (6, 3, 32, 32)).astype(dtype)
    if dtype == "float32":
        images = images / 255.0 - 0.3
    pad = TF.padding_sides(padding) if padding is not None else (0, 0, 0, 0)
    results = {}
    for device in DEVICES:
        gen = wg.Generator().manual_seed(123)
        crop = T.RandomCrop(size, padding=padding, padding_mode=mode, fill=fill, generator=gen)
        flip = T.RandomHorizontalFlip(p=0.5, generator=gen)
        x = wg.tensor(images, device=device)
        results[device] = (crop(x).to("cpu").numpy(), flip(x).to("cpu").numpy())
        assert gen.offset == 2 * 3 * 6  # three counters per image and per transform
    seed = _seed32(123)
    want_crop = _reference(images, size, pad, mode, fill, 0.0, seed, 0)
    want_flip = _reference(images, (32, 32), (0, 0, 0, 0), "constant", 0, 0.5, seed, 18)
    for device, (got_crop, got_flip) in results.items():
        assert got_crop.dtype == images.dtype, device
        np.testing.assert_array_equal(got_crop, want_crop, err_msg=device)  # pure copies: exact
        np.testing.assert_array_equal(got_flip, want_flip, err_msg=device)


@pytest.mark.parametrize("device", DEVICES)
def test_draws_are_per_image_and_uniform(device):
    # crop 1x1 out of a 9x9 image whose pixel values are their positions: the output is the draw
    grid = np.arange(81, dtype=np.float32).reshape(1, 1, 9, 9)
    gen = wg.Generator().manual_seed(5)
    picks = T.RandomCrop(1, generator=gen)(wg.tensor(np.repeat(grid, 8100, 0), device=device))
    counts = np.bincount(picks.to("cpu").numpy().astype(np.int64).ravel(), minlength=81)
    assert counts.min() > 60 and counts.max() < 145  # 100 expected each
    # flip with p = 0.3: image [0, 1] reads [1, 0] when flipped
    two = wg.tensor(np.tile(np.array([0, 1], np.uint8), (4000, 1, 1, 1)), device=device)
    flipped = T.RandomHorizontalFlip(0.3, generator=gen)(two).to("cpu").numpy()[:, 0, 0, 0]
    assert 0.27 < flipped.mean() < 0.33
    assert T.RandomHorizontalFlip(0.0)(two).tolist() == two.tolist()
    np.testing.assert_array_equal(T.RandomHorizontalFlip(1.0)(two).to("cpu").numpy()[:, 0, 0], [[1, 0]] * 4000)


@pytest.mark.parametrize("device", DEVICES)
def test_seeded_repeatable_and_fresh_each_call(device):
    x = wg.tensor(np.random.default_rng(1).integers(0, 256, (8, 3, 12, 12)).astype(np.uint8), device=device)
    aug = T.Compose([T.RandomCrop(12, padding=3), T.RandomHorizontalFlip()])
    wg.manual_seed(7)
    a, b = aug(x).tolist(), aug(x).tolist()
    wg.manual_seed(7)
    assert aug(x).tolist() == a and a != b


@pytest.mark.parametrize("device", DEVICES)
def test_any_leading_dims_and_single_images(device):
    x = wg.tensor(np.random.default_rng(2).random((2, 3, 1, 5, 6)).astype(np.float32), device=device)
    gen = wg.Generator().manual_seed(3)
    y = T.RandomCrop((4, 5), padding=1, generator=gen)(x)
    gen.manual_seed(3)
    flat = T.RandomCrop((4, 5), padding=1, generator=gen)(x.reshape(6, 1, 5, 6))
    assert y.shape == (2, 3, 1, 4, 5) and y.reshape(6, 1, 4, 5).tolist() == flat.tolist()
    assert T.RandomHorizontalFlip(1.0)(x[0, 0]).tolist() == x[0, 0].flip(-1).tolist()


@pytest.mark.parametrize("device", DEVICES)
def test_to_tensor_and_normalize(device):
    rng = np.random.default_rng(4)
    u8 = rng.integers(0, 256, (5, 3, 4, 6)).astype(np.uint8)
    x = T.ToTensor()(wg.tensor(u8, device=device))
    assert x.dtype is wg.float32 and x.device.type == device
    np.testing.assert_allclose(x.to("cpu").numpy(), u8 / 255.0, rtol=1e-6)
    mean, std = (0.49, 0.48, 0.45), (0.25, 0.24, 0.26)
    y = T.Normalize(mean, std)(x)
    # torchvision's normalize: (x - mean) / std per channel
    want = (torch.from_numpy(u8 / 255.0).float() - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
    np.testing.assert_allclose(y.to("cpu").numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    assert T.ToTensor()(x) is x  # floats pass through, as torchvision leaves float arrays unscaled
    # a NumPy image is HWC (torchvision's rule) and becomes CHW
    hwc = u8[0].transpose(1, 2, 0)
    np.testing.assert_allclose(T.ToTensor()(hwc).numpy(), u8[0] / 255.0, rtol=1e-6)
    with pytest.raises(TypeError, match="Input tensor should be a float tensor. Got webgrad.uint8"):
        T.Normalize(mean, std)(wg.tensor(u8, device=device))
    with pytest.raises(ValueError, match="std evaluated to zero"):
        T.Normalize(0.5, 0.0)(x)


@pytest.mark.skipif("webgpu" not in DEVICES, reason="needs WebGPU")
def test_cpu_and_webgpu_affine_agree():
    u8 = np.random.default_rng(5).integers(0, 256, (4, 3, 9, 7)).astype(np.uint8)
    outs = [T.Normalize((0.1, 0.2, 0.3), (0.3, 0.2, 0.1))(T.ToTensor()(wg.tensor(u8, device=d))).to("cpu").numpy()
            for d in ("cpu", "webgpu")]
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6, atol=1e-6)


def test_bad_arguments():
    x = wg.zeros(2, 3, 8, 8)
    with pytest.raises(ValueError, match=r"Required crop size \(20, 20\) is larger than input image size \(10, 10\)"):
        T.RandomCrop(20, padding=1)(x)
    assert T.RandomCrop(20, pad_if_needed=True)(x).shape == (2, 3, 20, 20)
    with pytest.raises(ValueError, match="reflect padding .* needs a larger image"):
        T.RandomCrop(8, padding=8, padding_mode="reflect")(x)
    with pytest.raises(ValueError, match="Padding mode should be either constant, edge, reflect or symmetric"):
        T.RandomCrop(8, padding_mode="wrap")
    with pytest.raises(ValueError, match="Padding must be an int or a 1, 2, or 4 element tuple"):
        T.RandomCrop(8, padding=(1, 2, 3))
    with pytest.raises(ValueError, match="at least 3 dimensions"):
        T.RandomHorizontalFlip()(wg.zeros(8, 8))
    with pytest.raises(TypeError, match="must be uint8 or float32"):
        T.RandomHorizontalFlip()(wg.zeros(1, 8, 8, dtype=wg.int32))


@pytest.mark.skipif("webgpu" not in DEVICES, reason="replay records WebGPU work")
def test_replayed_step_draws_fresh_augmentations():
    x = wg.tensor(np.random.default_rng(6).integers(0, 256, (4, 3, 10, 10)).astype(np.uint8), device="webgpu")
    aug = T.Compose([T.RandomCrop(10, padding=2, padding_mode="reflect"), T.RandomHorizontalFlip(), T.ToTensor()])

    def step(batch):
        return aug(batch) * 1.0

    results = []
    for run in (step, wg.replayable(step)):
        wg.manual_seed(11)
        results.append([run(x).tolist() for _ in range(4)])
    assert results[0] == results[1]              # replays draw what eager calls draw, in order
    assert len({str(r) for r in results[1]}) == 4  # and every replay draws anew


# ---------------------------------------------------------------------------------------------- ColorJitter
def _tv_blend(img1, img2, ratio):  # torchvision.transforms._functional_tensor, verbatim
    bound = 1.0 if img1.is_floating_point() else 255.0
    return (ratio * img1 + (1.0 - ratio) * img2).clamp(0, bound).to(img1.dtype)


def _tv_gray(img):
    r, g, b = img.unbind(dim=-3)
    return (0.2989 * r + 0.587 * g + 0.114 * b).to(img.dtype).unsqueeze(dim=-3)


def _tv_adjust(op, img, f):
    if op == 0:
        return _tv_blend(img, torch.zeros_like(img), f)
    if op == 1:
        dtype = img.dtype if torch.is_floating_point(img) else torch.float32
        return _tv_blend(img, torch.mean(_tv_gray(img).to(dtype), dim=(-3, -2, -1), keepdim=True), f)
    return _tv_blend(img, _tv_gray(img), f)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_color_jitter_matches_torchvision_semantics(device, dtype):
    from webgrad._backends.kernels import AUGMENT_COLOR_ORDERS
    rng = np.random.default_rng(8)
    images = rng.integers(0, 256, (24, 3, 6, 8)).astype(dtype)
    if dtype == "float32":
        images = images / 255.0
    ranges = [(0.6, 1.4), (0.5, 1.5), (0.0, 2.0)]
    gen = wg.Generator().manual_seed(9)
    got = T.ColorJitter(0.4, 0.5, (0.0, 2.0), generator=gen)(wg.tensor(images, device=device)).to("cpu").numpy()
    assert got.dtype == images.dtype and gen.offset == 4 * 24
    seed, orders = _seed32(9), set()
    for n, img in enumerate(torch.from_numpy(images)):
        order = AUGMENT_COLOR_ORDERS[int(_uniform(seed, 4 * n) * 6)]
        orders.add(order)
        for op in order:
            lo, hi = (np.float32(v) for v in ranges[op])
            img = _tv_adjust(op, img, float(lo + (hi - lo) * np.float32(_uniform(seed, 4 * n + 1 + op))))
        want = img.numpy()
        if dtype == "uint8":  # float32 rounding may move a value across an integer: at most 1, rarely
            diff = np.abs(got[n].astype(np.int64) - want.astype(np.int64))
            assert diff.max() <= 1 and (diff > 0).mean() < 0.02, (n, order)
        else:
            np.testing.assert_allclose(got[n], want, rtol=1e-5, atol=1e-6, err_msg=str((n, order)))
    assert len(orders) == 6  # every order occurs among 24 images


@pytest.mark.skipif("webgpu" not in DEVICES, reason="needs WebGPU")
def test_color_jitter_cpu_and_webgpu_agree():
    rng = np.random.default_rng(10)
    for dtype in ("uint8", "float32"):
        images = rng.integers(0, 256, (16, 3, 32, 32)).astype(dtype)
        outs = []
        for device in ("cpu", "webgpu"):
            gen = wg.Generator().manual_seed(1)
            outs.append(T.ColorJitter(0.4, 0.4, 0.4, generator=gen)(wg.tensor(images / (1 if dtype == "uint8" else 255.0), dtype=getattr(wg, dtype), device=device)).to("cpu").numpy())
        np.testing.assert_allclose(outs[0].astype(np.float64), outs[1].astype(np.float64), rtol=1e-6, atol=1e-6)
    gray = wg.tensor(rng.random((4, 1, 4, 4)).astype(np.float32))
    assert T.ColorJitter(saturation=0.9)(gray).tolist() == gray.tolist()  # saturation leaves one channel alone


def test_color_jitter_arguments():
    assert T.ColorJitter(0.4).brightness == (0.6, 1.4) and T.ColorJitter(contrast=2).contrast == (0.0, 3.0)
    with pytest.raises(ValueError, match="If brightness is a single number, it must be non negative"):
        T.ColorJitter(-0.1)
    with pytest.raises(NotImplementedError, match="hue"):
        T.ColorJitter(hue=0.1)
    with pytest.raises(TypeError, match="permitted channel values are \\[1, 3\\], but found 2"):
        T.ColorJitter(0.5)(wg.zeros(2, 4, 4))


# ---------------------------------------------------------------------------------------------- RandomErasing
def _tv_erasing_params(h, w, scale, ratio, seed, base):
    """torchvision's RandomErasing.get_params (10 attempts, then no erasing), with webgrad's draws."""
    import math
    if not _uniform(seed, base) < 0.5:
        return None
    area = h * w
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for a in range(10):
        d = base + 1 + 4 * a
        erase_area = area * (scale[0] + (scale[1] - scale[0]) * _uniform(seed, d))
        aspect_ratio = math.exp(log_ratio[0] + (log_ratio[1] - log_ratio[0]) * _uniform(seed, d + 1))
        eh = int(round(math.sqrt(erase_area * aspect_ratio)))
        ew = int(round(math.sqrt(erase_area / aspect_ratio)))
        if not (eh < h and ew < w):
            continue
        return int(_uniform(seed, d + 2) * (h - eh + 1)), int(_uniform(seed, d + 3) * (w - ew + 1)), eh, ew
    return None


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_random_erasing_matches_torchvision_semantics(device, dtype):
    images = (np.random.default_rng(12).integers(1, 256, (40, 3, 12, 10))).astype(dtype)
    gen = wg.Generator().manual_seed(13)
    scale, ratio = (0.02, 0.6), (0.3, 3.3)
    got = T.RandomErasing(p=0.5, scale=scale, ratio=ratio, value=0, generator=gen)(wg.tensor(images, device=device))
    got = got.to("cpu").numpy()
    assert gen.offset == 41 * 40
    erased = 0
    for n in range(40):
        want = images[n].copy()
        box = _tv_erasing_params(12, 10, scale, ratio, _seed32(13), 41 * n)
        if box is not None:
            i, j, h, w = box
            want[:, i:i + h, j:j + w] = 0
            erased += 1
        np.testing.assert_array_equal(got[n], want, err_msg=f"image {n}, box {box}")
    assert 10 < erased < 30


def test_random_erasing_arguments():
    with pytest.raises(ValueError, match="Random erasing probability should be between 0 and 1"):
        T.RandomErasing(p=1.5)
    with pytest.raises(ValueError, match="Scale should be between 0 and 1"):
        T.RandomErasing(scale=(0.1, 1.5))
    with pytest.raises(ValueError, match="If value is str, it should be 'random'"):
        T.RandomErasing(value="noise")
    x = wg.ones(3, 8, 8)
    assert T.RandomErasing(p=0.0)(x).tolist() == x.tolist()
    assert 5.0 in sum(sum(T.RandomErasing(p=1.0, value=5)(x).tolist(), []), [])


@pytest.mark.parametrize("device", DEVICES)
def test_compose_fuses_to_tensor_and_normalize(device):
    u8 = wg.tensor(np.random.default_rng(14).integers(0, 256, (3, 3, 5, 5)).astype(np.uint8), device=device)
    mean, std = (0.4, 0.5, 0.6), (0.2, 0.3, 0.4)
    fused = T.Compose([T.ToTensor(), T.Normalize(mean, std)])(u8).to("cpu").numpy()
    apart = T.Normalize(mean, std)(T.ToTensor()(u8)).to("cpu").numpy()
    np.testing.assert_allclose(fused, apart, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(2, 4, 6, 3), (3, 5, 3, 3)])  # H * W a multiple of 4 (vec4 path on WebGPU) or not
def test_affine_kernel_layouts(device, shape):
    rng = np.random.default_rng(15)
    hwc = rng.integers(0, 256, shape).astype(np.uint8)
    chw = np.ascontiguousarray(hwc.transpose(0, 3, 1, 2))
    scale, shift = [0.5, 2.0, -1.0], [1.0, 0.0, 3.0]
    want = chw * np.array(scale)[:, None, None] + np.array(shift)[:, None, None]
    for image, last in ((hwc, True), (chw, False)):
        for dtype in ("uint8", "float32"):
            got = TF._affine(wg.tensor(image.astype(dtype), device=device), scale, shift, "t", channels_last=last)
            np.testing.assert_allclose(got.to("cpu").numpy(), want, rtol=1e-6, err_msg=f"{dtype} channels_last={last}")
    view = wg.tensor(np.concatenate([np.zeros((1,) + chw.shape[1:], np.uint8), chw]), device=device)[1:]  # offset
    np.testing.assert_allclose(TF._affine(view, scale, shift, "t").to("cpu").numpy(), want, rtol=1e-6)
