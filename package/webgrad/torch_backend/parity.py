"""Parity harness: a small model suite run in eager PyTorch on the CPU and on webgrad, compared.

    python -m webgrad.torch_backend.parity                       # every target, every model
    python -m webgrad.torch_backend.parity --device cpu --models mlp cnn --json parity.json
    python -m webgrad.torch_backend.parity --device torch:webgpu  # the webgpu torch device only

Targets (--device): "cpu" and "webgpu" compile the model with ``backend="webgrad"`` on that webgrad device,
its tensors staying CPU torch tensors; "torch:webgpu" moves the model and data to PyTorch's webgpu device
(webgrad.torch_device) and runs it twice, eagerly (mode "eager") and compiled (mode "compile", the graphs
taking and returning webgpu tensors). For each model and target: the same weights and inputs go through eager
PyTorch on the CPU and through webgrad; the loss, the logits, every parameter gradient and the parameters (and
buffers) after one SGD step are compared with the model's tolerances. The report lists per model pass/fail, the largest absolute and relative error
of each compared tensor, the ATen ops that fell back to eager PyTorch, and the slowest ops (host time:
on WebGPU the kernels run asynchronously, so an op's figure is its dispatch plus any read-back it forces).
Exit status 1 on any mismatch.
"""

import argparse
import copy
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(64, 32), nn.Linear(32, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class CNN(nn.Module):
    """The MNIST CNN's shape, smaller: conv-relu-pool-conv-relu-pool-linear."""

    def __init__(self, size=16):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 4, 3, padding=1), nn.Conv2d(4, 8, 3, padding=1)
        self.fc = nn.Linear(8 * (size // 4) ** 2, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.fc(x.flatten(1))


class _Block(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN plus the shortcut (a 1x1 conv + BN where the shape changes), then ReLU."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + self.shortcut(x))


class ResNet8(nn.Module):
    """ResNet-8, CIFAR style (He et al. 2016, section 4.2; webgrad.examples.models.CifarResNet's layout): a
    3x3 conv with BatchNorm, three stages of one basic block at widths 8, 16, 32 (stride 2 entering the
    last two, projection shortcuts), global average pooling, a linear layer; 3x32x32 inputs. BatchNorm in
    training mode: batch statistics, running statistics updated (compared after the step)."""

    def __init__(self, width=8):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width)
        self.layer1 = _Block(width, width, 1)
        self.layer2 = _Block(width, 2 * width, 2)
        self.layer3 = _Block(2 * width, 4 * width, 2)
        self.fc = nn.Linear(4 * width, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class Encoder(nn.Module):
    """A small transformer encoder layer (attention, layer norm, GELU) over a sequence of 8 tokens."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation="gelu", batch_first=True)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(self.layer(self.embed(x.reshape(x.shape[0], 8, 8))).mean(1))


class _GPTBlock(nn.Module):
    """Pre-norm decoder block: causal self-attention (scaled_dot_product_attention, is_causal) and a GELU MLP."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """A nanoGPT-shaped decoder, small: token and position embeddings, two causal blocks, a final layer norm
    and the language-model head; next-token logits for every position, flattened to [batch * tokens, vocab]."""

    def __init__(self, vocab=10, d=16, heads=2, layers=2, tokens=8):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(tokens, d)
        self.blocks = nn.ModuleList(_GPTBlock(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x)).flatten(0, 1)


def _images(shape):
    return torch.randn(*shape), torch.randint(0, 10, (shape[0],))


def _tokens(shape):
    seq = torch.randint(0, 10, (shape[0], shape[1] + 1))
    return seq[:, :-1].contiguous(), seq[:, 1:].reshape(-1).contiguous()


# name: (constructor, input shape, atol, rtol, inputs(shape) -> (x, y))
SUITE = {
    "mlp": (MLP, (8, 1, 8, 8), 1e-5, 1e-4, _images),
    "cnn": (CNN, (8, 1, 16, 16), 1e-5, 1e-4, _images),
    "resnet8": (ResNet8, (2, 3, 32, 32), 1e-4, 1e-3, _images),
    "encoder": (Encoder, (4, 64), 1e-4, 1e-3, _images),
    "gpt": (GPT, (4, 8), 1e-4, 1e-3, _tokens),
}
TARGETS = ("cpu", "webgpu", "torch:webgpu")


class _WithLoss(nn.Module):
    """model(x) and its cross-entropy in one module, so the loss's graph goes through the backend too."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, y):
        logits = self.model(x)
        return F.cross_entropy(logits, y), logits


def _step(fn, model, x, y):
    """One training step of `model` called through `fn` (itself or its compiled wrapper); what it returns is
    on the CPU."""
    # SGD with momentum, not Adam: Adam divides by |grad|, so on gradients that are rounding noise (a bias
    # before a normalisation) it turns 1e-9 differences into full lr-sized steps
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss, logits = fn(x, y)
    loss.backward()
    grads = {n: p.grad.detach().cpu().clone() for n, p in model.named_parameters()}
    opt.step()
    params = {n: p.detach().cpu().clone() for n, p in model.named_parameters()}
    params.update({n: b.detach().cpu().clone() for n, b in model.named_buffers()})  # BatchNorm's running stats
    return {"loss": loss.detach().cpu(), "logits": logits.detach().cpu()}, grads, params


def _errors(a, b):
    diff = (a.double() - b.double()).abs()
    return diff.max().item() if diff.numel() else 0.0, \
        (diff / b.double().abs().clamp_min(1e-6)).max().item() if diff.numel() else 0.0


def run_model(name, device, seed=0, mode="compile"):
    """Compare one model on one target; returns its report row (a dict). device: "cpu" or "webgpu" (compiled,
    CPU tensors) or "torch:webgpu" (PyTorch's webgpu device) with mode "eager" or "compile"."""
    from . import compile as wg_compile
    make, shape, atol, rtol, inputs = SUITE[name]
    torch.manual_seed(seed)
    eager = _WithLoss(make())
    compiled_model = copy.deepcopy(eager)
    x, y = inputs(shape)
    stats = {"fallback": {}, "time": {}}
    torch._dynamo.reset()
    if device == "torch:webgpu":
        import webgrad.torch_device as td
        td.reset_fallback_counts()
        compiled_model.to("webgpu")
        tx, ty = x.to("webgpu"), y.to("webgpu")
        compiled = compiled_model if mode == "eager" else wg_compile(compiled_model, stats=stats)
    elif mode == "compile":
        tx, ty = x, y
        compiled = wg_compile(compiled_model, device=device, stats=stats)
    else:
        raise ValueError(f"mode {mode!r} runs on device 'torch:webgpu' only")
    start = time.perf_counter()
    outs_c, grads_c, params_c = _step(compiled, compiled_model, tx, ty)
    seconds = time.perf_counter() - start
    if device == "torch:webgpu":  # ops of the webgpu device that ran on the CPU count as fallback too
        for op, n in td.fallback_counts().items():
            stats["fallback"][op] = stats["fallback"].get(op, 0) + n
    outs_e, grads_e, params_e = _step(eager, eager, x, y)
    compared, ok = {}, True
    for group, got, want in (("out", outs_c, outs_e), ("grad", grads_c, grads_e), ("step", params_c, params_e)):
        for key in want:
            abs_err, rel_err = _errors(got[key], want[key])
            close = torch.allclose(got[key].double(), want[key].double(), atol=atol, rtol=rtol)
            ok = ok and close
            compared[f"{group}:{key}"] = {"abs": abs_err, "rel": rel_err, "ok": close}
    slowest = sorted(stats["time"].items(), key=lambda kv: -kv[1])[:3]
    return {"model": name, "device": device, "mode": mode, "ok": ok, "atol": atol, "rtol": rtol, "compared": compared,
            "fallback": stats["fallback"], "slowest": [[op, round(s * 1e3, 3)] for op, s in slowest],
            "seconds": round(seconds, 2)}


def report(rows, out=sys.stdout):
    print(f"{'model':8} {'mode':7} {'device':12} {'result':6} {'max abs':>9} {'max rel':>9} {'worst tensor':28} "
          "fallback ops; slowest ops (ms)", file=out)
    for r in rows:
        worst = max(r["compared"].items(), key=lambda kv: kv[1]["abs"])
        mabs = max(c["abs"] for c in r["compared"].values())
        mrel = max(c["rel"] for c in r["compared"].values())
        fb = ", ".join(f"{op}×{n}" for op, n in r["fallback"].items()) or "none"
        slow = ", ".join(f"{op.replace('aten.', '')} {ms}" for op, ms in r["slowest"])
        print(f"{r['model']:8} {r['mode']:7} {r['device']:12} {'PASS' if r['ok'] else 'FAIL':6} {mabs:9.2e} {mrel:9.2e} "
              f"{worst[0]:28} {fb}; {slow}", file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", nargs="+", default=list(TARGETS), choices=TARGETS)
    parser.add_argument("--models", nargs="+", default=list(SUITE), choices=list(SUITE))
    parser.add_argument("--json", help="also write the report as JSON to this file")
    args = parser.parse_args(argv)
    import warnings
    warnings.filterwarnings("ignore", message="webgrad torch backend")  # the report lists them instead
    rows = [run_model(m, d, mode=mode) for d in args.device for mode in (("eager", "compile") if
            d == "torch:webgpu" else ("compile",)) for m in args.models]
    report(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
