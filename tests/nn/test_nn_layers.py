"""The layers the pytorch/examples scan asked for (issue 13) against torch.nn: ConvTranspose2d, Upsample,
PixelShuffle, the padding layers, GroupNorm, InstanceNorm, channel-wise Dropout, PReLU, ParameterList and
ParameterDict: outputs, gradients, running statistics, reprs and errors. The functional forms and their
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
    ("GroupNorm", (2, 4), {}), ("GroupNorm", (3, 6), {"eps": 1e-3, "affine": False}),
    ("InstanceNorm2d", (3,), {}), ("InstanceNorm1d", (3,), {"affine": True, "track_running_stats": True}),
    ("InstanceNorm3d", (2,), {"momentum": None}),
    ("Dropout2d", (), {}), ("Dropout1d", (0.2,), {}), ("Dropout3d", (0.3, True), {}),
    ("PReLU", (), {}), ("PReLU", (3, 0.1), {}),
    ("RNN", (3, 4), {"nonlinearity": "relu", "num_layers": 2}), ("RNNCell", (3, 4), {"nonlinearity": "relu"}),
    ("EmbeddingBag", (5, 2), {"mode": "sum"}), ("EmbeddingBag", (5, 2), {"max_norm": 1.0, "padding_idx": 0}),
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
    ("GroupNorm", (2, 4), {}, (2, 4, 3, 2)), ("GroupNorm", (3, 3), {"affine": False}, (2, 3, 4)),
    ("InstanceNorm2d", (3,), {"affine": True}, (2, 3, 2, 3)), ("InstanceNorm2d", (2,), {}, (2, 3, 3)),
    ("InstanceNorm1d", (3,), {"affine": True, "track_running_stats": True}, (2, 3, 4)),
    ("PReLU", (), {}, (2, 3, 2)), ("PReLU", (3, 0.1), {}, (2, 3, 2, 2)),
    ("Dropout2d", (), {}, (2, 3, 2, 2)),  # eval mode below: the identity
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,args,kwargs,shape", LAYER_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(LAYER_CASES)])
def test_layer_matches_torch(name, args, kwargs, shape, device):
    torch.manual_seed(0)
    ref = getattr(torch.nn, name)(*args, **kwargs)
    ours = getattr(nn, name)(*args, **kwargs).to(device)
    if name.startswith("Dropout"):
        ref.eval(), ours.eval()
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
    with pytest.raises(NotImplementedError, match="'cubic'"):
        F.interpolate(x, scale_factor=2, mode="cubic")
    with pytest.raises(RuntimeError, match=r"input.size\(-3\)=4 is not divisible by 9"):
        F.pixel_shuffle(x, 3)
    with pytest.raises(RuntimeError, match=r"input.size\(-2\)=3 is not divisible by 2"):
        F.pixel_unshuffle(x, 2)
    with pytest.raises(ValueError, match="padding must be an int or a tuple of 4 ints"):
        nn.ReflectionPad2d((1, 2))


def test_deprecated_upsample_names_warn_and_match_torch():
    x = np.random.default_rng(0).standard_normal((1, 2, 2, 3)).astype(np.float32)
    for name, kwargs in (("upsample", {"scale_factor": 2, "mode": "bilinear"}), ("upsample_nearest", {"size": 5}),
                         ("upsample_bilinear", {"scale_factor": 2})):
        with pytest.warns(UserWarning, match=f"nn.functional.{name} is deprecated"):
            got = getattr(F, name)(wg.tensor(x), **kwargs).numpy()
        with pytest.warns(UserWarning):
            want = getattr(torch.nn.functional, name)(torch.tensor(x), **kwargs).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=name)


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


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,shape", [("InstanceNorm2d", (2, 3, 2, 3)), ("InstanceNorm1d", (3, 4))])
def test_instance_norm_running_stats_match_torch_over_steps(name, shape, device):
    ref = getattr(torch.nn, name)(3, momentum=0.3, affine=True, track_running_stats=True)
    ours = getattr(nn, name)(3, momentum=0.3, affine=True, track_running_stats=True).to(device)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = (rng.standard_normal(shape) * 2 + 1).astype(np.float32)
        ref(torch.tensor(x)), ours(wg.tensor(x, device=device))
    for key in ("running_mean", "running_var"):
        np.testing.assert_allclose(getattr(ours, key).numpy(), getattr(ref, key).numpy(), rtol=1e-5, atol=1e-6)
    ref.eval(), ours.eval()  # now the running statistics normalise
    x = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(ours(wg.tensor(x, device=device)).detach().numpy(), ref(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_dropout2d_zeroes_whole_channels(device):
    wg.manual_seed(0)
    x = wg.ones(40, 50, 3, 2, device=device, requires_grad=True)
    y = F.dropout2d(x, 0.3)
    planes = y.detach().numpy().reshape(40, 50, 6)
    assert np.all((planes == 0) | np.isclose(planes, 1 / 0.7))
    assert np.all(planes.min(2) == planes.max(2))  # one draw per channel of each sample
    assert abs((planes[:, :, 0] == 0).mean() - 0.3) < 0.05
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy().reshape(40, 50, 6), planes, rtol=1e-6)  # the gradient passes the same mask
    layer = nn.Dropout2d(0.3).to(device).eval()
    assert layer(x) is x
    u = F.dropout1d(wg.ones(30, 4, device=device), 0.5).numpy()  # unbatched [C, L]: one draw per channel
    assert np.all(u.min(1) == u.max(1))
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input, but received a 4D input"):
        F.dropout1d(x, 0.5)
    with pytest.warns(UserWarning, match="Received a 3D input to dropout2d"):
        F.dropout2d(wg.ones(2, 3, 4), 0.5)


def test_norm_and_prelu_errors_name_the_problem():
    with pytest.raises(RuntimeError, match=r"divisible by num_groups, but got input of shape \[2, 3, 4\] and "
                                           r"num_groups=2"):
        F.group_norm(wg.randn(2, 3, 4), 2)
    with pytest.raises(ValueError, match=r"num_channels \(3\) must be divisible by num_groups \(2\)"):
        nn.GroupNorm(2, 3)
    with pytest.raises(ValueError, match="Expected more than 1 spatial element when training"):
        F.instance_norm(wg.randn(2, 3, 1))
    with pytest.raises(RuntimeError, match="Expected running_mean and running_var to be defined"):
        F.instance_norm(wg.randn(2, 3, 4), use_input_stats=False)
    with pytest.raises(ValueError, match=r"expected 3D or 4D input \(got 2D input\)"):
        nn.InstanceNorm2d(3)(wg.randn(3, 4))
    with pytest.raises(ValueError, match=r"expected input's size at dim=1 to match num_features \(3\)"):
        nn.InstanceNorm2d(3, affine=True)(wg.randn(2, 4, 3, 3))
    with pytest.raises(RuntimeError, match="Found parameter numbers = 3 and channel size = 4"):
        F.prelu(wg.randn(2, 4, 3), wg.randn(3))


def test_parameter_list_and_dict_register_like_torch():
    def build(m, mnn):
        net = mnn.Module()
        net.plist = mnn.ParameterList([mnn.Parameter(m.zeros(2, 3)), m.zeros(4)])  # a plain tensor is wrapped
        net.pdict = mnn.ParameterDict({"w": m.zeros(3), "b": mnn.Parameter(m.zeros(1))})
        return net

    ours, ref = build(wg, nn), build(torch, torch.nn)
    assert list(ours.state_dict()) == list(ref.state_dict()) == ["plist.0", "plist.1", "pdict.b", "pdict.w"]
    assert all(isinstance(p, nn.Parameter) for p in ours.plist) and len(list(ours.parameters())) == 4
    assert repr(ours).replace("webgrad.", "torch.") == repr(ref)  # the dict's entries by legacy type name
    ours.plist.append(wg.ones(1))
    ours.plist[0] = wg.ones(2)
    assert len(ours.plist) == 3 and tuple(ours.plist[0].shape) == (2,) and len(ours.plist[1:]) == 2
    ours.pdict.update([("z", wg.ones(2))])
    assert list(ours.pdict) == ["b", "w", "z"] and "z" in ours.pdict and ours.pdict.get("q") is None
    assert tuple(ours.pdict.pop("w").shape) == (3,) and "pdict.w" not in ours.state_dict()
    with pytest.raises(IndexError, match="index 5 is out of range"):
        ours.plist[5]
    with pytest.raises(TypeError, match="not a string"):
        ours.pdict[0] = wg.ones(1)


@pytest.mark.parametrize("device", DEVICES)
def test_small_autoencoder_with_the_new_layers_learns(device):
    # the pytorch/examples shapes in one model: a strided encoder, then ConvTranspose2d, Upsample and
    # PixelShuffle back up, with GroupNorm, InstanceNorm2d, PReLU, Dropout2d and reflection padding between
    wg.manual_seed(0)
    model = nn.Sequential(
        nn.ReflectionPad2d(1), nn.Conv2d(1, 4, 3, stride=2), nn.GroupNorm(2, 4), nn.PReLU(4), nn.Dropout2d(0.1),
        nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1, output_padding=1), nn.InstanceNorm2d(4, affine=True),
        nn.PReLU(), nn.Conv2d(4, 4, 1), nn.PixelShuffle(2), nn.Upsample(scale_factor=0.5, mode="bilinear"),
    ).to(device)
    x = wg.tensor(np.random.default_rng(0).standard_normal((4, 1, 8, 8)).astype(np.float32), device=device)
    opt = wg.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _ in range(30):
        loss = F.mse_loss(model(x), x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.6 * losses[0], losses


def test_parameter_list_names_no_device_for_meta_parameters_as_torch():
    ours = nn.ParameterList([nn.Parameter(wg.ones(2, 3, device="meta")), nn.Parameter(wg.ones(2))])
    ref = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(2, 3, device="meta")),
                                  torch.nn.Parameter(torch.ones(2))])
    assert repr(ours).replace("webgrad.", "torch.") == repr(ref)
