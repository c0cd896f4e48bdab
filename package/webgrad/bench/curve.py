"""Learning curves side by side: `python -m webgrad.bench curve --model mlp|cnn|resnet18 --epochs N [--normalize] [--amp]`.

webgrad and PyTorch train the same model from the SAME initial weights (PyTorch's init, copied in
through state_dict) on the SAME batches in the same order (one shuffled order per epoch shared by
all), batch 128, with the model's benchmark recipe (webgrad.bench.recipes.benchmark_optimizer: Adam lr
1e-3 for the MNIST MLP and CNN, SGD lr 0.01 with momentum 0.9 for ResNet-18). Test accuracy after each
epoch is printed for each run: differences come only from floating-point rounding, so the curves should
agree within noise. Needs torch and NumPy (to hand the data to torch).

--model resnet18 trains ResNet-18 (the CIFAR variant of `bench scale`, webgrad.models.resnet18) with one
input channel on MNIST padded to 32x32, and tests it in eval mode (batch norm's running statistics).
--amp adds a run of each library under autocast (float16) with a GradScaler (bench train --amp's step),
from the same weights on the same batches: whether mixed precision reaches float32's accuracy. The two
float32 runs, the same math rounded differently, show how far two runs differ by rounding alone; the
summary line sets each mixed-precision run's gap from its library's float32 run against that.
"""

import argparse
import random
import time

import numpy as np

import webgrad as wg
from webgrad.datasets import MNIST
from webgrad import models
from webgrad.bench.recipes import MNIST_MODELS, benchmark_optimizer

CURVE_MODELS = ("mlp", "cnn", "resnet18")
BATCH = 128
EVAL_BATCH = 1000


def build(name, nn):
    """The model `name` built with `nn` (webgrad.nn or torch.nn): ResNet-18 takes MNIST's one channel."""
    if name == "resnet18":
        return models.resnet18((1, 32, 32), num_classes=10, nn=nn)
    return models.get_model(name, nn=nn)


def mnist_arrays(root, model, normalize):
    """{split: (float32 images [n, 1, s, s], int64 labels)}: pixels in [0, 1] or standardised, padded from
    28x28 to 32x32 with background for ResNet-18 (the CIFAR shape of its stem and stages)."""
    mean, std = (0.1307, 0.3081) if normalize else (0.0, 1.0)
    data = {}
    for split in ("train", "test"):
        ds = MNIST(root, train=split == "train")
        x = (ds.data.numpy().astype(np.float32) / 255.0 - mean) / std
        if model == "resnet18":
            x = np.pad(x, ((0, 0), (2, 2), (2, 2)), constant_values=(0.0 - mean) / std)
        data[split] = (x[:, None], ds.targets.numpy().astype(np.int64))
    return data


class Run:
    """One training run in webgrad or torch (`lib`): the model from `state` on `device`, the recipe's optimizer,
    plain or --amp steps (webgrad's replayed: webgrad.replayable), the data resident on the device."""

    def __init__(self, lib, name, state, device, amp, data):
        self.lib, self.device = lib, device
        self.model = build(name, lib.nn)
        self.model.load_state_dict(state)
        self.model.to(device)
        opt = benchmark_optimizer(name, self.model.parameters(), lib.optim)
        self.step_fn = models.train_step(self.model, opt, amp=device if amp else None, replay=lib is wg, lib=lib)
        (xtr, ytr), (self.xte, self.yte) = data["train"], data["test"]
        self.x, self.y = lib.tensor(xtr, device=device), lib.tensor(ytr, device=device)

    def epoch(self, order):
        """Train on the batches of `order` (training image indices); the last batch's loss."""
        index = self.lib.tensor(order, device=self.device)
        for i in range(0, len(order), BATCH):
            rows = index[i:i + BATCH]
            loss = self.step_fn(self.x.index_select(0, rows), self.y.index_select(0, rows))
        return loss.item()

    def accuracy(self):
        """Test accuracy in eval mode (batch norm's running statistics)."""
        self.model.eval()
        correct = 0
        with self.lib.no_grad():
            for i in range(0, len(self.yte), EVAL_BATCH):
                out = self.model(self.lib.tensor(self.xte[i:i + EVAL_BATCH], device=self.device)).argmax(1)
                correct += int((out.to("cpu").numpy() == self.yte[i:i + EVAL_BATCH]).sum())
        self.model.train()
        return correct / len(self.yte)


def amp_summary(final):
    """The last epoch's accuracies {run name: accuracy} in one line: each mixed-precision run's gap from its
    library's float32 run, against the float32 runs' gap from each other (rounding alone)."""
    noise = abs(final["torch f32"] - final["webgrad f32"])
    gaps = [f"{lib} amp - {lib} f32 {100 * (final[f'{lib} amp'] - final[f'{lib} f32']):+.2f} points"
            for lib in ("webgrad", "torch")]
    return f"after the last epoch: {'; '.join(gaps)}; torch f32 - webgrad f32 {100 * noise:.2f} points apart"


def main(argv=None):
    import torch
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=CURVE_MODELS, default="mlp")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--device", default="webgpu")
    p.add_argument("--root", default=None, help="a folder with MNIST's IDX files (default: find_mnist)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--normalize", action="store_true", help="standardise pixels (mean 0.1307, std 0.3081)")
    p.add_argument("--amp", action="store_true", help="also a mixed-precision run of each library")
    p.add_argument("--images", type=int, default=None, metavar="N",
                   help="the first N images of each split only (a quick check)")
    args = p.parse_args(argv)
    tdev = "cuda" if torch.cuda.is_available() else "cpu"

    data = mnist_arrays(args.root, args.model, args.normalize)
    if args.images:
        data = {split: tuple(a[:args.images] for a in arrays) for split, arrays in data.items()}

    torch.manual_seed(args.seed)
    state = build(args.model, torch.nn).state_dict()
    runs = {}
    for amp in (False, True) if args.amp else (False,):
        tag = "amp" if amp else "f32"
        runs[f"torch {tag}"] = Run(torch, args.model, state, tdev, amp, data)
        runs[f"webgrad {tag}"] = Run(wg, args.model, {k: v.numpy() for k, v in state.items()}, args.device, amp,
                                     data)

    recipe = "Adam 1e-3" if args.model in MNIST_MODELS else "SGD 0.01, momentum 0.9"
    print(f"{args.model}, {args.epochs} epochs, {recipe}, batch {BATCH}, "
          f"{'standardised' if args.normalize else '[0, 1]'} inputs{' padded to 32x32' if args.model == 'resnet18' else ''}"
          f"; torch on {tdev}, webgrad on {args.device}; {len(data['train'][1])} training and {len(data['test'][1])} test images")
    print(f"{'epoch':>5} " + " ".join(f"{name + ' acc':>16}" for name in runs)
          + " " + " ".join(f"{name + ' loss':>17}" for name in runs))
    rng = random.Random(args.seed)
    accuracies = {}
    for epoch in range(args.epochs):
        order = list(range(len(data["train"][1])))
        rng.shuffle(order)
        start = time.perf_counter()
        losses = {name: run.epoch(order) for name, run in runs.items()}
        accuracies = {name: run.accuracy() for name, run in runs.items()}
        print(f"{epoch + 1:5d} " + " ".join(f"{accuracies[n]:16.2%}" for n in runs)
              + " " + " ".join(f"{losses[n]:17.4f}" for n in runs)
              + f"   ({time.perf_counter() - start:.1f} s)", flush=True)
    if args.amp and accuracies:
        print(amp_summary(accuracies))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
