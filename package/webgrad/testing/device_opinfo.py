"""PyTorch's operator database (OpInfo) on the webgpu torch device, against the same samples on the CPU.

    python -m webgrad.testing.device_opinfo [--only NAME ...] [--write-table PATH] [--max-samples N]
                                            [--time-box S] [--verbose]

Real PyTorch runs both sides: every float32 entry of ``torch.testing._internal.common_methods_invocations.op_db``
(needs the ``expecttest`` package) calls its own op (``op.op``) on its sample inputs, once as generated on the
CPU and once with every tensor moved to ``torch.device("webgpu")`` (``import webgrad.torch_device``), sizes,
strides and storage offsets kept. The CPU result is the oracle; neither side is written by webgrad. Compared:

- forward: device, shape, dtype and values (floats within a tolerance, integers and bools exactly);
- gradients, where the OpInfo supports autograd: one fixed random cotangent backpropagated through both with
  ``torch.autograd.grad``, every input's gradient compared (an absent gradient counts as zeros);
- random ops (dropout, bernoulli, ``empty``...): shapes and dtypes only.

The CPU fallback (torch_device/fallback.py) is left on but counted, and every ATen overload that took it is
named: ``strict()`` would stop at the first. Each entry gets one status, the worst over its samples:

- ``wrong``: a value, shape, dtype or device differs from the CPU's, forward or gradient;
- ``error``: the device raised (forward or backward) on a sample the CPU accepts;
- ``fallback``: values match, but some ATen overloads ran on the CPU (named in the table);
- ``pass``: forward and gradient of every sample match, wholly on the device;
- ``skipped``: no sample can live on the device (float64, complex, int16... tensors: the device holds
  float32, float16, int64, int32, uint8 and bool), or the CPU refused every sample.

Samples the CPU refuses, and samples holding a dtype the device lacks, are left out. Each entry is time-boxed;
a time box reached after some samples ran keeps the verdict of those samples.
"""

import argparse
import sys
import time
from dataclasses import dataclass, field

from .opinfo import (_TimeBox, _first_line, _flatten, _passthrough_seed, _random_candidate, _random_values, _rebind,
                     _reference_grads, _torch_gradient_known_wrong, counts, describe, entries, sample_loop, table_row)

STATUSES = ("pass", "fallback", "wrong", "error", "skipped")
WORST_FIRST = ("wrong", "error", "fallback", "pass")
FORWARD_TOL = (1e-3, 1e-4)  # (rtol, atol) for float results; integers and bools compared exactly
GRAD_TOL = (5e-3, 5e-4)
FLOAT16_TOL = (1e-3, 1e-3)
# entries whose tensor arguments PyTorch wants on the CPU whatever the input's device (tensor_split's indices)
CPU_ARGUMENTS = {"tensor_split"}
UNDEFINED_VALUES = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
                    "resize_", "resize_as_"}


@dataclass
class Result:
    name: str
    variant: str
    status: str
    reason: str = ""
    samples: int = 0  # samples run on both sides
    grads: int = 0  # samples whose gradients were compared
    fallbacks: dict = field(default_factory=dict)  # ATen overload -> calls that ran on the CPU
    notes: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def full_name(self):
        return f"{self.name}:{self.variant}" if self.variant else self.name


class NoDeviceDtype(Exception):
    """A sample holds a tensor of a dtype the webgpu device does not have."""


class Mismatch(Exception):
    """A value, shape, dtype or device differs from the CPU's."""


def _device():
    import torch
    import webgrad.torch_device  # noqa: F401  (registers the device)
    return torch.device("webgpu")


# ------------------------------------------------------------------------------------------ samples to the device
class ToDevice:
    """A sample's objects with every tensor moved to the webgpu device, with its sizes, strides and storage
    offset (a view of a copy of its whole storage), as a leaf requiring grad where the CPU one does; the same CPU
    tensor gives the same device tensor. A `device` keyword naming the CPU names the webgpu device instead."""

    def __init__(self, keep_args_on_cpu=False):
        from webgrad.torch_device import storage
        self.supported = set(storage.TO_WEBGRAD)
        self.tensors = {}  # id(cpu tensor) -> (cpu tensor, device tensor)
        self.keep_on_cpu = keep_args_on_cpu

    def args(self, args):
        """The sample's positional arguments (left on the CPU for ops that want them there)."""
        return tuple(args) if self.keep_on_cpu else self(tuple(args))

    def __call__(self, obj, key=None):
        import torch
        if isinstance(obj, torch.Tensor):
            hit = self.tensors.get(id(obj))
            if hit is not None:
                return hit[1]
            if obj.layout != torch.strided or obj.dtype not in self.supported:
                raise NoDeviceDtype(f"{obj.dtype}" if obj.layout == torch.strided else f"{obj.layout}")
            data = obj.detach()
            whole = torch.empty(0, dtype=data.dtype).set_(data.untyped_storage())
            moved = whole.to("webgpu").as_strided(data.shape, data.stride(), data.storage_offset()).detach()
            if obj.requires_grad:
                moved.requires_grad_(True)
            self.tensors[id(obj)] = (obj, moved)
            return moved
        if isinstance(obj, torch.dtype) and obj not in self.supported:
            raise NoDeviceDtype(str(obj))
        if key == "device" and (isinstance(obj, torch.device) or isinstance(obj, str)) and \
                torch.device(obj).type == "cpu":
            return torch.device("webgpu")
        if isinstance(obj, list):
            return [self(o) for o in obj]
        if isinstance(obj, tuple) and not isinstance(obj, torch.Size):
            items = [self(o) for o in obj]
            return type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)
        if isinstance(obj, dict):
            return {k: self(v, k) for k, v in obj.items()}
        return obj


# ------------------------------------------------------------------------------------------ comparison
def compare(ref, got, tol, where="output", random=False):
    """Raise Mismatch naming the first difference between the CPU's `ref` and the device's `got`."""
    import torch
    if isinstance(ref, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            raise Mismatch(f"{where}: the CPU gives a Tensor, the device a {type(got).__name__}")
        expected = "webgpu" if ref.device.type == "cpu" else ref.device.type
        if got.device.type != expected:
            raise Mismatch(f"{where}: on {got.device.type}, expected {expected}")
        if tuple(ref.shape) != tuple(got.shape):
            raise Mismatch(f"{where}: shape {list(got.shape)}, CPU {list(ref.shape)}")
        if ref.dtype != got.dtype:
            raise Mismatch(f"{where}: dtype {got.dtype}, CPU {ref.dtype}")
        if random or ref.layout != torch.strided:
            return
        a, b = got.detach().cpu().resolve_conj().resolve_neg(), ref.detach().resolve_conj().resolve_neg()
        if not (b.dtype.is_floating_point or b.dtype.is_complex):
            if not torch.equal(a, b):
                bad = tuple(int(i) for i in (a != b).nonzero()[0])
                raise Mismatch(f"{where}: at {bad} device {a[bad].item()}, CPU {b[bad].item()}")
            return
        rtol, atol = FLOAT16_TOL if b.dtype is torch.float16 else tol
        close = torch.isclose(a.double(), b.double(), rtol=rtol, atol=atol, equal_nan=True)
        if not bool(close.all()):
            bad = tuple(int(i) for i in (~close).nonzero()[0])
            raise Mismatch(f"{where}: {int((~close).sum())} of {close.numel()} values differ; at {bad} device "
                           f"{a[bad].item():.6g}, CPU {b[bad].item():.6g} (rtol {rtol:g}, atol {atol:g})")
        return
    if isinstance(ref, torch.Size) or not isinstance(ref, (tuple, list)):
        if isinstance(ref, float) and isinstance(got, float) and not random:
            if abs(got - ref) <= tol[1] + tol[0] * abs(ref) or (got != got and ref != ref):
                return
        if random and type(got) is type(ref):
            return
        if got != ref or type(got) is not type(ref):
            raise Mismatch(f"{where}: device {got!r}, CPU {ref!r}")
        return
    if not isinstance(got, (tuple, list)):
        raise Mismatch(f"{where}: the CPU gives a {type(ref).__name__}, the device a {type(got).__name__}")
    if len(got) != len(ref):
        raise Mismatch(f"{where}: {len(got)} items, CPU {len(ref)}")
    for i, (r, g) in enumerate(zip(ref, got)):
        compare(r, g, tol, f"{where}[{i}]", random)


# ------------------------------------------------------------------------------------------ one entry
class _Verdict:
    def __init__(self):
        self.status, self.reason = "pass", ""

    def fail(self, status, reason):
        if WORST_FIRST.index(status) < WORST_FIRST.index(self.status):
            self.status, self.reason = status, reason


def run_entry(op, max_samples=32, time_box=20.0):
    """Run one OpInfo entry's samples on the CPU and on the webgpu device; return its Result."""
    import torch
    from webgrad.torch_device import fallback
    _device()
    result = Result(op.name, op.variant_test_name, "pass")
    random_candidate = _random_candidate(op)
    undefined = op.name in UNDEFINED_VALUES
    torch_op = _rebind(op.op, torch, _passthrough_seed) if random_candidate else op.op
    grad = bool(op.supports_autograd)
    grad_unreliable = grad and _torch_gradient_known_wrong(op)
    verdict, notes, skipped = _Verdict(), set(), [0]
    started = time.monotonic()
    with fallback.strict(False):
        sample_loop(op, grad, max_samples, time_box, verdict, notes, result, ("wrong",),
                    lambda sample: _run_sample(op, sample, torch_op, grad, grad_unreliable, undefined,
                                               random_candidate, verdict, notes, skipped, result))
    if result.fallbacks:
        verdict.fail("fallback", "fell back: " + ", ".join(sorted(result.fallbacks)))
    result.status, result.reason = verdict.status, verdict.reason
    if result.status == "pass" and result.samples == 0:
        result.status = "skipped"
        result.reason = (f"every sample holds a dtype the device lacks ({skipped[0]} samples)" if skipped[0]
                         else "the CPU refused every sample")
    if skipped[0] and result.samples:
        notes.add(f"{skipped[0]} samples left out (dtypes the device lacks)")
    result.notes = sorted(notes)
    result.seconds = time.monotonic() - started
    return result


def _run_sample(op, sample, torch_op, grad, grad_unreliable, undefined, random_candidate, verdict, notes, skipped,
                result):
    import torch
    from webgrad.torch_device import fallback
    what = describe(sample)
    move = ToDevice(keep_args_on_cpu=op.name in CPU_ARGUMENTS)
    try:  # first: the CPU run below may write into its inputs
        d_input, d_args, d_kwargs = move(sample.input), move.args(sample.args), move(dict(sample.kwargs))
    except NoDeviceDtype:
        skipped[0] += 1
        return
    try:
        if random_candidate:
            torch.manual_seed(0)
        ref = torch_op(sample.input, *sample.args, **sample.kwargs)
    except Exception:
        return  # the CPU refuses the sample
    lacking = [t.dtype for t in _flatten(ref) if isinstance(t, torch.Tensor) and t.dtype not in move.supported]
    if lacking:  # the result cannot live on the device (complex, float64...)
        skipped[0] += 1
        return
    random = _random_values(torch_op, sample, ref, undefined, random_candidate)
    if random:
        notes.add("random values: shapes and dtypes compared")
    result.samples += 1
    before = fallback.fallback_counts()
    try:
        try:
            if move.tensors or "device" in sample.kwargs:
                got = torch_op(d_input, *d_args, **d_kwargs)
            else:  # a factory function given no tensor and no device: the device's is the default one
                with torch.device("webgpu"):
                    got = torch_op(d_input, *d_args, **d_kwargs)
        except (_TimeBox, KeyboardInterrupt):
            raise
        except Exception as exc:
            verdict.fail("error", f"{_first_line(exc)} on sample {what}")
            return
        try:
            compare(ref, got, FORWARD_TOL, "output", random)
        except Mismatch as exc:
            verdict.fail("wrong", f"{exc} on sample {what}")
            return
        if grad:
            _check_grad(sample, ref, got, move, random, grad_unreliable, verdict, notes, what, result)
    finally:
        after = fallback.fallback_counts()
        for name, n in after.items():
            if n > before.get(name, 0):
                result.fallbacks[name] = result.fallbacks.get(name, 0) + n - before.get(name, 0)


def _check_grad(sample, ref, got, move, random, grad_unreliable, verdict, notes, what, result):
    import torch
    process = sample.output_process_fn_grad
    try:
        ref_p = process(ref)
    except Exception:
        return
    try:
        got_p = process(got)
    except Exception as exc:
        verdict.fail("error", f"processing the output for the gradient: {_first_line(exc)} on sample {what}")
        return
    ref_leaves, got_leaves = _flatten(ref_p), _flatten(got_p)
    pairs = [(r, g) for r, g in zip(ref_leaves, got_leaves) if isinstance(r, torch.Tensor) and r.requires_grad]
    inputs = [t for t, _ in move.tensors.values() if t.requires_grad]
    if not pairs or not inputs:
        return
    cotangents, ref_grads = _reference_grads(pairs, inputs)
    if ref_grads is None:
        return  # torch cannot differentiate this sample
    for k, (r, g) in enumerate(pairs):
        if not isinstance(g, torch.Tensor) or not g.requires_grad:
            verdict.fail("wrong", f"output {k} does not require grad (the CPU's does) on sample {what}")
            return
    d_inputs = [move.tensors[id(t)][1] for t in inputs]
    try:
        d_grads = torch.autograd.grad([g for _, g in pairs], d_inputs, [c.to("webgpu") for c in cotangents],
                                      allow_unused=True)
    except (_TimeBox, KeyboardInterrupt):
        raise
    except Exception as exc:
        verdict.fail("error", f"backward: {_first_line(exc)} on sample {what}")
        return
    result.grads += 1
    for i, (t, rg, dg) in enumerate(zip(d_inputs, ref_grads, d_grads)):
        if rg is None and dg is None:
            continue
        rg = torch.zeros_like(inputs[i]) if rg is None else rg
        dg = torch.zeros_like(t) if dg is None else dg
        try:
            compare(rg, dg, GRAD_TOL, f"gradient of input {i}", random)
        except Mismatch as exc:
            if grad_unreliable:
                notes.add(f"gradient of input {i} differs from the CPU's, whose own gradient test is an expected "
                          "failure")
                continue
            verdict.fail("wrong", f"{exc} on sample {what}")
            return


# ------------------------------------------------------------------------------------------ the database
def run(only=None, max_samples=32, time_box=20.0, verbose=False):
    results = []
    for op in entries(only):
        r = run_entry(op, max_samples, time_box)
        results.append(r)
        if verbose:
            print(f"{r.full_name:45s} {r.status:9s} {r.seconds:6.2f}s {r.samples:3d} samples {r.grads:3d} grads "
                  f"{r.reason[:160]}", flush=True)
    return results


def summary(results):
    c = counts(results, STATUSES)
    return (f"opinfo on the webgpu torch device: pass {c['pass']}, fallback {c['fallback']}, wrong {c['wrong']}, "
            f"error {c['error']}, skipped {c['skipped']} of {len(results)}")


def blockers(results):
    """[(ATen overload, entries it sent to the CPU)], most entries first."""
    found = {}
    for r in results:
        for name in r.fallbacks:
            found[name] = found.get(name, 0) + 1
    return sorted(found.items(), key=lambda kv: (-kv[1], kv[0]))


def table(results, max_samples, backend):
    import torch
    lines = [summary(results), "",
             f"torch {torch.__version__.split('+')[0]}, webgrad's {backend} backend behind the device, float32 "
             f"entries, up to {max_samples} samples each, against the same samples on the CPU "
             "(`python -m webgrad.testing.device_opinfo`). pass: values and gradients match, no ATen op fell "
             "back to the CPU; fallback: values match but the named overloads ran on the CPU; wrong: a value, "
             "shape, dtype or device differs; error: the device raised where the CPU did not; skipped: no sample "
             "fits the device's dtypes.", ""]
    top = blockers(results)
    if top:
        lines += ["ATen overloads that fell back, by entries affected: " +
                  ", ".join(f"`{name}` {n}" for name, n in top), ""]
    lines += ["| OpInfo entry | status | first failure or what fell back |", "|---|---|---|"]
    for r in sorted(results, key=lambda r: (r.name, r.variant)):
        reason = r.reason
        if r.fallbacks and r.status != "fallback":
            reason += "; fell back: " + ", ".join(sorted(r.fallbacks))
        lines.append(table_row(r, reason))
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="entries to run: NAME or NAME:VARIANT")
    parser.add_argument("--write-table", metavar="PATH", help="write the per-entry markdown table there")
    parser.add_argument("--max-samples", type=int, default=32, help="samples per entry (default 32)")
    parser.add_argument("--time-box", type=float, default=20.0, help="seconds per entry (default 20)")
    parser.add_argument("--verbose", "-v", action="store_true", help="one line per entry as it finishes")
    args = parser.parse_args(argv)
    results = run(args.only, args.max_samples, args.time_box, args.verbose)
    for r in results:
        if r.status == "wrong":
            print(f"WRONG {r.full_name}: {r.reason}", file=sys.stderr)
    if args.write_table:
        from webgrad.torch_device import storage
        with open(args.write_table, "w", encoding="utf-8") as f:
            f.write(table(results, args.max_samples, storage.webgrad_device().type))
    top = blockers(results)
    if top:
        print("fell back (entries): " + ", ".join(f"{name} {n}" for name, n in top[:40]))
    print(summary(results))
    return 1 if any(r.status == "wrong" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
