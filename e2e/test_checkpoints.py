"""Checkpoints on the dashboard (webgrad/apps/mnist/resume.py, web/js/checkpoint*.js): Pause, reload and Resume
continue the run (the step counter, the loss curve, the weights saved); a lost GPU device resumes from the
last checkpoint; a damaged checkpoint is refused with a message and the page still trains; IndexedDB keeps
checkpoints where OPFS is missing. Screenshots of the Resume offer go to artifacts/."""

from conftest import APP_TIMEOUT_MS
from dashboard import start_training, stat, wait_run_end

# 750 steps per epoch: the run is far from an epoch's end while the test looks at it
RUN = dict(model="mlp", optimizer="adam", lr=0.002, batch_size=16, epochs=2, scheduler="cosine",
           train_size=12000, test_size=100)
STEPS = 750

# sha256 of the model's weights (the safetensors bytes of its state_dict), computed in the page's Python
SHA = "import hashlib, io, webgrad as wg\n" \
      "def sha(state):\n" \
      "    buf = io.BytesIO()\n" \
      "    wg.save(dict(state), buf)\n" \
      "    return hashlib.sha256(buf.getvalue()).hexdigest()\n"


def points(page):
    return int(page.evaluate("document.getElementById('loss-chart').dataset.points"))


def progress_value(page):
    return int(page.evaluate("document.getElementById('train-progress').value"))


def pause_and_wait_for_checkpoint(page):
    page.click("#pause")
    page.wait_for_function("document.body.dataset.train === 'paused' && document.body.dataset.checkpoint === 'saved'",
                           timeout=120_000)
    return int(page.evaluate("document.body.dataset.checkpointStep"))


def reload(page):
    page.reload()
    page.wait_for_function("document.body.dataset.app !== 'loading'", timeout=APP_TIMEOUT_MS)
    assert page.evaluate("document.body.dataset.app") == "ready", page.inner_text("#run-message")


def test_pause_reload_resume_continues_the_run(app_page, run_python, screenshot):
    page = app_page
    run_python("import webgrad; webgrad.manual_seed(0)")
    start_training(page, **RUN)
    page.wait_for_function("Number(document.getElementById('loss-chart').dataset.points) >= 3", timeout=300_000)
    step = pause_and_wait_for_checkpoint(page)
    assert 0 < progress_value(page) <= step  # the bar shows the last progress message, the checkpoint the last step
    assert "Checkpoint saved in OPFS on Pause" in page.inner_text("#checkpoint-status")
    curve = points(page)
    weights = run_python(SHA + "sha(app.model.state_dict())")
    adam_step = run_python("app.run.opt.state_dict()['state'][0]['step']")
    assert adam_step == step

    reload(page)
    page.wait_for_function("document.body.dataset.checkpoint === 'offered'", timeout=60_000)
    offer = page.inner_text("#checkpoint")
    for text in ("Resume training?", "MLP 784-128-10", "MNIST", "Adam, lr 0.002, batch 16, cosine annealing",
                 f"epoch 1 of 2, step {step} of {STEPS}", "on Pause", "OPFS"):
        assert text in offer, (text, offer)
    assert page.is_enabled("#checkpoint-resume") and page.is_enabled("#checkpoint-discard")
    # What OPFS holds is what the run had: the page's Python reads it back
    stored = run_python(SHA + "from webgrad.apps.mnist import checkpoint\n"
                        "state, _ = checkpoint.unpack((await app.checkpoints.store.load())[0], 'webgpu')\n"
                        "[sha(state['model']), state['optimizer']['state'][0]['step'], state['progress']['step']]")
    assert stored == [weights, adam_step, step]
    screenshot(page, "checkpoint-offer")
    page.set_viewport_size({"width": 420, "height": 900})
    page.wait_for_timeout(1000)  # headless Chromium repaints the re-laid-out page lazily
    screenshot(page, "checkpoint-offer-narrow")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")  # nothing sticks out
    page.set_viewport_size({"width": 1280, "height": 900})

    page.click("#checkpoint-resume")
    page.wait_for_function("document.body.dataset.checkpoint === 'resumed'", timeout=120_000)
    assert page.is_hidden("#checkpoint")
    assert "Resumed from the checkpoint of epoch 1" in page.inner_text("#run-message")
    # The model got the checkpoint's weights: the App's host copy, taken from the model right after the restore
    assert run_python("app.saved['label']") == "the checkpoint"
    assert run_python(SHA + "hashlib.sha256(app.saved['data']).hexdigest()") == weights
    # The form shows the resumed run's settings; the curve is the one before the reload, and it goes on.
    assert page.input_value("#f-lr") == "0.002" and page.input_value("#f-scheduler") == "cosine"
    page.wait_for_function(f"Number(document.getElementById('loss-chart').dataset.points) > {curve}", timeout=300_000)
    assert progress_value(page) > step
    assert int(stat(page, "step").split(" / ")[0]) > step  # the step counter continued, not restarted
    screenshot(page, "checkpoint-resumed")
    page.click("#stop")
    assert wait_run_end(page, 120_000) == "stopped"


def test_a_lost_device_resumes_from_the_last_checkpoint(app_page, run_python):
    page = app_page
    start_training(page, **RUN)
    page.wait_for_function("Number(document.getElementById('loss-chart').dataset.points) >= 2", timeout=300_000)
    step = pause_and_wait_for_checkpoint(page)
    weights = run_python(SHA + "sha(app.model.state_dict())")
    curve = points(page)

    run_python("import js\njs.webgradDevices.at(-1).destroy()")  # what a GPU reset or driver crash does
    page.wait_for_function("document.body.dataset.checkpoint === 'resumed'", timeout=180_000)
    message = page.inner_text("#run-message")
    assert "The GPU device was lost" in message and f"resumed training from the checkpoint of epoch 1, step {step}" \
        in message, message
    assert int(page.evaluate("document.body.dataset.checkpointStep")) == step
    assert page.evaluate("[document.body.dataset.gpu, document.body.dataset.train]") == ["ok", "training"]
    # On the new device, the model holds the checkpoint's weights (the App's copy, taken right after the restore)
    assert run_python("app.saved['label']") == "the checkpoint"
    assert run_python(SHA + "hashlib.sha256(app.saved['data']).hexdigest()") == weights
    page.wait_for_function(f"Number(document.getElementById('loss-chart').dataset.points) > {curve}", timeout=300_000)
    assert progress_value(page) > step
    page.click("#stop")
    assert wait_run_end(page, 120_000) == "stopped"


def test_a_damaged_checkpoint_is_refused_and_kept_until_discarded(app_page, run_python, screenshot):
    page = app_page
    start_training(page, **RUN)
    page.wait_for_function("Number(document.getElementById('loss-chart').dataset.points) >= 1", timeout=300_000)
    pause_and_wait_for_checkpoint(page)
    page.click("#stop")
    wait_run_end(page, 120_000)
    # One bit flipped in the middle of the stored checkpoint (a disk error, a write cut short)
    run_python("store = app.checkpoints.store\n"
               "items = await store.load()\n"
               "await store.discard()\n"
               "bad = bytearray(items[0])\n"
               "bad[len(bad) // 2] ^= 1\n"
               "await store.save(bytes(bad))")

    reload(page)
    page.wait_for_function("document.body.dataset.checkpoint === 'error'", timeout=60_000)
    banner = page.inner_text("#checkpoint")
    assert "The saved checkpoint cannot be used" in banner and "checksum" in banner, banner
    assert page.is_hidden("#checkpoint-resume") and page.is_enabled("#checkpoint-discard")
    screenshot(page, "checkpoint-damaged")
    assert run_python("len(await app.checkpoints.store.load())") == 1  # kept until the user says otherwise

    page.click("#checkpoint-discard")
    page.wait_for_function("document.body.dataset.checkpoint === 'none'", timeout=60_000)
    assert page.is_hidden("#checkpoint") and "removed" in page.inner_text("#checkpoint-status")
    assert run_python("len(await app.checkpoints.store.load())") == 0
    start_training(page, **dict(RUN, epochs=1, train_size=320))  # the page trains as before
    assert wait_run_end(page, 300_000) == "done"


def test_both_stores_keep_the_two_newest_generations(page, server_url):
    # The worker's OPFS store is tested above; here, in the page's thread (createWritable, no sync access
    # handle), OPFS and the IndexedDB fallback, in folders of their own.
    page.goto(server_url + "/")
    result = page.evaluate("""async () => {
        const { openOpfs, openIndexedDb } = await import("./js/checkpoint-store.js");
        const out = {};
        for (const store of [await openOpfs("test-opfs"), await openIndexedDb("test-idb")]) {
            const kinds = [];
            for (const n of [1, 2, 3]) kinds.push(await store.save(new Uint8Array([n, n, n])));
            const { kind, items } = await store.load();
            await store.discard();
            out[kind] = { kinds, items: items.map((a) => Array.from(a)), after: (await store.load()).items.length };
        }
        return out;
    }""")
    for kind in ("OPFS", "IndexedDB"):
        assert result[kind] == {"kinds": [kind] * 3, "items": [[3, 3, 3], [2, 2, 2]], "after": 0}, result
