"""Adapter choice per data-parallel rank (webgrad._backends.webgpu.adapters): pure functions, no GPU needed."""

import pytest

from webgrad._backends.webgpu.adapters import choose_adapter, wants_choice


def gpu(name, kind="DiscreteGPU", backend="Vulkan"):
    return {"device": name, "adapter_type": kind, "backend_type": backend}


# two GPUs as wgpu lists them on Linux: each through Vulkan and through OpenGL, plus lavapipe
TWO_GPUS = [gpu("H200 a"), gpu("H200 a", backend="OpenGL"), gpu("H200 b"), gpu("H200 b", backend="OpenGL"),
            gpu("llvmpipe", "CPU")]
# this machine: lavapipe through Vulkan and llvmpipe through OpenGL
ONE_CPU_ADAPTER = [gpu("llvmpipe", "CPU"), gpu("llvmpipe", "CPU", "OpenGL")]


def test_local_rank_takes_its_own_gpu():
    assert choose_adapter(TWO_GPUS, {"LOCAL_RANK": "0"})[0] == 0
    assert choose_adapter(TWO_GPUS, {"LOCAL_RANK": "1"})[0] == 2
    assert choose_adapter(TWO_GPUS, {"LOCAL_RANK": "2"})[0] == 0  # more ranks than GPUs: round-robin


def test_one_adapter_of_the_preferred_kind_is_shared():
    for rank in ("0", "1"):
        assert choose_adapter(ONE_CPU_ADAPTER, {"LOCAL_RANK": rank}) is None  # wgpu's own choice, shared
    assert choose_adapter(TWO_GPUS, {}) is None  # no rank: not a data-parallel launch


def test_integrated_gpus_when_no_discrete_one():
    infos = [gpu("llvmpipe", "CPU"), gpu("iGPU 0", "IntegratedGPU"), gpu("iGPU 1", "IntegratedGPU")]
    assert [choose_adapter(infos, {"LOCAL_RANK": r})[0] for r in "01"] == [1, 2]


def test_explicit_index_wins_and_is_checked():
    assert choose_adapter(TWO_GPUS, {"WEBGRAD_ADAPTER_INDEX": "4", "LOCAL_RANK": "1"}) == (4, "WEBGRAD_ADAPTER_INDEX")
    with pytest.raises(ValueError, match=r"WEBGRAD_ADAPTER_INDEX=5, but wgpu found 5 adapter\(s\): 0: H200 a"):
        choose_adapter(TWO_GPUS, {"WEBGRAD_ADAPTER_INDEX": "5"})
    with pytest.raises(ValueError, match="must be an integer"):
        choose_adapter(TWO_GPUS, {"WEBGRAD_ADAPTER_INDEX": "gpu1"})


def test_enumeration_only_when_asked():
    assert not wants_choice({})
    assert wants_choice({"LOCAL_RANK": "0"}) and wants_choice({"WEBGRAD_ADAPTER_INDEX": "0"})


def test_native_binding_honours_the_index(monkeypatch):
    """The real binding on this machine's adapters: index 0 of wgpu's list is what the device reports."""
    wgpu = pytest.importorskip("wgpu")
    from helpers import webgpu_available
    if not webgpu_available():
        pytest.skip("no WebGPU adapter")
    from webgrad._backends.webgpu.native import _chosen_adapter
    monkeypatch.setenv("WEBGRAD_ADAPTER_INDEX", "0")
    adapter = _chosen_adapter(wgpu)
    assert adapter.info["device"] == wgpu.gpu.enumerate_adapters_sync()[0].info["device"]
    monkeypatch.setenv("WEBGRAD_ADAPTER_INDEX", "99")
    with pytest.raises(ValueError, match="WEBGRAD_ADAPTER_INDEX=99"):
        _chosen_adapter(wgpu)
