"""Matmul throughput in float16 against float32 on WebGPU, with PyTorch's CUDA figures beside them when CUDA
is present: `python tools/bench_f16.py [--sizes M,N,K ...] [--native]` (float16 rows: the path half products
take by default; with --native also the half kernel matmul_h of shaders/f16.wgsl, see f16.NATIVE_MATMUL).

Each product runs under no_grad through the public op (`a @ b`), repeated until a second has passed,
synchronised at both ends; TFLOP/s = 2 M N K / time per product.
"""

import argparse
import time

import webgrad as wg


def _rate(fn, sync, seconds=1.0):
    fn()
    sync()
    n, start = 0, time.perf_counter()
    while True:
        for _ in range(5):
            fn()
        n += 5
        sync()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / n


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", nargs="+", default=["4096,4096,4096", "128,4096,4096"])
    p.add_argument("--native", action="store_true", help="also time the half kernel matmul_h (f16.NATIVE_MATMUL)")
    args = p.parse_args(argv)
    from webgrad._backends.webgpu import f16
    info = wg.webgpu.adapter_info()
    rt = wg.device("webgpu").backend.runtime
    name = info.get("device") or info.get("description")
    print(f"webgrad on {name} ({info.get('backend')}), shader-f16: {rt.has_f16}")
    try:
        import torch
        cuda = torch.cuda.is_available()
    except ImportError:
        torch, cuda = None, False
    print(f"{'M,N,K':>16} {'dtype':>8} {'webgrad TFLOP/s':>16} {'torch CUDA TFLOP/s':>19}")
    for size in args.sizes:
        m, n, k = (int(v) for v in size.split(","))
        flops = 2.0 * m * n * k
        paths = ((wg.float32, False), (wg.float16, False)) + (((wg.float16, True),) if args.native else ())
        for dtype, native in paths:
            f16.NATIVE_MATMUL = native
            a = wg.randn(m, k, device="webgpu").to(dtype)
            b = wg.randn(k, n, device="webgpu").to(dtype)
            with wg.no_grad():
                t = _rate(lambda: a @ b, wg.webgpu.synchronize)
            ref = "-"
            if cuda:
                torch.backends.cuda.matmul.allow_tf32 = False
                tdt = torch.float32 if dtype is wg.float32 else torch.float16
                ta, tb = torch.randn(m, k, device="cuda", dtype=tdt), torch.randn(k, n, device="cuda", dtype=tdt)
                ref = f"{flops / _rate(lambda: ta @ tb, torch.cuda.synchronize) / 1e12:.1f}"
            name = "matmul_h" if native else dtype.name
            print(f"{size:>16} {name:>8} {flops / t / 1e12:16.2f} {ref:>19}", flush=True)
        f16.NATIVE_MATMUL = False
        if torch is not None:  # accuracy of the half product against torch's (CPU reference on small K)
            a = wg.randn(256, k, device="webgpu").half()
            b = wg.randn(k, 256, device="webgpu").half()
            ours = (a @ b).float().to("cpu").numpy()
            tref = (torch.from_numpy(a.to("cpu").float().numpy()) @ torch.from_numpy(b.to("cpu").float().numpy()))
            err = abs(ours - tref.half().float().numpy()).max() / abs(tref.numpy()).max()
            print(f"{'':>16} f16 max |ours - torch| / max|ref| at K={k}: {err:.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
