"""The JupyterLite notebooks (notebooks/), offline, in headless Chromium with WebGPU (SwiftShader).

The site is built first when needed (tools/lite.py: a no-op when its inputs are unchanged, ~20 s from a
clean checkout) and served by serve.py at /lite/. Each shipped notebook is opened in the notebooks
app and run cell by cell through the app's own command (window.jupyterapp, exposed by the build),
with a timeout per cell; outputs are read from the notebook model, and an error output fails the
test with its traceback. The `page` fixture (conftest.py) fails a test on any request to a host
other than 127.0.0.1, including the kernel worker's.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from tools import bootstrap, lite

# as in e2e/conftest.py, which cannot be imported by name: tests/ has a conftest.py too
ARTIFACTS = bootstrap.ROOT / "artifacts"

UI_TIMEOUT_MS = 120_000  # the JupyterLab UI loads in ~4 s here; a cold, loaded machine is slower
CELL_TIMEOUT_S = 180  # the first code cell boots the kernel (~20 s) and installs webgrad
TRAINING_CELL_TIMEOUT_S = 900  # an MNIST training cell on SwiftShader: ~1-2 min here, more under load
ANSI = re.compile(r"\x1b\[[0-9;]*m")

# Simulates a browser without JSPI: Python can no longer block on a JavaScript promise, as in Firefox
# or Safari today. webgrad must then never block (it raises instead), and the notebooks' async
# read-backs must carry them through.
NO_JSPI = """\
import pyodide.ffi

def _no_jspi(*args, **kwargs):
    raise RuntimeError("simulated browser without JSPI: cannot block on a promise")

pyodide.ffi.can_run_sync = lambda: False
pyodide.ffi.run_sync = _no_jspi"""

START_CELL = """(index) => {
    const app = window.jupyterapp, panel = app.shell.currentWidget;
    window.__cellRun = { index, done: false, error: null };
    panel.sessionContext.ready
        .then(() => { panel.content.activeCellIndex = index; return app.commands.execute("notebook:run-cell"); })
        .then(() => { window.__cellRun.done = true; },
              (e) => { window.__cellRun.error = String(e && e.stack || e); window.__cellRun.done = true; });
}"""


@pytest.fixture(scope="module")
def lite_site():
    return lite.build()


def open_notebook(page, server_url, name):
    page.goto(f"{server_url}/lite/notebooks/index.html?path={name}")
    page.wait_for_function(
        "() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
        " return !!(w && w.context && w.context.isReady && w.content.widgets.length); }",
        timeout=UI_TIMEOUT_MS,
    )


def cells(page):
    return page.evaluate("() => window.jupyterapp.shell.currentWidget.content.model.toJSON().cells")


def insert_cell(page, index, source):
    page.evaluate("""([index, source]) => window.jupyterapp.shell.currentWidget.content.model.sharedModel
                     .insertCell(index, { cell_type: "code", source })""", [index, source])


def start_cell(page, index):
    page.evaluate(START_CELL, index)


def finish_cell(page, index, timeout_s, allow_error=False):
    """Wait for the running cell; returns its outputs' text (streams, results, errors)."""
    try:
        page.wait_for_function("() => window.__cellRun.done", timeout=timeout_s * 1000, polling=250)
    except PlaywrightTimeoutError:  # say which cell hung, and what it had printed so far
        pytest.fail(f"cell {index} did not finish in {timeout_s} s; its outputs so far:\n{output_text(cells(page)[index])}")
    error = page.evaluate("window.__cellRun.error")
    assert error is None, f"running cell {index} failed in the page: {error}"
    cell = cells(page)[index]
    errors = [o for o in cell.get("outputs", []) if o["output_type"] == "error"]
    if errors and not allow_error:
        source = "".join(cell["source"])
        tb = ANSI.sub("", "\n".join(errors[0]["traceback"]))
        pytest.fail(f"cell {index} raised {errors[0]['ename']}: {errors[0]['evalue']}\n--- source:\n{source}\n--- traceback:\n{tb}")
    return output_text(cell)


def run_cell(page, index, timeout_s=CELL_TIMEOUT_S, allow_error=False):
    start_cell(page, index)
    return finish_cell(page, index, timeout_s, allow_error)


def output_text(cell):
    parts = []
    for o in cell.get("outputs", []):
        if o["output_type"] == "stream":
            parts.append("".join(o["text"]))
        elif o["output_type"] == "error":
            parts.append(f"{o['ename']}: {o['evalue']}")
        elif "text/plain" in o.get("data", {}):
            parts.append("".join(o["data"]["text/plain"]))
    return ANSI.sub("", "\n".join(parts))


def run_cells(page, indices, timeouts=None):
    """Run the cells at `indices` in order; returns {index: output text}. `timeouts` maps a piece of
    a cell's source to that cell's timeout (default CELL_TIMEOUT_S)."""
    sources = ["".join(c["source"]) for c in cells(page)]
    out = {}
    for i in indices:
        timeout = next((t for marker, t in (timeouts or {}).items() if marker in sources[i]), CELL_TIMEOUT_S)
        out[i] = run_cell(page, i, timeout)
    return out


def run_all(page):
    return run_cells(page, range(len(cells(page))))


def percent(pattern, text):
    match = re.search(pattern + r"\s*([\d.]+)%", text)
    assert match, f"no {pattern!r} in the output:\n{text}"
    return float(match.group(1)) / 100


def test_dashboard_links_to_the_notebooks(lite_site, page, server_url):
    """The dashboard's link opens JupyterLab (/lite/), offline, with the four notebooks."""
    page.goto(f"{server_url}/")
    page.click("#notebooks-link")
    page.wait_for_url(f"{server_url}/lite/**", timeout=UI_TIMEOUT_MS)
    page.wait_for_function("() => window.jupyterapp && document.querySelectorAll('.jp-DirListing-item').length >= 4",
                           timeout=UI_TIMEOUT_MS)
    names = page.eval_on_selector_all(".jp-DirListing-itemText", "els => els.map((e) => e.textContent.trim())")
    for name in ("01-quickstart.ipynb", "02-train-mnist.ipynb", "03-custom-kernel.ipynb", "04-gpt-from-scratch.ipynb"):
        assert name in names, names
    # served without COOP/COEP (serve.NOT_ISOLATED says why): its kernel keeps its service-worker bridge
    assert page.evaluate("crossOriginIsolated") is False


@pytest.mark.parametrize("jspi", [True, False], ids=["jspi", "no-jspi"])
def test_quickstart(lite_site, page, server_url, jspi):
    open_notebook(page, server_url, "01-quickstart.ipynb")
    if not jspi:
        insert_cell(page, 0, NO_JSPI)
    outputs = run_all(page)
    text = "\n".join(outputs.values())
    assert "adapter: google swiftshader" in text
    assert f"Python can block on the GPU here (JSPI): {jspi}" in text
    assert "[[3.0, 0.0, 7.0], [0.0, 11.0, 0.0]]" in text
    assert ("tensor([[ 3.,  0.,  7.]," in text) == jspi  # print(tensor) reads synchronously: JSPI only
    errors = [float(e) for e in re.findall(r"max \|autograd - finite differences\| = ([\d.e+-]+)", text)]
    assert len(errors) == 2 and max(errors) < 1e-3, text
    assert "gradient check PASSED" in text
    assert "learned weights: [2.0, -3.0, 0.5]  bias: 1.0" in text

    if jspi:
        # Offline, NumPy is not installable: piplite says so at once (no request leaves the machine,
        # no hang), and webgrad, which does not need NumPy, keeps working in the same kernel.
        n = len(cells(page))
        insert_cell(page, n, "%pip install numpy")
        message = run_cell(page, n, allow_error=True)
        assert "numpy could not be installed" in message and "PyPI fallback is disabled" in message, message
        insert_cell(page, n + 1, "print(await (wg.ones(3) * 2).tolist_async())")
        assert run_cell(page, n + 1).strip() == "[2.0, 2.0, 2.0]"


# A PyTorch-style training loop, as a user pastes it from a tutorial: only the first two lines are webgrad's.
AS_TORCH_CELL = """\
import webgrad
webgrad.as_torch()
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else "cpu"
print(f"Using {device} device")
torch.manual_seed(0)
X = torch.randn(256, 2)
y = ((X[:, 0] * X[:, 1]) > 0).long()  # the quadrant's sign: not linearly separable
loader = DataLoader(TensorDataset(X, y), batch_size=32, shuffle=True)
model = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
for epoch in range(20):
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        loss = F.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
with torch.no_grad():
    accuracy = (model(X.to(device)).argmax(1) == y.to(device)).float().mean().item()
print(f"loss {loss.item():.4f}, accuracy {accuracy:.3f}")"""


# torchvision as image scripts import it: in Pyodide there is none, so as_torch() answers with webgrad.vision
TORCHVISION_CELL = """\
import torchvision
from torchvision import transforms, models
from torch.utils.data import DataLoader
augment = transforms.Compose([transforms.Resize(40), transforms.RandomResizedCrop(32),
                              transforms.RandomHorizontalFlip(), transforms.ToTensor(),
                              transforms.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))])
data = torchvision.datasets.FakeData(size=8, image_size=(3, 48, 48), num_classes=10, transform=augment)
images, labels = next(iter(DataLoader(data, batch_size=4)))
net = models.resnet18(num_classes=10).to(device).eval()
with torch.no_grad():
    logits = net(images.to(device))
grid = torchvision.utils.make_grid(images, nrow=2)
print(torchvision.__name__, tuple(images.shape), tuple(logits.shape), tuple(grid.shape), logits.device.type)"""


def test_a_pytorch_cell_runs_under_as_torch(lite_site, page, server_url):
    """issue 13: after webgrad.as_torch(), a cell written for PyTorch trains on WebGPU in the notebook; a
    torchvision cell (datasets, transforms, models, utils) runs on webgrad.vision without NumPy or Pillow."""
    open_notebook(page, server_url, "01-quickstart.ipynb")
    run_cell(page, 1)  # %pip install webgrad
    n = len(cells(page))
    insert_cell(page, n, AS_TORCH_CELL)
    text = run_cell(page, n, timeout_s=600)
    assert "Using webgpu device" in text, text
    accuracy = float(re.search(r"accuracy ([\d.]+)", text).group(1))
    assert accuracy > 0.9, text
    insert_cell(page, n + 1, TORCHVISION_CELL)
    text = run_cell(page, n + 1, timeout_s=600)
    assert "webgrad.vision (4, 3, 32, 32) (4, 10) (3, 70, 70) webgpu" in text, text


def test_custom_kernel(lite_site, page, server_url):
    open_notebook(page, server_url, "03-custom-kernel.ipynb")
    text = "\n".join(run_all(page).values())
    forward = float(re.search(r"forward: max \|GPU - CPU reference\| = ([\d.e+-]+)", text).group(1))
    backward = float(re.search(r"backward: max \|GPU - CPU reference\| = ([\d.e+-]+)", text).group(1))
    assert forward < 1e-5 and backward < 1e-4, text
    assert "custom op matches its CPU reference: PASSED" in text
    assert percent("accuracy on the rings with the custom activation:", text) > 0.95
    assert int(re.search(r"\((\d+) replayed steps\)", text).group(1)) == 148  # the custom op was captured


def test_train_mnist(lite_site, page, server_url, screenshot):
    open_notebook(page, server_url, "02-train-mnist.ipynb")
    sources = ["".join(c["source"]) for c in cells(page)]
    mlp_cell = next(i for i, s in enumerate(sources) if "train_model(mlp()" in s)
    text = "\n".join(run_cells(page, range(mlp_cell)).values())
    assert "software GPU: MLP on 25,600 digits, CNN on 1,024" in text  # SwiftShader: the subset sizes
    assert "60,000 training and 10,000 test digits on webgpu" in text

    # The chart and the progress bar must move while the cell is still running (live output).
    start_cell(page, mlp_cell)
    page.wait_for_function("() => { const c = document.querySelector('svg.webgrad-chart');"
                           " return c && Number(c.dataset.points) >= 3; }",
                           timeout=TRAINING_CELL_TIMEOUT_S * 1000, polling=250)
    done_mid_run = page.evaluate("Number(document.querySelector('.webgrad-progress').dataset.done)")
    assert not page.evaluate("window.__cellRun.done"), "the chart only filled once training had ended"
    assert 0 < done_mid_run < 200
    text = finish_cell(page, mlp_cell, TRAINING_CELL_TIMEOUT_S)
    text += "\n".join(run_cells(page, range(mlp_cell + 1, len(sources)),
                                {"train_model(cnn()": TRAINING_CELL_TIMEOUT_S}).values())

    mlp_accuracy = percent("MLP test accuracy:", text)
    cnn_accuracy = percent("CNN test accuracy:", text)
    print(f"MNIST notebook: MLP {mlp_accuracy:.2%} on 2,000 test digits, CNN {cnn_accuracy:.2%} on 500")
    assert mlp_accuracy >= 0.90
    assert cnn_accuracy >= 0.60  # 16 steps only on SwiftShader (~80%): chance is 10%
    # One loss point every 5 steps of the MLP's 200 and every 2 of the CNN's 16.
    points = page.eval_on_selector_all("svg.webgrad-chart", "els => els.map((e) => Number(e.dataset.points))")
    assert points == [40, 8], points
    assert page.eval_on_selector_all(".webgrad-progress", "els => els.map((e) => e.dataset.done)") == ["200", "16"]
    correct = page.eval_on_selector_all(".webgrad-digit", "els => els.map((e) => Number(e.dataset.correct))")
    assert len(correct) == 60 and sum(correct[:30]) >= 24, correct  # two grids of 30; the MLP's mostly right

    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(".jp-Notebook .jp-Cell").nth(mlp_cell).screenshot(path=str(ARTIFACTS / "jupyterlite-mnist-mlp.png"))
    # The whole notebook in one picture: JupyterLab scrolls inside the page, so grow the viewport to it.
    height = page.evaluate("document.querySelector('.jp-WindowedPanel-outer').scrollHeight")
    page.set_viewport_size({"width": 1280, "height": min(height + 160, 12_000)})
    page.wait_for_timeout(500)
    screenshot(page, "jupyterlite-mnist")


def test_gpt_from_scratch(lite_site, page, server_url, screenshot):
    """A character-level GPT trains on the bundled Shakespeare on SwiftShader, its loss goes below the text's unigram
    entropy, it samples with the KV cache (streamed) and from a prompt, and its state_dict is saved."""
    open_notebook(page, server_url, "04-gpt-from-scratch.ipynb")
    text = "\n".join(run_cells(page, range(len(cells(page))), {"train_step(*get_batch": TRAINING_CELL_TIMEOUT_S,
                                                                 "model.stream(": TRAINING_CELL_TIMEOUT_S}).values())
    entropy = float(re.search(r"unigram entropy ([\d.]+) nats per character", text).group(1))
    loss = float(re.search(r"final training loss ([\d.]+), validation loss ([\d.]+)", text).group(1))
    print(f"GPT notebook: training loss {loss:.3f} against the unigram entropy {entropy:.3f}")
    assert 3.0 < entropy < 3.3 and loss < entropy - 0.3, text
    assert "103,936 parameters" in text  # the software GPU's model: 2 blocks of width 64
    sample = text[text.index("HAMLET:\n"):]
    assert len(sample) > 300 and "JULIET:\n" in sample, text
    points = page.eval_on_selector_all("svg.webgrad-chart", "els => els.map((e) => Number(e.dataset.points))")
    assert points == [15 + 2], points  # a loss every 10 of the 150 steps, and the entropy's two ends
    assert "lm_head.weight" in text
    height = page.evaluate("document.querySelector('.jp-WindowedPanel-outer').scrollHeight")
    page.set_viewport_size({"width": 1280, "height": min(height + 160, 12_000)})
    page.wait_for_timeout(500)
    screenshot(page, "jupyterlite-gpt")
