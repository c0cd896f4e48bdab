"""`python -m webgrad.bench SUBCOMMAND [args]`: dispatch to a benchmark module.

Subcommands:
  kernels   GPU kernel throughput: matmul GFLOP/s, elementwise and reduction GB/s (vs NumPy)
  train     MNIST-shaped training samples/s: webgrad replayed and eager vs PyTorch eager, side by side
  curve     learning curves of webgrad and PyTorch from the same weights on the same batches (MNIST MLP, CNN,
            ResNet-18; --amp: mixed precision against float32)
  scale     ResNet-18, wide MLP and a transformer block: samples/s, ms/step and peak GPU memory vs PyTorch eager
  amp-memory  peak GPU memory of a replayed step under autocast against float32 (--gpu-kernels: a GPU's
            kernel variants on a software adapter)
  profile   per-kernel GPU time of a recorded training step (timestamp queries)
  replay    where a replayed step's time goes: host (in and outside the binding's submit), wall, GPU span,
            per-dispatch GPU times; the same code runs in Pyodide on Dawn (tools/bench_dawn.py --profile)
  phases    an eager step's host time by phase (forward, loss, backward, optimizer step, submit); the same
            code runs in Pyodide on Dawn (tools/bench_dawn.py --phases)
  ddp       DistributedDataParallel over N local ranks (torch.compile backend): samples/s, scaling, all-reduce
  compile   torch.compile(backend="webgrad") training steps vs eager PyTorch, and the boundary's cost per call
  attention fused attention forward and backward over head sizes and lengths, GPU time per dispatch (--torch:
            PyTorch's SDPA on CUDA in the same call)

The browser benchmark (MNIST training samples/s of the demo page in headless Chromium, host vs GPU time
per step) serves a source checkout's page, so it is not part of the package: from the repository's root,
  python -m tools.bench_browser [--models mlp cnn] [--batches 128 1024] [--profile]
"""

import importlib
import sys

SUBCOMMANDS = {
    "kernels": "webgrad.bench.kernels",
    "train": "webgrad.bench.train",
    "curve": "webgrad.bench.curve",
    "profile": "webgrad.bench.profile",
    "replay": "webgrad.bench.replay_profile",
    "phases": "webgrad.bench.eager_phases",
    "scale": "webgrad.bench.scale",
    "amp-memory": "webgrad.bench.amp_memory",
    "ddp": "webgrad.bench.ddp",
    "compile": "webgrad.bench.compile",
    "attention": "webgrad.bench.attention",
}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in SUBCOMMANDS:
        if argv and argv[0] == "browser":
            print("webgrad.bench browser moved out of the package: run `python -m tools.bench_browser` "
                  "from the repository's root", file=sys.stderr)
            return 2
        print(__doc__.strip())
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return importlib.import_module(SUBCOMMANDS[argv[0]]).main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
