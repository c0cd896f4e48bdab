"""A 0-d CPU tensor beside WebGPU tensors in elementwise ops, as PyTorch takes a 0-d CPU tensor beside CUDA ones:
it enters as a scalar, the result stays on the GPU and its gradient comes back to the CPU tensor; a CPU tensor
with dims is still a device mismatch (PyTorch's RuntimeError)."""

import numpy as np
import pytest

import webgrad as wg
from helpers import DEVICES

pytestmark = pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")


def test_binary_ops_take_a_cpu_scalar_tensor_with_its_gradient():
    x = wg.tensor([1.0, -2.0, 3.0], device="webgpu", requires_grad=True)
    s = wg.tensor(2.0, requires_grad=True)
    out = x * s + s / x - s
    assert out.device.type == "webgpu"
    out.sum().backward()
    xv = np.array([1.0, -2.0, 3.0])
    np.testing.assert_allclose(x.grad.cpu().numpy(), 2.0 - 2.0 / xv ** 2, rtol=1e-6)
    assert s.grad.device.type == "cpu"
    np.testing.assert_allclose(float(s.grad), xv.sum() + (1 / xv).sum() - 3, rtol=1e-6)


def test_comparisons_where_and_logical_ops():
    x = wg.tensor([1.0, -2.0, 3.0], device="webgpu")
    zero = wg.tensor(0.0)
    assert (x > zero).cpu().tolist() == [True, False, True]
    assert wg.where(x > 0, x, zero).cpu().tolist() == [1.0, 0.0, 3.0]
    assert wg.where(wg.tensor(True), x, x * 2).device.type == "webgpu"
    assert wg.logical_and(x > 0, wg.tensor(True)).cpu().tolist() == [True, False, True]


def test_distribution_prior_on_the_cpu_beside_a_gpu_posterior():
    """A VAE's KL term: q on the GPU against Normal(0., 1.), whose parameters are 0-d CPU tensors."""
    import webgrad.distributions as D
    q = D.Normal(wg.tensor([0.5, -1.0], device="webgpu"), wg.tensor([1.5, 0.5], device="webgpu"))
    kl = D.kl_divergence(q, D.Normal(0.0, 1.0))
    mu, sd = np.array([0.5, -1.0]), np.array([1.5, 0.5])
    np.testing.assert_allclose(kl.cpu().numpy(), np.log(1 / sd) + (sd ** 2 + mu ** 2) / 2 - 0.5, rtol=1e-5)


def test_cpu_tensors_with_dims_are_still_a_mismatch():
    x = wg.ones(3, device="webgpu")
    with pytest.raises(RuntimeError, match="expected all tensors on the same device"):
        x * wg.ones(1)
    with pytest.raises(RuntimeError, match="expected all tensors on the same device"):
        wg.where(x > 0, x, wg.zeros(3))
