"""Driving the dashboard (web/) from tests: the form, the run, the views' state.

The page keeps its state where tests can read it: <body data-app data-train data-outcome data-model data-dataset
data-preparing data-samples>, data-pred on each test digit, data-p on each probability bar, data-points on each
chart. assert_accessible(page, state) runs axe-core (npm) on the page: no WCAG 2.1 AA violation.
"""

import json
from pathlib import Path

SELECTS = ("model", "optimizer", "scheduler")
RUN_TIMEOUT_MS = 900_000


def fill_form(page, **settings):
    """Set form fields by name: model, optimizer, scheduler, lr, batch_size, epochs, train_size, test_size (a
    text's: steps, sample_every)."""
    for name, value in settings.items():
        selector = f"#train-form [name={name}]"
        if name in SELECTS:
            page.select_option(selector, str(value))
        else:
            page.fill(selector, str(value))


def start_training(page, **settings):
    fill_form(page, **settings)
    page.click("#train")
    page.wait_for_function("document.body.dataset.train === 'training'", timeout=30_000)


def wait_run_end(page, timeout_ms=RUN_TIMEOUT_MS):
    """Wait for the run to end; returns its outcome (done, stopped, diverged, invalid, device-lost)."""
    page.wait_for_function("document.body.dataset.outcome !== undefined && document.body.dataset.train === 'idle'",
                           timeout=timeout_ms)
    return page.evaluate("document.body.dataset.outcome")


def stat(page, name):
    """The text of a progress figure: epoch, step, rate, eta, loss, accuracy, lr."""
    return page.inner_text(f"#stat-{name}")


def data_answer(page, action):
    """Do `action()` (which gives the page a file or files); the data status once the trainer has answered."""
    page.evaluate("document.getElementById('data-status').textContent = ''")
    action()
    page.wait_for_function("/ on the GPU|^Not loaded/.test(document.getElementById('data-status').textContent)",
                           timeout=120_000)
    return page.inner_text("#data-status")


def wait_for_rate(page, timeout_ms=300_000):
    """The samples/s figure once it is known: the run's first steps record the step for replay and post
    their loss with no rate (it would time the recording), so the loss chart fills before the rate shows."""
    page.wait_for_function("/^[\\d,]+$/.test(document.getElementById('stat-rate').textContent)", timeout=timeout_ms)
    return int(stat(page, "rate").replace(",", ""))


def accuracy(page):
    return float(stat(page, "accuracy").rstrip("%")) / 100


def grid_predictions(page):
    return page.eval_on_selector_all("#grid li", "els => els.map((e) => e.dataset.pred === undefined ? null : Number(e.dataset.pred))")


def probabilities(page):
    return page.eval_on_selector_all("#probs li", "els => els.map((e) => Number(e.dataset.p))")


def classify(page, action):
    """Run `action()` (which changes the drawing), wait for the model's answer; returns the probabilities
    (None if the page shows no guess)."""
    before = page.evaluate("Number(document.getElementById('probs').dataset.answers || 0)")
    action()
    page.wait_for_function(f"Number(document.getElementById('probs').dataset.answers || 0) > {before}", timeout=60_000)
    if page.evaluate("document.getElementById('probs').dataset.state") != "ready":
        return None
    return probabilities(page)


def send_to_app(run_python, msg):
    """Queue a message for the trainer from Python, as the page would send it, bypassing the form's checks."""
    run_python(f"import json\napp.receive(json.loads({json.dumps(json.dumps(msg))}))")


def pick(page, i):
    """Show test digit i in the drawing area (a click on it in the grid); the model's probabilities for it."""
    return classify(page, lambda: page.click(f"#grid li:nth-child({i + 1}) button"))


def import_file(page, path):
    """Import a file through the page's file input; the status line once the import has answered."""
    page.evaluate("document.getElementById('file-status').textContent = ''")  # so an old answer does not count
    page.set_input_files("#import", str(path))
    page.wait_for_function("/Imported|Import failed/.test(document.getElementById('file-status').textContent)",
                           timeout=60_000)
    return page.inner_text("#file-status")


def wait_eval(page):
    """Wait until every test digit has a prediction."""
    page.wait_for_function("[...document.querySelectorAll('#grid li')].every((e) => e.dataset.pred !== undefined)",
                           timeout=300_000)


# ------------------------------------------------------------------ accessibility (axe-core from npm)
AXE = Path(__file__).resolve().parents[1] / "node_modules" / "axe-core" / "axe.min.js"
WCAG_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]  # WCAG 2.1 AA: axe's rules with these tags


def axe_violations(page, tags=WCAG_AA):
    """axe-core's WCAG 2.1 AA violations on the page as it is now: [{id, impact, help, nodes: [target: summary]}]."""
    if not AXE.is_file():
        raise FileNotFoundError(f"{AXE} is missing: npm install (package.json's devDependencies has axe-core)")
    if not page.evaluate("typeof window.axe === 'object'"):
        page.add_script_tag(path=str(AXE))
    return page.evaluate("""async (tags) => {
        const result = await axe.run(document, { runOnly: { type: "tag", values: tags }, resultTypes: ["violations"] });
        return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.slice(0, 6).map((n) =>
                `${n.target.join(" ")}: ${n.failureSummary.replace(/\\s+/g, " ")}`) }));
    }""", tags)


def assert_accessible(page, state):
    """No axe-core WCAG 2.1 AA violation in `state` (a name for the message)."""
    found = axe_violations(page)
    assert not found, f"{state}: " + "; ".join(f"{v['id']} ({v['impact']}): {v['help']} -> {v['nodes']}" for v in found)
