"""Model files: the page's export loads in the Python safetensors package and in PyTorch with
PyTorch's names; importing a file (the page's own, or one PyTorch wrote) gives the same predictions;
a wrong or corrupt file is refused with a message and the current model stays."""

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

import torch_models
from dashboard import accuracy, fill_form, grid_predictions, import_file, pick, start_training, wait_eval, wait_run_end

GRID = 48
MLP_SHAPES = {"1.weight": (128, 784), "1.bias": (128,), "3.weight": (10, 128), "3.bias": (10,)}  # 0 is Flatten
CNN_SHAPES = {"0.weight": (16, 1, 3, 3), "0.bias": (16,), "3.weight": (32, 16, 3, 3), "3.bias": (32,),
              "7.weight": (10, 1568), "7.bias": (10,)}


def torch_predictions(model, kind, n):
    x, y = torch_models.test_images(n)
    out = torch_models.logits(model, x)
    return out.argmax(1).tolist(), (out.argmax(1) == y).float().mean().item()


def open_fresh(page, server_url):
    """A second page: a new worker, a new Python, a new GPU device."""
    fresh = page.context.new_page()
    fresh.goto(server_url + "/")
    fresh.wait_for_function("document.body.dataset.app !== 'loading'", timeout=180_000)
    assert fresh.evaluate("document.body.dataset.app") == "ready"
    return fresh


def test_export_then_import_in_a_fresh_page(app_page, server_url, tmp_path):
    page = app_page
    start_training(page, model="mlp", optimizer="adam", lr=0.003, batch_size=64, epochs=1,
                   train_size=1280, test_size=200)
    assert wait_run_end(page) == "done"
    wait_eval(page)
    trained = grid_predictions(page)

    with page.expect_download() as download:
        page.click("#export")
    assert download.value.suggested_filename == "webgrad-mnist-mlp.safetensors"
    path = tmp_path / "exported.safetensors"
    download.value.save_as(path)
    assert "Exported" in page.inner_text("#file-status")

    # The Python safetensors package reads it, with PyTorch's names and shapes.
    tensors = load_file(str(path))
    assert {k: v.shape for k, v in tensors.items()} == MLP_SHAPES
    assert all(v.dtype == np.float32 and np.isfinite(v).all() for v in tensors.values())
    # PyTorch loads it (strict) and predicts what the page predicted.
    model = torch_models.build("mlp")
    model.load_state_dict({k: torch.from_numpy(v) for k, v in tensors.items()})
    assert torch_predictions(model, "mlp", GRID)[0] == trained

    fresh = open_fresh(page, server_url)
    fill_form(fresh, test_size=200)
    assert "Imported" in import_file(fresh, path)
    wait_eval(fresh)
    assert grid_predictions(fresh) == trained
    assert fresh.evaluate("document.body.dataset.model") == "mlp"
    fresh.close()


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_import_a_pytorch_model(app_page, torch_files, kind):
    page = app_page
    path, model = torch_files[kind]
    fill_form(page, test_size=500)
    text = import_file(page, path)
    assert "Imported" in text, text
    wait_eval(page)
    assert page.evaluate("document.body.dataset.model") == kind
    assert page.input_value("#f-model") == kind
    preds, acc = torch_predictions(model, kind, 500)
    assert grid_predictions(page) == preds[:GRID]
    # float32 on the GPU vs PyTorch on the CPU: at most a near-tie apart
    assert abs(accuracy(page) - acc) <= 1 / 500, (accuracy(page), acc)


def test_bad_files_keep_the_current_model(app_page, torch_files, tmp_path):
    page = app_page
    fill_form(page, test_size=100)
    assert "Imported" in import_file(page, torch_files["mlp"][0])
    wait_eval(page)
    grid = grid_predictions(page)
    before = pick(page, 0)
    assert before is not None and abs(sum(before) - 1) < 1e-5

    good = torch_files["mlp"][0].read_bytes()
    corrupt = tmp_path / "corrupt.safetensors"
    corrupt.write_bytes(bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8)))
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(good[: len(good) // 2])
    wrong = tmp_path / "wrong.safetensors"
    torch_models.save(torch.nn.Sequential(torch.nn.Linear(784, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)), wrong)

    for path, why in ((corrupt, "not a valid .safetensors file"), (truncated, "not a valid .safetensors file"),
                      (wrong, "fit no model")):
        text = import_file(page, path)
        assert "Import failed" in text and why in text, text
        assert "error" in page.get_attribute("#file-status", "class")
        assert page.evaluate("document.body.dataset.model") == "mlp"
        pick(page, 1)  # another digit first, so that the next answer is a new one
        np.testing.assert_allclose(pick(page, 0), before, rtol=1e-6, atol=1e-7)  # the same model answers
    assert grid_predictions(page) == grid


def _load_url(page, url):
    """Load a model through the page's "Load from URL" form; the status line once it has answered."""
    page.evaluate("document.getElementById('file-status').textContent = ''")
    page.fill("#model-url", url)
    page.click("#load-url")
    page.wait_for_function("/Imported|Import failed/.test(document.getElementById('file-status').textContent)",
                           timeout=60_000)
    return page.inner_text("#file-status")


def test_load_from_url(app_page, server_url, torch_files, tmp_path):
    """A good file from this server's URL, then a 404, a corrupt file and a wrong architecture: each refusal
    says why and the model loaded first keeps answering."""
    page = app_page
    good, model = torch_files["mlp"]
    wrong = tmp_path / "wrong.safetensors"
    torch_models.save(torch.nn.Sequential(torch.nn.Linear(784, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)), wrong)
    served = {"/models/good.safetensors": good.read_bytes(), "/models/wrong.safetensors": wrong.read_bytes(),
              "/models/corrupt.safetensors": bytes(range(256)) * 20}

    def serve(route):
        path = "/" + route.request.url.split("/", 3)[3]
        body = served.get(path)
        if body is None:
            route.fulfill(status=404, body="not found")
        else:
            route.fulfill(status=200, body=body, headers={"Content-Type": "application/octet-stream",
                                                          "Cross-Origin-Resource-Policy": "same-origin"})
    page.route("**/models/**", serve)

    fill_form(page, test_size=100)
    text = _load_url(page, server_url + "/models/good.safetensors")
    assert "Imported good.safetensors" in text, text
    wait_eval(page)
    assert page.evaluate("document.body.dataset.model") == "mlp"
    preds, _ = torch_predictions(model, "mlp", 100)
    assert grid_predictions(page) == preds[:GRID]
    before = pick(page, 0)

    for path, why in (("/models/missing.safetensors", "answered 404"),
                      ("/models/corrupt.safetensors", "not a valid .safetensors file"),
                      ("/models/wrong.safetensors", "fit no model")):
        text = _load_url(page, server_url + path)
        assert "Import failed" in text and why in text, text
        assert page.evaluate("document.body.dataset.model") == "mlp"
        pick(page, 1)
        np.testing.assert_allclose(pick(page, 0), before, rtol=1e-6, atol=1e-7)  # the same model answers
