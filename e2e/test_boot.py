"""The boot page: WebGPU adapter shown, Pyodide + webgrad booted in a worker, Python runs there."""

import re
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import serve


def test_boot_shows_adapter_and_runs_python(booted_page, run_python, screenshot):
    page = booted_page
    # Headless Chromium here renders WebGPU with SwiftShader; the page names the architecture.
    page.wait_for_function("!document.getElementById('gpu').textContent.includes('checking')")
    assert "swiftshader" in page.inner_text("#gpu")
    # Boot progress: every stage's bar is full once the trainer is up.
    page.wait_for_function("document.body.dataset.app === 'ready'", timeout=180_000)
    assert "ready" in page.inner_text("#status")
    for stage in ("pyodide", "wheel", "data"):
        value, maximum = page.evaluate(f"[document.getElementById('boot-{stage}').value, "
                                       f"document.getElementById('boot-{stage}').max]")
        assert value == maximum > 0, (stage, value, maximum)
    assert "MNIST are ready" in page.inner_text("#boot-summary")
    # serve.py's COOP/COEP headers make the page and its worker cross-origin isolated, and nothing broke
    assert page.evaluate("crossOriginIsolated") is True
    assert run_python("import js\nbool(js.crossOriginIsolated)") is True

    version = run_python("import webgrad, sys; sys.version")
    assert re.match(r"3\.14\.\d+", version), version

    # State persists between calls (one Python globals dict), and top-level await works.
    run_python("import asyncio\nanswer = 6 * 7")
    assert run_python("await asyncio.sleep(0)\nanswer") == 42
    assert run_python("{'a': [1, 2.5]}") == {"a": [1, 2.5]}
    screenshot(page, "boot")


def test_python_errors_reject(run_python):
    try:
        run_python("1 / 0")
    except Exception as e:  # playwright.sync_api.Error carrying the Python traceback
        assert "ZeroDivisionError" in str(e)
    else:
        raise AssertionError("expected the Python error to reach the test")


def test_without_webgpu_page_explains(page, server_url, screenshot):
    # As in a browser without WebGPU, in the page and in its worker: the page must explain, not stay blank.
    page.add_init_script("delete Navigator.prototype.gpu;")  # init scripts do not reach workers: patch worker.js

    def worker_without_gpu(route):
        response = route.fetch()
        route.fulfill(response=response, body="delete WorkerNavigator.prototype.gpu;\n" + response.text())

    page.route("**/worker.js", worker_without_gpu)
    page.goto(server_url + "/")
    gpu = page.locator("#gpu.missing")
    gpu.wait_for()
    text = gpu.inner_text()
    assert "WebGPU is not available" in text
    assert "--enable-unsafe-webgpu" in text
    # Instead of an empty dashboard: what to do, in a card of its own.
    explanation = page.locator("#nogpu")
    assert explanation.is_visible()
    assert "--enable-unsafe-webgpu" in explanation.inner_text() and "Chrome" in explanation.inner_text()
    for panel in ("#setup", "#charts", "#draw", "#files"):
        assert page.locator(panel).is_hidden(), panel
    # Python still boots; the trainer cannot start, and Train stays off.
    page.wait_for_function("document.body.dataset.app !== 'loading'", timeout=180_000)
    assert page.evaluate("document.body.dataset.app") == "error"
    assert page.evaluate("document.body.dataset.boot") == "ready"
    assert "no WebGPU" in page.inner_text("#boot-summary")
    assert page.is_disabled("#train")
    screenshot(page, "no-webgpu")


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_static_build_boots(page, server_url, tmp_path):
    # `python serve.py --build DIR` output behind a plain static server (no mounts, no gzip).
    # (server_url: its fixture has built the current wheel.)
    site = tmp_path / "site"
    serve.build_static(site)
    static = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(site)))
    threading.Thread(target=static.serve_forever, daemon=True).start()
    try:
        page.goto(f"http://127.0.0.1:{static.server_port}/")
        page.wait_for_function("document.body.dataset.boot !== 'loading'", timeout=120_000)
        assert page.evaluate("document.body.dataset.boot") == "ready", page.inner_text("#status")
        assert page.evaluate("webgradRunPython('1 + 1')") == 2
    finally:
        static.shutdown()
        static.server_close()
