"""Training MNIST on the dashboard: the MLP learns (≥ 90% on a test subset), the charts and figures
update, and Pause / Resume / Stop act on the run. Screenshots go to artifacts/."""

import re

from dashboard import accuracy, grid_predictions, start_training, stat, wait_for_rate, wait_run_end

# ~92% on the first 2000 test digits after 2 epochs (374 steps of SGD with momentum), seed 0.
MLP_RUN = dict(model="mlp", optimizer="sgd", lr=0.1, batch_size=64, epochs=2, scheduler="none",
               train_size=12000, test_size=2000)


def test_mlp_trains_to_90_percent(app_page, run_python, screenshot):
    page = app_page
    assert "architecture swiftshader" in page.inner_text("#gpu")
    run_python("import webgrad; webgrad.manual_seed(0)")
    start_training(page, **MLP_RUN)

    # Mid-training: the loss chart fills, the figures move.
    page.wait_for_function("Number(document.getElementById('loss-chart').dataset.points) >= 3", timeout=300_000)
    assert wait_for_rate(page) > 0
    assert stat(page, "eta") != "–"
    assert re.fullmatch(r"1 / 2", stat(page, "epoch"))
    # GPU memory held by tensors (its peak in the tooltip): a training MLP and MNIST on the GPU hold MiBs
    assert re.fullmatch(r"[\d.]+ (KiB|MiB|GiB)", stat(page, "memory")), stat(page, "memory")
    assert "at its peak" in page.get_attribute("#stat-memory", "title")
    screenshot(page, "dashboard-training")

    assert wait_run_end(page) == "done", page.inner_text("#run-message")
    acc = accuracy(page)
    assert acc >= 0.90, f"test accuracy {acc:.2%} on 2000 test digits"
    assert page.evaluate("Number(document.getElementById('acc-chart').dataset.points)") == 2
    assert int(page.evaluate("document.getElementById('loss-chart').dataset.points")) >= 374 // 10
    samples_per_s = int(stat(page, "rate").replace(",", ""))
    assert samples_per_s > 0
    print(f"MLP: {acc:.2%} on 2000 test digits, {samples_per_s} samples/s at the end")

    # The views after an epoch: predictions on every test digit, a confusion matrix of the test subset.
    preds = grid_predictions(page)
    assert None not in preds
    labels = page.eval_on_selector_all("#grid li", "els => els.map((e) => Number(e.dataset.label))")
    wrong = sum(p != t for p, t in zip(preds, labels))
    assert page.locator("#grid li.wrong").count() == wrong
    cells = page.eval_on_selector_all("#confusion tbody td", "els => els.map((e) => Number(e.textContent))")
    assert sum(cells) == 2000
    assert sum(cells[i * 10 + i] for i in range(10)) == round(acc * 2000)
    assert "Done" in page.inner_text("#run-message")
    screenshot(page, "dashboard-trained")
    page.set_viewport_size({"width": 420, "height": 900})
    page.wait_for_timeout(1000)  # headless Chromium repaints the re-laid-out page lazily
    screenshot(page, "dashboard-narrow")


def test_cnn_trains(app_page, run_python):
    # A short run: the convolutional path (im2col, pooling, their backward) trains in the browser.
    page = app_page
    run_python("import webgrad; webgrad.manual_seed(0)")
    start_training(page, model="cnn", optimizer="adam", lr=0.003, batch_size=32, epochs=1, scheduler="none",
                   train_size=640, test_size=100)
    assert wait_run_end(page) == "done", page.inner_text("#run-message")
    assert int(page.evaluate("document.getElementById('loss-chart').dataset.points")) >= 2
    assert float(stat(page, "loss")) < 2.0  # from ~2.3 at the start (ten classes)
    assert accuracy(page) > 0.3
    assert page.evaluate("document.body.dataset.model") == "cnn"


def test_pause_resume_stop(app_page):
    page = app_page
    # Small batches over the whole training set: the run cannot finish during the test.
    start_training(page, model="mlp", optimizer="adam", lr=0.001, batch_size=16, epochs=1,
                   train_size=60000, test_size=100)
    page.wait_for_function("document.getElementById('stat-step').textContent !== '–'", timeout=120_000)

    page.click("#pause")
    page.wait_for_function("document.body.dataset.train === 'paused'", timeout=120_000)
    assert page.is_enabled("#resume") and page.is_disabled("#pause") and page.is_enabled("#stop")
    assert page.evaluate("document.activeElement.id") == "resume"  # keyboard focus follows
    step = stat(page, "step")
    page.wait_for_timeout(3000)
    assert stat(page, "step") == step, "the run went on while paused"

    page.click("#resume")
    page.wait_for_function("document.body.dataset.train === 'training'", timeout=30_000)
    page.wait_for_function(f"document.getElementById('stat-step').textContent !== {step!r}", timeout=120_000)

    page.click("#stop")
    assert wait_run_end(page, 120_000) == "stopped"
    assert page.is_enabled("#train") and page.is_disabled("#stop")
    assert "Stopped" in page.inner_text("#run-message")
