"""nn.utils.fusion against torch.nn.utils.fusion: a fused conv (or linear) equals the eval-mode conv -> batch norm
it replaces, and its weights equal torch's fused weights."""

import numpy as np
import pytest
import torch
from torch.nn.utils import fusion as tfusion

import webgrad as wg
from webgrad.nn.utils import fusion as wfusion


def _np(x):
    return x.detach().numpy()


def _copy(t_module, w_module):
    w_module.load_state_dict({k: wg.tensor(v.detach().numpy()) for k, v in t_module.state_dict().items()})
    return w_module


def _trained_bn(make_bn):
    """A torch batch norm whose running statistics and affine parameters are not the defaults."""
    torch.manual_seed(1)
    bn = make_bn(torch.nn)
    if bn.affine:
        with torch.no_grad():
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    return bn.eval()


CONVS = [
    ("conv1d", lambda nn: nn.Conv1d(3, 4, 3), lambda nn: nn.BatchNorm1d(4), (2, 3, 9), False),
    ("conv2d", lambda nn: nn.Conv2d(3, 4, 3, padding=1), lambda nn: nn.BatchNorm2d(4), (2, 3, 6, 6), False),
    ("conv2d_no_bias", lambda nn: nn.Conv2d(3, 4, 3, bias=False), lambda nn: nn.BatchNorm2d(4, affine=False),
     (2, 3, 6, 6), False),
    ("conv3d", lambda nn: nn.Conv3d(2, 4, 2), lambda nn: nn.BatchNorm3d(4), (1, 2, 4, 4, 4), False),
    ("conv_transpose2d", lambda nn: nn.ConvTranspose2d(3, 4, 3, stride=2), lambda nn: nn.BatchNorm2d(4),
     (2, 3, 4, 4), True),
]


@pytest.mark.parametrize("name,make_conv,make_bn,shape,transpose", CONVS, ids=[c[0] for c in CONVS])
def test_fused_conv_equals_conv_then_bn(name, make_conv, make_bn, shape, transpose):
    torch.manual_seed(0)
    t_conv = make_conv(torch.nn).eval()
    t_bn = _trained_bn(make_bn)
    w_conv, w_bn = _copy(t_conv, make_conv(wg.nn)).eval(), _copy(t_bn, make_bn(wg.nn)).eval()
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    unfused = _np(w_bn(w_conv(wg.tensor(x))))
    fused = wfusion.fuse_conv_bn_eval(w_conv, w_bn, transpose=transpose)
    t_fused = tfusion.fuse_conv_bn_eval(t_conv, t_bn, transpose=transpose)
    assert fused is not w_conv and type(fused) is type(w_conv)
    np.testing.assert_allclose(_np(fused(wg.tensor(x))), unfused, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(fused(wg.tensor(x))), _np(t_fused(torch.tensor(x))), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(fused.weight), _np(t_fused.weight), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(_np(fused.bias), _np(t_fused.bias), rtol=1e-6, atol=1e-7)
    assert isinstance(fused.weight, wg.nn.Parameter) and isinstance(fused.bias, wg.nn.Parameter)
    # torch's quirk kept: a conv without bias gets a bias that does not require grad
    assert (fused.weight.requires_grad, fused.bias.requires_grad) == \
        (t_fused.weight.requires_grad, t_fused.bias.requires_grad)
    np.testing.assert_array_equal(_np(w_conv.weight), _np(t_conv.weight))  # the original is untouched


@pytest.mark.parametrize("features", [5, 1])
def test_fused_linear_equals_linear_then_bn(features):
    torch.manual_seed(0)
    t_lin = torch.nn.Linear(6, 5).eval()
    t_bn = _trained_bn(lambda nn: nn.BatchNorm1d(features))
    w_lin, w_bn = _copy(t_lin, wg.nn.Linear(6, 5)).eval(), _copy(t_bn, wg.nn.BatchNorm1d(features)).eval()
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    fused = wfusion.fuse_linear_bn_eval(w_lin, w_bn)
    t_fused = tfusion.fuse_linear_bn_eval(t_lin, t_bn)
    if features == 5:
        np.testing.assert_allclose(_np(fused(wg.tensor(x))), _np(w_bn(w_lin(wg.tensor(x)))), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(fused(wg.tensor(x))), _np(t_fused(torch.tensor(x))), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(fused.weight), _np(t_fused.weight), rtol=1e-6, atol=1e-7)


def test_weights_functions_match_torch():
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((4, 3, 3, 3), (4,), (4,), (4,), (4,), (4,))]
    arrays[3] = np.abs(arrays[3]) + 0.1  # a variance
    tw, tb = tfusion.fuse_conv_bn_weights(*[torch.tensor(a) for a in arrays[:4]], 1e-3,
                                          *[torch.tensor(a) for a in arrays[4:]])
    ww, wb = wfusion.fuse_conv_bn_weights(*[wg.tensor(a) for a in arrays[:4]], 1e-3,
                                          *[wg.tensor(a) for a in arrays[4:]])
    np.testing.assert_allclose(_np(ww), _np(tw), rtol=1e-6)
    np.testing.assert_allclose(_np(wb), _np(tb), rtol=1e-6)
    lw, lb = rng.standard_normal((4, 7)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    tw, tb = tfusion.fuse_linear_bn_weights(torch.tensor(lw), torch.tensor(lb), *[torch.tensor(a) for a in
                                            arrays[2:4]], 1e-5, *[torch.tensor(a) for a in arrays[4:]])
    ww, wb = wfusion.fuse_linear_bn_weights(wg.tensor(lw), wg.tensor(lb), *[wg.tensor(a) for a in arrays[2:4]],
                                            1e-5, *[wg.tensor(a) for a in arrays[4:]])
    np.testing.assert_allclose(_np(ww), _np(tw), rtol=1e-6)
    np.testing.assert_allclose(_np(wb), _np(tb), rtol=1e-6)


def test_fusion_refuses_training_mode_and_mismatched_features():
    conv, bn = wg.nn.Conv2d(3, 4, 3), wg.nn.BatchNorm2d(4)
    with pytest.raises(AssertionError, match="Fusion only for eval"):
        wfusion.fuse_conv_bn_eval(conv.eval(), bn.train())
    with pytest.raises(AssertionError, match="running_mean and bn.running_var must not be None"):
        wfusion.fuse_conv_bn_eval(conv.eval(), wg.nn.BatchNorm2d(4, track_running_stats=False).eval())
    with pytest.raises(AssertionError, match="linear.out_features == bn.num_features"):
        wfusion.fuse_linear_bn_eval(wg.nn.Linear(3, 5).eval(), wg.nn.BatchNorm1d(4).eval())
