"""The JupyterLite notebooks under their Content-Security-Policy (tools/lite.py's, sent by serve.py): the
quickstart notebook runs (webgrad installed and training in the kernel's worker) and nothing is blocked."""


import pytest

import serve
from test_jupyterlite import UI_TIMEOUT_MS, open_notebook, run_all
from tools import lite

from test_csp import WATCH


@pytest.fixture(scope="module")
def lite_site():
    return lite.build()


def test_notebook_runs_under_its_csp(lite_site, browser, server_url):
    context = browser.new_context()  # not the fixtures' context: that one bypasses the policy
    page = context.new_page()
    console = []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" and "Security Policy" in m.text else None)
    page.add_init_script(WATCH)
    start = len(serve.CSP_REPORTS)
    response = page.goto(f"{server_url}/lite/notebooks/index.html?path=01-quickstart.ipynb")
    assert "'wasm-unsafe-eval'" in response.headers["content-security-policy"]
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget", timeout=UI_TIMEOUT_MS)
    open_notebook(page, server_url, "01-quickstart.ipynb")
    text = "\n".join(run_all(page).values())
    assert "gradient check PASSED" in text and "learned weights: [2.0, -3.0, 0.5]" in text
    page.wait_for_timeout(1000)  # reports are posted asynchronously
    violations = page.evaluate("window.cspViolations")
    reports = [f"{r.get('violated-directive')} blocked {r.get('blocked-uri')} in {r.get('document-uri')}"
               for r in serve.CSP_REPORTS[start:]]
    context.close()
    assert violations == [] and console == [] and reports == [], (violations, console, reports)
