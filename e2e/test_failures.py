"""Bad input and bad luck: invalid hyperparameters are refused, a diverging run stops with the last good
weights, a lost GPU device stops the run and the page recovers onto a new device."""

import math

from dashboard import fill_form, import_file, pick, send_to_app, start_training, wait_eval, wait_run_end

VALID = dict(model="mlp", optimizer="adam", lr=0.001, batch_size=128, epochs=1, scheduler="none",
             train_size=1000, test_size=100)

INVALID = [  # (field, value, the label the message names)
    ("lr", "0", "Learning rate"),
    ("lr", "-0.1", "Learning rate"),
    ("lr", "", "Learning rate"),
    ("lr", "20", "Learning rate"),
    ("batch_size", "0", "Batch size"),
    ("batch_size", "12.5", "Batch size"),
    ("batch_size", "2000", "Batch size"),  # more than the 1000 training samples
    ("epochs", "0", "Epochs"),
    ("train_size", "0", "Training samples"),
    ("test_size", "20000", "Test samples"),
]


def test_invalid_hyperparameters_are_refused(app_page):
    page = app_page
    for field, value, label in INVALID:
        case = f"{field}={value!r}"
        fill_form(page, **VALID)
        fill_form(page, **{field: value})
        page.click("#train")
        error = page.locator("#form-error")
        error.wait_for()
        assert label in error.inner_text(), case
        assert page.get_attribute(f"#train-form [name={field}]", "aria-invalid") == "true", case
        page.wait_for_timeout(300)
        assert page.evaluate("document.body.dataset.train") == "idle", case
        assert page.evaluate("document.body.dataset.outcome") is None, f"{case}: a run was requested"
        fill_form(page, **{field: VALID[field]})  # fixed: the message goes away
        assert page.inner_text("#form-error") == "", case


def test_the_worker_checks_too(app_page, run_python):
    # A config that skipped the form's checks (e.g. a modified page) is refused by the trainer.
    send_to_app(run_python, {"type": "train", "config": dict(VALID, epochs=0)})
    page = app_page
    page.wait_for_function("document.body.dataset.outcome === 'invalid'", timeout=30_000)
    assert "epochs" in page.inner_text("#form-error")
    assert "Not started" in page.inner_text("#run-message")


def test_nan_loss_stops_and_keeps_the_last_good_weights(app_page, run_python):
    page = app_page
    # lr = 1e30 (beyond the form's bounds, sent straight to the trainer): the weights overflow within a
    # few steps and the loss becomes NaN.
    send_to_app(run_python, {"type": "train", "config": dict(VALID, optimizer="sgd", lr=1e30)})
    assert wait_run_end(page, 300_000) == "diverged"
    message = page.inner_text("#run-message")
    assert "the loss became nan" in message.lower() or "the loss became inf" in message.lower(), message
    assert "last weights with a finite loss were put back" in message
    probs = pick(page, 0)
    assert probs is not None and all(math.isfinite(p) for p in probs) and abs(sum(probs) - 1) < 1e-5
    assert page.is_enabled("#train")


def test_lost_device_stops_training_and_recovers(app_page, run_python, torch_files):
    page = app_page
    fill_form(page, test_size=100)
    assert "Imported" in import_file(page, torch_files["mlp"][0])  # known weights, copied to the host
    wait_eval(page)
    start_training(page, **dict(VALID, batch_size=16, train_size=60000))
    page.wait_for_function("document.getElementById('stat-step').textContent !== '–'", timeout=120_000)

    run_python("import js\njs.webgradDevices[0].destroy()")  # what a GPU reset or driver crash does
    assert wait_run_end(page, 120_000) == "device-lost"
    page.wait_for_function("/opened a new one/.test(document.getElementById('run-message').textContent)",
                           timeout=120_000)
    message = page.inner_text("#run-message")
    assert "The GPU device was lost" in message and "were put back" in message, message
    assert page.evaluate("document.body.dataset.gpu") == "ok"

    # The model on the new device answers, and training works again.
    probs = pick(page, 0)
    assert probs is not None and abs(sum(probs) - 1) < 1e-5
    start_training(page, **VALID)
    assert wait_run_end(page, 300_000) == "done"
