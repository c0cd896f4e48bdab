"""PyTorch's OpInfo database through webgrad (webgrad.testing.opinfo): no wrong values, and pass counts
that only go up. The harness itself is tested too, with ops that are wrong on purpose.

When an op is added or fixed, regenerate the tables and FEATURES.md, and raise the floors here:

    python -m webgrad.testing.opinfo --device cpu --write-table tests/compat/opinfo_cpu.md
    python -m webgrad.testing.opinfo --device webgpu --write-table tests/compat/opinfo_webgpu.md
    python -m tools.features
"""

import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("expecttest")  # op_db needs it

import webgrad as wg  # noqa: E402
from webgrad.testing import opinfo  # noqa: E402
from helpers import webgpu_available  # noqa: E402

HERE = Path(__file__).resolve().parent
REGENERATE = "python -m webgrad.testing.opinfo --device {0} --write-table tests/compat/opinfo_{0}.md; python -m tools.features"

# Entries passing forward and gradient today; raise these as ops are added (never lower them).
CPU_PASS_FLOOR = 658
WEBGPU_PASS_FLOOR = 106

# Silently wrong results found by the harness, each a bug in the op (delete the line when it is fixed):
KNOWN_WRONG = set()

# What real training scripts call, run on WebGPU in every test run (the full WebGPU run is
# `python -m webgrad.testing.opinfo --device webgpu`).
WEBGPU_OPS = [
    "matmul", "mm", "bmm", "add", "sub", "mul", "div", "neg", "exp", "log", "sqrt", "rsqrt", "pow", "abs",
    "tanh", "sigmoid", "clamp", "maximum", "minimum", "where", "softmax", "log_softmax",
    "nn.functional.cross_entropy", "nn.functional.nll_loss", "nn.functional.mse_loss",
    "nn.functional.binary_cross_entropy_with_logits", "nn.functional.linear", "nn.functional.conv2d",
    "nn.functional.max_pool2d", "nn.functional.avg_pool2d", "nn.functional.adaptive_avg_pool2d",
    "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "nn.functional.leaky_relu",
    "nn.functional.layer_norm", "nn.functional.batch_norm", "nn.functional.group_norm",
    "nn.functional.embedding", "nn.functional.dropout", "nn.functional.scaled_dot_product_attention",
    "nn.functional.pad", "sum", "mean", "var", "max", "argmax", "cat", "stack", "reshape", "view",
    "transpose", "permute", "flatten", "squeeze", "unsqueeze", "expand", "t", "index_select", "gather",
    "scatter", "masked_fill", "topk", "sort", "argsort", "cumsum", "einsum", "tril", "triu", "zeros_like",
    "ones_like", "arange", "full", "repeat", "repeat_interleave", "roll", "flip", "norm", "clone", "contiguous",
    "to", "float", "long", "split", "chunk", "__getitem__", "logsumexp", "amax", "new_zeros", "multinomial",
    "nn.functional.rms_norm", "nn.functional.normalize", "nn.functional.softplus",
    "nn.functional.conv1d", "bfloat16",
]


def _by_name(results):
    return {r.full_name: r for r in results}


def _committed(device):
    path = HERE / f"opinfo_{device}.md"
    return opinfo.read_table(path.read_text(encoding="utf-8"))[1] if path.exists() else {}


def _check(results, device, floor, names=None):
    got = _by_name(results)
    wrong = {n for n, r in got.items() if r.status == "wrong"}
    new_wrong = wrong - KNOWN_WRONG
    assert not new_wrong, "webgrad gives wrong results:\n" + "\n".join(f"{n}: {got[n].reason}" for n in sorted(new_wrong))
    fixed = {n for n in KNOWN_WRONG if n in got and got[n].status != "wrong"}
    assert not fixed, f"no longer wrong, delete from KNOWN_WRONG: {sorted(fixed)}"
    passed = sum(r.status == "pass" for r in results)
    assert passed >= floor, f"{opinfo.summary(results, device)}: fewer than the floor of {floor} pass"
    committed = _committed(device)
    stale = sorted(n for n, r in got.items() if committed.get(n, ("",))[0] != r.status)
    assert not stale, (f"tests/compat/opinfo_{device}.md is out of date for {stale[:10]} "
                       f"({len(stale)} entries): run {REGENERATE.format(device)}")
    if passed > floor and names is None:
        print(f"{opinfo.summary(results, device)}: raise CPU_PASS_FLOOR to {passed}")


def test_cpu_in_full():
    results = opinfo.run("cpu")
    assert len(results) == len(opinfo.entries())
    _check(results, "cpu", CPU_PASS_FLOOR)


@pytest.mark.skipif(not webgpu_available(), reason="no WebGPU adapter")
def test_webgpu_ops_real_scripts_use():
    results = opinfo.run("webgpu", WEBGPU_OPS)
    known = {op.name for op in opinfo.entries()}
    assert not set(WEBGPU_OPS) - known, f"not OpInfo names: {sorted(set(WEBGPU_OPS) - known)}"
    _check(results, "webgpu", WEBGPU_PASS_FLOOR, WEBGPU_OPS)


# ------------------------------------------------------------------------ the harness catches what it should
def _entry(full_name):
    return next(op for op in opinfo.entries([full_name.split(":")[0]])
                if opinfo.Result(op.name, op.variant_test_name, "").full_name == full_name)


class _ScaledGrad(wg.autograd.Function):
    """abs with a gradient 1% too large."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return wg.abs(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * wg.sign(x) * 1.01


def test_a_right_op_passes():
    r = opinfo.run_entry(_entry("abs"))
    assert (r.status, r.reason) == ("pass", "") and r.samples >= 1


def test_a_wrong_forward_value_is_wrong():
    r = opinfo.run_entry(_entry("abs"), impl=lambda x: wg.abs(x) * 1.001)
    assert r.status == "wrong" and r.reason.startswith("output:") and "float32[20, 20]" in r.reason


def test_a_wrong_gradient_is_wrong():
    r = opinfo.run_entry(_entry("abs"), impl=_ScaledGrad.apply)
    assert r.status == "wrong" and r.reason.startswith("gradient of input 0:")


def test_a_missing_gradient_is_forward_only():
    r = opinfo.run_entry(_entry("abs"), impl=lambda x: wg.abs(x).detach())
    assert r.status == "forward-only" and "does not require grad" in r.reason


def test_an_exception_is_an_error_with_its_type():
    def boom(x):
        raise ValueError("no\nsecond line")
    r = opinfo.run_entry(_entry("abs"), impl=boom)
    assert r.status == "error" and r.reason.startswith("ValueError: no on sample (float32[20, 20])")


def test_an_entry_past_its_time_box_stops():
    def slow(x):
        time.sleep(0.5)
        return wg.abs(x)
    r = opinfo.run_entry(_entry("abs"), time_box=0.1, impl=slow)
    assert r.status == "error" and r.reason == "time box of 0.1 s reached before a sample finished"


def test_a_wrong_dtype_or_shape_is_wrong():
    r = opinfo.run_entry(_entry("argmax"), impl=lambda x, *a, **k: wg.argmax(x, *a, **k).float())
    assert r.status == "wrong" and "dtype float32, torch int64" in r.reason
    r = opinfo.run_entry(_entry("sum"), impl=lambda x, *a, **k: wg.sum(x, *a, **k).unsqueeze(0))
    assert r.status == "wrong" and "shape" in r.reason


def test_int64_results_compare_by_value():
    r = opinfo.run_entry(_entry("argmax"))
    assert r.status == "pass"
    int64 = wg.argmax(wg.ones(2)).dtype.name == "int64"
    assert r.int_dtype == ("" if int64 else "int32 for torch's int64")
    r = opinfo.run_entry(_entry("argmax"), impl=lambda x, *a, **k: wg.argmax(x, *a, **k) + 1)
    assert r.status == "wrong" and "output: at" in r.reason


def test_random_ops_compare_shapes_only():
    r = opinfo.run_entry(_entry("nn.functional.dropout"))
    assert r.status == "pass" and "random values: shapes and dtypes compared" in r.notes
    r = opinfo.run_entry(_entry("nn.functional.dropout"),
                         impl=lambda x, *a, **k: wg.nn.functional.dropout(x, *a, **k)[..., :1])
    assert r.status == "wrong"


def test_a_name_webgrad_lacks_is_missing():
    op = _entry("abs")
    fake = type(op).__new__(type(op))
    fake.__dict__.update(op.__dict__, name="special.no_such_function")
    r = opinfo.run_entry(fake)
    assert (r.status, r.reason) == ("missing", "webgrad has no torch.special.no_such_function")


def test_samples_convert_with_their_dtypes():
    conv = opinfo.Converter("cpu")
    idx = torch.tensor([[0, 2]])
    mask = torch.tensor([True, False])
    x = torch.ones(2, 3, requires_grad=True)
    got = conv([x, (idx, mask), {"dtype": torch.float16, "size": torch.Size([2, 3]), "device": "cpu",
                                 "memory_format": torch.contiguous_format}, x])
    assert got[0].requires_grad and got[3] is got[0]
    assert got[1][0].dtype is opinfo.webgrad_dtype(torch.int64) and got[1][0].tolist() == [[0, 2]]
    assert got[1][1].dtype is wg.bool and got[1][1].tolist() == [True, False]
    assert got[2] == {"dtype": wg.float16, "size": (2, 3), "device": "cpu", "memory_format": wg.contiguous_format}
    assert isinstance(got[2]["size"], wg.Size)
    z = conv(torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64))  # webgrad's complex64 (a view over pairs)
    assert z.dtype is wg.complex64 and z.tolist() == [1 + 2j, 3 - 1j]
    b = conv(torch.tensor([1.5, -2.0], dtype=torch.bfloat16))
    assert b.dtype is wg.bfloat16 and b.tolist() == [1.5, -2.0]
    with pytest.raises(opinfo.Unconvertible, match="float8_e5m2"):
        conv(torch.ones(2, dtype=torch.float8_e5m2))
