"""A PyTorch MNIST CNN trained through torch.compile(backend="webgrad"), the whole script:

    python -m webgrad.examples.compile_mnist --device webgpu --epochs 1     # webgrad on WebGPU (wgpu-py)
    python -m webgrad.examples.compile_mnist --backend eager                # the same model in eager PyTorch

The model, the optimizer (torch.optim.Adam), the data and the loop are plain PyTorch; only the compiled
step runs on webgrad. --train-limit trains on the first N images (a quick check).
"""

import argparse
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from webgrad import models
from webgrad.datasets.idx import read_idx
from webgrad.datasets.mnist import find_mnist


def load(kind, limit=None):
    root = find_mnist()
    (n, h, w), pixels = read_idx(os.path.join(root, f"{kind}-images-idx3-ubyte"), 3, "images")
    _, labels = read_idx(os.path.join(root, f"{kind}-labels-idx1-ubyte"), 1, "labels")
    x = torch.frombuffer(bytearray(pixels), dtype=torch.uint8).reshape(n, 1, h, w).float() / 255
    y = torch.frombuffer(bytearray(labels), dtype=torch.uint8).long()
    return (x[:limit], y[:limit]) if limit else (x, y)


class CNN(nn.Module):
    """The reference recipe's CNN (webgrad.models.cnn, built with torch.nn: conv3x3(16)-ReLU-maxpool2-
    conv3x3(32)-ReLU-maxpool2-fc(1568 -> 10)) and its loss, so the compiled graph holds the loss too."""

    def __init__(self):
        super().__init__()
        self.net = models.cnn(nn=nn)

    def forward(self, x, y):
        logits = self.net(x)
        return F.cross_entropy(logits, y), logits


def webgrad_backend():
    from webgrad.torch_backend import webgrad_backend
    return webgrad_backend


def main(argv=None):
    p = argparse.ArgumentParser(description="MNIST CNN through torch.compile(backend='webgrad')")
    p.add_argument("--backend", choices=["webgrad", "eager"], default="webgrad")
    p.add_argument("--device", choices=["webgpu", "cpu"], default="webgpu")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--train-limit", type=int, default=None)
    p.add_argument("--test-limit", type=int, default=None)
    args = p.parse_args(argv)
    torch.manual_seed(0)
    (x, y), (tx, ty) = load("train", args.train_limit), load("t10k", args.test_limit)
    model = CNN()
    # "webgrad" is registered by the installed package's entry point; a source checkout that was not
    # (re-)installed since the entry point was added passes the backend function itself, the same thing
    backend = "webgrad" if "webgrad" in torch._dynamo.list_backends() else webgrad_backend()
    step = model if args.backend == "eager" else torch.compile(model, backend=backend, options={"device": args.device})
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    start, seen = time.perf_counter(), 0
    for epoch in range(args.epochs):
        order = torch.randperm(len(x))
        # drop the last partial batch: one shape, so every step replays the same recorded graphs
        for i in range(0, len(x) - args.batch_size + 1, args.batch_size):
            idx = order[i:i + args.batch_size]
            opt.zero_grad()
            loss, _ = step(x[idx], y[idx])
            loss.backward()
            opt.step()
            seen += len(idx)
        print(f"epoch {epoch + 1}: loss {loss.item():.4f}, {seen / (time.perf_counter() - start):,.0f} samples/s")
    with torch.no_grad():
        correct = sum((model(tx[i:i + 1000], ty[i:i + 1000])[1].argmax(1) == ty[i:i + 1000]).sum().item()
                      for i in range(0, len(tx), 1000))
    accuracy = correct / len(tx)
    print(f"test accuracy {accuracy:.4f} ({args.backend}{'' if args.backend == 'eager' else ', ' + args.device})")
    return accuracy


if __name__ == "__main__":
    main()
