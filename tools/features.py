"""Writes FEATURES.md: PyTorch's public names, each marked supported, partial or missing in webgrad.

    python -m tools.features            # rewrite FEATURES.md (needs torch: the list of names is torch's)
    python -m tools.features --check    # exit 1 if FEATURES.md is out of date (tests/compat/test_features.py)

A name is "supported" when webgrad has it under the same path, "partial" when PARTIAL below says what
differs, "missing" otherwise. The lists come from the installed torch and webgrad, so the table cannot
drift from the code; only PARTIAL is written by hand.
"""

import argparse
import importlib
import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "FEATURES.md"

# (torch namespace, webgrad namespace, which of torch's names count)
NAMESPACES = [
    ("torch", "webgrad", "functions and classes in torch.__all__"),
    ("torch.nn", "webgrad.nn", "modules"),
    ("torch.nn.functional", "webgrad.nn.functional", "functions"),
    ("torch.nn.init", "webgrad.nn.init", "functions"),
    ("torch.special", "webgrad.special", "functions"),
    ("torch.masked", "webgrad.masked", "functions"),
    ("torch.optim", "webgrad.optim", "optimizers"),
    ("torch.optim.lr_scheduler", "webgrad.optim.lr_scheduler", "schedulers"),
    ("torch.utils.data", "webgrad.utils.data", "classes and functions"),
    ("torch.func", "webgrad.func", "functions"),
    ("torch.fft", "webgrad.fft", "functions"),
    ("torch.linalg", "webgrad.linalg", "functions"),
    ("torch.distributions", "webgrad.distributions", "classes and functions"),
    ("torch.nn.attention.flex_attention", "webgrad.nn.attention.flex_attention", "functions and classes"),
]

# PyTorch's OpInfo tests as `python -m webgrad.testing.opinfo --device D --write-table PATH` last wrote them
OPINFO_TABLES = [("cpu", "tests/compat/opinfo_cpu.md"), ("webgpu", "tests/compat/opinfo_webgpu.md")]

# What differs where webgrad has the name: shown as "partial".
PARTIAL = {
    "torch.Tensor": "float32, bfloat16, int32, int16, int8, uint8, bool everywhere (on WebGPU bfloat16, int16 and "
                    "int8 take 4 bytes an element of device memory); float64 on the CPU; float16 on the CPU and on "
                    "WebGPU with shader-f16; complex64 as float32 pairs; no complex128",
    "torch.autocast": "bfloat16 and float16 on both devices (defaults: bfloat16 on the CPU, float16 on WebGPU); "
                      "batch_norm computes and returns float32",
    "torch.tensor": "int64 data becomes int32 (range-checked)",
    "torch.from_numpy": "int64 arrays become int32",
    "torch.save": "torch's zip format for .pt/.pth names, safetensors for .safetensors",
    "torch.load": "a restricted unpickler: tensors, OrderedDict and plain containers only",
    "torch.nn.Conv2d": "groups > 1 correct but run group by group",
    "torch.nn.functional.conv2d": "groups > 1 correct but run group by group",
    "torch.nn.Conv3d": "groups > 1 correct but run group by group (on the 2-D convolution)",
    "torch.nn.functional.conv3d": "groups > 1 correct but run group by group (on the 2-D convolution)",
    "torch.conv2d": "groups > 1 correct but run group by group",
    "torch.conv3d": "groups > 1 correct but run group by group (on the 2-D convolution)",
    "torch.utils.data.DataLoader": "num_workers accepted, batches made in the calling process",
    "torch.optim.SparseAdam": "webgrad has no sparse gradients: step() raises PyTorch's error for a dense one",
    "torch.nn.attention.flex_attention.flex_attention": "dense (the [B, H, L, S] scores are materialised); each "
                                                        "mod runs once on broadcast index tensors, so Python if on "
                                                        "the indices must be torch.where",
    "torch.vmap": "func runs once per slice of the mapped dim (PyTorch batches them into one call)",
    "torch.func.vmap": "func runs once per slice of the mapped dim (PyTorch batches them into one call)",
    "torch.func.jacfwd": "by reverse mode, one backward pass per output element; closed-over tensors as grad's",
    "torch.func.jvp": "by reverse mode (double backward): func's ops need second derivatives",
    "torch.func.hessian": "by reverse mode: func's ops need second derivatives; closed-over tensors as grad's",
    "torch.func.linearize": "each jvp_fn call runs func again (no traced linear graph)",
    **{f"torch.func.{name}": "at the outermost transform, tensors func closes over are constants to the results"
       for name in ("grad", "grad_and_value", "vjp", "jacrev")},
    **{f"torch.fft.{name}": "complex64 only (a float64 input raises TypeError: no complex128); products with the "
                            "transform's matrices, O(n^2) per dim"
       for name in ("fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "rfft2", "rfftn", "ihfft", "ihfft2",
                    "ihfftn")},
}


def _public(module, kind):
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    out = []
    for name in names:
        if name.startswith("_"):
            continue
        obj = getattr(module, name, None)
        if obj is None or inspect.ismodule(obj):
            continue
        if kind == "modules" and not (inspect.isclass(obj) and issubclass(obj, module.Module)):
            continue
        if kind == "optimizers" and not (inspect.isclass(obj) and issubclass(obj, module.Optimizer)):
            continue
        if kind == "schedulers" and not (inspect.isclass(obj) and name.endswith(("LR", "Plateau"))):
            continue
        if kind in ("functions",) and (not callable(obj) or inspect.isclass(obj)):  # (torch.fft lists Tensor)
            continue
        if kind.startswith("functions and classes") and not callable(obj):
            continue
        out.append(name)
    return sorted(set(out))


def table():
    import torch  # noqa: F401  (the names are torch's)
    lines = ["# What of PyTorch webgrad has", "",
             "Generated by `python -m tools.features` from the installed torch and webgrad (do not edit by hand).",
             "supported: same name, same meaning; partial: the note says what differs; missing: not in webgrad yet.",
             ""]
    totals = []
    for torch_name, ours_name, kind in NAMESPACES:
        theirs, ours = importlib.import_module(torch_name), importlib.import_module(ours_name)
        rows, counts = [], {"supported": 0, "partial": 0, "missing": 0}
        for name in _public(theirs, kind):
            path = f"{torch_name}.{name}"
            if not hasattr(ours, name):
                status, note = "missing", ""
            elif path in PARTIAL:
                status, note = "partial", PARTIAL[path]
            else:
                status, note = "supported", ""
            counts[status] += 1
            rows.append(f"| `{path}` | {status} | {note} |")
        totals.append((torch_name, kind, counts))
        lines += [f"## `{torch_name}` ({kind})", "",
                  f"{counts['supported']} supported, {counts['partial']} partial, {counts['missing']} missing.", "",
                  "| name | status | note |", "|---|---|---|", *rows, ""]
    summary = ["| namespace | supported | partial | missing |", "|---|---|---|---|"]
    summary += [f"| `{n}` ({k}) | {c['supported']} | {c['partial']} | {c['missing']} |" for n, k, c in totals]
    from webgrad.testing.opinfo import features_section
    lines += features_section([(d, f"python -m webgrad.testing.opinfo --device {d} --write-table {p}",
                                (ROOT / p).read_text(encoding="utf-8"))
                               for d, p in OPINFO_TABLES if (ROOT / p).exists()])
    return "\n".join(lines[:5] + summary + [""] + lines[5:]).rstrip() + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if FEATURES.md differs from a fresh table")
    args = parser.parse_args(argv)
    text = table()
    if args.check:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print("FEATURES.md is out of date: run python -m tools.features", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
