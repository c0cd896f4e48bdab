"""float16 on WebGPU (shaders/f16.wgsl): casts, the half product, and the float16 policies of the registry.

float16 needs the adapter's optional `shader-f16` feature (WGSL `enable f16;`): the runtime requests it where
the adapter offers it and says so in ``rt.has_f16``. Without it (SwiftShader, many mobile adapters) the
first float16 storage raises an error that names the feature.

What runs in half precision natively (half operands read into f32, f32 math, each result rounded once:
PyTorch's numerics on CUDA, where half convolutions accumulate in f32 and half elementwise ops compute in
f32 "opmath"): casts and copies (any strides); convolutions and both their gradients on GPU adapters
(conv.py's half launchers: conv_gemm.wgsl's float16 variants, or winograd.wgsl's where winograd.suits);
BatchNorm (batch_norm.py: half activations, f32 statistics and parameters); unary, unary_backward and binary
on contiguous halves (elementwise.wgsl's float16 entry points); products (linear, matmul, bmm) of half operands
on GPU adapters (matmul.wgsl's float16 variants: NATIVE_MATMUL below). Every other kernel (reductions, softmax,
pooling, ...) and float16 work that does not fit those kernels (strided views, broadcasts) runs on float16
operands by converting them to float32 scratch views, running its float32 kernel and rounding the result into
the float16 output, at the cost of two extra conversions: each record's policy (kernels.py) says which, and
:func:`run` applies it. The backend calls :func:`run` only once a float16 storage exists, so float32 work never
pays for it.
"""

import os
import struct

from ..._view import View
from ...dtypes import float16, float32
from ..kernels import HALF, IN, INOUT, NATIVE, REFUSE
from .. import kernels
from . import elementwise
from . import matmul as tiled
from .dispatch import Kernel, grid
from .typed import F16Shader
from .views import MAX_RANK, check_view, contiguous_view, holds_dtype, merge_dims

FEATURE = "shader-f16"

SHADER = F16Shader("f16.wgsl", {})
_CAST_LAYOUT = ((0, "write"), (1, "read"), (2, "uniform"))
CASTS = {(float16, float32): Kernel(SHADER, "h_from_f", _CAST_LAYOUT),
         (float32, float16): Kernel(SHADER, "f_from_h", _CAST_LAYOUT),
         (float16, float16): Kernel(SHADER, "h_from_h", _CAST_LAYOUT)}
# Both contiguous, with offsets and size multiples of 4: four elements a thread through vec4 views. H200, ResNet-18's
# replayed autocast step: the 33 weight casts took 285 us and the 34 casts of their gradients back 235 us with the
# strided kernels above (bench replay --amp --each).
CONTIGUOUS_CASTS = {(float16, float32): Kernel(SHADER, "h_from_f4", _CAST_LAYOUT),
                    (float32, float16): Kernel(SHADER, "f_from_h4", _CAST_LAYOUT),
                    (float16, float16): Kernel(SHADER, "h_from_h4", _CAST_LAYOUT)}
MATMUL = Kernel(SHADER, "matmul_h", ((0, "read"), (1, "read"), (2, "write"), (3, "read"), (4, "uniform")),
                ("TRANS_A", "TRANS_B", "HAS_BIAS", "RELU"))
_CAST_PARAMS = struct.Struct("<2I2i8I8i8i")
_MATMUL_PARAMS = struct.Struct("<12I")
TILE = 128  # outputs per workgroup side of matmul_h


def missing_feature_error(rt):
    info = rt.binding.info()
    name = info.get("device") or info.get("description") or info.get("architecture") or "this adapter"
    return TypeError(
        f"float16 on WebGPU needs the adapter feature '{FEATURE}', which {name} does not offer (SwiftShader, "
        "the browser's software adapter, and many mobile GPUs lack it); keep float32 there (webgrad.autocast "
        "is then a no-op you can switch off with enabled=False), or use device='cpu' for float16")


# ------------------------------------------------------------------ casts and copies


def copy(rt, out, x):
    """out = x (shapes equal, any strides) where either is float16; other dtypes meet float16 through f32."""
    check_view(out, "out")
    check_view(x, "x")
    if out.shape != x.shape:
        raise ValueError(f"x has shape {x.shape} but out has shape {out.shape}")
    if out.numel == 0:
        return
    if x.dtype not in (float16, float32):  # ints, bytes, bools: their own float32 conversion first
        x = _scratch_from(rt, x)
    if out.dtype not in (float16, float32):
        tmp = _scratch(rt, out.shape)
        copy(rt, tmp, x)
        elementwise.copy(rt, out, tmp)
        return
    if x.storage is out.storage and not (x.offset == out.offset and x.strides == out.strides):
        tmp = contiguous_view(rt.storage(x.numel, x.dtype), x.shape, x.dtype)
        copy(rt, tmp, x)
        x = tmp
    # (the key names the pair's strided kernel; the launch may be its contiguous twin, chosen from the layout)
    key = (CASTS[(out.dtype, x.dtype)], out.shape, out.strides, out.offset, x.strides, x.offset)
    launch = rt.memo.get(key)
    if launch is None:
        dims = merge_dims(out.shape, [out.strides, x.strides])
        if len(dims) > MAX_RANK:
            raise ValueError(f"float16 copies walk at most {MAX_RANK} dims after merging; got {len(dims)}")
        whole = (len(dims) == 1 and list(dims[0][1]) == [1, 1] and out.numel % 4 == 0 and out.offset % 4 == 0
                 and x.offset % 4 == 0)
        kernel = (CONTIGUOUS_CASTS if whole else CASTS)[(out.dtype, x.dtype)]
        pad = [(1, (0, 0))] * (MAX_RANK - len(dims))
        full = dims + pad
        params = _CAST_PARAMS.pack(out.numel, len(dims), out.offset, x.offset,
                                   *(n for n, _ in full), *(s[0] for _, s in full), *(s[1] for _, s in full))
        threads = out.numel // 4 if whole else out.numel
        launch = rt.memo[key] = rt.launch(kernel, (), params, grid(-(-threads // 256)))
    rt.run(launch, (out.storage, x.storage))


def _scratch(rt, shape, dtype=float32):
    n = 1
    for s in shape:
        n *= s
    return contiguous_view(rt.storage(n, dtype), tuple(shape), dtype)


def _scratch_from(rt, x):
    """A contiguous float32 copy of view x."""
    tmp = _scratch(rt, x.shape)
    if x.dtype is float16:
        copy(rt, tmp, x)
    else:
        elementwise.copy(rt, tmp, x)
    return tmp


# ------------------------------------------------------------------ matmul


def matmul(rt, out, a, b, trans_a=False, trans_b=False, bias=None, relu=False):
    """matmul_h: the backend's matmul (same views and semantics as matmul.py's) for float16 out, a, b and bias."""
    check_view(out, "out", dtype=float16, contiguous=True, ndim=3)
    batch, M, N = out.shape
    K = a.shape[1] if trans_a else a.shape[2]
    strides = []
    operands = ((a, "a", *((K, M) if trans_a else (M, K))), (b, "b", *((N, K) if trans_b else (K, N))))
    for view, name, rows, cols in operands:
        check_view(view, name, dtype=float16, ndim=3)
        if view.shape != (batch, rows, cols) or (rows * cols and (view.strides[2] != 1 and cols > 1 or
                                                                 view.strides[1] != cols and rows > 1)):
            raise ValueError(f"matmul: {name} must be [{batch}, {rows}, {cols}] with contiguous rows, got shape "
                             f"{view.shape} strides {view.strides}")
        stride = view.strides[0] if batch > 1 else 0
        if stride not in (0, rows * cols):
            raise ValueError(f"matmul: {name}'s batch stride must be 0 or {rows * cols}, got {stride}")
        strides.append(stride)
    if bias is not None:
        check_view(bias, "bias", dtype=float16, contiguous=True, ndim=1)
        if bias.shape != (N,):
            raise ValueError(f"matmul: bias has shape {bias.shape}, expected ({N},)")
    if out.numel == 0:
        return
    a, b, bias = (_materialized(rt, v) if v is not None and v.storage is out.storage else v for v in (a, b, bias))
    key = (MATMUL, batch, M, N, K, trans_a, trans_b, bias is not None, relu, a.offset, b.offset, out.offset,
           bias.offset if bias is not None else 0, *strides)
    launch = rt.memo.get(key)
    if launch is None:
        if batch > rt.limits["max_compute_workgroups_per_dimension"]:
            raise ValueError(f"float16 matmul: a batch of {batch} is more than one dispatch covers")
        constants = (("TRANS_A", int(trans_a)), ("TRANS_B", int(trans_b)), ("HAS_BIAS", int(bias is not None)),
                     ("RELU", int(relu)))
        params = _MATMUL_PARAMS.pack(M, N, K, a.offset, b.offset, out.offset, bias.offset if bias is not None else 0,
                                     strides[0], strides[1], 0, 0, 0)
        launch = rt.memo[key] = rt.launch(MATMUL, constants, params, (-(-N // TILE), -(-M // TILE), batch))
    rt.run(launch, (a.storage, b.storage, out.storage, (bias or a).storage))


def _materialized(rt, v):
    tmp = contiguous_view(rt.storage(v.numel, v.dtype), v.shape, v.dtype)
    copy(rt, tmp, v)
    return tmp


# Half products run on matmul.wgsl's float16 variants (matmul.py; on GPU adapters, where matmul.wgsl runs):
# halves read from global memory as they are, converted to f32 where they are staged into the f32 workgroup
# tiles, so the multiply, the tiles and the plans are the float32 kernel's; one rounding at the store. Before
# them, half products ran the float32 kernel on float32 copies of the operands, rounded into the half output:
# the same numerics (a half is exact in f32, products and sums in f32, one rounding) for three more passes
# through memory and their scratch. matmul_h (shaders/f16.wgsl: half tiles, no swizzled or warp-tiled
# layouts) is slower than both; H200, `python tools/bench_f16.py --native --sizes 8192,2304,768 8192,3072,768
# 8192,768,3072 4096,4096,4096` (a GPT-2 step's products, then a square one), TFLOP/s as float32 / float16
# through the copies / matmul_h: 22.8 / 27.2 / 23.1, 31.5 / 28.9 / 25.9, 31.2 / 29.3 / 20.2, 35.2 / 34.1 /
# 27.7. WEBGRAD_HALF_MATMUL=native turns matmul_h on (to measure a whole step). Mixed operands (one half, one
# float32) and software adapters (matmul_cpu.wgsl, float32 only) keep the copies.
NATIVE_MATMUL = os.environ.get("WEBGRAD_HALF_MATMUL") == "native"


@kernels.matmul.implement("webgpu", half=True)
def matmul_half(rt, out, a, b, trans_a=False, trans_b=False, bias=None, relu=False):
    if not (out.dtype is a.dtype is b.dtype is float16):
        return NotImplemented
    if NATIVE_MATMUL and (bias is None or bias.dtype is float16):
        return matmul(rt, out, a, b, trans_a, trans_b, bias, relu)
    if tiled.profile(rt) != "gpu" or bias is not None and bias.dtype not in (float16, float32):
        return NotImplemented
    strides = tiled.checked(out, a, b, trans_a, trans_b, bias, float16, bias.dtype if bias is not None else None)
    if out.numel == 0:
        return None
    a, b, bias = (_materialized(rt, v) if v is not None and v.storage is out.storage else v for v in (a, b, bias))
    tiled.launch(rt, out, a, b, trans_a, trans_b, bias, relu, strides, tiled.element_types(out, a, b, bias))
    return None


@kernels.copy.implement("webgpu", half=True)
def copy_half(rt, out, x):
    return copy(rt, out, x)


# ------------------------------------------------------------------ the float16 policies of the registry


def run(rt, kernel, args, kwargs):
    """Run `kernel` (a record of _backends/kernels.py) on arguments that may hold float16 views, by its
    float16 policy: NATIVE, its launcher takes them; HALF, its half launcher where that takes these views,
    else CAST; CAST, through float32 scratch copies; REFUSE, TypeError."""
    impl = kernel.impls["webgpu"]
    if not _holds_half(args) and not _holds_half(kwargs.values()):
        return impl(rt, *args, **kwargs)
    policy = kernel.half
    if policy == NATIVE:
        return impl(rt, *args, **kwargs)
    if policy == REFUSE:
        raise TypeError(f"{kernel.name}: the WebGPU backend updates float32 tensors only; keep parameters, "
                        "gradients and optimizer state in float32 (webgrad.autocast casts per op)")
    if policy == HALF:
        result = kernel.half_impls["webgpu"](rt, *args, **kwargs)
        if result is not NotImplemented:
            return result
    return _through_f32(rt, kernel, impl, args, kwargs)


def _holds_half(values):
    return holds_dtype(values, (float16,))


def _through_f32(rt, kernel, impl, args, kwargs):
    """`impl` on float32 scratch copies of the float16 views: the ones it reads are converted first (IN and
    INOUT arguments), and the ones it writes (OUT, INOUT) are rounded back into their float16 views after."""
    back = []

    def scratch(v, kind):
        if not (isinstance(v, View) and v.dtype is float16):
            return v
        if kind == IN:
            return _scratch_from(rt, v)
        tmp = _scratch(rt, v.shape)
        if kind == INOUT:
            copy(rt, tmp, v)
        back.append((v, tmp))
        return tmp

    kinds = kernel.positions
    new_args = [scratch(v, kinds[i]) for i, v in enumerate(args)]
    new_kwargs = {k: scratch(v, kernel.by_name[k]) for k, v in kwargs.items()}
    result = impl(rt, *new_args, **new_kwargs)
    for v, tmp in back:
        copy(rt, v, tmp)
    return result
