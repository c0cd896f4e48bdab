"""The dashboard beyond MNIST, in headless Chromium (SwiftShader): CIFAR-format files written here (a
learnable synthetic class signal, tests/cifar_files.py) given through the file input train a ResNet-8 with
GPU augmentation far above chance; a folder of generated PNGs in 3 classes (mixed sizes, a non-image file)
trains through the folder input; bad input is refused with a message and the current data and model stay.
Screenshots of the CIFAR run go to artifacts/ (cifar-training.png, cifar-trained.png)."""

import re

import numpy as np
import pytest
from PIL import Image

from dashboard import accuracy, assert_accessible, data_answer, start_training, stat, wait_for_rate, wait_run_end
from tests.cifar_files import synthetic_images, write_cifar10, write_cifar100

APP_TIMEOUT_MS = 180_000
# ResNet-8 takes seconds per step on SwiftShader (a CPU; ~6 s at batch 16 on a loaded 2-core machine), so
# the run is 30 steps, not hundreds: the synthetic signal is learnt well above chance in that many.
CIFAR_RUN = dict(model="resnet8", optimizer="adam", lr=0.003, batch_size=16, epochs=1, scheduler="none",
                 train_size=480, test_size=200, crop_padding=4, flip_p=0.5, brightness=0.2, contrast=0.2,
                 erasing_p=0.25)


@pytest.fixture(scope="module")
def dash(module_page):
    """One page for the module (Python boots once): the trainer with MNIST on the GPU."""
    module_page.wait_for_function("document.body.dataset.app !== 'loading'", timeout=APP_TIMEOUT_MS)
    assert module_page.evaluate("document.body.dataset.app") == "ready"
    return module_page


def run_python(page, code):
    return page.evaluate("(code) => window.webgradRunPython(code)", code)


def pick(page, source):
    page.check(f'input[name="dataset"][value="{source}"]')


@pytest.fixture(scope="module")
def cifar(tmp_path_factory):
    root = tmp_path_factory.mktemp("cifar")
    write_cifar10(root, per_batch=100, test=200, seed=0)  # 500 training images
    return root / "cifar-10-batches-bin"


def png_folder(root, per_class=20, odd_sizes=3):
    """root/{blue,cyan,red}/*.png: the class colour of tests/cifar_files.py's palette (3: blue, 6: cyan, 0: red)
    with stripes and noise, 16x16 except `odd_sizes` blue images of 24x20; and a notes.txt, not an image."""
    rng = np.random.default_rng(0)
    for name, colour in (("blue", 3), ("cyan", 6), ("red", 0)):
        (root / name).mkdir(parents=True)
        x = synthetic_images(np.full(per_class, colour), rng, noise=20.0)
        for i in range(per_class):
            img = Image.fromarray(x[i].transpose(1, 2, 0)[:16, :16])
            if i < odd_sizes and name == "blue":
                img = img.resize((24, 20))
            img.save(root / name / f"{i:03d}.png")
    (root / "red" / "notes.txt").write_text("not an image")
    return root


def test_cifar10_files_train_resnet8_with_augmentation(dash, cifar, screenshot):
    page = dash
    pick(page, "cifar10")
    files = sorted(str(p) for p in cifar.iterdir())
    text = data_answer(page, lambda: page.set_input_files("#cifar-files", files))
    assert text.startswith("CIFAR-10: 500 training and 200 test images (3×32×32) on the GPU, 10 classes: airplane"), text
    assert page.evaluate("document.body.dataset.dataset") == "cifar10"
    assert page.locator("#draw").is_hidden()  # drawing digits is MNIST's
    # SwiftShader has no shader-f16: mixed precision is greyed out, with the reason
    assert page.is_disabled("#f-amp") and "no shader-f16" in page.inner_text("#amp-why")
    assert page.locator("#grid li").count() == 48 and page.locator("#per-class li").count() == 10
    run_python(page, "import webgrad; webgrad.manual_seed(0)")
    start_training(page, **CIFAR_RUN)  # 30 steps of 16, augmented on the GPU

    page.wait_for_function("Number(document.getElementById('loss-chart').dataset.points) >= 3", timeout=300_000)
    assert wait_for_rate(page) > 0
    gpu = stat(page, "gpu")  # SwiftShader has timestamp-query: GPU ms per step
    assert re.fullmatch(r"[\d.]+", gpu), (gpu, page.get_attribute("#stat-gpu", "title"))
    assert "ResNet-8 (3x32x32 -> 10 classes)" in page.inner_text("#run-message")
    screenshot(page, "cifar-training")

    assert wait_run_end(page) == "done", page.inner_text("#run-message")
    acc = accuracy(page)
    samples_per_s = int(stat(page, "rate").replace(",", ""))
    print(f"CIFAR ResNet-8 (augmented, batch 16, 30 steps): {acc:.1%} on 200 test images, "
          f"{samples_per_s} samples/s, GPU {stat(page, 'gpu')} ms/step (SwiftShader)")
    assert acc > 0.4, f"test accuracy {acc:.1%}; chance is 10%"
    names = page.eval_on_selector_all("#grid li .pred", "els => els.map((e) => e.textContent)")
    assert set(names) <= {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"}
    per_class = page.eval_on_selector_all("#per-class li", "els => els.map((e) => e.dataset.accuracy)")
    assert len(per_class) == 10 and all(v != "" for v in per_class)
    assert sum(page.eval_on_selector_all("#confusion tbody td", "els => els.map((e) => Number(e.textContent))")) == 200
    screenshot(page, "cifar-trained")


def test_image_folder_trains(dash, tmp_path, screenshot):
    page = dash
    folder = png_folder(tmp_path / "shapes")
    pick(page, "images")
    page.fill("#image-size", "16")
    text = data_answer(page, lambda: page.set_input_files("#image-folder", str(folder)))
    assert text.startswith("shapes: 48 training and 12 test images (3×16×16) on the GPU, 3 classes: blue, cyan, red."), text
    assert "1 file skipped (not images)" in text and "3 images of another size resized to 16x16" in text
    assert page.evaluate("document.body.dataset.model") == "none"  # the CIFAR model does not fit 3 classes
    # the subsets' fields show the folder's real size (and take no more)
    assert [page.input_value("#f-train-size"), page.input_value("#f-test-size")] == ["48", "12"]
    start_training(page, model="cnn", optimizer="adam", lr=0.003, batch_size=8, epochs=5, scheduler="none",
                   crop_padding=0, flip_p=0.5, brightness=0, contrast=0, erasing_p=0)
    assert wait_run_end(page) == "done", page.inner_text("#run-message")
    assert accuracy(page) > 0.8, stat(page, "accuracy")  # three colours; chance is a third
    assert page.locator("#confusion tbody tr").count() == 3
    assert page.eval_on_selector_all("#grid li", "els => els.length") == 12
    screenshot(page, "images-trained")


def test_bad_input_keeps_data_and_model(dash, tmp_path, cifar, screenshot):
    """Each bad input: a message, and the images folder's data and model of the test before stay."""
    page = dash
    if page.evaluate("document.body.dataset.dataset") != "images":
        test_image_folder_trains(page, tmp_path / "first", screenshot)
    model = page.evaluate("document.body.dataset.model")
    assert model == "cnn"

    def refused(source, files, *fragments):
        pick(page, source)
        input_id = "#cifar-files" if source == "cifar10" else "#image-folder"
        text = data_answer(page, lambda: page.set_input_files(input_id, files))
        assert text.startswith("Not loaded, the current data (your images) stays: "), text
        for fragment in fragments:
            assert fragment in text, text
        assert page.evaluate("document.body.dataset.dataset") == "images"
        assert page.evaluate("document.body.dataset.model") == model

    # CIFAR-10: a truncated batch; a file that is not a CIFAR batch; a corrupt tarball
    bad = tmp_path / "bad"
    bad.mkdir()
    for p in cifar.iterdir():
        (bad / p.name).write_bytes(p.read_bytes())
    (bad / "data_batch_2.bin").write_bytes((cifar / "data_batch_2.bin").read_bytes()[:-1000])
    refused("cifar10", sorted(str(p) for p in bad.iterdir()), "data_batch_2.bin", "truncated")
    (bad / "data_batch_2.bin").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 100)
    refused("cifar10", sorted(str(p) for p in bad.iterdir()), "data_batch_2.bin", "not a CIFAR binary batch")
    tarball = tmp_path / "cifar-10-binary.tar.gz"
    tarball.write_bytes(b"\x1f\x8b\x08\x00" + b"garbage" * 50)
    refused("cifar10", [str(tarball)], "not a readable tar archive")
    # a folder of one class
    one = tmp_path / "one" / "cats"
    one.mkdir(parents=True)
    Image.new("RGB", (8, 8), (200, 10, 10)).save(one / "a.png")
    refused("images", str(one.parent), "found 1 class folder (cats)", "at least 2")
    # too large for one GPU buffer (SwiftShader: 1 GiB): 90 images at 2048x2048 need 1.05 GiB
    big = tmp_path / "big"
    for name in ("a", "b", "c"):
        (big / name).mkdir(parents=True)
        for i in range(30):
            Image.new("RGB", (4, 4), (i, 0, 0)).save(big / name / f"{i}.png")
    page.fill("#image-size", "2048")
    refused("images", str(big), "too large for this GPU", "need 1.05 GiB", "at most 1.00 GiB per buffer")
    screenshot(page, "data-too-large")
    page.fill("#image-size", "32")
    page.set_viewport_size({"width": 420, "height": 900})  # a narrow window: the data card stacks above the form
    page.wait_for_timeout(1000)  # headless Chromium repaints the re-laid-out page lazily
    screenshot(page, "datasets-narrow")


def test_cifar100_files_load_through_the_picker(dash, tmp_path, screenshot):
    page = dash
    folder = write_cifar100(tmp_path)
    pick(page, "cifar100")
    assert page.inner_text("#cifar-pick label.button") == "Choose CIFAR-100 files…"
    text = data_answer(page, lambda: page.set_input_files("#cifar-files", sorted(str(p) for p in folder.iterdir())))
    assert text == "CIFAR-100: 120 training and 60 test images (3×32×32) on the GPU, 100 classes.", text
    assert page.evaluate("document.body.dataset.dataset") == "cifar100"
    # the subsets' fields show this small dataset's real size; a class per line of the accuracy list
    assert [page.input_value("#f-train-size"), page.input_value("#f-test-size")] == ["120", "60"]
    assert page.locator("#per-class li").count() == 100 and page.is_hidden("#confusion")
    assert page.inner_text("#per-class li:nth-child(8) .name") == "thing7"
    assert_accessible(page, "CIFAR-100 loaded")
    screenshot(page, "cifar100-loaded")
