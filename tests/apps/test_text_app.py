"""The page's Text dataset and its GPTs (webgrad.apps.mnist in CPython, on the CPU): a text's tokens, bad files
refused with the data and model kept, a run's validation loss and samples, Resume after a reload continuing the
same run, the prompt box, and exports that load into webgrad.models.gpt built with torch.nn. The page runs the
same code on WebGPU (e2e/test_text_page.py)."""

import asyncio
import concurrent.futures
import io
import json
import math
from collections import Counter

import pytest

import webgrad as wg
from webgrad.apps.mnist import App, models, storage, train
from webgrad.apps.mnist.data import MAX_TEXT_BYTES, TextData
from webgrad.models.gpt import GPTConfig, define

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

RUN = dict(model="gpt-tiny", optimizer="adamw", scheduler="none", lr=3e-3, batch_size=8, steps=20, sample_every=10,
           amp=False)


def wait(coro):
    """Run a coroutine in a thread of its own (Playwright's loop may run in this one in a session with e2e/)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def make_app(store=None):
    messages = []
    app = App(messages.append, device="cpu", store=store)
    app.messages = messages
    return app


def of(app, kind):
    return [m for m in app.messages if m["type"] == kind]


def load_text(app, data, name="poem.txt"):
    app.messages.clear()
    wait(app._dataset({"type": "dataset", "source": "text", "data": data, "name": name}))
    return app.messages[-1]


def state_bytes(model):
    buf = io.BytesIO()
    wg.save(dict(model.state_dict()), buf)
    return buf.getvalue()


@pytest.fixture(scope="module")
def trained():
    """An App that trained a tiny GPT for 20 steps on the bundled sample."""
    app = make_app()
    wait(app._dataset({"source": "text-sample"}))
    wg.manual_seed(0)
    wait(app._train(dict(RUN)))
    app.run_messages = list(app.messages)
    return app


def test_the_sample_is_tokenised_by_character():
    msgs = []
    app = App(msgs.append, device="cpu")
    wait(app._dataset({"source": "text-sample"}))
    data, text = app.data, msgs[-1]
    raw = (__import__("importlib.resources").resources.files("webgrad.apps") / "data/shakespeare.txt").read_text()
    assert data.kind == "characters" and data.vocab == sorted(set(raw))
    assert text["vocab_size"] == len(set(raw)) and text["characters"] == len(raw)
    assert text["train_size"] + text["test_size"] == len(raw) and text["test_size"] == len(raw) // 10
    counts = Counter(raw)
    assert text["unigram"] == pytest.approx(-sum(c / len(raw) * math.log(c / len(raw)) for c in counts.values()))
    assert [k for k, _, _ in text["models"]] == list(models.GPT_SIZES) and text["source"] == "sample"
    assert text["models"][0][1:] == ("GPT tiny (0.11M parameters)", "2 layers of width 64, 4 heads, 32-token context")
    assert data.decode(data.encode("ROMEO:\nO")) == "ROMEO:\nO"
    x, y = data.batch("train", 4, 32)
    assert x.shape == y.shape == (4, 32) and x.dtype == wg.int64
    assert x[:, 1:].tolist() == y[:, :-1].tolist()  # the target is the input shifted by one


def test_many_distinct_characters_make_byte_tokens_and_latin1_is_read():
    wide = "".join(chr(0x4E00 + i) for i in range(300)) * 2
    data = TextData(wide.encode("utf-8"), "wide.txt", "cpu")
    assert data.kind == "bytes" and len(data.vocab) <= 256 and "UTF-8 bytes" in data.notes
    assert data.decode(data.encode(wide[:5])) == wide[:5]
    latin = TextData("Ça va, très bien. ".encode("latin-1") * 10, "old.txt", "cpu")
    assert latin.kind == "characters" and "Latin-1" in latin.notes and "é" not in latin.vocab and "è" in latin.vocab
    crlf = TextData(b"line one\r\nline two\r\n" * 10, "dos.txt", "cpu")
    assert "\r" not in crlf.vocab


@pytest.mark.parametrize("raw,message", [
    (b"", "poem.txt is empty"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4, "not a text file: it holds binary data"),
    (bytes([1, 2, 3, 4, 5, 6, 7]) * 50 + b"text", "not a text file: .* control codes"),
    (b"a" * (MAX_TEXT_BYTES + 1), r"poem.txt holds 16,777,217 bytes, more than the 16 MiB \(16,777,216 bytes\) the "
                                  "page takes"),
    (b"too short", "too short: 9 characters"),
    (b"a" * 500, "repeats one character"),
])
def test_bad_text_files_are_refused_and_the_data_and_model_stay(trained, raw, message):
    app = trained
    data, model, kind = app.data, app.model, app.kind
    answer = load_text(app, raw)
    assert answer["type"] == "data-error" and __import__("re").search(message, answer["message"]), answer
    assert app.data is data and app.model is model and app.kind == kind


def test_a_run_reports_validation_loss_and_samples(trained):
    msgs = trained.run_messages
    progress = [m for m in msgs if m["type"] == "progress" and "loss" in m]
    assert [m["preparing"] for m in progress[:2]] == [True, True] and not progress[-1]["preparing"]
    assert progress[-1]["tokens_per_s"] == pytest.approx(progress[-1]["samples_per_s"] * 32)
    evals, samples = [m for m in msgs if m["type"] == "text-eval"], [m for m in msgs if m["type"] == "sample"]
    assert [m["step"] for m in evals] == [10, 20] == [m["step"] for m in samples]
    assert all(0 < m["val_loss"] < math.log(60) + 0.5 for m in evals)
    assert all(len(m["text"]) == train.SAMPLE_TOKENS and set(m["text"]) <= set(trained.data.vocab) for m in samples)
    assert progress[-1]["loss"] < progress[0]["loss"]
    assert [m for m in msgs if m["type"] == "run-end"][-1]["outcome"] == "done"


def test_the_prompt_box_continues_a_prompt(trained):
    trained.messages.clear()
    wait(trained._generate({"type": "generate", "id": 7, "prompt": "ROMEO:\n", "length": 45, "temperature": 0.8}))
    answers = of(trained, "generated")
    assert [m.get("done") for m in answers] == [False, False, False, True]  # streamed every 20 tokens
    assert len(answers[-1]["text"]) == 45 and answers[-2]["text"] == answers[-1]["text"] and answers[-1]["id"] == 7
    wait(trained._generate({"type": "generate", "id": 8, "prompt": "Ωmega", "length": 5}))
    assert "characters the text does not ('Ω')" in of(trained, "generated")[-1]["error"]


def test_bad_text_settings_name_the_field(trained):
    for change, field in ((dict(model="mlp"), "model"), (dict(steps=0), "steps"), (dict(batch_size=513), "batch_size"),
                          (dict(sample_every=1.5), "sample_every"), (dict(lr=0), "lr")):
        with pytest.raises(ValueError, match=f"^{field}:"):
            train.check_config(dict(RUN, dataset="text", **change))
    config = models.gpt_config("gpt-6x384", 60)
    assert "128 sequences of 256 tokens need 192 MiB in one GPU buffer" in \
        models.check_gpt_fits(config, 128, 128 * 2 ** 20)
    assert models.check_gpt_fits(config, 16, 128 * 2 ** 20) is None
    short = TextData(b"abcdefghij" * 12, "short.txt", "cpu")  # 108 characters for training
    why = train.check_run(train.check_config(dict(RUN, model="gpt-medium", dataset="text")), short, "cpu")
    assert why.startswith("model: the GPT medium reads 128 tokens at a time"), why


def test_the_export_loads_into_the_pytorch_definition(trained):
    trained.messages.clear()
    wait(trained._export())
    exported = of(trained, "exported")[-1]
    assert exported["filename"] == "webgrad-text-gpt-tiny.safetensors"
    with open_meta(exported["data"]) as meta:
        config = GPTConfig(**json.loads(meta["config"]))
        assert json.loads(meta["vocab"]) == trained.data.vocab and meta["model"] == "gpt-tiny"
    ref = define(torch.nn).GPT(config)
    ref.load_state_dict(safetensors_torch.load(exported["data"]))  # strict: every name and shape
    idx = [[trained.data.encode("ROMEO:\nO, she doth teach the")[i] for i in range(20)]]
    with wg.no_grad():
        ours, _ = trained.model(wg.tensor(idx), wg.tensor(idx))
    with torch.no_grad():
        theirs, _ = ref(torch.tensor(idx), torch.tensor(idx))
    assert torch.allclose(torch.tensor(ours.tolist()), theirs, atol=1e-5)


class open_meta:
    def __init__(self, data):
        from webgrad.io import safetensors
        self.meta = safetensors.parse(data)[1]

    def __enter__(self):
        return self.meta

    def __exit__(self, *exc):
        return False


def test_imports_of_gpt_files(trained, tmp_path):
    app = trained
    wait(app._export())
    data = of(app, "exported")[-1]["data"]
    app.messages.clear()
    wait(app._import(data, "mine.safetensors"))
    imported = of(app, "imported")[-1]
    assert imported["kind"] == "gpt-tiny" and imported["model"].startswith("GPT tiny: 2 layers of width 64")
    assert of(app, "text-eval")[-1]["source"] == "import"
    # A PyTorch .pt of the same network, without metadata: the heads come from the page's sizes
    ref = define(torch.nn).GPT(models.gpt_config("gpt-tiny", len(app.data.vocab)))
    buf = io.BytesIO()
    torch.save(ref.state_dict(), buf)
    app.messages.clear()
    wait(app._import(buf.getvalue(), "nanogpt.pt"))
    assert of(app, "imported")[-1]["kind"] == "gpt-tiny", app.messages
    idx = [[1, 2, 3, 4]]
    with wg.no_grad():
        ours, _ = app.model(wg.tensor(idx))
    with torch.no_grad():
        theirs, _ = ref(torch.tensor(idx))
    assert torch.allclose(torch.tensor(ours.tolist()), theirs, atol=1e-5)
    # Refused, the model kept: an image model's weights, a GPT of another vocabulary
    model = app.model
    mlp = io.BytesIO()
    wg.save(models.build("mlp").state_dict(), mlp)
    for raw, message in ((mlp.getvalue(), "are not a GPT's"),
                         (state_bytes(models.build("gpt-tiny", "cpu", None, 61)), "reads 61 tokens"),
                         (b"not a file", "not a valid .safetensors or PyTorch file")):
        app.messages.clear()
        wait(app._import(raw, "x.safetensors"))
        assert message in of(app, "import-error")[-1]["message"], app.messages
        assert app.model is model


def test_resume_after_a_reload_continues_the_same_run(tmp_path):
    store = storage.FolderStore(tmp_path / "opfs")

    def stop_after_first_checkpoint(app):
        def post(msg):
            app.messages.append(msg)
            if msg["type"] == "checkpoint-saved":
                app.receive({"type": "stop"})
        app._post = post

    # the run uninterrupted, for reference
    whole = make_app()
    wait(whole._dataset({"source": "text-sample"}))
    wg.manual_seed(3)
    wait(whole._train(dict(RUN)))

    first = make_app(store)
    stop_after_first_checkpoint(first)
    wait(first._dataset({"source": "text-sample"}))
    wg.manual_seed(3)
    wait(first._train(dict(RUN)))
    assert of(first, "run-end")[-1]["outcome"] == "stopped" and first.run is None
    offer_app = make_app(store)  # the page reloaded: MNIST is not needed, the sample is loaded on Resume
    wait(offer_app.checkpoints.offer())
    offer = of(offer_app, "checkpoint-offer")[-1]["summary"]
    assert offer["data"]["source"] == "sample" and offer["step"] == 10 and offer["val_loss"] is not None
    wg.manual_seed(99)  # whatever the generator holds after a reload: the checkpoint's state is put back
    wait(offer_app.checkpoints.resume())
    state = of(offer_app, "state")[0]
    assert state["resumed"]["message"].startswith("Resumed from the checkpoint of step 10 of 20")
    assert [p[0] for p in state["history"]["val_loss"]] == [10]
    assert state["sample"]["step"] == 10 and len(state["sample"]["text"]) == train.SAMPLE_TOKENS  # shown again
    assert of(offer_app, "run-end")[-1]["outcome"] == "done"
    assert state_bytes(offer_app.model) == state_bytes(whole.model)  # the same batches, the same weights


def test_a_text_files_checkpoint_needs_that_text(tmp_path):
    store = storage.FolderStore(tmp_path / "opfs")
    poem = b"Tyger Tyger, burning bright,\nIn the forests of the night;\n" * 8
    app = make_app(store)
    app._post = lambda msg: (app.messages.append(msg),
                             msg["type"] == "checkpoint-saved" and app.receive({"type": "stop"}))
    load_text(app, poem, "tyger.txt")
    wait(app._train(dict(RUN, steps=4, sample_every=2)))
    later = make_app(store)
    wait(later.checkpoints.offer())
    assert of(later, "checkpoint-offer")[-1]["summary"]["data"]["label"] == "tyger.txt"
    wait(later._dataset({"source": "text-sample"}))
    wait(later.checkpoints.resume())
    assert "trained on another text (tyger.txt)" in of(later, "checkpoint-error")[-1]["message"]
    load_text(later, poem, "tyger.txt")
    later.messages.clear()
    wait(later.checkpoints.resume())
    assert of(later, "state")[0]["resumed"]["step"] == 2 and of(later, "run-end")[-1]["outcome"] == "done"
