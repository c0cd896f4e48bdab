"""The dashboard's datasets and models beyond MNIST (webgrad.apps.mnist in CPython, on the CPU): CIFAR-10
from the user's files, "your images", the model picker, augmentation, and bad input that leaves the current
data and model as they were. The page runs the same code on WebGPU (e2e/test_page_datasets_browser.py)."""

import asyncio
import concurrent.futures
import os

import numpy as np
import pytest

import webgrad as wg
from webgrad.apps.mnist import App, data as page_data, train

from cifar_files import synthetic_images, write_cifar10, write_cifar100

CONFIG = dict(model="resnet8", optimizer="adam", scheduler="none", lr=3e-3, batch_size=16, epochs=1,
              train_size=60000, test_size=10000, crop_padding=2, flip_p=0.5, brightness=0.2, contrast=0.2,
              erasing_p=0.25)


def wait(coro):
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@pytest.fixture
def app():
    messages = []
    app = App(messages.append, device="cpu")
    app.messages = messages
    return app


def last(app, kind):
    return [m for m in app.messages if m["type"] == kind][-1]


def images_message(per_class=6, classes=("red", "green", "blue"), size=16, seed=0):
    """What the worker sends for a decoded folder: planar RGB bytes, one label byte per image."""
    labels = [k for k in range(len(classes)) for _ in range(per_class)]
    rng = np.random.default_rng(seed)
    x = synthetic_images(np.array(labels) * 3, rng, noise=10.0)[:, :, :size, :size]
    return {"type": "dataset", "source": "images", "pixels": x.tobytes(), "labels": bytes(labels),
            "classes": list(classes), "size": size, "skipped": 2, "resized": 1, "name": "shapes"}


def test_cifar10_files_train_a_resnet8_with_augmentation(app, tmp_path):
    write_cifar10(tmp_path, per_batch=32, test=100, seed=0)
    wait(app._dataset({"type": "dataset", "source": "cifar10", "root": str(tmp_path)}))
    data = last(app, "data")
    assert (data["name"], data["channels"], data["height"], data["train_size"], data["test_size"]) == \
        ("cifar10", 3, 32, 160, 100)
    assert data["classes"][:2] == ["airplane", "automobile"] and len(data["grid_pixels"]) == 48 * 3072
    wg.manual_seed(0)
    wait(app._train(dict(CONFIG)))
    end = last(app, "run-end")
    assert end["outcome"] == "done", end
    assert last(app, "state")["model"] == "ResNet-8 (3x32x32 -> 10 classes)"
    ev = last(app, "eval")
    assert len(ev["confusion"]) == 10 and sum(map(sum, ev["confusion"])) == 100
    assert ev["accuracy"] > 0.3, ev["accuracy"]  # 10 steps of 16; chance is 0.1
    assert "gpu_ms" in last(app, "progress") and last(app, "progress")["gpu_timer"]


def test_cifar100_files_give_100_classes(app, tmp_path):
    write_cifar100(tmp_path)
    wait(app._dataset({"type": "dataset", "source": "cifar100", "root": str(tmp_path)}))
    data = last(app, "data")
    assert (data["name"], data["label"], data["train_size"], data["test_size"]) == ("cifar100", "CIFAR-100", 120, 60)
    assert len(data["classes"]) == 100 and data["classes"][7] == "thing7"
    wait(app._train(dict(CONFIG, batch_size=16, epochs=1, train_size=60000, test_size=10000)))
    assert last(app, "run-end")["outcome"] == "done" and len(last(app, "eval")["confusion"]) == 100
    assert last(app, "state")["model"] == "ResNet-8 (3x32x32 -> 100 classes)"
    # files of CIFAR-10 chosen as CIFAR-100: refused, the data stays
    wait(app._dataset({"type": "dataset", "source": "cifar100", "root": str(tmp_path / "none")}))
    assert last(app, "data-error")["message"].startswith("CIFAR-100: ") and app.data.name == "cifar100"


@pytest.mark.parametrize("model", ["mlp", "cnn", "resnet8", "resnet18"])
def test_every_model_takes_the_folder_s_size_and_classes(app, model):
    wait(app._dataset(images_message()))
    data = last(app, "data")
    assert data["classes"] == ["red", "green", "blue"] and data["notes"] == \
        "2 files skipped (not images); 1 image of another size resized to 16x16"
    assert (data["train_size"], data["test_size"]) == (15, 3)  # one of each class held out
    wait(app._train(dict(CONFIG, model=model, batch_size=5, train_size=100, test_size=100,
                         erasing_p=0.0 if model == "resnet18" else 0.25)))
    assert last(app, "run-end")["outcome"] == "done", last(app, "run-end")
    assert len(last(app, "eval")["confusion"]) == 3
    assert last(app, "eval")["test_size"] == 3


def test_bad_input_keeps_the_data_and_the_model(app, tmp_path, monkeypatch):
    wait(app._dataset(images_message()))
    wait(app._train(dict(CONFIG, model="mlp", batch_size=5, train_size=100, test_size=100)))
    data, model = app.data, app.model

    def refused(msg, *fragments):
        app.messages.clear()
        wait(app._dataset(msg))
        assert [m["type"] for m in app.messages] == ["data-error"], app.messages
        for fragment in fragments:
            assert fragment in app.messages[0]["message"], app.messages[0]["message"]
        assert app.data is data and app.model is model

    # a truncated CIFAR batch; a file that is not one
    write_cifar10(tmp_path, per_batch=8, test=10)
    batch = tmp_path / "cifar-10-batches-bin" / "data_batch_3.bin"
    batch.write_bytes(batch.read_bytes()[:-100])
    refused({"source": "cifar10", "root": str(tmp_path)}, "CIFAR-10:", "data_batch_3.bin", "truncated")
    batch.write_bytes(b"not CIFAR at all")
    refused({"source": "cifar10", "root": str(tmp_path)}, "data_batch_3.bin", "not a CIFAR binary batch")
    refused({"source": "cifar10", "root": str(tmp_path / "empty")}, "not found under the files you chose")
    # one class; a class with no image
    one = images_message(classes=("only",))
    refused(one, "found 1 class folder (only)", "at least 2")
    empty = images_message()
    empty["labels"] = bytes(min(b, 1) for b in empty["labels"])
    refused(empty, "no image in the class folder(s) blue")
    # larger than one GPU buffer may hold
    monkeypatch.setattr(page_data, "buffer_limit", lambda device: 4096)
    refused(images_message(), "too large for this GPU", "need 13.5 KiB", "at most 4.0 KiB per buffer")


def test_mixed_precision_is_refused_with_the_reason(app):
    wait(app._dataset(images_message()))
    wait(app._train(dict(CONFIG, model="mlp", batch_size=5, amp=True)))
    end = last(app, "run-end")
    assert end["outcome"] == "invalid" and end["message"].startswith("Mixed precision: ")
    assert train.amp_unavailable("cpu") in end["message"]


@pytest.mark.parametrize("field,value", [("crop_padding", 17), ("crop_padding", 1.5), ("flip_p", 1.5),
                                         ("erasing_p", -0.1), ("brightness", "0.2"), ("amp", 1)])
def test_bad_augmentation_settings_name_the_field(field, value):
    with pytest.raises(ValueError, match=f"^{field}:"):
        train.check_config(dict(CONFIG, **{field: value}))
