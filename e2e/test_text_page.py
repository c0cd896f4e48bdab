"""A language model in the page (headless Chromium, WebGPU on SwiftShader): a text file given to the Text
dataset's file input trains the tiny GPT (webgrad.models.gpt) for a few hundred steps until its loss is below
the text's unigram entropy (computed here from the text), a sample generated on the GPU appears, the prompt box
continues a prompt, and after a reload the Resume banner says the file must be chosen again; chosen, Resume
continues the curve. Bad files (empty, binary, huge) are refused with a message, the text and the model kept.
Each state passes axe-core (WCAG 2.1 AA). Screenshots: artifacts/text-*.png."""

import math
import re
from collections import Counter
from importlib.resources import files

import pytest

from conftest import APP_TIMEOUT_MS
from dashboard import assert_accessible, data_answer, start_training, stat, wait_run_end

TEXT = files("webgrad.apps").joinpath("data/shakespeare.txt").read_text()
# The tiny GPT (2 layers of width 64, 32 characters of context): ~0.5 s a step on SwiftShader with 2 busy cores.
RUN = dict(model="gpt-tiny", optimizer="adamw", lr=0.003, batch_size=16, steps=400, sample_every=100,
           scheduler="none")


def unigram_entropy(text):
    counts = Counter(text)
    return -sum(c / len(text) * math.log(c / len(text)) for c in counts.values())


def give_text(page, path):
    page.check('input[name="dataset"][value="text"]')
    return data_answer(page, lambda: page.set_input_files("#text-file", str(path)))


def points(page, chart="loss-chart"):
    return int(page.evaluate(f"document.getElementById('{chart}').dataset.points"))


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "shakespeare.txt"
    path.write_text(TEXT)
    return path


def test_a_gpt_trains_on_a_dropped_text_samples_and_resumes(app_page, run_python, text_file, screenshot):
    page = app_page
    entropy = unigram_entropy(TEXT)
    status = give_text(page, text_file)
    assert status.startswith(f"shakespeare.txt: {len(TEXT):,} characters, {len(set(TEXT))} distinct characters"), status
    assert f"Unigram entropy {entropy:.3f} nats per token" in status, status
    assert page.evaluate("document.body.dataset.dataset") == "text"
    assert page.is_hidden("#draw") and page.is_hidden("#digits") and page.is_visible("#textgen")
    options = page.eval_on_selector_all("#f-model option", "els => els.map((o) => [o.value, o.textContent])")
    assert [v for v, _ in options] == ["gpt-tiny", "gpt-small", "gpt-medium", "gpt-6x384"]
    assert options[0][1] == "GPT tiny (0.11M parameters)"
    assert page.is_hidden("#f-epochs") and page.is_visible("#f-steps")
    assert_accessible(page, "text loaded")

    run_python("import webgrad; webgrad.manual_seed(0)")
    start_training(page, **RUN)
    assert page.is_visible("#run-preparing")
    screenshot(page, "text-preparing")
    assert_accessible(page, "text, preparing the GPU step")
    # a few hundred steps: below the unigram entropy (the model uses the context), two samples shown
    page.wait_for_function("Number(document.body.dataset.samples || 0) >= 2", timeout=900_000)
    loss = float(stat(page, "loss"))
    assert loss < entropy - 0.3, (loss, entropy)
    assert points(page, "acc-chart") == 2 and float(stat(page, "accuracy")) < entropy  # the validation loss too
    sample = page.inner_text("#sample-text")
    assert len(sample) >= 150 and set(sample) <= set(TEXT), sample
    assert page.inner_text("#sample-meta").startswith("Step 200: the model continues a new line")
    tokens_per_s = int(stat(page, "rate").replace(",", ""))
    gpu_ms = stat(page, "gpu")
    print(f"GPT tiny on SwiftShader: {tokens_per_s} tokens/s, {gpu_ms} GPU ms/step, loss {loss} after 200 steps "
          f"(unigram entropy {entropy:.3f})")
    assert tokens_per_s > 0 and re.fullmatch(r"[\d.]+", gpu_ms), gpu_ms
    screenshot(page, "text-training")
    assert_accessible(page, "text, training")

    # the prompt box, while it trains: the continuation streams in
    page.fill("#prompt", "ROMEO:\n")
    page.fill("#gen-length", "120")
    page.click("#generate")
    page.wait_for_function("document.getElementById('generated').dataset.done === 'true'", timeout=120_000)
    generated = page.inner_text("#generated")
    assert generated.startswith("ROMEO:\n") and len(generated) == len("ROMEO:\n") + 120, generated
    page.fill("#prompt", "Ωmega")
    page.click("#generate")
    page.wait_for_function("document.getElementById('generate-status').classList.contains('error')", timeout=60_000)
    assert "characters the text does not ('Ω')" in page.inner_text("#generate-status")

    page.evaluate("document.body.dataset.checkpoint = 'none'")  # the samples' checkpoints said 'saved' already
    page.click("#pause")
    page.wait_for_function("document.body.dataset.train === 'paused' && document.body.dataset.checkpoint === 'saved'",
                           timeout=120_000)
    step = int(page.evaluate("document.body.dataset.checkpointStep"))
    curve = points(page)
    assert step >= 200

    page.reload()
    page.wait_for_function("document.body.dataset.app !== 'loading'", timeout=APP_TIMEOUT_MS)
    page.wait_for_function("document.body.dataset.checkpoint === 'offered'", timeout=60_000)
    offer = page.inner_text("#checkpoint")
    for text in ("GPT tiny", "Text (shakespeare.txt)", f"step {step} of 400", "AdamW, lr 0.003, batch 16, 400 steps, a sample every 100",
                 "on Pause", "Validation loss",
                 "It trained on shakespeare.txt, which this page does not keep: choose that text file again"):
        assert text in offer, (text, offer)
    screenshot(page, "text-resume-offer")
    assert_accessible(page, "text, the Resume offer")
    give_text(page, text_file)
    assert page.inner_text("#checkpoint-data") == "shakespeare.txt is loaded: Resume continues the run."
    page.click("#checkpoint-resume")
    page.wait_for_function("document.body.dataset.checkpoint === 'resumed'", timeout=120_000)
    assert page.inner_text("#run-message").startswith(f"Resumed from the checkpoint of step {step} of 400")
    assert points(page) == curve and points(page, "acc-chart") == 2  # the curves as they were, then they go on
    assert page.inner_text("#sample-text") == sample  # and the last sample
    page.wait_for_function(f"Number(document.getElementById('loss-chart').dataset.points) > {curve + 2}",
                           timeout=300_000)
    assert int(stat(page, "step").split(" / ")[0]) > step
    screenshot(page, "text-resumed")
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(1000)  # headless Chromium repaints the re-laid-out page lazily
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert_accessible(page, "text, narrow (390 px)")
    screenshot(page, "text-narrow")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.click("#stop")
    assert wait_run_end(page, 120_000) == "stopped"

    # Bad files: a message each; the text and the model stay
    model = page.evaluate("document.body.dataset.model")
    assert model == "gpt-tiny"
    for name, payload, message in (
            ("empty.txt", b"", "empty.txt is empty"),
            ("photo.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8,
             "photo.txt is not a text file: it holds binary data"),
            ("huge.txt", b"a" * (16 * 2 ** 20 + 1),
             "huge.txt holds 16,777,217 bytes, more than the 16 MiB (16,777,216 bytes) the page takes")):
        answer = data_answer(page, lambda: page.set_input_files(
            "#text-file", files=[{"name": name, "mimeType": "text/plain", "buffer": payload}]))
        assert answer.startswith("Not loaded, the current data (the text) stays: ") and message in answer, answer
        assert page.evaluate("[document.body.dataset.dataset, document.body.dataset.model]") == ["text", model]
    screenshot(page, "text-bad-file")
    assert_accessible(page, "text, a file refused")
