"""The JupyterLite build's pieces that run in CPython: the Pyodide lock writer, the pinned wheel list,
and serve.py's /lite/ mount. (Building and running the site: e2e/test_jupyterlite.py.)"""

from __future__ import annotations

import hashlib
import http.client
import json
import threading
import zipfile

import pytest

pytest.importorskip("packaging")

import serve  # noqa: E402
from tools import lite, pyodide_lock  # noqa: E402

INFO = {"abi_version": "2026_0", "arch": "wasm32", "platform": "emscripten_5_0_3", "python": "3.14.2"}


def make_wheel(folder, name, version, requires=(), modules=("pkg/__init__.py",), top_level=None):
    """A minimal pure-Python wheel with the given Requires-Dist lines and files."""
    dist = f"{name.replace('-', '_')}-{version}"
    path = folder / f"{dist}-py3-none-any.whl"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as z:
        for m in modules:
            z.writestr(m, "")
        z.writestr(f"{dist}.dist-info/METADATA", metadata)
        z.writestr(f"{dist}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        if top_level is not None:
            z.writestr(f"{dist}.dist-info/top_level.txt", top_level)
    return path


@pytest.fixture
def npm_lock(tmp_path):
    path = tmp_path / "npm-lock.json"
    path.write_text(json.dumps({"info": INFO, "packages": {"numpy": {"name": "numpy"}}}))
    return path


def test_lock_lists_each_wheel_with_its_hash_imports_and_pyodide_dependencies(tmp_path, npm_lock):
    out = tmp_path / "pyodide"
    out.mkdir()
    app = make_wheel(out, "App-Thing", "1.2.0", requires=[
        "dep-one>=1",
        'pexpect>4.6; sys_platform != "win32" and sys_platform != "emscripten"',  # not in Pyodide
        'colorama; sys_platform == "win32"',
        'typing-extensions; python_version < "3.12"',  # Pyodide is 3.14
        'pytest; extra == "test"',
    ], modules=["app_thing/__init__.py", "app_helper.py", "app_thing-1.2.0.data/x"])
    dep = make_wheel(out, "dep_one", "1.0", modules=["weird/__init__.py"], top_level="dep_one\n")
    lock = pyodide_lock.write_lock(npm_lock, [app, dep], out / "pyodide-lock.json")

    assert lock["info"] == INFO  # the npm lock's: must match the runtime
    assert json.loads((out / "pyodide-lock.json").read_text()) == lock
    entry = lock["packages"]["app-thing"]
    assert entry["file_name"] == app.name and entry["version"] == "1.2.0"
    assert entry["sha256"] == hashlib.sha256(app.read_bytes()).hexdigest()
    assert entry["depends"] == ["dep-one"]
    assert entry["imports"] == ["app_helper", "app_thing"]
    assert entry["install_dir"] == "site" and entry["package_type"] == "package"
    assert lock["packages"]["dep-one"]["imports"] == ["dep_one"]  # top_level.txt wins when present
    assert "numpy" not in lock["packages"]  # nothing of the npm lock's packages: they are not shipped


def test_a_dependency_missing_from_the_lock_fails_the_build(tmp_path, npm_lock):
    app = make_wheel(tmp_path, "app", "1.0", requires=["missing-dep"])
    with pytest.raises(ValueError, match=r"needs \['missing-dep'\].*lite_requirements.txt"):
        pyodide_lock.write_lock(npm_lock, [app], tmp_path / "pyodide-lock.json")


def test_wheels_must_sit_next_to_the_lock(tmp_path, npm_lock):
    (tmp_path / "elsewhere").mkdir()
    app = make_wheel(tmp_path / "elsewhere", "app", "1.0")
    with pytest.raises(ValueError, match="must sit next to"):
        pyodide_lock.write_lock(npm_lock, [app], tmp_path / "pyodide-lock.json")


def test_pinned_kernel_wheels_are_hash_locked():
    lines = [line for line in lite.REQUIREMENTS.read_text().splitlines() if line and not line.startswith("#")]
    assert len(lines) == len(lite._requirements()) == 16
    for line in lines:
        assert "==" in line and " --hash=sha256:" in line, line
    assert all(len(digest) == 64 for digest in lite._requirements().values())
    names = {req.split("==")[0] for req in lite._requirements()}
    # what the kernel installs at start-up, and the two the npm lock lacks
    assert {"micropip", "ipython", "jedi", "comm", "ipython-pygments-lexers"} <= names


def get(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, resp.getheader("Content-Type"), body


def test_serve_mounts_the_site_at_lite(tmp_path, monkeypatch):
    site = tmp_path / "lite"
    (site / "notebooks").mkdir(parents=True)
    (site / "index.html").write_text("<p>lab</p>")
    (site / "notebooks" / "index.html").write_text("<p>notebooks</p>")
    (site / "files").mkdir()
    (site / "files" / "01.ipynb").write_text("{}")
    monkeypatch.setattr(lite, "SITE", site)
    mounts = [(prefix, site if prefix == "/lite/" else root) for prefix, root in serve.MOUNTS]
    assert any(prefix == "/lite/" for prefix, _ in serve.MOUNTS)
    server = serve.make_server("127.0.0.1", 0, mounts=mounts, quiet=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_port
        assert get(port, "/lite/")[2] == b"<p>lab</p>"
        assert get(port, "/lite/notebooks/?path=01.ipynb")[2] == b"<p>notebooks</p>"
        assert get(port, "/lite/files/01.ipynb")[1] == "application/json"
        assert get(port, "/lite/../serve.py")[0] == 404
        (site / "index.html").unlink()  # not built: the 404 says how to build it
        status, _, body = get(port, "/lite/")
        assert status == 404 and b"serve.py --lite" in body
    finally:
        server.shutdown()
        server.server_close()
