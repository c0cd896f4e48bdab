"""nn.Conv3d and nn.ConvTranspose3d (nn/conv.py, sharing _ConvNd with the 2-D modules) against torch.nn: forward
and gradients with torch's weights loaded (strides, padding and its strings, padding modes, dilation, groups,
output_padding, output_size, unbatched inputs), parameter shapes and default initialisation, state_dict round trips
both ways, repr, and bad arguments raising torch's exception types."""

import math

import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import nn

# torch's note that its own 'same' padding of an even kernel copies the input
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")


def _pair_of_modules(name, args, kwargs, device):
    torch.manual_seed(0)
    ref = getattr(torch.nn, name)(*args, **kwargs)
    ours = getattr(nn, name)(*args, **kwargs).to(device)
    ours.load_state_dict({k: wg.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    return ours, ref


def _check_forward_and_gradients(ours, ref, shape, device, **call):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    xt = torch.tensor(x, requires_grad=True)
    xw = wg.tensor(x, device=device, requires_grad=True)
    yt, yw = ref(xt, **call), ours(xw, **call)
    assert tuple(yw.shape) == tuple(yt.shape)
    g = np.random.default_rng(1).standard_normal(tuple(yt.shape)).astype(np.float32)
    (yt * torch.tensor(g)).sum().backward()
    (yw * wg.tensor(g, device=device)).sum().backward()
    np.testing.assert_allclose(yw.detach().to("cpu").numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(xw.grad.to("cpu").numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    named = dict(ref.named_parameters())
    for n, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.to("cpu").numpy(), named[n].grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=n)


CONV3D_CASES = [
    ((2, 4, 3), {}, (2, 2, 4, 5, 4)),
    ((4, 6, (3, 2, 1)), {"stride": (2, 1, 2), "padding": (1, 0, 1), "dilation": (1, 2, 1), "groups": 2,
                         "bias": False}, (1, 4, 5, 5, 4)),
    ((2, 3, (2, 3, 2)), {"padding": "same", "dilation": (1, 2, 1)}, (1, 2, 4, 5, 3)),
    ((2, 3, 2), {"padding": "valid", "stride": 2}, (1, 2, 5, 4, 4)),
    ((3, 2, 2), {"padding": 1}, (3, 3, 4, 3)),  # unbatched [C, D, H, W]
]


@pytest.mark.parametrize("args,kwargs,shape", CONV3D_CASES, ids=[str(i) for i in range(len(CONV3D_CASES))])
def test_conv3d_matches_torch(device, args, kwargs, shape):
    _check_forward_and_gradients(*_pair_of_modules("Conv3d", args, kwargs, device), shape, device)


@pytest.mark.parametrize("name,args,kwargs,shape", [
    ("Conv3d", (2, 3, 3), {"padding": 1, "padding_mode": "reflect"}, (1, 2, 4, 4, 5)),
    ("Conv3d", (2, 2, (2, 3, 2)), {"padding": "same", "padding_mode": "replicate"}, (1, 2, 3, 4, 4)),
    ("Conv3d", (2, 4, 3), {"padding": (2, 1, 0), "stride": 2, "groups": 2, "padding_mode": "circular"},
     (2, 2, 4, 3, 5)),
    ("Conv3d", (2, 2, 2), {"padding": 1, "padding_mode": "reflect"}, (2, 3, 4, 3)),  # unbatched
    ("Conv2d", (2, 3, (2, 3)), {"padding": "same", "dilation": (3, 1), "padding_mode": "reflect"}, (1, 2, 7, 5)),
], ids=["reflect", "same-replicate", "circular", "reflect-unbatched", "conv2d-same-reflect"])
def test_padding_modes_match_torch(device, name, args, kwargs, shape):
    _check_forward_and_gradients(*_pair_of_modules(name, args, kwargs, device), shape, device)


CONV_TRANSPOSE3D_CASES = [
    ((3, 2, 2), {}, (2, 3, 3, 2, 4)),
    ((4, 6, (3, 2, 3)), {"stride": (2, 1, 3), "padding": (1, 0, 1), "output_padding": (1, 0, 2), "groups": 2},
     (1, 4, 3, 3, 2)),
    ((2, 3, 2), {"stride": 2, "dilation": (2, 1, 1), "output_padding": (1, 1, 0), "bias": False}, (1, 2, 2, 3, 3)),
    ((2, 2, 3), {"stride": 2, "padding": 1}, (2, 3, 2, 3)),  # unbatched
]


@pytest.mark.parametrize("args,kwargs,shape", CONV_TRANSPOSE3D_CASES,
                         ids=[str(i) for i in range(len(CONV_TRANSPOSE3D_CASES))])
def test_conv_transpose3d_matches_torch(device, args, kwargs, shape):
    _check_forward_and_gradients(*_pair_of_modules("ConvTranspose3d", args, kwargs, device), shape, device)


def test_conv_transpose3d_output_size_matches_torch(device):
    ours, ref = _pair_of_modules("ConvTranspose3d", (2, 2, 3), {"stride": (2, 3, 2), "padding": 1}, device)
    _check_forward_and_gradients(ours, ref, (1, 2, 2, 3, 2), device, output_size=[4, 8, 4])
    x = np.zeros((1, 2, 2, 3, 2), np.float32)
    for size in ([3, 7, 3], (1, 2, 4, 9, 4), [3, 8, 4]):
        assert tuple(ours(wg.tensor(x, device=device), output_size=size).shape) == \
            tuple(ref(torch.tensor(x), output_size=size).shape)
    for L, module, inp in ((wg, ours, wg.tensor(x, device=device)), (torch, ref, torch.tensor(x))):
        with pytest.raises(ValueError, match=r"requested an output size of \[5, 7, 3\], but valid sizes range "
                                             r"from \[3, 7, 3\] to \[4, 9, 4\]"):
            module(inp, output_size=[5, 7, 3])
        with pytest.raises(ValueError, match="output_size must have 3 or 5 elements"):
            module(inp, output_size=[4, 4])


@pytest.mark.parametrize("name,args,kwargs", [
    ("Conv3d", (4, 6, (3, 2, 1)), {"groups": 2}),
    ("Conv3d", (3, 5, 2), {"bias": False}),
    ("ConvTranspose3d", (4, 6, (1, 2, 3)), {"groups": 2}),
    ("ConvTranspose3d", (3, 5, 2), {"bias": False}),
])
def test_parameter_shapes_and_state_dict_keys_match_torch(name, args, kwargs):
    ours, ref = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert list(ours.state_dict()) == list(ref.state_dict())
    for (n, p), (nt, pt) in zip(ours.named_parameters(), ref.named_parameters()):
        assert n == nt and tuple(p.shape) == tuple(pt.shape)


@pytest.mark.parametrize("name,args,fan_in", [
    ("Conv3d", (8, 64, (3, 2, 2)), 8 * 12),
    ("ConvTranspose3d", (16, 64, (2, 1, 1)), 64 * 2),  # fan_in is weight.shape[1] * kernel: out_channels here
    ("ConvTranspose3d", (16, 64, 1, 1, 0, 0, 4), 16),  # groups=4: 64 // 4 output channels a group
])
def test_default_init_is_torchs_kaiming_uniform(name, args, fan_in):
    # kaiming_uniform_(a=sqrt(5)) bounds the weight by 1 / sqrt(fan_in), and the bias takes the same bound
    module = getattr(nn, name)(*args)
    bound = 1 / math.sqrt(fan_in)
    w, b = module.weight.detach().numpy(), module.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert np.abs(b).max() <= bound and np.abs(b).max() > 0.8 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.1 * bound


@pytest.mark.parametrize("name,args,kwargs,shape", [
    ("Conv3d", (2, 4, (2, 3, 2)), {"stride": 2, "groups": 2}, (1, 2, 4, 5, 4)),
    ("ConvTranspose3d", (2, 4, 2), {"stride": 2, "bias": False}, (1, 2, 2, 3, 2)),
])
def test_state_dict_round_trips_through_torch(name, args, kwargs, shape):
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    ours, ref = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    ref.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})  # strict
    np.testing.assert_allclose(ours(wg.tensor(x)).detach().numpy(), ref(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    torch.nn.init.normal_(ref.weight)
    back = getattr(nn, name)(*args, **kwargs)
    back.load_state_dict({k: wg.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    np.testing.assert_array_equal(back.weight.detach().numpy(), ref.weight.detach().numpy())
    np.testing.assert_allclose(back(wg.tensor(x)).detach().numpy(), ref(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,args,kwargs", [
    ("Conv3d", (4, 8, 3), {}),
    ("Conv3d", (4, 8, (3, 2, 1)), {"stride": (2, 1, 1), "padding": (1, 0, 2), "dilation": 2, "groups": 4,
                                   "bias": False, "padding_mode": "circular"}),
    ("Conv3d", (2, 2, 3), {"padding": "same"}),
    ("Conv3d", (2, 2, 3), {"padding": "valid"}),
    ("ConvTranspose3d", (4, 8, 3), {}),
    ("ConvTranspose3d", (4, 8, (3, 2, 1)), {"stride": 2, "padding": 1, "output_padding": (1, 0, 1), "groups": 2,
                                            "dilation": (1, 2, 1), "bias": False}),
])
def test_repr_matches_torch(name, args, kwargs):
    assert repr(getattr(nn, name)(*args, **kwargs)) == repr(getattr(torch.nn, name)(*args, **kwargs))


@pytest.mark.parametrize("name,args,kwargs", [
    ("Conv3d", (4, 4, 3), {"groups": 0}),
    ("Conv3d", (3, 4, 3), {"groups": 2}),
    ("Conv3d", (4, 3, 3), {"groups": 2}),
    ("Conv3d", (2, 2, 3), {"padding": "full"}),
    ("Conv3d", (2, 2, 3), {"padding": "same", "stride": (1, 2, 1)}),
    ("Conv3d", (2, 2, 3), {"padding_mode": "mirror"}),
    ("ConvTranspose3d", (2, 2, 3), {"padding_mode": "reflect"}),
    ("ConvTranspose3d", (4, 3, 3), {"groups": 2}),
])
def test_bad_constructor_arguments_raise_value_error_like_torch(name, args, kwargs):
    for L in (torch, wg):
        with pytest.raises(ValueError):
            getattr(L.nn, name)(*args, **kwargs)


def test_bad_inputs_raise_runtime_error_like_torch(device):
    for L, dev in ((torch, "cpu"), (wg, device)):
        conv, transposed = L.nn.Conv3d(4, 2, 2).to(dev), L.nn.ConvTranspose3d(4, 2, 2).to(dev)
        for module in (conv, transposed):
            with pytest.raises(RuntimeError):  # 3 channels into a module for 4
                module(L.zeros(1, 3, 3, 3, 3, device=dev))
            with pytest.raises(RuntimeError):  # a 2-D image, not a volume
                module(L.zeros(1, 4, 3, 3, device=dev)[0])
        with pytest.raises(RuntimeError):  # smaller than the kernel
            conv(L.zeros(1, 4, 1, 3, 3, device=dev))


def test_parameters_take_device_and_dtype(device):
    for name in ("Conv3d", "ConvTranspose3d"):
        module = getattr(nn, name)(2, 2, 2, device=device)
        assert all(p.device.type == device for p in module.parameters())
        assert getattr(nn, name)(2, 2, 2, dtype=wg.float64).weight.dtype is wg.float64


def test_conv_forward_hook_for_weight_transforming_subclasses():
    # subclasses such as weight-standardised convolutions call _conv_forward with their own weight, as in PyTorch
    def standardised(L):
        class StdConv3d(L.nn.Conv3d):
            def forward(self, x):
                w = self.weight
                w = (w - w.mean(dim=(1, 2, 3, 4), keepdim=True)) / (w.std(dim=(1, 2, 3, 4), keepdim=True) + 1e-5)
                return self._conv_forward(x, w, self.bias)
        return StdConv3d(2, 3, 2, padding=1, padding_mode="replicate")
    ours, ref = standardised(wg), standardised(torch)
    ours.load_state_dict({k: wg.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    x = np.random.default_rng(3).standard_normal((1, 2, 3, 3, 3)).astype(np.float32)
    np.testing.assert_allclose(ours(wg.tensor(x)).detach().numpy(), ref(torch.tensor(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-4)


def test_torch_module_paths_find_them():
    from webgrad.nn.modules.conv import Conv3d, ConvTranspose3d
    assert Conv3d is nn.Conv3d and ConvTranspose3d is nn.ConvTranspose3d
