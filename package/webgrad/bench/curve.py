"""Learning curves side by side: `python -m webgrad.bench curve --model mlp|cnn --epochs N [--normalize]`.

webgrad and PyTorch train the same model from the SAME initial weights (PyTorch's init, copied in
through state_dict) on the SAME batches in the same order (one shuffled order per epoch shared by
both), with the reference recipe (cross-entropy, Adam lr 1e-3, batch 128). Test accuracy after each
epoch is printed for both: differences come only from floating-point rounding, so the curves should
agree within noise. Needs torch and NumPy (to hand the data to torch).
"""

import argparse
import random
import time

import numpy as np

import webgrad as wg
from webgrad.datasets import MNIST
from webgrad.examples.models import MODELS, training_step


def torch_model(name):
    import torch.nn as nn
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(1568, 10))


def main(argv=None):
    import torch
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(MODELS), default="mlp")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--device", default="webgpu")
    p.add_argument("--root", default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--normalize", action="store_true", help="standardise pixels (mean 0.1307, std 0.3081)")
    args = p.parse_args(argv)
    mean, std = (0.1307, 0.3081) if args.normalize else (0.0, 1.0)
    tdev = "cuda" if torch.cuda.is_available() else "cpu"

    data = {}
    for split in ("train", "test"):
        ds = MNIST(args.root, train=split == "train")
        x = (ds.data.numpy().astype(np.float32) / 255.0 - mean) / std
        data[split] = (x.reshape(-1, 1, 28, 28), ds.targets.numpy().astype(np.int64))
    (xtr, ytr), (xte, yte) = data["train"], data["test"]

    torch.manual_seed(args.seed)
    tm = torch_model(args.model)
    wm = MODELS[args.model]()
    wm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    tm, wm = tm.to(tdev), wm.to(args.device)
    topt, wopt = torch.optim.Adam(tm.parameters(), lr=1e-3), wg.optim.Adam(wm.parameters(), lr=1e-3)

    wstep = wg.replayable(training_step(wm, wopt))

    txtr, tytr = torch.tensor(xtr, device=tdev), torch.tensor(ytr, device=tdev)
    wxtr, wytr = wg.tensor(xtr, device=args.device), wg.tensor(ytr, device=args.device)

    def accuracy_torch():
        with torch.no_grad():
            out = tm(torch.tensor(xte, device=tdev)).argmax(1).cpu().numpy()
        return (out == yte).mean()

    def accuracy_webgrad():
        with wg.no_grad():
            correct = 0
            for i in range(0, len(yte), 1000):
                out = wm(wg.tensor(xte[i:i + 1000], device=args.device)).argmax(1)
                correct += int((out.to("cpu").numpy() == yte[i:i + 1000]).sum())
        return correct / len(yte)

    print(f"{args.model}, {args.epochs} epochs, Adam 1e-3, batch 128, "
          f"{'standardised' if args.normalize else '[0, 1]'} inputs; torch on {tdev}, webgrad on {args.device}")
    print(f"{'epoch':>5} {'torch acc':>10} {'webgrad acc':>12} {'torch loss':>11} {'webgrad loss':>13}")
    rng = random.Random(args.seed)
    for epoch in range(args.epochs):
        order = list(range(len(ytr)))
        rng.shuffle(order)
        torder, worder = torch.tensor(order, device=tdev), wg.tensor(order, device=args.device)
        start = time.perf_counter()
        for i in range(0, len(order), 128):
            ti, wi = torder[i:i + 128], worder[i:i + 128]
            tloss = torch.nn.functional.cross_entropy(tm(txtr[ti]), tytr[ti])
            topt.zero_grad()
            tloss.backward()
            topt.step()
            wloss = wstep(wxtr.index_select(0, wi), wytr.index_select(0, wi))
        print(f"{epoch + 1:5d} {accuracy_torch():10.2%} {accuracy_webgrad():12.2%} {tloss.item():11.4f} "
              f"{wloss.item():13.4f}   ({time.perf_counter() - start:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
