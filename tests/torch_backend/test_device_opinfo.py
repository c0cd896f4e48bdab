"""PyTorch's OpInfo samples on the webgpu torch device against the CPU (webgrad.testing.device_opinfo): entries
that run wholly on the device, values and gradients matching, stay so. The full run and its table:

    python -m webgrad.testing.device_opinfo --write-table tests/compat/opinfo_torch_device.md
"""

import os

import pytest

torch = pytest.importorskip("torch")
if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 9):
    pytest.skip("webgrad.torch_device needs torch >= 2.9", allow_module_level=True)
pytest.importorskip("expecttest")  # op_db needs it

from helpers import webgpu_available  # noqa: E402

if not webgpu_available():  # the mechanics on webgrad's NumPy backend where no adapter exists
    os.environ.setdefault("WEBGRAD_TORCH_DEVICE", "cpu")

from webgrad.testing import device_opinfo  # noqa: E402

# entries that had taken the CPU fallback (or failed) before the ATen table mapped their ops
FIXED = [
    "masked_fill", "bernoulli", "logsumexp", "remainder", "fmod", "flip", "roll", "cumsum", "cumprod", "sort", "argsort", "topk",
    "multinomial", "eye", "linspace", "logspace", "std", "var", "std_mean", "prod", "nansum", "nanmean",
    "nn.functional.interpolate:nearest", "nn.functional.interpolate:bilinear", "atan2", "isin", "count_nonzero",
    "floor_divide", "div:floor_rounding", "div:trunc_rounding", "trunc", "exp2", "nn.functional.conv1d",
    "nn.functional.conv_transpose2d", "linalg.vector_norm", "norm", "nn.functional.normalize",
    "nn.functional.cosine_similarity", "cdist", "baddbmm", "addmv", "dot", "xlogy", "nn.functional.kl_div",
    "nn.functional.smooth_l1_loss", "nn.functional.huber_loss", "__getitem__", "index_put", "scatter",
    "masked_select", "masked_scatter", "copysign", "rsub", "argmin", "aminmax", "kthvalue", "median", "mode",
    "cummax", "logcumsumexp", "equal", "softmax", "log_softmax", "masked.softmax",
    "nn.functional.adaptive_avg_pool2d", "nn.functional.adaptive_max_pool2d", "nn.functional.max_pool2d",
    "nn.functional.avg_pool2d", "nn.functional.pad:reflect", "nn.functional.grid_sample", "unfold",
    "linalg.solve_triangular", "linalg.inv", "linalg.cholesky", "linalg.cross", "lgamma", "digamma",
    "nn.functional.embedding_bag", "nn.functional.max_pool3d", "nn.functional.avg_pool3d",
    "nn.functional.adaptive_avg_pool3d", "nn.functional.adaptive_max_pool3d", "nn.functional.max_unpool2d",
    "nn.functional.max_unpool3d:grad", "index_reduce:amax", "index_reduce:prod", "sgn", "gather", "linalg.pinv",
    "linalg.matrix_rank", "renorm", "nn.functional.batch_norm", "nn.functional.glu", "histc",
    "nn.functional.conv3d", "nn.functional.conv_transpose3d", "nn.functional.conv_transpose1d",
    "_segment_reduce:lengths", "_upsample_bilinear2d_aa", "nn.functional.interpolate:nearest-exact", "linalg.det",
    "linalg.slogdet", "linalg.svd", "linalg.qr", "linalg.lu_factor", "linalg.solve", "cholesky_solve",
    "special.bessel_y0", "special.chebyshev_polynomial_t", "igamma", "unique", "unique_consecutive",
    "nn.functional.pdist", "nn.functional.multilabel_margin_loss", "nn.functional.unfold", "_batch_norm_with_update",
    "histogram", "put", "geqrf", "ormqr", "nn.functional.ctc_loss", "nn.functional.fractional_max_pool2d",
]
# a sample of entries that ran on the device already
OTHERS = ["add", "mul", "matmul", "sum", "mean", "amax", "where", "scatter_add", "index_select", "index_add", "cat",
          "nn.functional.cross_entropy", "nn.functional.layer_norm", "nn.functional.gelu", "tril",
          "nn.functional.embedding"]


def _run(names):
    results = {r.full_name: r for r in device_opinfo.run(names, max_samples=16)}
    missing = sorted(set(names) - set(results))
    assert not missing, f"not OpInfo entries: {missing}"
    return results


@pytest.mark.parametrize("names", [FIXED, OTHERS], ids=["fixed", "others"])
def test_entries_run_on_the_device_and_match_the_cpu(names):
    results = _run(names)
    failing = {n: f"{results[n].status}: {results[n].reason}" for n in names if results[n].status != "pass"}
    assert not failing, "\n".join(f"{n}: {why}" for n, why in failing.items())
    assert all(results[n].samples for n in names)


def test_a_fallback_is_named():
    """An op with no kernel (LAPACK's Bunch-Kaufman LDL^T) is reported with the ATen overload that ran on the CPU."""
    r = _run(["linalg.ldl_factor"])["linalg.ldl_factor"]
    assert r.status == "fallback" and any(name.startswith("aten.linalg_ldl_factor_ex") for name in r.fallbacks)


def test_a_difference_is_reported():
    cpu = torch.tensor([1.0, 2.0])
    with pytest.raises(device_opinfo.Mismatch, match="values differ"):
        device_opinfo.compare(cpu, torch.tensor([1.0, 2.5]).to("webgpu"), device_opinfo.FORWARD_TOL)
    with pytest.raises(device_opinfo.Mismatch, match="dtype"):
        device_opinfo.compare(cpu, cpu.int().to("webgpu"), device_opinfo.FORWARD_TOL)
    with pytest.raises(device_opinfo.Mismatch, match="on cpu"):
        device_opinfo.compare(cpu, cpu.clone(), device_opinfo.FORWARD_TOL)
