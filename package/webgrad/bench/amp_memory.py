"""Peak GPU memory of a replayed training step in mixed precision against the same step in float32.

    python -m webgrad.bench amp-memory [--models gpt-6x384 resnet18] [--batch N] [--gpu-kernels]

Each row trains the model a few replayed steps in float32, then under webgrad.autocast with a GradScaler
(bench scale's recipes and its peak: live tensors plus what the recorded step holds), and prints both peaks
and their ratio. Memory does not depend on how fast the kernels run, only on which buffers they allocate,
so --gpu-kernels runs the kernel variants of a GPU (runtime.KERNEL_VARIANTS) on a software adapter: its
figures are a GPU's, measured where there is none (ResNet-18's float32 step at batch 128 peaks at 845.4 MiB
on lavapipe with them, as on an H200). Needs an adapter with shader-f16.
"""

import argparse

import webgrad as wg
from webgrad.bench.scale import BATCH, MIN_WARMUP, webgrad_result

MODELS = ("gpt-6x384", "resnet18", "transformer", "widemlp", "gpt2-small")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["gpt-6x384", "resnet18"], choices=MODELS)
    p.add_argument("--batch", type=int, help="one batch size for every model (default: bench scale's)")
    p.add_argument("--gpu-kernels", action="store_true", help="a GPU's kernel variants on a software adapter")
    args = p.parse_args(argv)
    rt = wg.device("webgpu").backend.runtime
    if not rt.has_f16:
        raise SystemExit("bench amp-memory: this adapter has no shader-f16 (float16 storages)")
    if args.gpu_kernels:
        rt.software = False
    info = wg.webgpu.adapter_info()
    print(f"webgrad on WebGPU: {info.get('device') or info.get('description')} ({info.get('backend')}); "
          f"{'GPU' if not rt.software else 'software'} kernel variants")
    print(f"{'model':11} {'batch':>5} | {'float32 peak MiB':>16} {'autocast peak MiB':>17} | {'ratio':>6}")
    for model in args.models:
        batch = args.batch or BATCH[model]
        f32 = webgrad_result(model, batch, 1, MIN_WARMUP)["peak"]
        amp = webgrad_result(model, batch, 1, MIN_WARMUP, amp=True)["peak"]
        print(f"{model:11} {batch:5d} | {f32 / 2**20:16.1f} {amp / 2**20:17.1f} | {amp / f32:5.3f}x", flush=True)
    return 0
