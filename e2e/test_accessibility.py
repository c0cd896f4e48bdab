"""The page passes axe-core's WCAG 2.1 AA rules (axe-core from npm, injected by the test) in each state a user
meets with images: booting, ready, a form error, training, paused, trained (the confusion matrix's shades, the
test images' buttons), and in a narrow window (390 px). The Text dataset's states are checked in
e2e/test_text_page.py. Also: the page's favicon is served (same origin, under the page's policy) and nothing
the page asks for is missing; the import button offers .pt/.pth files too."""

from conftest import APP_TIMEOUT_MS, BOOT_TIMEOUT_MS
from dashboard import assert_accessible, fill_form, start_training, wait_eval, wait_run_end

RUN = dict(model="mlp", optimizer="sgd", lr=0.1, batch_size=64, epochs=2, scheduler="none", train_size=6400,
           test_size=500)  # 200 steps: long enough to pause it


def test_every_state_passes_axe(page, server_url, screenshot):
    missing = []
    page.on("response", lambda r: missing.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto(server_url + "/")
    assert page.evaluate("document.body.dataset.boot") == "loading"
    assert_accessible(page, "boot")
    page.wait_for_function("document.body.dataset.boot !== 'loading' && document.body.dataset.app !== 'loading'",
                           timeout=BOOT_TIMEOUT_MS + APP_TIMEOUT_MS)
    assert page.evaluate("document.body.dataset.app") == "ready", page.inner_text("#run-message")
    assert_accessible(page, "ready")

    # the favicon: declared, served from this origin; and no request of the page failed (a 404 favicon.ico was)
    assert page.get_attribute("link[rel=icon]", "href") == "favicon.svg"
    assert page.evaluate("fetch('favicon.svg').then((r) => [r.status, r.headers.get('content-type')])") == \
        [200, "image/svg+xml"]
    assert page.get_attribute("#import", "accept") == ".safetensors,.pt,.pth"

    fill_form(page, lr="0")
    page.click("#train")
    page.locator("#form-error").wait_for()
    assert_accessible(page, "form error")
    fill_form(page, lr="0.1")

    start_training(page, **RUN)
    assert page.is_visible("#run-preparing")  # the first step records: the line says so until the figures come
    assert_accessible(page, "training, preparing the GPU step")
    page.wait_for_function("document.body.dataset.preparing === 'false'", timeout=300_000)
    assert page.is_hidden("#run-preparing") and page.inner_text("#stat-loss") != "–"
    page.wait_for_function("document.getElementById('stat-rate').textContent !== '–'", timeout=60_000)
    assert_accessible(page, "training")
    page.click("#pause")
    page.wait_for_function("document.body.dataset.train === 'paused' && document.body.dataset.checkpoint === 'saved'",
                           timeout=120_000)
    assert_accessible(page, "paused")
    page.click("#resume")
    assert wait_run_end(page, 600_000) == "done", page.inner_text("#run-message")
    wait_eval(page)
    assert page.locator("#grid li.wrong").count() > 0  # a wrong prediction: the red buttons are checked too
    assert page.locator("#confusion tbody td[style*='220, 38, 38']").count() > 0  # and red cells of the matrix
    assert_accessible(page, "trained")
    # every shade the matrix can take, in a table of the matrix's style beside it: a share of 0 to 1 of a class
    page.evaluate("""async () => {
        const { shade } = await import("./js/results.js");
        const table = document.createElement("table");
        table.className = "confusion";
        table.id = "shade-probe";
        const row = table.createTBody().insertRow();
        for (let k = 0; k <= 20; k++) {
            for (const diagonal of [true, false]) {
                const cell = row.insertCell();
                cell.textContent = String(100 * k);
                cell.style.background = shade(diagonal, k / 20);
            }
        }
        document.getElementById("matrix").append(table);
    }""")
    assert_accessible(page, "the confusion matrix's shades")
    page.evaluate("document.getElementById('shade-probe').remove()")
    # the test images' buttons are named by their visible text, with what they are before it
    names = page.eval_on_selector_all("#grid li.wrong button", "els => els.map((b) => b.textContent)")
    assert names[0].startswith("Test image, wrong: predicted ") and ", is " in names[0], names[0]
    screenshot(page, "a11y-trained")

    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(1000)  # headless Chromium repaints the re-laid-out page lazily
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")  # nothing sticks out
    assert_accessible(page, "narrow (390 px), trained")
    screenshot(page, "a11y-narrow")
    assert not missing, missing
