"""The kernel registry (_backends/kernels.py): every backend implements every record that is not optional,
with the record's signature, and each float16 policy does what it says."""

import inspect

import numpy as np
import pytest

import webgrad as wg
from webgrad._backends import kernels
from webgrad._backends.cpu import CPUBackend
from webgrad._view import View
from helpers import webgpu_available

RECORDS = sorted(kernels.REGISTRY.values(), key=lambda k: k.name)
BACKENDS = ["cpu"] + (["webgpu"] if webgpu_available() else [])


def _load(backend):
    """Import the backend's kernel families (their imports register the implementations)."""
    wg.device(backend).backend


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_record_is_implemented(backend):
    _load(backend)
    missing = [k.name for k in RECORDS if not k.optional and backend not in k.impls]
    assert not missing, f"the {backend} backend lacks {missing}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("record", RECORDS, ids=lambda k: k.name)
def test_implementations_take_the_records_arguments(backend, record):
    _load(backend)
    for impl in (record.impls.get(backend), record.half_impls.get(backend)):
        if impl is None:
            continue
        params = list(inspect.signature(impl).parameters.values())
        if backend == "webgpu":
            assert params[0].name == "rt", f"{impl.__qualname__}: a WebGPU launcher takes the runtime first"
            params = params[1:]
        got = [(p.name, p.default is inspect.Parameter.empty) for p in params]
        want = [(a.name, a.required) for a in record.args]
        assert got == want, f"{impl.__module__}.{impl.__qualname__} takes {got}, the record says {want}"
        for p, a in zip(params, record.args):
            if not a.required:
                assert p.default == a.default, f"{impl.__qualname__}: {a.name} defaults to {p.default!r}, " \
                                               f"the record says {a.default!r}"


def test_half_launchers_follow_the_policy():
    _load("cpu")
    if webgpu_available():
        _load("webgpu")
        for k in RECORDS:
            assert (k.half == kernels.HALF) == ("webgpu" in k.half_impls), k.name
    for k in RECORDS:
        assert "cpu" not in k.half_impls, k.name  # NumPy computes float16 itself


def test_a_record_reads_its_compact_signature():
    k = kernels.DeviceKernel("probe", "out:out x:in bias:in=None scale:arg=0.5 tag:arg='a'", "doc")
    assert [(a.name, a.kind, a.required) for a in k.args] == [
        ("out", "out", True), ("x", "in", True), ("bias", "in", False), ("scale", "arg", False), ("tag", "arg", False)]
    assert k.args[3].default == 0.5 and k.args[4].default == "a"
    with pytest.raises(ValueError, match="unknown kind"):
        kernels.DeviceKernel("bad", "x:inn", "doc")
    with pytest.raises(ValueError, match="float16 policy"):
        kernels.DeviceKernel("bad", "x:in", "doc", half="maybe")


def test_a_missing_kernel_is_a_clear_error():
    probe = kernels.DeviceKernel("probe", "out:out", "a record nobody implements", optional=True)
    cpu = CPUBackend()
    assert not cpu.has(probe)
    with pytest.raises(NotImplementedError, match="no kernel 'probe'"):
        probe(cpu, None)


def test_optional_kernels_are_asked_for_not_probed():
    cpu = wg.device("cpu").backend
    assert not cpu.has(kernels.check_finite) and cpu.has(kernels.matmul)
    if webgpu_available():
        gpu = wg.device("webgpu").backend
        assert gpu.has(kernels.check_finite) and gpu.has(kernels.clip_grad_norm)
        needy = kernels.DeviceKernel("needy", "x:in", "doc", requires=("a-feature-no-adapter-has",))
        needy.implement("webgpu")(lambda rt, x: None)
        assert not gpu.has(needy)


@pytest.mark.skipif(not webgpu_available(), reason="needs WebGPU")
@pytest.mark.parametrize("software", [True, False], ids=["thread-per-column", "workgroup-rows"])
@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 5, 1), (2, 1031, 1), (2, 2500, 1), (4, 7, 3), (1, 300, 65)])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_cumsum_kernel_matches_the_cpu(monkeypatch, software, shape, dtype):
    """cumsum's two WebGPU variants (scan.wgsl) against the CPU reference, views at an offset."""
    gpu = wg.device("webgpu").backend
    monkeypatch.setattr(gpu.runtime, "software", software)
    rng = np.random.default_rng(7)
    n = int(np.prod(shape))
    data = rng.normal(size=n + 3).astype(np.float32) if dtype == "float32" else \
        rng.integers(-50, 50, size=n + 3).astype(np.int32)
    dt = getattr(wg, dtype)
    results = []
    for be in (gpu, wg.device("cpu").backend):
        x = View(be.from_bytes(data.tobytes(), dt), shape, View.contiguous_strides(shape), 3, dt)
        out_storage = be.empty(n + 2, dt)
        out = View(out_storage, shape, View.contiguous_strides(shape), 2, dt)
        kernels.cumsum(be, out, x)
        results.append(np.frombuffer(be.to_bytes(out), data.dtype))
    if dtype == "float32":
        np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-4)
    else:
        np.testing.assert_array_equal(results[0], results[1])


@pytest.mark.skipif(not webgpu_available(), reason="needs WebGPU")
def test_cumsum_of_long_columns_on_a_software_adapter(monkeypatch):
    """llvmpipe ends a thread's loop after ~65535 iterations: long columns go through transposed rows there."""
    gpu = wg.device("webgpu").backend
    monkeypatch.setattr(gpu.runtime, "software", True)
    data = np.random.default_rng(3).integers(-5, 5, size=(70_001, 2))
    got = wg.tensor(data, device="webgpu").cumsum(0).numpy()
    np.testing.assert_array_equal(got, np.cumsum(data, axis=0))
