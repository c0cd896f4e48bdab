"""Batched matmul with fused bias and ReLU: shaders/matmul.wgsl, dispatched as matmul_plan says.

matmul_plan.py (tile choice, K split, override constants, uniform layout) and matmul.wgsl belong to
the matmul kernel; this module only checks the views and hands the plan to the runtime (run_plan,
which the convolutions in conv.py use too). matmul.wgsl also comes in float16 variants (typed.py: the
element types of matmul_io.wgsl), which f16.py's half launcher runs on float16 operands, in twins whose
epilogue also writes GELU of the output into a second one (epilogue_text), which fusion.py puts in a captured
step's linear -> gelu, and in f32h twins (retyped), which read or write float32 through float16 rounding:
cast_folding.py folds autocast's casts back to float32 into a captured step's products with them.
"""

from ...dtypes import float16, float32
from .. import kernels
from ...ops import table
from . import matmul_plan, shaders, typed
from .elementwise import materialize
from .dispatch import Kernel
from .views import check_view

_LAYOUT = ((0, "read"), (1, "read"), (2, "write"), (3, "read"), (4, "uniform"))
_KERNELS = {}  # (file, entry point, element types, activation) -> Kernel (the plan names the override constants)
_KEYS = {}  # Kernel -> its key in _KERNELS
# Activations of matmul.wgsl's epilogue (fusion.py fuses a captured linear -> gelu): the op table's records
ACTIVATIONS = ("gelu", "gelu_tanh")
# The element types (AT, BT, OT, CT) of matmul_io.wgsl's ELEMENT_TYPES: a, b, out, bias
F32 = ("f32", "f32", "f32", "f32")
_WGSL = {float32: "f32", float16: "f16"}


def shader(name=matmul_plan.SHADER, types=F32, activation=None):
    """Shader file `name` (matmul.wgsl, or matmul_cpu_*.wgsl on a software adapter) with element types
    `types` (AT, BT, OT, CT: see matmul_io.wgsl) and matmul.wgsl's activation epilogue (None, or one of
    ACTIVATIONS: epilogue_text); float16 ones need shader-f16."""
    return typed.typed_shader(name, tuple(zip(("AT", "BT", "OT", "CT"), types)),
                              (("EPILOGUE", epilogue_text(activation)),))


def epilogue_text(activation):
    """matmul.wgsl's ``//! splice EPILOGUE``: act_store and act_store4, which get every stored output. None:
    they do nothing. An activation (a record of the op table): they write its value of each (rounded) output
    into binding 5 at the same place, in the op table's WGSL (the elementwise op's numerics: f32 math on the
    stored value, one rounding)."""
    if activation is None:
        return "fn act_store(o: u32, y: OT) {}\nfn act_store4(i: u32, y: vec4<OT>) {}\n"
    if activation not in ACTIVATIONS:
        raise ValueError(f"matmul: no {activation!r} epilogue (one of {ACTIVATIONS})")
    return "\n".join((
        "@group(0) @binding(5) var<storage, read_write> act: array<OT>;",
        "@group(0) @binding(5) var<storage, read_write> act4: array<vec4<OT>>;",
        shaders.source("activations.wgsl"),
        f"fn activation(x: f32) -> f32 {{ return {table.UNARY[activation].wgsl}; }}",
        "fn act_store(o: u32, y: OT) { act[o] = to_OT(activation(f32(y))); }",
        "fn act_store4(i: u32, y: vec4<OT>) {",
        "    let v = vec4<f32>(y);",
        "    act4[i] = to_OT4(vec4<f32>(activation(v.x), activation(v.y), activation(v.z), activation(v.w)));",
        "}", ""))


def _kernel(name, entry, types=F32, activation=None):
    key = (name, entry, types, activation)
    kernel = _KERNELS.get(key)
    if kernel is None:
        layout = _LAYOUT if activation is None else _LAYOUT + ((5, "write"),)
        kernel = _KERNELS[key] = Kernel(shader(name, types, activation), entry, layout)
        _KEYS[kernel] = key
    return kernel


def activated(kernel, activation):
    """The twin of `kernel` (a matmul.wgsl product or reduction of any element types) whose epilogue also writes
    `activation` (one of ACTIVATIONS) of its output into binding 5; None for any other kernel."""
    key = _KEYS.get(kernel)
    if key is None or key[0] != matmul_plan.SHADER or key[3] is not None:
        return None
    return _kernel(key[0], key[1], key[2], activation)


def element_types_of(kernel):
    """The element types (AT, BT, OT, CT) of a matmul.wgsl product or reduction, and its activation epilogue (None
    or one of ACTIVATIONS); None for any other kernel (matmul_cpu.wgsl's among them)."""
    key = _KEYS.get(kernel)
    if key is None or key[0] != matmul_plan.SHADER:
        return None
    return key[2], key[3]


def retyped(kernel, types):
    """The twin of `kernel` (a matmul.wgsl kernel: element_types_of) on element `types` (AT, BT, OT, CT), where
    each may also be typed.py's "f32h" (cast_folding.py stores a product's result so)."""
    key = _KEYS[kernel]
    return _kernel(key[0], key[1], tuple(types), key[3])


def _operand(view, name, batch, rows, cols, dtype=float32):
    """Check a [batch, rows, cols] operand whose last two dims are contiguous; its batch stride."""
    check_view(view, name, dtype=dtype, ndim=3)
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


def checked(out, a, b, trans_a, trans_b, bias, dtype=float32, bias_dtype=float32):
    """Check the kernel's views (out, a, b of `dtype`, bias of `bias_dtype`); (a's, b's batch stride)."""
    check_view(out, "out", dtype=dtype, contiguous=True, ndim=3)
    batch, M, N = out.shape
    K = a.shape[1] if trans_a else a.shape[2] if len(a.shape) == 3 else -1
    a_stride = _operand(a, "a", batch, *((K, M) if trans_a else (M, K)), dtype)
    b_stride = _operand(b, "b", batch, *((N, K) if trans_b else (K, N)), dtype)
    if bias is not None:
        check_view(bias, "bias", dtype=bias_dtype, contiguous=True, ndim=1)
        if bias.shape != (N,):
            raise ValueError(f"matmul: bias has shape {bias.shape}, expected ({N},)")
    return a_stride, b_stride


@kernels.matmul.implement("webgpu")
def matmul(rt, out, a, b, trans_a=False, trans_b=False, bias=None, relu=False):
    strides = checked(out, a, b, trans_a, trans_b, bias)
    if out.numel == 0:
        return
    a, b, bias = (materialize(rt, v) if v is not None and v.storage is out.storage else v for v in (a, b, bias))
    launch(rt, out, a, b, trans_a, trans_b, bias, relu, strides)


@kernels.matmul_causal.implement("webgpu")
def matmul_causal(rt, out, a, b, trans_a=False, trans_b=False, part="out"):
    if part not in matmul_plan.CAUSAL_PARTS:
        raise ValueError(f"matmul_causal: part must be one of {sorted(matmul_plan.CAUSAL_PARTS)}, got {part!r}")
    strides = checked(out, a, b, trans_a, trans_b, None)
    if out.numel == 0:
        return
    a, b = (materialize(rt, v) if v.storage is out.storage else v for v in (a, b))
    launch(rt, out, a, b, trans_a, trans_b, None, False, strides, causal=matmul_plan.CAUSAL_PARTS[part])


def launch(rt, out, a, b, trans_a, trans_b, bias, relu, strides, types=F32, causal=0):
    """Plan and record the product of views `checked` accepted (strides: its result), none of them in out's
    storage, on the kernel variant of element `types` (AT, BT, OT, CT); causal: matmul_plan.plan's."""
    batch, M, N = out.shape
    K = a.shape[1] if trans_a else a.shape[2]
    p = matmul_plan.plan(batch, M, N, K, trans_a, trans_b, bias is not None, relu, a.offset, b.offset,
                         out.offset, bias.offset if bias is not None else 0, *strides, profile=profile(rt),
                         causal=causal)
    run_plan(rt, p, a.storage, b.storage, out.storage, bias.storage if bias is not None else None, types)


def element_types(out, a, b, bias):
    """The element types (AT, BT, OT, CT) of matmul_io.wgsl for these views (float32 or float16); with no
    bias, binding 3 holds a's buffer, so CT is a's type."""
    return _WGSL[a.dtype], _WGSL[b.dtype], _WGSL[out.dtype], _WGSL[(bias if bias is not None else a).dtype]


def run_plan(rt, p, a, b, out, bias=None, types=F32):
    """Record plan p (matmul_plan.plan) on storages a, b, out and bias (None: none), of element types
    `types` (AT, BT, OT, CT: element_types). With split-K the product writes its partial tiles into the
    runtime's kept scratch (Runtime.split_k_scratch, shared by every split product, float32 whatever the
    operands), then the reduction writes out."""
    key = p if types == F32 else (p, types)
    launches = rt.memo.get(key)  # plans are cached by matmul_plan, so a repeated product finds its Launches
    if launches is None:
        # a split product writes f32 partials (OT = f32), which its reduction reads (AT = f32)
        split = (types[0], types[1], "f32", types[3]), ("f32", types[1], types[2], types[3])
        launches = rt.memo[key] = tuple(
            rt.launch(_kernel(q.shader, q.entry_point, t if p.reduce is not None else types),
                      tuple(sorted(q.constants.items())), q.params, q.workgroups)
            for q, t in zip((p, p.reduce), split) if q is not None)
    if bias is None:
        bias = a  # any read-only buffer: HAS_BIAS is off
    if p.reduce is None:
        rt.run(launches[0], (a, b, out, bias))
        return
    scratch = rt.split_k_scratch(p.scratch)
    rt.run(launches[0], (a, b, scratch, bias))
    rt.run(launches[1], (scratch, b, out, bias))  # binding 1 is unused by the reduction
