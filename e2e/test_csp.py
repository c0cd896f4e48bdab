"""The page and its worker under serve.py's Content-Security-Policy: it boots, trains, and nothing it does is
blocked (MNIST's MLP, then a GPT on the bundled text with its samples and the prompt box). Violations are caught
three ways: the page's securitypolicyviolation events, console errors, and the reports the browser posts to
serve.py (report-uri), which cover the worker too."""

import time

import serve
from conftest import APP_TIMEOUT_MS, guard_offline
from dashboard import fill_form

WATCH = """
window.cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) =>
    window.cspViolations.push(`${e.violatedDirective} blocked ${e.blockedURI} (${e.sourceFile}:${e.lineNumber})`));
"""


def wait(page, expression, timeout_ms=APP_TIMEOUT_MS):
    """Poll `expression` in the page until it is truthy. Playwright's wait_for_function evaluates its
    predicate with eval, which this page's policy blocks (the other e2e tests bypass the policy).
    It waits with page.wait_for_timeout, not time.sleep: the sync API dispatches the offline guard's route
    handler only while a Playwright call runs, and a request held there (a CSP report, say) would stall."""
    deadline = time.monotonic() + timeout_ms / 1000
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"timed out waiting for {expression}"
        page.wait_for_timeout(250)


def test_page_boots_and_trains_under_its_csp(browser, server_url):
    context = browser.new_context()  # not the fixtures' context: that one bypasses the policy
    foreign = guard_offline(context)
    page = context.new_page()
    console = []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" and "Security Policy" in m.text else None)
    page.add_init_script(WATCH)
    response = page.goto(server_url + "/")
    assert "script-src 'self'" in response.headers["content-security-policy"]

    # the policy is live and its violations are seen: an inline script is blocked, and reported to serve.py
    start = len(serve.CSP_REPORTS)
    ran = page.evaluate("""() => { const s = document.createElement('script'); s.textContent = 'window.inlineRan = 1';
                                   document.head.append(s); return window.inlineRan === 1; }""")
    assert ran is False
    wait(page, "window.cspViolations.length > 0", 10_000)
    deadline = time.monotonic() + 30
    while len(serve.CSP_REPORTS) == start and time.monotonic() < deadline:
        page.wait_for_timeout(100)  # lets the offline guard pass the report on (see wait)
    assert any("script-src" in str(r) for r in serve.CSP_REPORTS[start:]), serve.CSP_REPORTS[start:]
    page.evaluate("window.cspViolations = []")
    console.clear()
    start = len(serve.CSP_REPORTS)

    wait(page, "document.body.dataset.app !== 'loading' && document.body.dataset.boot !== 'loading'")
    assert page.evaluate("document.body.dataset.boot") == "ready", page.inner_text("#status")
    assert page.evaluate("document.body.dataset.app") == "ready", page.inner_text("#run-message")
    worker_csp = page.evaluate("fetch('/worker.js').then((r) => r.headers.get('content-security-policy'))")
    assert "'wasm-unsafe-eval'" in worker_csp and "connect-src 'self'" in worker_csp

    # a short run on the GPU through the worker: 20 steps of the MLP, then its evaluation
    fill_form(page, model="mlp", optimizer="sgd", lr=0.1, batch_size=64, epochs=1, scheduler="none",
              train_size=1280, test_size=200)
    page.click("#train")
    wait(page, "document.body.dataset.outcome !== undefined && document.body.dataset.train === 'idle'", 600_000)
    assert page.evaluate("document.body.dataset.outcome") == "done", page.inner_text("#run-message")

    # a GPT on the bundled text: the favicon, the Text card's views, a sample and a prompt's continuation
    page.check('input[name="dataset"][value="text"]')
    page.click("#text-sample")
    wait(page, "document.body.dataset.dataset === 'text'", 120_000)
    fill_form(page, model="gpt-tiny", optimizer="adamw", lr=0.003, batch_size=8, steps=8, sample_every=4,
              scheduler="none")
    page.evaluate("delete document.body.dataset.outcome")
    page.click("#train")
    wait(page, "document.body.dataset.outcome !== undefined && document.body.dataset.train === 'idle'", 600_000)
    assert page.evaluate("document.body.dataset.outcome") == "done", page.inner_text("#run-message")
    assert page.evaluate("document.body.dataset.samples") == "2"
    page.fill("#gen-length", "20")
    page.click("#generate")
    wait(page, "document.getElementById('generated').dataset.done === 'true'", 120_000)
    page.wait_for_timeout(1000)  # reports are posted asynchronously
    violations = page.evaluate("window.cspViolations")
    reports = [f"{r.get('violated-directive')} blocked {r.get('blocked-uri')} in {r.get('document-uri')}"
               for r in serve.CSP_REPORTS[start:]]
    context.close()
    assert violations == [] and console == [] and reports == [], (violations, console, reports)
    assert not foreign, foreign
