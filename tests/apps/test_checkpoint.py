"""The dashboard's checkpoints (webgrad.apps.mnist: checkpoint.py, resume.py, storage.py) in CPython on the
CPU backend: the file format round-trips any nested state with tensors and refuses damaged, foreign and
newer files with a message; a run paused, "reloaded" (a new App on the same store) and resumed ends with
the same weights, to the bit, as the same run never interrupted; a lost device resumes from the last
checkpoint. The page's side (OPFS, the Resume offer) is e2e/test_checkpoints.py."""

import asyncio
import concurrent.futures
import json
import struct

import pytest

import webgrad as wg
from webgrad.apps.mnist import App, checkpoint, storage, train
from webgrad.apps.mnist.checkpoint import CheckpointError


def wait(coro):
    """Run a coroutine in a thread of its own (Playwright's loop may run in this one, as in test_mnist_app)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


# ===================================================================== the file format
def test_any_nested_state_round_trips():
    state = {
        "weights": wg.randn(3, 2), "ints": wg.tensor([1, -2, 3], dtype=wg.int32),
        "bytes": wg.tensor([0, 255], dtype=wg.uint8), "mask": wg.tensor([True, False]),
        "by_index": {0: {"step": 3.0, "buf": wg.ones(2)}, 1: {"step": 3.0, "buf": None}},
        "betas": (0.9, 0.999), "odd": [float("nan"), float("inf"), -float("inf")],
        "$tagged": {"$t": "not a tensor"}, "text": "é ✓", "flags": [True, False, None], "big": 2 ** 62,
    }
    out, summary = checkpoint.unpack(checkpoint.pack(state, {"model": "m"}))
    assert summary == {"model": "m"}
    for key in ("weights", "ints", "bytes", "mask"):
        assert out[key].dtype == state[key].dtype and out[key].tolist() == state[key].tolist()
    assert out["by_index"][0]["buf"].tolist() == [1.0, 1.0] and out["by_index"][1] == {"step": 3.0, "buf": None}
    assert out["betas"] == (0.9, 0.999) and isinstance(out["betas"], tuple)
    assert str(out["odd"]) == "[nan, inf, -inf]"
    assert out["$tagged"] == {"$t": "not a tensor"}  # a plain dict that looks like a tag stays a dict
    assert (out["text"], out["flags"], out["big"]) == ("é ✓", [True, False, None], 2 ** 62)


def test_a_checkpoint_is_a_safetensors_file():
    safetensors = pytest.importorskip("safetensors.numpy")
    raw = checkpoint.pack({"model": {"0.weight": wg.ones(2, 3)}, "optimizer": {"state": {0: {"m": wg.zeros(2)}}}}, {})
    assert sorted(safetensors.load(raw)) == ["model/0.weight", "optimizer/state/0/m"]


def test_what_a_checkpoint_cannot_hold_is_named():
    with pytest.raises(CheckpointError, match=r"scheduler/lr_lambdas/0.*function"):
        checkpoint.pack({"scheduler": {"lr_lambdas": [lambda epoch: 0.5]}}, {})


def _with_metadata(raw, **changes):
    """The file with its header's metadata changed (None removes an entry); tensor data untouched."""
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    for key, value in changes.items():
        header["__metadata__"].pop(key, None) if value is None else header["__metadata__"].__setitem__(key, value)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + raw[8 + n:]


def _flip(raw, index):
    out = bytearray(raw)
    out[index] ^= 0x01
    return bytes(out)


GOOD = checkpoint.pack({"model": {"w": wg.arange(64, dtype=wg.float32)}, "progress": {"step": 12}}, {"step": 12})
DIGIT = GOOD.index(b'\\"step\\":12') + len(b'\\"step\\":1')  # the "2" of step 12 inside the state's JSON


@pytest.mark.parametrize("raw,message", [
    (_flip(GOOD, len(GOOD) - 5), "do not match the checksum"),  # one bit of a weight
    (GOOD[:DIGIT] + b"3" + GOOD[DIGIT + 1:], "do not match the checksum"),  # step 12 -> 13 in the state
    (GOOD[:-8], "truncated"),  # a write that stopped early
    (GOOD[:5], "too short"),
    (b"", "too short"),
    (bytes(range(256)) * 4, "damaged"),
    (_with_metadata(GOOD, sha256=None), "do not match the checksum"),
    (_with_metadata(GOOD, version="2"), "version '2'.*written by a newer webgrad"),
    (_with_metadata(GOOD, format=None), "not a webgrad checkpoint"),
], ids=["weight-bit", "state-digit", "truncated", "header-cut", "empty", "noise", "no-digest", "newer",
        "plain-safetensors"])
def test_damaged_and_foreign_files_are_refused(raw, message):
    with pytest.raises(CheckpointError, match=message):
        checkpoint.peek(raw)
    with pytest.raises(CheckpointError, match=message):
        checkpoint.unpack(raw)


def test_folder_store_keeps_two_generations(tmp_path):
    store = storage.FolderStore(tmp_path / "ckpt")
    assert wait(store.load()) == []
    for data in (b"one", b"two", b"three"):
        wait(store.save(data))
    assert wait(store.load()) == [b"three", b"two"]
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == \
        ["checkpoint-00000002.safetensors", "checkpoint-00000003.safetensors"]  # no .partial left
    wait(store.discard())
    assert wait(store.load()) == []


# ===================================================================== a run paused, reloaded, resumed
def _tiny_mnist(root, train_n=320, test_n=100):
    """IDX files of made-up digits (pixel patterns that differ by class), as MNIST lays them out."""
    def write(name, dims, payload):
        (root / name).write_bytes(struct.pack(f">I{len(dims)}I", 0x0800 | len(dims), *dims) + bytes(payload))

    root.mkdir(exist_ok=True)
    for prefix, n in (("train", train_n), ("t10k", test_n)):
        labels = [(i * 7) % 10 for i in range(n)]
        pixels = bytearray()
        for i, label in enumerate(labels):
            pixels += bytes((p * (label + 1) + i) % 256 if p % 10 == label else 0 for p in range(784))
        write(f"{prefix}-images-idx3-ubyte", (n, 28, 28), pixels)
        write(f"{prefix}-labels-idx1-ubyte", (n,), labels)
    return root


@pytest.fixture(scope="module")
def mnist_root(tmp_path_factory):
    return str(_tiny_mnist(tmp_path_factory.mktemp("mnist")))


CONFIG = dict(model="mlp", optimizer="adam", scheduler="cosine", lr=3e-3, batch_size=32, epochs=2,
              train_size=320, test_size=100)  # 10 steps per epoch


def make_app(root, store=None):
    messages = []
    app = App(messages.append, device="cpu", store=store)
    wait(app.load_data(root))
    app.messages = messages
    return app


def interrupt_at(app, step, *, then="stop"):
    """Once, before training step `step` (counting from 0), the page sends Pause, then `then` happens ("stop":
    the tab is closed; "device-lost": the GPU goes away while paused)."""
    original = app.checkpoint
    fired = []

    async def checkpoint_hook():
        if app.run is not None and app.run.step == step and not fired:
            fired.append(step)
            app.receive({"type": "pause"})
            if then == "stop":
                app.receive({"type": "stop"})
            else:
                app.device_lost("destroyed: simulated")
        return await original()

    app.checkpoint = checkpoint_hook


def weights(app):
    return {k: v.tolist() for k, v in app.model.state_dict().items()}


async def serve_until(app, done, timeout_s=120):
    """App.serve() (which never ends) until done(messages) holds."""
    task = asyncio.ensure_future(app.serve())
    try:
        for _ in range(int(timeout_s / 0.01)):
            await asyncio.sleep(0.01)
            if done(app.messages):
                return
        raise AssertionError(f"timed out; messages: {[m['type'] for m in app.messages]}")
    finally:
        task.cancel()


@pytest.mark.parametrize("optimizer,scheduler", [("adam", "cosine"), ("sgd", "onecycle"), ("adamw", "step")])
def test_paused_reloaded_and_resumed_run_equals_the_uninterrupted_one(mnist_root, tmp_path, optimizer, scheduler):
    config = dict(CONFIG, optimizer=optimizer, scheduler=scheduler)
    reference = make_app(mnist_root)
    wg.manual_seed(0)
    wait(reference._train(config))
    assert reference.messages[-1]["outcome"] == "done"

    store = storage.FolderStore(tmp_path / "opfs")
    first = make_app(mnist_root, store)
    interrupt_at(first, 13)  # epoch 2, step 3: the epoch's order of samples must be drawn again
    wg.manual_seed(0)
    wait(first._train(config))
    assert first.messages[-1]["outcome"] == "stopped"
    saved = [m for m in first.messages if m["type"] == "checkpoint-saved"]
    assert [(m["summary"]["reason"], m["summary"]["step"]) for m in saved] == [("epoch", 10), ("pause", 13)]
    history = [p for p in first.checkpoints.history["loss"]]

    wg.manual_seed(1234)  # a reload: the generator starts elsewhere; the checkpoint brings its state back
    second = make_app(mnist_root, store)
    wait(second.checkpoints.offer())
    offer = second.messages[-1]
    assert offer["type"] == "checkpoint-offer" and offer["warning"] is None
    assert {k: offer["summary"][k] for k in ("model", "dataset", "epoch", "step_in_epoch", "step", "reason")} == \
        {"model": "MLP 784-128-10", "dataset": "MNIST", "epoch": 2, "step_in_epoch": 3, "step": 13, "reason": "pause"}
    second.messages.clear()
    wait(second.checkpoints.resume())
    state = second.messages[0]
    assert state["type"] == "state" and state["resumed"]["step"] == 13 \
        and state["config"] == train.check_config(config)  # the form's settings with their defaults filled in
    assert state["history"]["loss"] == history and len(state["history"]["accuracy"]) == 1
    reads = [m["global_step"] for m in second.messages if m["type"] == "progress" and "loss" in m]
    assert reads and reads[0] > 13 and reads[-1] == 20  # the curve goes on from the checkpoint's step
    assert second.messages[-1]["outcome"] == "done" and second.messages[-1]["steps"] == 20
    assert weights(second) == weights(reference)  # same samples, same optimizer and schedule: same bits
    assert second.run is None and wait(store.load()) == []  # a finished run leaves nothing to resume


def test_a_lost_device_resumes_from_the_last_checkpoint(mnist_root):
    reference = make_app(mnist_root)
    wg.manual_seed(0)
    wait(reference._train(CONFIG))

    app = make_app(mnist_root)  # no store: the copy in memory is what a lost device resumes from
    interrupt_at(app, 7, then="device-lost")
    wg.manual_seed(0)
    app.receive({"type": "train", "config": CONFIG})
    wait(serve_until(app, lambda msgs: any(m.get("outcome") == "done" for m in msgs)))
    kinds = [m["type"] for m in app.messages]
    assert "recovered" in kinds
    end = [m for m in app.messages if m["type"] == "run-end"]
    assert [m["outcome"] for m in end] == ["device-lost", "done"], end
    resumed = [m for m in app.messages if m.get("resumed")]
    assert len(resumed) == 1 and resumed[0]["resumed"]["step"] == 7
    assert "The GPU device was lost (destroyed: simulated)" in resumed[0]["resumed"]["message"]
    assert weights(app) == weights(reference)


def test_the_offer_falls_back_to_the_previous_checkpoint_and_keeps_the_damaged_one(mnist_root, tmp_path):
    store = storage.FolderStore(tmp_path / "opfs")
    app = make_app(mnist_root, store)
    interrupt_at(app, 13)
    wg.manual_seed(0)
    wait(app._train(CONFIG))
    newest = sorted((tmp_path / "opfs").iterdir())[-1]
    newest.write_bytes(_flip(newest.read_bytes(), 100))  # e.g. a disk error in the newest file

    again = make_app(mnist_root, store)
    wait(again.checkpoints.offer())
    offer = again.messages[-1]
    assert offer["type"] == "checkpoint-offer" and offer["summary"]["step"] == 10  # the epoch's checkpoint
    assert "newest checkpoint cannot be used" in offer["warning"] and "checksum" in offer["warning"]

    for path in (tmp_path / "opfs").iterdir():  # both damaged: refused, and still there
        path.write_bytes(path.read_bytes()[:-4])
    again.messages.clear()
    wait(again.checkpoints.offer())
    assert again.messages[-1]["type"] == "checkpoint-error"
    assert "cannot be used" in again.messages[-1]["message"] and "truncated" in again.messages[-1]["message"]
    wait(again.checkpoints.resume())
    assert again.messages[-1]["type"] == "checkpoint-error" and again.model is None
    assert len(wait(store.load())) == 2  # nothing deleted without the user's Discard

    wait(again.checkpoints.handle({"type": "discard-checkpoint"}))
    assert again.messages[-1]["type"] == "checkpoint-discarded" and wait(store.load()) == []


def test_a_checkpoint_of_other_settings_is_refused(mnist_root, tmp_path):
    # A checkpoint whose state does not fit the model its settings build (e.g. a file from another version)
    store = storage.FolderStore(tmp_path / "opfs")
    app = make_app(mnist_root, store)
    interrupt_at(app, 3)
    wg.manual_seed(0)
    wait(app._train(CONFIG))
    state, summary = checkpoint.unpack(wait(store.load())[0], "cpu")
    state["config"]["model"] = "cnn"
    wait(store.save(checkpoint.pack(state, summary)))
    model = app.model
    app.messages.clear()
    wait(app.checkpoints.resume())
    assert app.messages[-1]["type"] == "checkpoint-error"
    assert "does not fit the cnn model" in app.messages[-1]["message"] and "kept" in app.messages[-1]["message"]
    assert app.model is model and app.run is None

    state["config"]["epochs"] = 0  # settings the page refuses
    wait(store.discard())
    wait(store.save(checkpoint.pack(state, summary)))
    wait(app.checkpoints.resume())
    assert app.messages[-1]["type"] == "checkpoint-error" and app.messages[-1]["context"] == "resume"
    assert "its settings are not valid on this page (epochs: 0" in app.messages[-1]["message"]
    assert app.model is model and app.run is None


# ===================================================================== any model, any optimizer
OPTIMIZERS = [
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)), ("Adam", dict(lr=1e-2, amsgrad=True)),
    ("AdamW", dict(lr=1e-2)), ("Adamax", dict(lr=1e-2)), ("NAdam", dict(lr=1e-2)),
    ("RMSprop", dict(lr=1e-3, momentum=0.5)), ("Adagrad", dict(lr=1e-2)), ("Adadelta", dict(lr=1.0)),
]


@pytest.mark.parametrize("name,kwargs", OPTIMIZERS, ids=[n for n, _ in OPTIMIZERS])
def test_a_resnet_and_any_optimizer_round_trip(name, kwargs):
    # What the page will train beyond MNIST: a CIFAR ResNet (BatchNorm's running statistics and its integer
    # step counter are state too) with any optimizer and a schedule. Saved after 2 steps, put into a fresh
    # model and optimizer, both go on for 2 more steps: the same bits.
    from webgrad.examples.models import CifarResNet

    def build():
        model = CifarResNet(depth=8, width=4)
        opt = getattr(wg.optim, name)(model.parameters(), **kwargs)
        sched = wg.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        return model, opt, sched

    def step(model, opt, sched, seed):
        g = wg.Generator().manual_seed(seed)
        x, y = wg.randn(4, 3, 32, 32, generator=g), wg.randint(0, 10, (4,), generator=g)
        loss = wg.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()

    wg.manual_seed(0)
    model, opt, sched = build()
    for seed in (1, 2):
        step(model, opt, sched, seed)
    raw = checkpoint.pack({"model": model.state_dict(), "optimizer": opt.state_dict(),
                           "scheduler": sched.state_dict()}, {})
    state, _ = checkpoint.unpack(raw, "cpu")
    wg.manual_seed(99)
    model2, opt2, sched2 = build()
    model2.load_state_dict(state["model"])
    opt2.load_state_dict(state["optimizer"])
    sched2.load_state_dict(state["scheduler"])
    assert any("num_batches_tracked" in k for k in state["model"])
    for seed in (3, 4):
        step(model, opt, sched, seed)
        step(model2, opt2, sched2, seed)
    def values(m):
        return {k: v.tolist() for k, v in m.state_dict().items()}

    assert values(model2) == values(model)
    assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
