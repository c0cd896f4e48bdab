"""Batched matmul with fused bias and ReLU: shaders/matmul.wgsl, dispatched as matmul_plan says.

matmul_plan.py (tile choice, K split, override constants, uniform layout) and matmul.wgsl belong to
the matmul kernel; this module only checks the views and hands the plan to the runtime (run_plan,
which the convolutions in conv.py use too).
"""

from ...dtypes import float32
from .. import kernels
from . import matmul_plan
from .elementwise import materialize
from .dispatch import Kernel, Shader
from .views import check_view

_LAYOUT = ((0, "read"), (1, "read"), (2, "write"), (3, "read"), (4, "uniform"))
_SHADERS = {}  # file name -> Shader: matmul.wgsl, or matmul_cpu_*.wgsl on a software adapter
_KERNELS = {}  # (file, entry point) -> Kernel (the plan names the override constants itself)


def _kernel(shader, entry):
    kernel = _KERNELS.get((shader, entry))
    if kernel is None:
        if shader not in _SHADERS:
            _SHADERS[shader] = Shader(shader, {})
        kernel = _KERNELS[shader, entry] = Kernel(_SHADERS[shader], entry, _LAYOUT)
    return kernel


def _operand(view, name, batch, rows, cols):
    """Check a [batch, rows, cols] operand whose last two dims are contiguous; its batch stride."""
    check_view(view, name, dtype=float32, ndim=3)
    if view.shape != (batch, rows, cols):
        raise ValueError(f"matmul: {name} has shape {view.shape}, expected {(batch, rows, cols)}")
    if rows * cols and (view.strides[2] != 1 and cols > 1 or view.strides[1] != cols and rows > 1):
        raise ValueError(f"matmul: the last two dims of {name} must be contiguous, got strides {view.strides}")
    stride = view.strides[0] if batch > 1 else 0
    if stride not in (0, rows * cols) and batch > 1:
        raise ValueError(f"matmul: {name}'s batch stride must be 0 or {rows * cols}, got {stride}")
    return stride


def profile(rt):
    """The matmul_plan profile of runtime rt's adapter (runtime.KERNEL_VARIANTS)."""
    return rt.variant["matmul_profile"]


@kernels.matmul.implement("webgpu")
def matmul(rt, out, a, b, trans_a=False, trans_b=False, bias=None, relu=False):
    check_view(out, "out", dtype=float32, contiguous=True, ndim=3)
    batch, M, N = out.shape
    K = a.shape[1] if trans_a else a.shape[2] if len(a.shape) == 3 else -1
    a_stride = _operand(a, "a", batch, *((K, M) if trans_a else (M, K)))
    b_stride = _operand(b, "b", batch, *((N, K) if trans_b else (K, N)))
    if bias is not None:
        check_view(bias, "bias", dtype=float32, contiguous=True, ndim=1)
        if bias.shape != (N,):
            raise ValueError(f"matmul: bias has shape {bias.shape}, expected ({N},)")
    if out.numel == 0:
        return
    a, b, bias = (materialize(rt, v) if v is not None and v.storage is out.storage else v for v in (a, b, bias))
    p = matmul_plan.plan(batch, M, N, K, trans_a, trans_b, bias is not None, relu, a.offset, b.offset,
                         out.offset, bias.offset if bias is not None else 0, a_stride, b_stride, profile=profile(rt))
    run_plan(rt, p, a.storage, b.storage, out.storage, bias.storage if bias is not None else None)


def run_plan(rt, p, a, b, out, bias=None):
    """Record plan p (matmul_plan.plan) on storages a, b, out and bias (None: none). With split-K the
    product writes its partial tiles into the runtime's kept scratch (Runtime.split_k_scratch, shared by
    every split product), then the reduction writes out."""
    launches = rt.memo.get(p)  # plans are cached by matmul_plan, so a repeated product finds its Launches
    if launches is None:
        launches = rt.memo[p] = tuple(
            rt.launch(_kernel(q.shader, q.entry_point), tuple(sorted(q.constants.items())), q.params, q.workgroups)
            for q in (p, p.reduce) if q is not None)
    if bias is None:
        bias = a  # any read-only buffer: HAS_BIAS is off
    if p.reduce is None:
        rt.run(launches[0], (a, b, out, bias))
        return
    scratch = rt.split_k_scratch(p.scratch)
    rt.run(launches[0], (a, b, scratch, bias))
    rt.run(launches[1], (scratch, b, out, bias))  # binding 1 is unused by the reduction
