"""Fused attention against PyTorch's, shape by shape, forward and backward:
`python -m webgrad.bench attention [--shapes B,H,T,D ...] [--no-causal] [--torch] [--repeats N]`.

Models outside the benchmarks differ from them in head size and sequence length first, so this times
`F.scaled_dot_product_attention` over a spread of both (the default shapes: head sizes 32 to 128, 128 to 2,048
tokens, about 8 to 48 million score elements each) rather than at one model's shape. For each shape it records
the forward as one replayable step on WebGPU and the forward with grad_q, grad_k and grad_v of a random upstream
gradient (`autograd.grad`) as another, and times each of their dispatches alone with timestamp queries (median of
--repeats): whichever path the call takes (the fused kernels, or products and softmax: ops/attention_chunked.py;
WEBGRAD_SDPA=fused or =chunked forces one). The backward is the second step's time less the first's. TFLOP/s count the products as FlashAttention's paper does (4 B H T^2 D forward,
2.5 times that backward), halved when causal.

With --torch, PyTorch's own `scaled_dot_product_attention` in float32 on its CUDA GPU (the kernel its dispatcher
picks for float32, memory-efficient attention on an H100/H200) runs the same shapes in the same call, timed
with CUDA events, and the last columns are webgrad's time over PyTorch's (above 1: webgrad is slower).
"""

import argparse
import statistics
import sys

DEFAULT_SHAPES = ["64,8,128,32", "16,8,256,48", "16,6,256,64", "8,8,512,64", "8,12,1024,64", "4,16,1024,64",
                  "16,4,256,96", "4,12,512,128", "2,16,2048,64", "2,8,2048,128"]


def _parse(spec):
    b, h, t, d = (int(x) for x in spec.split(","))
    return b, h, t, d


def flops(shape, causal):
    """(forward, backward) floating-point operations of one attention call, FlashAttention's count."""
    b, h, t, d = shape
    fwd = 4.0 * b * h * t * t * d * (0.5 if causal else 1.0)
    return fwd, 2.5 * fwd


def _dispatch_seconds(fn, arg, repeats):
    """GPU seconds of the dispatches of `fn(arg)` recorded as a replayable step, each timed in a pass of its own
    (median of `repeats`), summed: whichever kernels the call takes (the fused ones, or products and softmax)."""
    import webgrad as wg
    from webgrad._backends.webgpu.runtime import default_runtime
    from webgrad.bench.replay_profile import gpu_times

    run = wg.replayable(fn)
    for _ in range(3):  # eager warm-up, recording, one replay
        run(arg)
    wg.webgpu.synchronize()
    rt = default_runtime()
    records = run.graph.records
    times = gpu_times(rt, records, rt.binding.prepare(records), "each", repeats)
    n = len(times[0])
    run.release()
    return sum(statistics.median(rep[j] for rep in times) for j in range(n))


def time_webgrad(shape, causal, repeats):
    """(forward seconds, backward seconds) on WebGPU: the forward alone recorded as one step, then forward and
    backward as another; the backward is their difference."""
    import webgrad as wg

    wg.manual_seed(0)
    q, k, v = (wg.randn(*shape, device="webgpu", requires_grad=True) for _ in range(3))
    g = wg.randn(*shape, device="webgpu")

    def forward(_):
        return wg.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def forward_backward(grad_out):
        return wg.autograd.grad(forward(None), (q, k, v), grad_out)

    fwd = _dispatch_seconds(forward, g, repeats)
    both = _dispatch_seconds(forward_backward, g, repeats)
    return fwd, max(both - fwd, 0.0)


def time_torch(shape, causal, iters=20):
    """(forward seconds, backward seconds) of PyTorch's SDPA in float32 on CUDA, CUDA events."""
    import torch
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = False
    q, k, v = (torch.randn(*shape, device="cuda", requires_grad=True) for _ in range(3))
    g = torch.randn(*shape, device="cuda")

    def timed(fn):
        for _ in range(3):
            fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3 / iters

    with torch.no_grad():
        fwd = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
    both = timed(lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                             (q, k, v), g))
    return fwd, max(both - fwd, 0.0)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m webgrad.bench attention", description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", nargs="*", default=DEFAULT_SHAPES, help="batch,heads,tokens,head_size ...")
    ap.add_argument("--no-causal", action="store_true", help="full attention instead of causal")
    ap.add_argument("--torch", action="store_true", help="also PyTorch's SDPA on its CUDA GPU, in the same call")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    causal = not args.no_causal

    import webgrad as wg

    info = wg.webgpu.adapter_info()
    name = info.get("device") or info.get("description", "?")
    print(f"adapter: {name}; {'causal' if causal else 'full'} attention, "
          "float32; us per call (TFLOP/s)")
    head = f"{'B,H,T,D':>14} {'forward':>17} {'backward':>17}"
    if args.torch:
        head += f" {'torch forward':>17} {'torch backward':>17} {'fwd x':>6} {'bwd x':>6}"
    print(head)
    for spec in args.shapes:
        shape = _parse(spec)
        f_flops, b_flops = flops(shape, causal)
        fwd, bwd = time_webgrad(shape, causal, args.repeats)

        def cell(seconds, n):
            return f"{seconds * 1e6:9.1f} ({n / max(seconds, 1e-12) / 1e12:5.1f})"

        line = f"{spec:>14} {cell(fwd, f_flops)} {cell(bwd, b_flops)}"
        if args.torch:
            tf, tb = time_torch(shape, causal)
            line += f" {cell(tf, f_flops)} {cell(tb, b_flops)} {fwd / tf:6.2f} {bwd / tb:6.2f}"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
