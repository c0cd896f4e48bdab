"""The wheel is the package, whole and on its own: every WGSL kernel once, the dashboard's Python
(webgrad.apps.mnist), and nothing that needs the checkout it was built from. Installed into a folder of
its own, it imports and finds its shaders there, in an interpreter that sees neither the checkout nor
site-packages (as in Pyodide: no NumPy)."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tools import bootstrap

ROOT = bootstrap.ROOT


@pytest.fixture(scope="module")
def wheel():
    pytest.importorskip("hatchling")
    return bootstrap.build_wheel(Path(sys.executable))  # reused when package/ and shaders/ are unchanged


def test_every_shader_once_and_the_app(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert len(names) == len(set(names))
    shipped = sorted(n.removeprefix("webgrad/shaders/") for n in names if n.startswith("webgrad/shaders/"))
    assert shipped == sorted(p.name for p in (ROOT / "shaders").glob("*.wgsl"))
    assert [n for n in names if n.endswith(".wgsl") and not n.startswith("webgrad/shaders/")] == []
    for module in ("app", "bench", "data", "models", "train"):
        assert f"webgrad/apps/mnist/{module}.py" in names


def test_installed_wheel_imports_without_the_checkout(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    "--target", str(target), str(wheel)], check=True, timeout=300)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import webgrad, webgrad.apps.mnist, webgrad.bench.__main__\n"
        "from webgrad._backends.webgpu import shaders\n"
        "assert webgrad.__file__.startswith(sys.argv[1]), webgrad.__file__\n"
        "assert shaders.FOLDER.startswith(sys.argv[1]), shaders.FOLDER\n"
        "assert 'fn decode_f32' in shaders.source('reduce.wgsl')\n"
        "assert 'numpy' not in sys.modules and 'serve' not in sys.modules and 'tools' not in sys.modules\n"
        "print('ok')\n"
    )
    # -S: no site-packages (no editable install, no NumPy); -E: no PYTHONPATH; run from tmp_path: the
    # checkout is not on sys.path
    out = subprocess.run([sys.executable, "-E", "-S", "-c", code, str(target)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
