"""CIFAR-10/100 and ImageFolder datasets (webgrad.datasets), on files the tests write themselves."""

import os
import pickle
import subprocess
import sys
import tarfile

import numpy as np
import pytest

import webgrad as wg
from webgrad.datasets import CIFAR10, CIFAR100, ImageFolder
from webgrad.datasets import unpickle

from cifar_files import binary_records, synthetic_images, write_cifar10
from helpers import PACKAGE_DIR, DEVICES


def _record(label, pixel):
    """One CIFAR-10 binary record, byte by byte: the label, then pixel(c, y, x) for c, y, x in order."""
    return bytes([label]) + bytes(pixel(c, y, x) for c in range(3) for y in range(32) for x in range(32))


def _pixel(c, y, x):
    return (c * 85 + y * 7 + x) % 256


# ---------------------------------------------------------------------------------------------- the format
@pytest.mark.parametrize("device", DEVICES)
def test_binary_format_byte_by_byte(tmp_path, device):
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    for b in range(1, 6):
        (folder / f"data_batch_{b}.bin").write_bytes(_record(b, _pixel) + _record(9 - b, lambda c, y, x: 255 - _pixel(c, y, x)))
    (folder / "test_batch.bin").write_bytes(_record(3, _pixel))
    train = CIFAR10(tmp_path, train=True, device=device)
    assert len(train) == 10 and train.data.shape == (10, 3, 32, 32) and train.data.dtype is wg.uint8
    assert train.targets.tolist() == [1, 8, 2, 7, 3, 6, 4, 5, 5, 4] and train.targets.dtype is wg.int32
    data = train.data.to("cpu").numpy()
    assert data[0, 0, 0, :4].tolist() == [0, 1, 2, 3]          # the red plane comes first, row by row
    assert data[0, 1, 2, 5] == (85 + 14 + 5) and data[0, 2, 31, 31] == (170 + 217 + 31) % 256
    assert data[1, 1, 2, 5] == 255 - (85 + 14 + 5)
    image, label = train[2]
    assert label == 2 and image.shape == (3, 32, 32) and image.dtype is wg.float32
    np.testing.assert_allclose(image.to("cpu").numpy(), data[2] / 255.0, rtol=1e-6)
    test = CIFAR10(tmp_path / "cifar-10-batches-bin", train=False, device=device)  # the folder itself works too
    assert len(test) == 1 and test[0][1] == 3 and test.classes[3] == "cat"


def test_truncated_and_corrupt_files_name_the_file(tmp_path):
    write_cifar10(tmp_path, per_batch=4, test=4)
    path = tmp_path / "cifar-10-batches-bin" / "data_batch_3.bin"
    raw = path.read_bytes()
    path.write_bytes(raw[:-100])
    with pytest.raises(ValueError, match=rf"data_batch_3\.bin: {len(raw) - 100} bytes is not a whole number of "
                                         r"3073-byte records .*3 records and 2973 bytes over.*truncated"):
        CIFAR10(tmp_path)
    path.write_bytes(b"")
    with pytest.raises(ValueError, match=r"data_batch_3\.bin: 0 bytes"):
        CIFAR10(tmp_path)
    path.write_bytes(bytes([12]) + raw[1:])  # a label that no CIFAR-10 class has
    with pytest.raises(ValueError, match=r"data_batch_3\.bin: label 12 at record 0.*below 10"):
        CIFAR10(tmp_path)
    path.unlink()
    with pytest.raises(FileNotFoundError, match=r"data_batch_3\.bin not found"):
        CIFAR10(tmp_path)
    CIFAR10(tmp_path, train=False)  # the test split does not need it


def test_missing_dataset_and_download(tmp_path):
    with pytest.raises(FileNotFoundError, match="cifar-10-batches-bin/ or cifar-10-binary.tar.gz"):
        CIFAR10(tmp_path)
    with pytest.raises(FileNotFoundError, match="download=True cannot help: webgrad never downloads"):
        CIFAR10(tmp_path, download=True)


def test_tarball_as_downloaded(tmp_path):
    train_x, train_y, _, _ = write_cifar10(tmp_path / "src", per_batch=3, test=2)
    with tarfile.open(tmp_path / "cifar-10-binary.tar.gz", "w:gz") as t:
        t.add(tmp_path / "src" / "cifar-10-batches-bin", arcname="cifar-10-batches-bin")
    ds = CIFAR10(tmp_path / "cifar-10-binary.tar.gz")
    np.testing.assert_array_equal(ds.data.numpy(), train_x)
    assert ds.targets.tolist() == train_y.tolist()
    (tmp_path / "cut.tar.gz").write_bytes((tmp_path / "cifar-10-binary.tar.gz").read_bytes()[:500])
    (tmp_path / "cut").mkdir()
    os.replace(tmp_path / "cut.tar.gz", tmp_path / "cut" / "cifar-10-binary.tar.gz")
    with pytest.raises(ValueError, match="cifar-10-binary.tar.gz: not a readable tar archive, or truncated"):
        CIFAR10(tmp_path / "cut")


def test_python_version_matches_binary(tmp_path):
    train_x, train_y, test_x, test_y = write_cifar10(tmp_path, per_batch=5, test=7, kind="python")
    with open(tmp_path / "cifar-10-batches-py" / "batches.meta", "wb") as f:
        pickle.dump({"label_names": [f"c{i}" for i in range(10)], "num_vis": 3072}, f, protocol=2)
    ds = CIFAR10(tmp_path)
    assert ds.format == "python" and ds.classes[4] == "c4"
    np.testing.assert_array_equal(ds.data.numpy(), train_x)
    assert ds.targets.tolist() == train_y.tolist()
    test = CIFAR10(tmp_path, train=False)
    np.testing.assert_array_equal(test.data.numpy(), test_x)
    # a pickle of the newest protocol (NumPy 2's _frombuffer) reads the same
    with open(tmp_path / "cifar-10-batches-py" / "test_batch", "wb") as f:
        pickle.dump({"data": test_x.reshape(-1, 3072), "labels": test_y.tolist()}, f, protocol=5)
    np.testing.assert_array_equal(CIFAR10(tmp_path, train=False).data.numpy(), test_x)


class _Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_restricted_unpickler_refuses_code(tmp_path):
    marker = tmp_path / "pwned"
    evil = pickle.dumps({"data": _Evil(marker), "labels": [0]}, protocol=2)
    with pytest.raises(pickle.UnpicklingError, match=r"refused to load global (posix|os)\.system"):
        unpickle.loads(evil, "evil")
    assert not marker.exists()
    # the same inside a dataset folder: the error names the file, and nothing ran
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    (folder / "test_batch").write_bytes(evil)
    with pytest.raises(pickle.UnpicklingError, match=r"test_batch: refused to load global"):
        CIFAR10(tmp_path, train=False)
    assert not marker.exists()
    for name in ("builtins.eval", "subprocess.Popen"):
        module, attr = name.split(".")
        raw = b"\x80\x02c" + module.encode() + b"\n" + attr.encode() + b"\n."
        with pytest.raises(pickle.UnpicklingError, match=rf"refused to load global {name}"):
            unpickle.loads(raw, "x")
    (folder / "test_batch").write_bytes(evil[:20])
    with pytest.raises((ValueError, pickle.UnpicklingError), match="test_batch"):
        CIFAR10(tmp_path, train=False)


@pytest.mark.parametrize("device", DEVICES)
def test_cifar100_fine_and_coarse(tmp_path, device):
    rng = np.random.default_rng(1)
    fine = rng.integers(0, 100, 6)
    coarse = fine // 5
    images = synthetic_images(fine, rng)
    folder = tmp_path / "cifar-100-binary"
    folder.mkdir()
    (folder / "train.bin").write_bytes(binary_records([coarse, fine], images))
    (folder / "test.bin").write_bytes(binary_records([coarse[:2], fine[:2]], images[:2]))
    (folder / "coarse_label_names.txt").write_text("\n".join(f"super{i}" for i in range(20)) + "\n")
    ds = CIFAR100(tmp_path, device=device)
    assert ds.targets.tolist() == fine.tolist() and ds.coarse_targets == coarse.tolist()
    assert ds.coarse_classes[3] == "super3" and len(ds.classes) == 100
    np.testing.assert_array_equal(ds.data.to("cpu").numpy(), images)
    by_super = CIFAR100(tmp_path, train=False, target_type="coarse", device=device)
    assert by_super.targets.tolist() == coarse[:2].tolist() and by_super.classes[0] == "super0"
    (folder / "train.bin").write_bytes(binary_records([fine, fine], images))  # coarse byte >= 20
    if fine.max() >= 20:
        with pytest.raises(ValueError, match=r"train\.bin: label \d+ at record \d+ \(label byte 0\)"):
            CIFAR100(tmp_path)


@pytest.mark.parametrize("device", DEVICES)
def test_loader_gathers_and_normalises_on_the_device(tmp_path, device):
    train_x, train_y, _, _ = write_cifar10(tmp_path, per_batch=4, test=2)
    ds = CIFAR10(tmp_path, device=device)
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    batches = list(ds.loader(batch_size=8, shuffle=False, mean=mean, std=std))
    assert [tuple(x.shape) for x, _ in batches] == [(8, 3, 32, 32), (8, 3, 32, 32), (4, 3, 32, 32)]
    x, y = batches[1]
    expected = (train_x[8:16] / 255.0 - np.array(mean)[:, None, None]) / np.array(std)[:, None, None]
    np.testing.assert_allclose(x.to("cpu").numpy(), expected, rtol=1e-5, atol=1e-5)
    assert y.tolist() == train_y[8:16].tolist() and y.device.type == device


def test_readers_need_no_numpy(tmp_path):
    """The binary reader and the whole GPU path (upload, gather, crop, flip, normalise) with NumPy blocked."""
    train_x, train_y, _, _ = write_cifar10(tmp_path, per_batch=2, test=2)
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'numpy' or name.startswith('numpy.'):\n"
        "            raise ImportError('numpy blocked for this test')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import webgrad.datasets, webgrad.transforms as T, webgrad.webgpu\n"
        "from webgrad.datasets.cifar import parse_binary\n"
        f"labels, pixels, n = parse_binary(open({str(tmp_path / 'cifar-10-batches-bin' / 'test_batch.bin')!r}, 'rb').read(), 't', 1, (10,))\n"
        "print(n, list(labels[0]), len(pixels))\n"
        "if webgrad.webgpu.is_available():\n"
        "    aug = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(0.5, 0.5)])\n"
        f"    ds = webgrad.datasets.CIFAR10({str(tmp_path)!r}, transform=aug, device='webgpu')\n"
        "    x, y = next(iter(ds.loader(batch_size=4)))\n"
        "    print(tuple(x.shape), y.tolist())\n"
    )
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    _, _, _, test_y = write_cifar10(tmp_path / "again", per_batch=2, test=2)
    assert lines[0] == f"2 {test_y.tolist()} 6144"
    if "webgpu" in DEVICES:
        assert lines[1] == f"(4, 3, 32, 32) {train_y[:4].tolist()}"


# ---------------------------------------------------------------------------------------------- ImageFolder
def _png_folder(root, sizes=((8, 6),), classes=("cat", "dog", "emu")):
    from PIL import Image
    rng = np.random.default_rng(2)
    expected = {}
    for k, name in enumerate(classes):
        (root / name).mkdir(parents=True)
        for i, (h, w) in enumerate(sizes):
            pixels = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            path = root / name / f"{i}.png"
            Image.fromarray(pixels).save(path)
            expected[str(path)] = (pixels, k)
    return expected


@pytest.mark.parametrize("device", DEVICES)
def test_image_folder(tmp_path, device):
    expected = _png_folder(tmp_path, sizes=((8, 6), (8, 6)))
    (tmp_path / "dog" / "notes.txt").write_text("not an image")
    ds = ImageFolder(tmp_path, device=device)
    assert ds.classes == ["cat", "dog", "emu"] and ds.class_to_idx == {"cat": 0, "dog": 1, "emu": 2}
    assert len(ds) == 6 and ds.data.shape == (6, 3, 8, 6) and ds.targets.tolist() == [0, 0, 1, 1, 2, 2]
    assert [p for p, _ in ds.skipped] == [str(tmp_path / "dog" / "notes.txt")]
    data = ds.data.to("cpu").numpy()
    for i, (path, label) in enumerate(ds.samples):
        pixels, k = expected[path]
        assert label == k
        np.testing.assert_array_equal(data[i], pixels.transpose(2, 0, 1))  # HWC file -> CHW tensor
    x, y = next(iter(ds.loader(batch_size=6)))
    np.testing.assert_allclose(x.to("cpu").numpy(), data / 255.0, rtol=1e-6)


def test_image_folder_resizes_and_reports(tmp_path):
    _png_folder(tmp_path / "a", sizes=((8, 6), (10, 12)))
    ds = ImageFolder(tmp_path / "a")
    assert ds.data.shape == (6, 3, 8, 6) and ds.resized == 3
    assert ImageFolder(tmp_path / "a", size=16).data.shape == (6, 3, 16, 16)
    (tmp_path / "b" / "one").mkdir(parents=True)
    (tmp_path / "b" / "two").mkdir()
    (tmp_path / "b" / "one" / "x.png").write_bytes(b"\x89PNG not really")
    (tmp_path / "b" / "two" / "y.txt").write_text("hello")
    with pytest.raises(FileNotFoundError, match="Found no valid file for the classes two"):
        ImageFolder(tmp_path / "b")
    with pytest.raises(FileNotFoundError, match="Couldn't find any class folder"):
        ImageFolder(tmp_path / "b" / "one")
    with pytest.warns(UserWarning, match="skipped 1 file"), pytest.raises(FileNotFoundError, match="could be decoded"):
        ImageFolder(tmp_path / "b", allow_empty=True)


def test_image_folder_without_pillow(tmp_path, monkeypatch):
    _png_folder(tmp_path)
    monkeypatch.setitem(sys.modules, "PIL", None)  # import PIL now raises ImportError
    with pytest.raises(RuntimeError, match="Pillow, which is not installed: pip install pillow"):
        ImageFolder(tmp_path)


# ---------------------------------------------------------------------------------------------- learning
def test_resnet8_learns_synthetic_cifar_with_augmentation(tmp_path):
    """The whole CIFAR path: files -> device -> crop/flip/normalise batches -> a ResNet-8, far above the 10%
    of chance on held-out images after 12 steps of 16 (seconds on the CPU)."""
    from webgrad.examples.models import resnet_cifar, training_step
    import webgrad.transforms as T

    write_cifar10(tmp_path, per_batch=64, test=200, seed=0)
    wg.manual_seed(0)
    mean, std = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)
    augment = T.Compose([T.RandomCrop(32, padding=4, padding_mode="reflect"), T.RandomHorizontalFlip(),
                         T.ToTensor(), T.Normalize(mean, std)])
    train = CIFAR10(tmp_path, transform=augment)
    model = resnet_cifar(8, width=8)
    step = training_step(model, wg.optim.Adam(model.parameters(), lr=3e-3))
    batches = iter(train.loader(batch_size=16, shuffle=True, drop_last=True))
    for _ in range(12):
        x, y = next(batches)
        assert x.shape == (16, 3, 32, 32) and x.dtype is wg.float32
        step(x, y)
    model.eval()
    with wg.no_grad():
        x, y = next(iter(CIFAR10(tmp_path, train=False).loader(batch_size=200, mean=mean, std=std)))
        accuracy = (model(x).argmax(1) == y).float().mean().item()
    assert accuracy > 0.5, accuracy


def test_resnet_cifar_state_dict_loads_into_pytorch():
    """CifarResNet's names and layouts are those of the same network written in PyTorch."""
    import torch
    from webgrad.examples.models import resnet_cifar

    class Block(torch.nn.Module):
        def __init__(self, i, o, s):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(i, o, 3, s, 1, bias=False)
            self.bn1 = torch.nn.BatchNorm2d(o)
            self.conv2 = torch.nn.Conv2d(o, o, 3, 1, 1, bias=False)
            self.bn2 = torch.nn.BatchNorm2d(o)
            self.shortcut = torch.nn.Sequential()
            if s != 1 or i != o:
                self.shortcut = torch.nn.Sequential(torch.nn.Conv2d(i, o, 1, s, bias=False), torch.nn.BatchNorm2d(o))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))

    class Net(torch.nn.Module):
        def __init__(self, w=4):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, w, 3, 1, 1, bias=False)
            self.bn1 = torch.nn.BatchNorm2d(w)
            self.layer1 = torch.nn.Sequential(Block(w, w, 1))
            self.layer2 = torch.nn.Sequential(Block(w, 2 * w, 2))
            self.layer3 = torch.nn.Sequential(Block(2 * w, 4 * w, 2))
            self.pool = torch.nn.AdaptiveAvgPool2d(1)
            self.fc = torch.nn.Linear(4 * w, 10)

        def forward(self, x):
            x = torch.relu(self.bn1(self.conv1(x)))
            return self.fc(self.pool(self.layer3(self.layer2(self.layer1(x)))).flatten(1))

    wg.manual_seed(0)
    ours = resnet_cifar(8, width=4).eval()
    theirs = Net().eval()
    state = {k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()}
    theirs.load_state_dict(state, strict=True)
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    with wg.no_grad(), torch.no_grad():
        np.testing.assert_allclose(ours(wg.tensor(x)).numpy(), theirs(torch.from_numpy(x)).numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="depth 6n \\+ 2"):
        resnet_cifar(10)
