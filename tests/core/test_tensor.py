"""Tensor creation, attributes, conversions and error messages, on every device."""

import array
import os
import subprocess
import sys

import numpy as np
import pytest

import webgrad as wg
from helpers import DEVICES, PACKAGE_DIR


def test_creation_from_python_data(device):
    t = wg.tensor([[1, 2, 3], [4, 5, 6]], device=device)
    assert t.shape == (2, 3) and t.dtype is wg.int64 and t.ndim == 2 and t.numel() == 6
    assert t.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert wg.tensor(2.5, device=device).item() == 2.5
    assert wg.tensor([True, False], device=device).dtype is wg.bool
    assert wg.tensor([1, 2.5], device=device).dtype is wg.float32
    assert wg.tensor([], device=device).shape == (0,)
    assert str(t.device) == device and t.device == device


def test_creation_from_buffers(device):
    f = wg.tensor(array.array("f", [1.0, 2.0]), device=device)
    assert f.dtype is wg.float32 and f.tolist() == [1.0, 2.0]
    u = wg.tensor(bytes([1, 2, 255]), device=device)
    assert u.dtype is wg.uint8 and u.tolist() == [1, 2, 255]
    i = wg.frombuffer(array.array("i", [7, -8]).tobytes(), dtype=wg.int32, device=device)
    assert i.tolist() == [7, -8]
    n = wg.tensor(np.arange(6, dtype=np.int64).reshape(2, 3), device=device)
    assert n.dtype is wg.int64 and n.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_creation_functions(device):
    assert wg.zeros(2, 3, device=device).tolist() == [[0.0] * 3] * 2
    assert wg.ones((2,), device=device).tolist() == [1.0, 1.0]
    assert wg.full((2,), 7, device=device).tolist() == [7, 7]
    assert wg.arange(5, device=device).tolist() == [0, 1, 2, 3, 4]
    assert wg.arange(1, 2, 0.25, device=device).tolist() == [1.0, 1.25, 1.5, 1.75]
    assert wg.linspace(0, 1, 5, device=device).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert wg.eye(2, 3, device=device).tolist() == [[1, 0, 0], [0, 1, 0]]
    x = wg.ones(2, 2, device=device)
    assert wg.zeros_like(x).tolist() == [[0, 0], [0, 0]] and wg.full_like(x, 3.0).tolist() == [[3, 3], [3, 3]]
    assert wg.empty(3, device=device).shape == (3,)


def test_random_is_seeded_and_identical_across_devices(device):
    wg.manual_seed(42)
    a = wg.rand(1000, device=device).tolist()
    wg.manual_seed(42)
    b = wg.rand(1000, device=device).tolist()
    assert a == b and 0 <= min(a) and max(a) < 1
    wg.manual_seed(42)
    ref = wg.rand(1000, device="cpu").tolist()
    np.testing.assert_allclose(a, ref, rtol=1e-6)
    n = np.array(wg.randn(20000, device=device).tolist())
    assert abs(n.mean()) < 0.03 and abs(n.std() - 1) < 0.03
    r = wg.randint(3, 7, (1000,), device=device).tolist()
    assert set(r) == {3, 4, 5, 6}
    p = wg.randperm(10, device=device).tolist()
    assert sorted(p) == list(range(10))


def test_attributes_and_conversions(device):
    x = wg.tensor([[1.5, -2.0]], device=device, requires_grad=True)
    assert x.size() == (1, 2) and x.size(1) == 2 and x.dim() == 2 and x.is_leaf
    assert x.detach().numpy().tolist() == [[1.5, -2.0]]
    assert x.int().tolist() == [[1, -2]] and x.bool().tolist() == [[True, True]]
    assert x.to("cpu").device == "cpu"
    c = x.detach().clone()
    c += 1
    assert x.tolist() == [[1.5, -2.0]] and c.tolist() == [[2.5, -1.0]]
    assert "requires_grad=True" in repr(x)
    with pytest.raises(RuntimeError, match="2 elements"):
        x.item()


def test_views_share_storage(device):
    x = wg.zeros(3, 4, device=device)
    x[1] = 5.0
    x[:, 2] = wg.tensor([1.0, 2.0, 3.0], device=device)
    assert x.tolist() == [[0, 0, 1, 0], [5, 5, 2, 5], [0, 0, 3, 0]]
    v = x.view(12)
    v[0] = 9.0
    assert x[0, 0].item() == 9.0
    assert x.t().is_contiguous() is False and x.t().contiguous().is_contiguous()


def test_errors_name_the_problem(device):
    a, b = wg.ones(2, 3, device=device), wg.ones(4, device=device)
    with pytest.raises(RuntimeError, match=r"add: shapes \[2, 3\] and \[4\] cannot be broadcast"):
        a + b
    with pytest.raises(RuntimeError, match=r"matmul: shapes \[2, 3\] and \[4\] cannot be multiplied|2x3 and 4x1"):
        a @ b
    with pytest.raises(RuntimeError, match="is invalid for input of size 6"):
        a.reshape(4, 2)
    with pytest.raises(IndexError, match="out of bounds"):
        a[5]
    with pytest.raises(RuntimeError, match="int32"):
        wg.ones(2, 2, device=device) @ wg.ones(2, 2, dtype=wg.int32, device=device)
    with pytest.raises(RuntimeError, match="not available"):
        wg.ones(2, device="cuda")
    with pytest.raises(ValueError, match="unknown device"):
        wg.ones(2, device="tpu")


def test_device_mismatch_is_reported():
    if "webgpu" not in [d for d in ("webgpu",) if _webgpu()]:
        pytest.skip("needs WebGPU")
    with pytest.raises(RuntimeError, match="same device"):
        wg.ones(2) + wg.ones(2, device="webgpu")


def _webgpu():
    from helpers import PACKAGE_DIR, webgpu_available
    return webgpu_available()


def test_type_promotion(device):
    i = wg.tensor([1, 2], device=device)
    f = wg.tensor([0.5, 0.5], device=device)
    assert (i + f).dtype is wg.float32
    assert (i + 1).dtype is wg.int64 and (i * 1.5).dtype is wg.float32
    assert (i / 2).dtype is wg.float32 and (i / 2).tolist() == [0.5, 1.0]
    assert (i // 2).tolist() == [0, 1]
    assert (i > 1).dtype is wg.bool


def test_max_with_dim_returns_values_and_indices(device):
    x = wg.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]], device=device)
    values, indices = x.max(dim=1)
    assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0]
    assert x.argmin(dim=1).tolist() == [0, 1]
    assert x.max().item() == 7.0 and x.argmax().item() == 3


def test_softmax_is_stable_for_huge_logits(device):
    x = wg.tensor([[1e4, -1e4, 0.0], [-1e4, -1e4, -1e4]], device=device)
    p = x.softmax(dim=1).tolist()
    assert p[0] == pytest.approx([1.0, 0.0, 0.0]) and p[1] == pytest.approx([1 / 3] * 3)
    lp = x.log_softmax(dim=1).tolist()
    assert lp[0][0] == pytest.approx(0.0) and lp[0][1] == pytest.approx(-2e4)


def test_import_without_numpy():
    """webgrad imports and explains itself when NumPy is absent (as in Pyodide)."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'numpy' or name.startswith('numpy.'):\n"
        "            raise ImportError('numpy blocked for this test')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import webgrad as wg\n"
        "try:\n"
        "    wg.ones(2)\n"
        "except RuntimeError as e:\n"
        "    assert 'NumPy' in str(e) and 'webgpu' in str(e), e\n"
        "    print('clear error')\n"
        "import webgrad.webgpu as g\n"
        "if g.is_available():\n"
        "    x = wg.tensor([1.0, 2.0], device='webgpu', requires_grad=True)\n"
        "    (x * x).sum().backward()\n"
        "    assert x.grad.tolist() == [2.0, 4.0]\n"
        "    print('trained without numpy')\n"
    )
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "clear error" in out.stdout


@pytest.mark.parametrize("shape", [(2, 0), (0, 3), (2, 0, 3), (2, 3, 0), (0,)])
def test_tolist_of_empty_shapes_matches_torch(shape):
    torch = pytest.importorskip("torch")
    for device in DEVICES:
        assert wg.zeros(*shape, device=device).tolist() == torch.zeros(*shape).tolist()


def test_creation_from_any_sequence_and_from_tensor_elements_matches_torch():
    """torch.tensor takes any sequence (a deque of returns, a range) and lists of 0-d tensors (a reward tensor's
    elements), its dtype following the tensors' own; text is refused with a TypeError."""
    import collections
    torch = pytest.importorskip("torch")
    cases = [
        lambda L: L.tensor(collections.deque([1.5, 2.5, 3.0])),
        lambda L: L.tensor(range(4)),
        lambda L: L.tensor([L.tensor(0.25)]),
        lambda L: L.tensor([L.tensor(0.25, dtype=L.float64), 2]),
        lambda L: L.tensor([L.tensor(3), 2.5]),
        lambda L: L.tensor([L.tensor(3), L.tensor(4)]),
        lambda L: L.tensor([L.tensor(True)]),
        lambda L: L.tensor([collections.deque([1, 2]), (3, 4)]),
    ]
    for make in cases:
        got, ref = make(wg), make(torch)
        assert str(got.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
        assert got.tolist() == ref.tolist()
    for lib in (wg, torch):
        with pytest.raises(TypeError, match="invalid data type 'str'"):
            lib.tensor("ab")
