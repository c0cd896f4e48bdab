"""serve.py's Content-Security-Policy: one policy for the page, one for its worker, tools/lite.py's for the
notebooks (with the hashes of their inline scripts), on every answer; violation reports taken at one path;
and the same policies in the static site --build writes (a _headers file and <meta> tags).
e2e/test_csp.py and e2e/test_csp_lite.py check in Chromium that the page and a notebook run under them."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import re
import threading

import pytest

import serve
from tools import lite


def start():
    server = serve.make_server("127.0.0.1", 0, quiet=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def request(port, path, method="GET", body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(method, path, body=body, headers=headers or {})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data


@pytest.fixture(scope="module")
def port():
    server = start()
    yield server.server_port
    server.shutdown()
    server.server_close()


def directives(policy):
    return {d.split()[0]: d.split()[1:] for d in policy.split("; ")}


def test_every_answer_carries_its_policy(port):
    for path, kind in [("/", "page"), ("/index.html", "page"), ("/js/main.js", "page"), ("/missing", "page"),
                       ("/worker.js", "worker"), ("/pyodide/pyodide.mjs", "page"), ("/lite/index.html", "lite")]:
        _, headers, _ = request(port, path, "HEAD")
        policy = headers["content-security-policy"]
        expected = lite.csp() if kind == "lite" else serve.CSP[kind]
        assert policy == f"{expected}; report-uri {serve.CSP_REPORT_PATH}", path


def test_the_policies_allow_only_this_origin():
    for policy in (serve.CSP["page"], serve.CSP["worker"], lite.csp()):
        d = directives(policy)
        assert d["default-src"] == ["'self'"] and d["connect-src"] == ["'self'"] and d["object-src"] == ["'none'"]
        for sources in d.values():  # nothing remote, no wildcard
            assert not [s for s in sources if "://" in s or s in ("*", "http:", "https:")], policy
    page, worker = directives(serve.CSP["page"]), directives(serve.CSP["worker"])
    assert page["script-src"] == ["'self'"] and page["style-src"] == ["'self'"]  # no inline, no eval
    assert worker["script-src"] == ["'self'", "'wasm-unsafe-eval'", "'unsafe-eval'"]


def test_the_notebooks_policy_names_each_inline_script_by_its_hash(tmp_path):
    site = tmp_path / "lite"
    (site / "app").mkdir(parents=True)
    (site / lite.STAMP).write_text("{}")
    (site / "index.html").write_text('<html><head><script>boot()</script><script src="x.js"></script>'
                                     '<script id="c" type="application/json">{}</script></head></html>')
    (site / "app" / "index.html").write_text("<html><head><script type=\"module\">\n go()\n</script></head></html>")
    script_src = directives(lite.csp(site))["script-src"]
    expected = {"'sha256-" + base64.b64encode(hashlib.sha256(body).digest()).decode() + "'"
                for body in (b"boot()", b"\n go()\n")}
    assert set(script_src) == {"'self'", "'wasm-unsafe-eval'", "'unsafe-eval'"} | expected


def test_violation_reports_are_kept_and_nothing_else_is_posted(port):
    report = {"csp-report": {"document-uri": "http://127.0.0.1/", "violated-directive": "script-src-elem",
                             "blocked-uri": "inline"}}
    before = len(serve.CSP_REPORTS)
    status, _, _ = request(port, serve.CSP_REPORT_PATH, "POST", json.dumps(report),
                           {"Content-Type": "application/csp-report"})
    assert status == 204 and serve.CSP_REPORTS[before:] == [report["csp-report"]]
    assert request(port, serve.CSP_REPORT_PATH, "POST", b"x" * (serve.MAX_REPORT + 1))[0] == 413
    assert request(port, serve.CSP_REPORT_PATH, "POST", b"not json")[0] == 204  # ignored
    assert request(port, "/index.html", "POST", b"{}")[0] == 405
    assert len(serve.CSP_REPORTS) == before + 1


def test_the_static_site_carries_the_same_policies(tmp_path, monkeypatch):
    site = tmp_path / "site"
    for name in ("index.html", "worker.js"):
        (tmp_path / name).write_text((serve.ROOT / "web" / name).read_text())
    monkeypatch.setattr(serve, "MOUNTS", [("/", tmp_path)])  # the page alone: no wheel or npm packages needed
    serve.build_static(site)
    rules = {}
    for block in re.split(r"\n(?=\S)", (site / "_headers").read_text().strip()):
        path, *lines = block.splitlines()
        rules[path] = dict(line.strip().split(": ", 1) for line in lines)
    assert rules["/"]["Content-Security-Policy"] == serve.CSP["page"] == rules["/index.html"]["Content-Security-Policy"]
    assert rules["/worker.js"]["Content-Security-Policy"] == serve.CSP["worker"]
    assert rules["/lite/*"]["Content-Security-Policy"] == lite.csp()
    assert rules["/"]["Cross-Origin-Embedder-Policy"] == "require-corp"
    assert rules["/*"]["X-Content-Type-Options"] == "nosniff"
    # no header is given by two rules that match one path (hosts join such values: two policies would apply)
    for name in {"Content-Security-Policy", "Cross-Origin-Opener-Policy", "Cross-Origin-Embedder-Policy"}:
        assert name not in rules["/*"]
    html = (site / "index.html").read_text()
    meta = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html)
    assert meta and meta.group(1) == serve.CSP["page"].replace("; frame-ancestors 'self'", "")
    assert html.index('<meta charset') < meta.start() < html.index("<script")
    assert (site / "worker.js").read_text() == (serve.ROOT / "web" / "worker.js").read_text()
