"""float16 on WebGPU (shaders/f16.wgsl): storage, casts, the routing of float16 work to native kernels or through f32.

float16 needs the adapter's optional `shader-f16` feature (WGSL `enable f16;`): the runtime requests it where
the adapter offers it and says so in ``rt.has_f16``. Without it (SwiftShader, many mobile adapters) the
first float16 storage raises an error that names the feature.

What runs in half precision natively (half operands read into f32, f32 math, each result rounded once:
PyTorch's numerics on CUDA, where half convolutions accumulate in f32 and half elementwise ops compute in
f32 "opmath"): casts and copies (any strides); convolutions and both their gradients on GPU adapters
(conv_gemm.wgsl's float16 variants, or winograd.wgsl's where winograd.suits: half in and out, f32 between);
BatchNorm (batch_norm.py: half activations, f32 statistics and
parameters); unary, unary_backward and binary on contiguous halves (elementwise.wgsl's float16 entry
points). A half matmul kernel exists but is not yet fast (NATIVE_MATMUL below). Every other kernel of
the backend (reductions, softmax, pooling, matmul, ...) and float16 work that does not fit those
kernels (strided views, broadcasts) runs on float16 operands by converting them to float32 scratch
views, running its float32 kernel and rounding the result into the float16 output, at the cost of two
extra conversions. The routing is installed on a backend when its first float16 storage is made
(:func:`enable`), so float32 work never pays for it.
"""

import struct

from ..._view import View
from ...dtypes import float16, float32
from . import conv, conv_gemm, elementwise, winograd
from .runtime import Kernel, grid
from .typed import F16Shader
from .views import MAX_RANK, check_view, contiguous_view, merge_dims

FEATURE = "shader-f16"

SHADER = F16Shader("f16.wgsl", {})
_CAST_LAYOUT = ((0, "write"), (1, "read"), (2, "uniform"))
CASTS = {(float16, float32): Kernel(SHADER, "h_from_f", _CAST_LAYOUT),
         (float32, float16): Kernel(SHADER, "f_from_h", _CAST_LAYOUT),
         (float16, float16): Kernel(SHADER, "h_from_h", _CAST_LAYOUT)}
# Both contiguous, with offsets and size multiples of 4: four elements a thread through vec4 views. H200, ResNet-18's
# replayed autocast step: the 33 weight casts took 285 us and the 34 casts of their gradients back 235 us with the
# strided kernels above (bench replay --amp --each, /work/.device/2 of session 13).
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


def enable(backend):
    """Make `backend` (a WebGPUBackend) ready for float16 storages, or raise naming the missing feature."""
    rt = backend.runtime
    if not getattr(rt, "has_f16", False):
        raise missing_feature_error(rt)
    if "_f16_routed" in backend.__dict__:
        return
    backend._f16_routed = True
    for name, written, pure in _ROUTED:
        setattr(backend, name, _through_f32(backend, getattr(backend, name), name, written, pure))
    backend.copy = _copy_method(backend, backend.copy)
    backend.matmul = _matmul_method(backend, backend.matmul)
    for name in ("unary", "unary_backward", "binary"):
        native = getattr(type(backend), name).__get__(backend)  # the unrouted method
        setattr(backend, name, _elementwise_method(native, getattr(backend, name)))
    for name in ("conv2d", "conv2d_backward_input", "conv2d_backward_weight"):
        setattr(backend, name, _conv_method(backend, name, getattr(backend, name)))


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


def _copy_method(backend, original):
    rt = backend.runtime

    def copy_(out, x):
        if out.dtype is float16 or x.dtype is float16:
            copy(rt, out, x)
        else:
            original(out, x)
    return copy_


# ------------------------------------------------------------------ matmul


def matmul(rt, out, a, b, trans_a=False, trans_b=False, bias=None, relu=False):
    """The backend's matmul (same views and semantics as matmul.py's) for float16 out, a, b and bias."""
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


# Whether half products use matmul_h (shaders/f16.wgsl) or the tuned float32 kernel on float32 copies of the
# operands. Both have the same numerics (a half is exact in f32, products and sums in f32, one rounding), so
# this is about speed alone. Measured on an H200 (tools/bench_f16.py, 4096^3): matmul_h's first version,
# with its 8 x 8 accumulators in an array indexed by loop counters (kept in local memory by the driver, as
# matmul.wgsl's header found for its own loop version), ran 0.71 TFLOP/s against the float32 kernel's
# 29.85. It now has named accumulators as matmul.wgsl does; until that version is measured
# (`tools/bench_f16.py --native`), half products take the float32 kernel, at the cost of one conversion
# pass over each operand and the output.
NATIVE_MATMUL = False


def _matmul_method(backend, routed):
    rt = backend.runtime

    def matmul_(out, a, b, trans_a=False, trans_b=False, bias=None, relu=False):
        if NATIVE_MATMUL and out.dtype is a.dtype is b.dtype is float16 and (bias is None or bias.dtype is float16):
            matmul(rt, out, a, b, trans_a, trans_b, bias, relu)
        else:
            routed(out, a, b, trans_a, trans_b, bias=bias, relu=relu)
    return matmul_


# ------------------------------------------------------------------ elementwise


def _elementwise_method(native, routed):
    """unary / unary_backward / binary: elementwise.wgsl's float16 entry points (f32 math, one rounding)
    when every view is contiguous float16 with offsets and size multiples of 8; else `routed`."""
    def run(op, out, *views, **kwargs):
        if isinstance(out, View) and out.dtype is float16 and \
                elementwise.half8_fits(out, [v for v in views if isinstance(v, View)]):  # (a, b: scalars)
            return native(op, out, *views, **kwargs)
        return routed(op, out, *views, **kwargs)
    run.__name__ = routed.__name__
    return run


# ------------------------------------------------------------------ convolutions


def _conv_method(backend, name, routed):
    """The backend's `name` (conv2d or one of its gradients): conv_gemm's (or winograd's) float16 kernels
    when every view is a contiguous float16 NCHW tensor of its own storage and the convolution is one
    conv_gemm takes (a GPU adapter, at least conv_gemm.MIN_CHANNELS output channels); else `routed`, through
    float32 (which also raises the errors for operands that do not fit)."""
    rt = backend.runtime
    product = {"conv2d": _conv_forward, "conv2d_backward_input": _conv_backward_input,
               "conv2d_backward_weight": _conv_backward_weight}[name]

    def conv_(out, a, b, *rest, **kwargs):
        if product(rt, out, a, b, *rest) is False:
            return routed(out, a, b, *rest, **kwargs)
        return None
    conv_.__name__ = name
    return conv_


def _native_conv(rt, out_channels, out, *inputs):
    """Whether conv_gemm takes this convolution natively: a GPU adapter, conv_gemm's channel counts, and
    every view (None: no bias) contiguous float16 with a storage apart from out's. Shapes: the callers."""
    if rt.variant["conv_unfold"] or not conv_gemm.suits(out_channels):
        return False
    for v in (out, *inputs):
        if v is not None and not (isinstance(v, View) and v.dtype is float16 and v.is_contiguous()
                                  and (v is out or v.storage is not out.storage)):
            return False
    return True


def _conv_sizes(x_shape, weight_shape, geom):
    """(N, O, OH, OW): the output shape of a convolution of 4-D shapes (None where they do not match)."""
    if len(x_shape) != 4 or len(weight_shape) != 4 or x_shape[1] != weight_shape[1]:
        return None
    (sh, sw), (ph, pw), (dh, dw) = geom
    N, C, H, W = x_shape
    O, _, kh, kw = weight_shape
    return N, O, conv._out_size(H, kh, sh, ph, dh), conv._out_size(W, kw, sw, pw, dw)


def _conv_forward(rt, out, x, weight, bias, stride, padding, dilation, keep=False):
    geom = conv._conv_geom(stride, padding, dilation)
    size = _conv_sizes(x.shape, weight.shape, geom)
    if size is None or out.shape != size or not _native_conv(rt, size[1], out, x, weight, bias) or \
            bias is not None and bias.shape != (size[1],):
        return False
    if out.numel:
        (winograd if winograd.suits(x.shape[1], size[1], weight.shape[2:], geom) else conv_gemm).forward(
            rt, out, x, weight, bias, geom)
    return None


def _conv_backward_input(rt, out, grad, weight, stride, padding, dilation):
    geom = conv._conv_geom(stride, padding, dilation)
    size = _conv_sizes(out.shape, weight.shape, geom)
    if size is None or grad.shape != size or not _native_conv(rt, size[1], out, grad, weight):
        return False
    if out.numel:
        (winograd if winograd.suits(out.shape[1], size[1], weight.shape[2:], geom) else conv_gemm).backward_input(
            rt, out, grad, weight, geom)
    return None


def _conv_backward_weight(rt, out, grad, x, stride, padding, dilation, workspace=None):
    geom = conv._conv_geom(stride, padding, dilation)
    size = _conv_sizes(x.shape, out.shape, geom)
    if size is None or grad.shape != size or not _native_conv(rt, size[1], out, grad, x):
        return False
    if out.numel:
        (winograd if winograd.suits(x.shape[1], size[1], out.shape[2:], geom) else conv_gemm
         ).backward_weight(rt, out, grad, x, geom)
    return None


# ------------------------------------------------------------------ everything else, through float32

# (method, positions of the views it writes, pure: whether its outputs' old contents are never read).
# Optimizer updates are left out: they update parameters and state in place, and autocast keeps
# parameters in float32 (an optimizer over float16 parameters raises below).
_ROUTED = (
    ("fill", (0,), True), ("unary", (1,), True), ("unary_backward", (1,), True), ("binary", (1,), True),
    ("where", (0,), True), ("reduce", (1,), True), ("softmax", (0,), True), ("softmax_backward", (0,), True),
    ("matmul", (0,), True), ("index_select", (0,), True), ("index_select_backward", (0,), False),
    ("gather", (0,), True), ("gather_backward", (0,), False), ("random", (0,), True),
    ("cross_entropy", (0,), True), ("cross_entropy_backward", (0,), True), ("im2col", (0,), True),
    ("col2im", (0,), False), ("conv2d", (0,), True), ("conv2d_backward_input", (0,), True),
    ("conv2d_backward_weight", (0,), True), ("max_pool2d", (0, 1), True), ("max_pool2d_backward", (0,), False),
    ("avg_pool2d", (0,), True), ("avg_pool2d_backward", (0,), False),
    ("augment_crop_flip", (0,), True), ("augment_affine", (0,), True), ("augment_color", (0,), True),
    ("augment_erase", (0,), True),
    ("sgd_step", None, False), ("adam_step", None, False), ("rmsprop_step", None, False),
    ("clip_grad_norm", None, False),
)


def _through_f32(backend, method, name, written, pure):
    """`method` taking float16 views: each becomes a float32 scratch copy, and the written ones are rounded
    back into their float16 views after the call. `written` indexes the positional arguments *after* the
    op name for the methods whose first argument is one (unary, binary, reduce)."""
    rt = backend.runtime

    def run(*args, **kwargs):
        if not any(isinstance(v, View) and v.dtype is float16 for v in (*args, *kwargs.values())):
            return method(*args, **kwargs)
        if written is None:
            raise TypeError(f"{name}: the WebGPU backend updates float32 tensors only; keep parameters, "
                            "gradients and optimizer state in float32 (webgrad.autocast casts per op)")
        back = []
        new_args = list(args)
        for i, v in enumerate(args):
            if isinstance(v, View) and v.dtype is float16:
                if i in written:
                    tmp = _scratch(rt, v.shape)
                    if not pure:
                        copy(rt, tmp, v)
                    back.append((v, tmp))
                    new_args[i] = tmp
                else:
                    new_args[i] = _scratch_from(rt, v)
        new_kwargs = {k: _scratch_from(rt, v) if isinstance(v, View) and v.dtype is float16 else v
                      for k, v in kwargs.items()}
        result = method(*new_args, **new_kwargs)
        for v, tmp in back:
            copy(rt, v, tmp)
        return result
    run.__name__ = name
    return run
