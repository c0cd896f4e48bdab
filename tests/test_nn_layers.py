"""The layers the pytorch/examples scan asked for (issue 13) against torch.nn: ConvTranspose2d, Upsample,
PixelShuffle, the padding layers, and their reprs, errors and state_dicts. The functional forms and their
gradients are rows of tests/op_cases.py."""

import math

import numpy as np
import pytest

import webgrad as wg
from webgrad import nn
import webgrad.nn.functional as F
from helpers import DEVICES

torch = pytest.importorskip("torch")


REPR_CASES = [
    ("ConvTranspose2d", (3, 8, 3), {}),
    ("ConvTranspose2d", (4, 8, (3, 5)), {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2, "bias": False}),
    ("ConvTranspose2d", (2, 2, 3), {"dilation": 2}),
    ("Upsample", (), {"scale_factor": 2}), ("Upsample", ((4, 5),), {"mode": "bilinear"}),
    ("UpsamplingNearest2d", (), {"scale_factor": 3}), ("UpsamplingBilinear2d", (7,), {}),
    ("PixelShuffle", (3,), {}), ("PixelUnshuffle", (2,), {}),
    ("ZeroPad2d", (2,), {}), ("ZeroPad2d", ((1, 2, 3, 4),), {}), ("ConstantPad2d", (1, 0.5), {}),
    ("ConstantPad1d", ((1, 2), 3), {}), ("ReflectionPad2d", (1,), {}), ("ReflectionPad1d", ((2, 1),), {}),
    ("ReplicationPad2d", ((0, 1, 2, 3),), {}), ("ReplicationPad3d", (1,), {}), ("CircularPad2d", (1,), {}),
]


@pytest.mark.parametrize("name,args,kwargs", REPR_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(REPR_CASES)])
def test_layer_repr_matches_torch(name, args, kwargs):
    assert repr(getattr(nn, name)(*args, **kwargs)) == repr(getattr(torch.nn, name)(*args, **kwargs))


LAYER_CASES = [
    ("ConvTranspose2d", (3, 4, 3), {"stride": 2, "padding": 1, "output_padding": 1}, (2, 3, 3, 4)),
    ("ConvTranspose2d", (4, 6, (2, 3)), {"dilation": (2, 1), "groups": 2}, (1, 4, 3, 3)),
    ("ConvTranspose2d", (2, 3, 3), {"bias": False}, (2, 3, 3)),
    ("Upsample", (), {"scale_factor": 2}, (1, 2, 3, 3)),
    ("Upsample", ((5, 4),), {"mode": "bilinear", "align_corners": True}, (2, 1, 3, 3)),
    ("UpsamplingBilinear2d", (), {"scale_factor": 2}, (1, 2, 2, 3)),
    ("UpsamplingNearest2d", ((3, 7),), {}, (1, 2, 2, 3)),
    ("PixelShuffle", (2,), {}, (1, 8, 2, 2)), ("PixelUnshuffle", (3,), {}, (2, 1, 3, 6)),
    ("ZeroPad2d", ((1, 0, 2, 1),), {}, (1, 2, 3, 3)), ("ConstantPad2d", (2, -1.5), {}, (2, 2, 2)),
    ("ReflectionPad2d", (2,), {}, (1, 2, 3, 4)), ("ReplicationPad2d", ((1, 2, 0, 3),), {}, (1, 1, 3, 3)),
    ("ReflectionPad1d", (2,), {}, (2, 3, 4)), ("CircularPad2d", (1,), {}, (1, 1, 3, 3)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,args,kwargs,shape", LAYER_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(LAYER_CASES)])
def test_layer_matches_torch(name, args, kwargs, shape, device):
    torch.manual_seed(0)
    ref = getattr(torch.nn, name)(*args, **kwargs)
    ours = getattr(nn, name)(*args, **kwargs).to(device)
    ours.load_state_dict({k: wg.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    xt = torch.tensor(x, requires_grad=True)
    xw = wg.tensor(x, device=device, requires_grad=True)
    yt, yw = ref(xt), ours(xw)
    g = np.random.default_rng(1).standard_normal(tuple(yt.shape)).astype(np.float32)
    (yt * torch.tensor(g)).sum().backward()
    (yw * wg.tensor(g, device=device)).sum().backward()
    np.testing.assert_allclose(yw.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(xw.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-5)
    for (n, p), (_, pt) in zip(ours.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), pt.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=n)


def test_conv_transpose2d_output_size_picks_output_padding():
    ours, ref = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1), torch.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 4)).astype(np.float32)
    for size in ([7, 7], [8, 7], (1, 3, 8, 8)):
        assert tuple(ours(wg.tensor(x), output_size=size).shape) == tuple(ref(torch.tensor(x), output_size=size).shape)
    with pytest.raises(ValueError, match=r"requested an output size of \[9, 7\], but valid sizes range from \[7, 7\] "
                                         r"to \[8, 8\] \(for an input of \[4, 4\]\)"):
        ours(wg.tensor(x), output_size=[9, 7])


def test_conv_transpose2d_inverts_the_shape_of_a_strided_conv2d():
    # the reason it exists: conv2d(stride=2) halves a 9x9 image to 5x5, conv_transpose2d takes it back to 9x9
    x = wg.randn(1, 2, 9, 9)
    w = wg.randn(3, 2, 3, 3)
    y = F.conv2d(x, w, stride=2, padding=1)
    assert tuple(F.conv_transpose2d(y, w, stride=2, padding=1).shape) == (1, 2, 9, 9)


def test_errors_name_the_problem():
    x = wg.randn(1, 4, 3, 3)
    with pytest.raises(RuntimeError, match="output padding must be smaller than either stride or dilation"):
        F.conv_transpose2d(x, wg.randn(4, 2, 3, 3), output_padding=1)
    with pytest.raises(RuntimeError, match="has 4 channels, but the weight of shape"):
        F.conv_transpose2d(x, wg.randn(3, 2, 3, 3))
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for ConvTranspose2d'):
        nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="only one of size or scale_factor should be defined"):
        F.interpolate(x, size=4, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor should be defined"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners option can only be set with the interpolating modes"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(NotImplementedError, match="Got 4D input, but linear mode needs 3D input"):
        F.interpolate(x, scale_factor=2, mode="linear")
    with pytest.raises(NotImplementedError, match="'bicubic'"):
        F.interpolate(x, scale_factor=2, mode="bicubic")
    with pytest.raises(RuntimeError, match=r"input.size\(-3\)=4 is not divisible by 9"):
        F.pixel_shuffle(x, 3)
    with pytest.raises(RuntimeError, match=r"input.size\(-2\)=3 is not divisible by 2"):
        F.pixel_unshuffle(x, 2)
    with pytest.raises(ValueError, match="padding must be an int or a tuple of 4 ints"):
        nn.ReflectionPad2d((1, 2))


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_nearest_picks_torchs_source_rows_for_awkward_scales(mode):
    # PyTorch computes the source index in float32: floor(i * float(1/scale)); a float64 formula picks
    # a different row for some sizes and scales (e.g. 1/3 or 1/1.1)
    # (and its 2-D kernel, unlike the 1-D and 3-D ones, copies equal sizes and halves doubled ones)
    for shape in ((1, 1, -1), (1, 1, -1, 1), (1, 1, 1, 1, -1)):
        for n in (1, 2, 3, 5, 7, 11):
            for scale in (0.3, 0.5, 1.1, 1.5, 2.0, 2.1, 2.9, 3.0, 10 / 3):
                x = np.arange(n, dtype=np.float32).reshape([n if s == -1 else s for s in shape])
                if math.floor(n * scale) == 0:
                    continue
                scales = [scale if s == -1 else 1.0 for s in shape[2:]]
                want = torch.nn.functional.interpolate(torch.tensor(x), scale_factor=scales, mode=mode).numpy()
                got = F.interpolate(wg.tensor(x), scale_factor=scales, mode=mode).numpy()
                np.testing.assert_array_equal(got, want, err_msg=f"shape={x.shape}, scale={scale}")
