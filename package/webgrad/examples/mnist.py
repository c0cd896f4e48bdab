"""Train on MNIST, the whole script:  python -m webgrad.examples.mnist --model mlp|cnn --device cpu|webgpu --epochs N

The digits are uploaded to the device once, as uint8. Every batch is gathered there (index_select with
a slice of the epoch's shuffled order) and normalised by one kernel, so the loop moves no pixels. The
training step is recorded once and replayed (webgrad.replayable), and the loss is read back every 10
steps only, since each read waits for the GPU.
"""

import argparse
import sys
import time

import webgrad as wg
import webgrad.webgpu
from webgrad.datasets import MNIST
from webgrad import models

# The reference recipe feeds pixels scaled to [0, 1]; --normalize uses the training set's mean and std.
MEAN, STD = 0.0, 1.0
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081
MODELS = ("mlp", "cnn")  # webgrad.models' MLP 784-128-10 and small CNN


def evaluate(model, test, mean=MEAN, std=STD):
    model.eval()
    correct = 0
    with wg.no_grad():
        for x, y in test.loader(batch_size=1000, mean=mean, std=std):
            correct += (model(x).argmax(dim=1) == y).int().sum().item()
    model.train()
    return correct / len(test)


def progress(epoch, epochs, step, steps, loss, rate, eta):
    width = 30
    done = int(width * step / max(steps, 1))
    bar = "#" * done + "." * (width - done)
    sys.stdout.write(f"\repoch {epoch + 1}/{epochs} [{bar}] {step}/{steps}  loss {loss:.4f}  "
                     f"{rate:,.0f} samples/s  ETA {eta:4.0f}s ")
    sys.stdout.flush()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(MODELS), default="mlp")
    p.add_argument("--device", default=None, help="cpu or webgpu (default: webgpu when available)")
    p.add_argument("--root", default=None, help="folder with the IDX files (default: find_mnist())")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--max-steps", type=int, default=None, help="stop each epoch early (quick checks)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eager", action="store_true", help="run every op from Python (no step replay)")
    p.add_argument("--normalize", action="store_true", help="standardise pixels with MNIST's mean and std")
    p.add_argument("--save", default=None,
                   help="write the trained weights here (.safetensors names: safetensors; others: PyTorch's format)")
    args = p.parse_args(argv)
    device = args.device or ("webgpu" if webgrad.webgpu.is_available() else "cpu")

    mean, std = (MNIST_MEAN, MNIST_STD) if args.normalize else (MEAN, STD)
    wg.manual_seed(args.seed)
    train, test = MNIST(args.root, train=True, device=device), MNIST(args.root, train=False, device=device)
    model = models.get_model(args.model).to(device)
    optimizer = wg.optim.Adam(model.parameters(), lr=args.lr)
    steps = len(train) // args.batch_size + (len(train) % args.batch_size > 0)
    if args.max_steps:
        steps = min(steps, args.max_steps)
    print(f"{args.model} on {device}: {sum(p.numel() for p in model.parameters()):,} parameters, "
          f"{steps} steps/epoch of {args.batch_size}")

    # on WebGPU the step is recorded once, then replayed (webgrad.replayable), unless --eager
    train_step = models.train_step(model, optimizer, replay=not args.eager)

    accuracy = None
    for epoch in range(args.epochs):
        start, seen, loss_value = time.perf_counter(), 0, float("nan")
        for step, (x, y) in enumerate(train.loader(args.batch_size, shuffle=True, mean=mean, std=std)):
            if step == steps:
                break
            loss = train_step(x, y)
            seen += x.shape[0]
            if step % 10 == 0 or step == steps - 1:
                loss_value = loss.item()
                rate = seen / (time.perf_counter() - start)
                progress(epoch, args.epochs, step + 1, steps, loss_value, rate, (steps - step - 1) * args.batch_size / rate)
        rate = seen / (time.perf_counter() - start)
        accuracy = evaluate(model, test, mean, std)
        print(f"\nepoch {epoch + 1}: loss {loss_value:.4f}  test accuracy {accuracy:.2%}  ({rate:,.0f} samples/s)")
    if args.save:
        wg.save(model.state_dict(), args.save)
        print(f"saved {args.save}")
    model.test_accuracy = accuracy
    return model


if __name__ == "__main__":
    main()
