"""Playwright test bed: headless Chromium with WebGPU (SwiftShader), the demo server, offline guard.

Fixtures for e2e tests:
  server_url     base URL of serve.py's server, started once per session on a free loopback port
  page           pytest-playwright's page; every request to a non-loopback host is aborted and fails the test
  booted_page    `page` opened on the demo page, with Pyodide + webgrad booted in the worker
  app_page       `booted_page` once the trainer has MNIST on the GPU (the dashboard is usable)
  module_page    a booted page shared by the tests of one module
  torch_files    {"mlp" | "cnn": (path, model)}: models trained with PyTorch, saved as .safetensors
  run_python     run_python(code, timeout_s=60) -> result of runPythonAsync(code) in the worker
                 (str/int/float/list/dict come back as such; other objects as their str())
  screenshot     screenshot(page, name) saves artifacts/<name>.png (failed tests get one automatically)
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import serve
from tools import bootstrap

ARTIFACTS = bootstrap.ROOT / "artifacts"
LOOPBACK_HOSTS = {"127.0.0.1", "localhost"}
# without the background-networking flags Chromium keeps
# trying to reach the internet; the last two enable WebGPU on SwiftShader's Vulkan.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--enable-unsafe-webgpu",
    "--enable-features=Vulkan",
]
BOOT_TIMEOUT_MS = 120_000  # Pyodide boots in ~3 s here; a cold, loaded machine can be much slower
APP_TIMEOUT_MS = 180_000  # + 11 MB of gzipped MNIST and its upload to the GPU


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    args = {**browser_type_launch_args, "args": [*browser_type_launch_args.get("args", []), *CHROMIUM_ARGS]}
    exe = bootstrap.chromium_path()  # $WEBGRAD_CHROMIUM, else /usr/bin/chromium; else Playwright's own
    if exe:
        args["executable_path"] = exe
    return args


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    # serve.py sends a Content-Security-Policy without 'unsafe-eval', and Playwright's wait_for_function
    # evaluates its predicate with eval in the page: the tests bypass the policy, except e2e/test_csp.py,
    # which opens a context of its own to check that the page runs under it.
    return {**browser_context_args, "bypass_csp": True}


@pytest.fixture(scope="session")
def server_url():
    """serve.py's server in a thread of this process, on a free port; its base URL (no trailing slash)."""
    bootstrap.build_wheel(Path(sys.executable))  # no-op unless package/ or shaders/ changed
    server = serve.make_server("127.0.0.1", 0, quiet=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def guard_offline(context) -> list[str]:
    """Abort every request of `context` that would leave this machine; returns the list they are put in."""
    foreign: list[str] = []

    def guard(route):
        url = route.request.url
        host = urlsplit(url).hostname
        if url.startswith(("http:", "https:", "ws:", "wss:")) and host not in LOOPBACK_HOSTS:
            foreign.append(url)
            route.abort()
        else:
            route.continue_()

    context.route("**/*", guard)
    return foreign


@pytest.fixture
def context(context):
    """Abort and record any request that would leave this machine; fail the test if there was one."""
    foreign = guard_offline(context)
    yield context
    if foreign:
        pytest.fail(f"requests to non-loopback hosts: {foreign}")


@pytest.fixture
def page(page):
    # Browser console lines land in the captured output of a failing test.
    page.on("console", lambda msg: print(f"[console.{msg.type}] {msg.text}"))
    page.on("pageerror", lambda err: print(f"[pageerror] {err}"))
    return page


@pytest.fixture
def booted_page(page, server_url):
    page.goto(server_url + "/")
    # body[data-boot] goes from "loading" to "ready" or "error" (see web/index.html).
    page.wait_for_function("document.body.dataset.boot !== 'loading'", timeout=BOOT_TIMEOUT_MS)
    assert page.evaluate("document.body.dataset.boot") == "ready", page.inner_text("#status")
    return page


@pytest.fixture(scope="module")
def module_page(browser, server_url):
    """A booted page shared by all the tests of a module (suites that run many cases in one page)."""
    context = browser.new_context(bypass_csp=True)  # see browser_context_args
    foreign = guard_offline(context)
    page = context.new_page()
    page.on("console", lambda msg: print(f"[console.{msg.type}] {msg.text}"))
    page.goto(server_url + "/")
    page.wait_for_function("document.body.dataset.boot !== 'loading'", timeout=BOOT_TIMEOUT_MS)
    assert page.evaluate("document.body.dataset.boot") == "ready", page.inner_text("#status")
    yield page
    context.close()
    if foreign:
        pytest.fail(f"requests to non-loopback hosts: {foreign}")


@pytest.fixture
def app_page(booted_page):
    page = booted_page
    # body[data-app] goes from "loading" to "ready" or "error" (see web/js/main.js).
    page.wait_for_function("document.body.dataset.app !== 'loading'", timeout=APP_TIMEOUT_MS)
    assert page.evaluate("document.body.dataset.app") == "ready", page.inner_text("#run-message")
    return page


@pytest.fixture
def run_python(booted_page):
    # The page's trainer boots in the same worker (opening the GPU device, uploading MNIST): code run
    # while it boots would race it for the device's first use and for the errors WebGPU reports (which
    # the next submit of either takes). Tests of the worker's Python start once the trainer settled.
    booted_page.wait_for_function("document.body.dataset.app !== 'loading'", timeout=APP_TIMEOUT_MS)

    def run(code: str, timeout_s: float = 60):
        return booted_page.evaluate(
            """([code, ms]) => Promise.race([
                window.webgradRunPython(code),
                new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms)),
            ])""",
            [code, int(timeout_s * 1000)],
        )
    return run


@pytest.fixture(scope="session")
def torch_files(tmp_path_factory):
    """{kind: (path, model)}: an MLP and a CNN trained here with PyTorch (seconds), saved as .safetensors."""
    import torch_models  # torch is a test dependency; only the tests that import models need it

    folder = tmp_path_factory.mktemp("torch")
    out = {}
    for kind in ("mlp", "cnn"):
        model = torch_models.train(kind)
        out[kind] = (torch_models.save(model, folder / f"{kind}.safetensors"), model)
    return out


@pytest.fixture
def screenshot():
    def save(page, name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path
    return save
