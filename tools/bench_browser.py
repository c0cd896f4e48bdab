"""Browser benchmark: `python -m tools.bench_browser [--models mlp cnn] [--batches 128 1024] [--steps N]
[--profile]`, from the repository's root.

MNIST training speed where the page trains: the demo page (web/) in headless Chromium with WebGPU,
Python in Pyodide in a Web Worker. It starts serve.py's server and Chromium, waits until the page has
MNIST on the GPU, then runs webgrad.apps.mnist.bench (in the wheel the page installs) for each model and
batch size:

    samples/s   steady-state training (Adam, loss read back every 10 steps, the step replayed with
                webgrad.replayable: as the page trains; --eager runs every step through Python instead)
    step ms     wall time per step in that steady state
    host ms     Python + FFI time to issue one step (autograd, kernel records, submits)
    GPU ms      the GPU work of one step alone: the step captured once and replayed without Python

With --profile, the GPU time of one step is broken down by kernel (each dispatch timed alone).

It lives in tools/, not in the package, because it serves the checkout's page (serve.py, web/,
node_modules/ from `python serve.py` or `python tests/run.py`). Needs Playwright with a Chromium:
$WEBGRAD_CHROMIUM, Debian's /usr/bin/chromium, else Playwright's own.
"""

import argparse
import json
import sys
import threading
import time
from pathlib import Path

import serve
from tools import bootstrap

# Headless Chromium with WebGPU on SwiftShader; no background traffic (the recipe of e2e/conftest.py).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--enable-unsafe-webgpu", "--enable-features=Vulkan"]
APP_TIMEOUT_MS = 300_000


def _run(page, code, timeout_s):
    return page.evaluate(
        """([code, ms]) => Promise.race([window.webgradRunPython(code),
            new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms))])""",
        [code, int(timeout_s * 1000)])


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tools.bench_browser", description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["mlp", "cnn"], choices=["mlp", "cnn"])
    ap.add_argument("--batches", nargs="+", type=int, default=[128, 1024])
    ap.add_argument("--steps", type=int, default=50, help="timed steps per configuration (default 50)")
    ap.add_argument("--max-seconds", type=float, default=120,
                    help="fewer steps where a configuration would take longer than this (default 120)")
    ap.add_argument("--eager", action="store_true", help="run every step through Python (no replay)")
    ap.add_argument("--profile", action="store_true", help="GPU time of one step by kernel")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args(argv)

    bootstrap.ensure_npm()
    bootstrap.build_wheel(Path(sys.executable))  # the page installs the wheel: it must hold this checkout's code
    from playwright.sync_api import sync_playwright

    server = serve.make_server("127.0.0.1", 0, quiet=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    results = []
    try:
        with sync_playwright() as pw:
            launch = {"args": CHROMIUM_ARGS}
            if bootstrap.chromium_path():
                launch["executable_path"] = bootstrap.chromium_path()
            browser = pw.chromium.launch(**launch)
            page = browser.new_page()
            t = time.perf_counter()
            page.goto(f"http://127.0.0.1:{server.server_port}/")
            page.wait_for_function("document.body.dataset.app !== 'loading'", timeout=APP_TIMEOUT_MS)
            if page.evaluate("document.body.dataset.app") != "ready":
                raise SystemExit(f"the page could not start training: {page.inner_text('#run-message')}")
            info = _run(page, "import webgrad.webgpu as W, sys\ni = W.adapter_info()\n"
                        "f\"{i['vendor']} {i['architecture']} {i['description']}\".strip() + ', Python ' + "
                        "sys.version.split()[0]", 60)
            print(f"page ready in {time.perf_counter() - t:.1f} s; WebGPU adapter: {info}; {browser.version}")
            print(f"{'model':<5} {'batch':>6} {'steps':>6} {'samples/s':>10} {'step ms':>9} {'host ms':>9} "
                  f"{'GPU ms':>9} {'dispatches':>11}", flush=True)
            for kind in args.models:
                for batch in args.batches:
                    steps = args.steps
                    # A first short run says how long a step takes; long configurations get fewer steps.
                    measure = f"from webgrad.apps.mnist import bench\nawait bench.measure(app, {kind!r}, {batch}, "
                    probe = _run(page, measure + f"steps=3, warmup=2, replays=2, replay={not args.eager})", 1800)
                    steps = max(5, min(steps, int(args.max_seconds * 1000 / max(probe["step_ms"], 1))))
                    r = _run(page, measure + f"steps={steps}, warmup=3, replays={max(3, min(20, steps // 2))}, "
                             f"replay={not args.eager}, profile={args.profile})", 3600)
                    results.append(r)
                    print(f"{kind:<5} {batch:>6} {steps:>6} {r['samples_per_s']:>10,.0f} {r['step_ms']:>9.1f} "
                          f"{r['host_ms']:>9.1f} {r['gpu_ms']:>9.1f} {r['dispatches_per_step']:>11}", flush=True)
                    if "profile" in r:
                        print(f"        GPU time by kernel, each dispatch alone (sum {sum(x[2] for x in r['profile']):.1f} ms):")
                    for name, groups, ms in r.get("profile", [])[:12]:
                        print(f"        {ms:9.2f} ms  {name} ({groups} workgroups)")
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
