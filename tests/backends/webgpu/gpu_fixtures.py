"""Fixtures of the WebGPU kernel tests: the GPU's kernel variants on any adapter, and a forced matmul K split.
A test module imports the ones it uses (`from gpu_fixtures import gpu_kernels`). Not a conftest.py: e2e/ imports
its own conftest by name, and a second conftest module on sys.path would shadow it."""

import pytest


@pytest.fixture
def gpu_kernels(monkeypatch):
    """The default runtime told it runs on a GPU, so that the kernel families pick their GPU variants (workgroup
    tiles, matmul.wgsl) on a software adapter too."""
    from webgrad._backends.webgpu.runtime import default_runtime

    monkeypatch.setattr(default_runtime(), "software", False)
    return default_runtime()


@pytest.fixture
def matmul_splits(monkeypatch):
    """force(n): every product planned afterwards splits K n ways across workgroups (1: the plan's own choice);
    the plan cache is cleared before and after the test."""
    from webgrad._backends.webgpu import matmul_plan

    def force(n):
        monkeypatch.setattr(matmul_plan, "_FORCED_SPLITS", n if n > 1 else None)
        matmul_plan._plan.cache_clear()
        return n

    yield force
    matmul_plan._plan.cache_clear()
