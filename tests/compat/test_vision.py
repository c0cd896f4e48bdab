"""webgrad.vision: torchvision's API on webgrad, what ``import torchvision`` gives under as_torch() where no
torchvision is installed. Checked against the oracles torchvision itself uses: torch's F.interpolate with
antialiasing (tensor Resize), Pillow (PIL Resize/crops), torchvision's published parameter counts and state_dict
layout, and its size and offset formulas; and pytorch/examples' MNIST pipeline end to end."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import vision
from webgrad.vision import transforms as T
from webgrad.vision.transforms import functional as TF

PIL = pytest.importorskip("PIL.Image")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_import_torchvision_under_as_torch_is_webgrad_vision():
    code = ("import webgrad; webgrad.as_torch()\n"
            "import torchvision, torchvision.transforms.functional as TF\n"
            "from torchvision import datasets, models, transforms, utils\n"
            "from torchvision.transforms import v2\n"
            "print(torchvision.__name__, datasets.__name__, TF.__name__, v2.ToDtype.__module__)\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "package"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["webgrad.vision", "webgrad.vision.datasets", "webgrad.vision.transforms.functional",
                                  "webgrad.vision.transforms"]


# ------------------------------------------------------------------ models
@pytest.mark.parametrize("name,params", [("resnet18", 11_689_512), ("resnet34", 21_797_672),
                                         ("resnet50", 25_557_032), ("resnext50_32x4d", 25_028_904),
                                         ("wide_resnet50_2", 68_883_240)])
def test_resnets_have_torchvisions_parameter_counts(name, params):
    with wg.device("meta"):  # shapes only: no initialisation to pay for
        model = vision.models.get_model(name)
    assert sum(p.numel() for p in model.parameters()) == params


def test_resnet18_state_dict_layout_forward_and_refused_weights():
    model = vision.models.resnet18(num_classes=7)
    keys = list(model.state_dict())
    assert len(keys) == 122 and keys[:2] == ["conv1.weight", "bn1.weight"]
    assert "layer2.0.downsample.0.weight" in keys and "layer2.0.downsample.1.running_var" in keys
    assert keys[-2:] == ["fc.weight", "fc.bias"]
    model.eval()
    assert model(wg.randn(2, 3, 64, 64)).shape == (2, 7)
    with pytest.raises(RuntimeError, match="pretrained"):
        vision.models.resnet18(weights="DEFAULT")


# ------------------------------------------------------------------ transforms against their oracles
def _image(shape, dtype=np.uint8, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.random(shape) * 255).astype(dtype)


@pytest.mark.parametrize("size,want", [(32, (32, 40)), ((20, 30), (20, 30)), ([24], (24, 30))])
def test_resize_tensor_is_antialiased_interpolate_with_torchvisions_size_rule(size, want):
    a = _image((3, 40, 50)).astype(np.float32)
    got = TF.resize(wg.tensor(a), size)
    ref = torch.nn.functional.interpolate(torch.from_numpy(a)[None], size=want, mode="bilinear", antialias=True,
                                          align_corners=False)[0]
    assert tuple(got.shape) == (3,) + want
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-3)
    u8 = TF.resize(wg.tensor(_image((3, 40, 50))), size)  # uint8: float, interpolated, rounded, clamped
    ref8 = torch.nn.functional.interpolate(torch.from_numpy(_image((3, 40, 50))).float()[None], size=want,
                                           mode="bilinear", antialias=True).round().clamp(0, 255).byte()[0]
    assert u8.dtype is wg.uint8 and np.abs(u8.numpy().astype(int) - ref8.numpy().astype(int)).max() <= 1


def test_pil_images_go_through_pillow_and_to_tensor_reads_their_bytes():
    pixels = _image((30, 40, 3))
    img = PIL.fromarray(pixels)
    resized = T.Resize(20)(img)
    assert isinstance(resized, PIL.Image) and resized.size == (26, 20)
    assert np.array_equal(np.asarray(resized), np.asarray(img.resize((26, 20), PIL.BILINEAR)))
    x = T.ToTensor()(img)
    np.testing.assert_allclose(x.numpy(), pixels.transpose(2, 0, 1) / 255.0, rtol=1e-6, atol=1e-7)
    gray = T.Grayscale()(img)
    assert isinstance(gray, PIL.Image) and gray.mode == "L"
    back = TF.to_pil_image(wg.tensor(pixels.transpose(2, 0, 1).copy()))
    assert np.array_equal(np.asarray(back), pixels)
    flipped = T.RandomHorizontalFlip(p=1.0)(img)  # a batched webgrad transform: the PIL image read first
    assert np.array_equal(flipped.numpy(), pixels.transpose(2, 0, 1)[:, :, ::-1])


def test_center_crop_pad_and_grayscale_formulas():
    a = _image((3, 5, 6))
    x = wg.tensor(a)
    assert np.array_equal(TF.center_crop(x, 3).numpy(), a[:, 1:4, 2:5])  # round(1.0), round(1.5) as Python's
    big = TF.center_crop(x, (7, 6)).numpy()
    assert big.shape == (3, 7, 6) and not big[:, 0].any() and np.array_equal(big[:, 1:6], a)
    np.testing.assert_array_equal(TF.pad(x, (1, 2), fill=9).numpy(),
                                  np.pad(a, ((0, 0), (2, 2), (1, 1)), constant_values=9))
    np.testing.assert_array_equal(TF.pad(x, 2, padding_mode="reflect").numpy(),
                                  np.pad(a, ((0, 0), (2, 2), (2, 2)), mode="reflect"))
    np.testing.assert_array_equal(TF.pad(x, (1, 0, 2, 1), padding_mode="edge").numpy(),
                                  np.pad(a, ((0, 0), (0, 1), (1, 2)), mode="edge"))
    f = a.astype(np.float32)
    gray = (0.2989 * f[0] + 0.587 * f[1] + 0.114 * f[2]).astype(np.uint8)
    np.testing.assert_array_equal(TF.rgb_to_grayscale(x).numpy()[0], gray)
    assert TF.rgb_to_grayscale(x, 3).shape == (3, 5, 6)


def test_random_transforms_follow_the_seed_and_keep_sizes():
    img = wg.tensor(_image((3, 40, 50)))
    pipeline = T.Compose([T.RandomResizedCrop(24, scale=(0.3, 1.0)), T.RandomVerticalFlip(),
                          T.RandomApply([T.Grayscale(3)], p=0.5), T.ToTensor(),
                          T.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))])
    wg.manual_seed(3)
    first = pipeline(img)
    wg.manual_seed(3)
    again = pipeline(img)
    assert first.shape == (3, 24, 24) and np.array_equal(first.numpy(), again.numpy())
    top, left, h, w = T.RandomResizedCrop.get_params(img, (0.08, 1.0), (3 / 4, 4 / 3))
    assert 0 <= top <= 40 - h and 0 <= left <= 50 - w and 0 < h <= 40 and 0 < w <= 50
    with pytest.raises(TypeError):
        T.Lambda("not callable")


def test_make_grid_layout_and_normalize():
    imgs = np.random.default_rng(1).random((5, 3, 4, 6)).astype(np.float32)
    grid = vision.utils.make_grid(wg.tensor(imgs), nrow=3, padding=1, pad_value=0.5).numpy()
    assert grid.shape == (3, 2 * 5 + 1, 3 * 7 + 1)
    np.testing.assert_array_equal(grid[:, 1:5, 8:14], imgs[1])
    np.testing.assert_array_equal(grid[:, 6:10, 1:7], imgs[3])
    np.testing.assert_array_equal(grid[:, 6:10, 8:14], imgs[4])
    assert (grid[:, 0] == 0.5).all() and (grid[:, 6:10, 15:21] == 0.5).all()  # the missing sixth image
    norm = vision.utils.make_grid(wg.tensor(imgs * 4 - 2), normalize=True, padding=0).numpy()
    assert norm.min() == 0.0 and abs(norm.max() - 1.0) < 1e-6


# ------------------------------------------------------------------ datasets
def _write_idx(path, array):
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    with open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def test_fashion_mnist_reads_torchvisions_layout_and_mnist_pipeline_runs(tmp_path):
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    images, labels = _image((20, 28, 28), seed=2), np.arange(20) % 10
    _write_idx(raw / "t10k-images-idx3-ubyte", images)
    _write_idx(raw / "t10k-labels-idx1-ubyte", labels)
    tf = T.Compose([T.ToTensor(), T.Normalize((0.2860,), (0.3530,))])
    ds = vision.datasets.FashionMNIST(str(tmp_path), train=False, transform=tf)
    x, y = ds[3]
    assert x.shape == (1, 28, 28) and y == 3 and ds.classes[9] == "Ankle boot"
    np.testing.assert_allclose(x.numpy()[0], (images[3] / 255.0 - 0.2860) / 0.3530, rtol=1e-5, atol=1e-5)
    batch, target = next(iter(wg.utils.data.DataLoader(ds, batch_size=8)))
    assert batch.shape == (8, 1, 28, 28) and target.tolist() == list(range(8))
    with pytest.raises(FileNotFoundError, match="FashionMNIST"):
        vision.datasets.FashionMNIST(str(tmp_path), train=True, download=True)


def test_image_folder_loads_lazily_as_pil_and_fake_data_is_seeded(tmp_path):
    for cls, color in (("cat", (255, 0, 0)), ("dog", (0, 0, 255))):
        (tmp_path / cls).mkdir()
        for i in range(2):
            PIL.new("RGB", (10 + i, 8), color).save(tmp_path / cls / f"{i}.png")
    (tmp_path / "dog" / "notes.txt").write_text("not an image")
    ds = vision.datasets.ImageFolder(str(tmp_path), transform=T.Compose([T.Resize((8, 8)), T.ToTensor()]))
    assert ds.classes == ["cat", "dog"] and len(ds) == 4 and ds.targets == [0, 0, 1, 1]
    x, y = ds[3]
    assert x.shape == (3, 8, 8) and y == 1 and float(x[2].min()) == 1.0 and float(x[0].max()) == 0.0
    raw, _ = vision.datasets.ImageFolder(str(tmp_path))[0]
    assert isinstance(raw, PIL.Image) and raw.size == (10, 8)
    fake = vision.datasets.FakeData(size=4, image_size=(3, 6, 5), num_classes=3, transform=T.ToTensor())
    wg.manual_seed(0)
    before = wg.rand(1).item()
    wg.manual_seed(0)
    a, b = fake[1], fake[1]
    assert wg.rand(1).item() == before  # the global generator's state is left as it was
    assert a[0].shape == (3, 6, 5) and np.array_equal(a[0].numpy(), b[0].numpy()) and a[1] == b[1] < 3
