"""Elementwise kernels: fill, copy, unary, unary_backward, binary, where (shaders/elementwise.wgsl).

One launcher (:func:`launch`) serves every entry point: it checks the views, reads in-place operands
through `out`, merges dims, packs the uniform and picks the specialisation (op code, integer or float
math, dtypes, contiguous fast path).

The ops come from the op table (webgrad/ops/table.py): :func:`ops` numbers them and writes the WGSL
``case`` lines that are spliced into elementwise.wgsl's ``switch`` statements, so the table is the
single source of both. Adding an op to the table needs nothing here.

float16: contiguous all-half operands run eight halves a thread (HALF8). A float16 operand beside float32 ones
into a float32 (or bool) out, PyTorch's promotion of half and float, is read as it is (MIXED4, or the scalar entry
points), so a mixed op makes no float32 copy of its half operand; and a binary op writes a float16 out of
float32 or strided operands where the layout takes eight halves a thread (HALF_OUT8: a backward's g * x for a half
operand, rounded once). Other float16 work goes through float32 copies (f16.run).
"""

import struct

from ...dtypes import bool_, float16, float32, int32, int64, uint8
from ...ops import table
from .. import kernels
from .dispatch import DynamicScalar, Kernel, Shader, dtype_code
from .views import (
    INT32_MAX, INT32_MIN, MAX_RANK, check_same_shape, check_view, contiguous_view, is_integral, merge_dims, same_view,
    scalar_fields,
)


class _OpCodes:
    """The table numbered for the shader: unary, backward and binary codes, and the spliced cases.
    Rebuilt when the table changes (a record registered at run time)."""

    def __init__(self):
        unary, binary = dict(table.UNARY), dict(table.BINARY)
        self.version = table.VERSION[0]
        # "identity" and "fill" are the unary codes behind copy() and fill() (hand-written cases).
        self.unary = {name: code for code, name in enumerate(("identity", "fill", *unary))}
        self.backward = {name: code for code, name in enumerate(n for n, op in unary.items() if op.grad)}
        self.binary = {name: code for code, name in enumerate(binary)}
        self.records = {"unary": unary, "binary": binary}
        self.constants = {
            **{"OP_" + n.upper(): c for n, c in self.unary.items()},
            **{"BW_" + n.upper(): c for n, c in self.backward.items()},
            **{"BIN_" + n.upper(): c for n, c in self.binary.items()},
            "DT_F16": dtype_code(float16),  # (float16 operands beside float32 ones: the mixed reads)
        }
        # elementwise.wgsl holds the cases of every record but the heavy ones (table.Unary's `heavy`); each heavy
        # record compiles into a module of its own (heavy_kernels)
        self.splices = _splices({n: op for n, op in unary.items() if not op.heavy},
                                {n: op for n, op in binary.items() if not op.heavy})
        self.heavy = {}  # (kind, name) -> that record's kernels (heavy_kernels)


def _splices(unary, binary):
    return {
        "unary_f": _cases("OP", ((n, op.wgsl) for n, op in unary.items())),
        "unary_i": _cases("OP", ((n, op.int_wgsl) for n, op in unary.items() if op.int_exact)),
        "backward_f": _cases("BW", ((n, op.grad) for n, op in unary.items() if op.grad)),
        "binary_f": _cases("BIN", ((n, op.wgsl) for n, op in binary.items())),
        "binary_i": _cases("BIN", ((n, op.int_wgsl) for n, op in binary.items() if op.int_exact)),
        "unary_overflow": _cases("OP", ((n, op.int_overflow) for n, op in unary.items() if op.int_overflow)),
        "binary_overflow": _cases("BIN", ((n, op.int_overflow) for n, op in binary.items() if op.int_overflow)),
    }


def _cases(prefix, items):
    """`case PREFIX_NAME: { ... }` for each (name, expression or body with `return`)."""
    lines = []
    for name, code in items:
        code = code.strip()
        body = code if "return" in code else f"return {code};"
        lines.append(f"        case {prefix}_{name.upper()}: {{ {body} }}")
    return "\n".join(lines)


# The codes of the hand-written unary cases (copy and fill), fixed whatever the table holds.
IDENTITY, FILL = 0, 1

_codes = [None]


def ops():
    """The current numbering of the op table (rebuilt only after table.register/unregister)."""
    current = _codes[0]
    if current is None or current.version != table.VERSION[0]:
        current = _codes[0] = _OpCodes()
    return current


def _shader_inputs():
    codes = ops()
    return codes.constants, codes.splices


SHADER = Shader("elementwise.wgsl", _shader_inputs)

_LAYOUT = ((0, "write"), (1, "read"), (2, "read"), (3, "read"), (4, "read"), (5, "uniform"))
_IN = lambda k: (f"IN{k}_DTYPE", f"IN{k}_FROM_OUT")  # noqa: E731
UNARY = Kernel(SHADER, "unary", _LAYOUT, ("OP", "INT_MATH", "CONTIGUOUS", "OUT_DTYPE", *_IN(0)))
UNARY_BACKWARD = Kernel(SHADER, "unary_backward", _LAYOUT, ("OP", "CONTIGUOUS", "OUT_DTYPE", *_IN(0), *_IN(1), *_IN(2)))
BINARY = Kernel(SHADER, "binary", _LAYOUT, ("OP", "INT_MATH", "CONTIGUOUS", "OUT_DTYPE", *_IN(0), *_IN(1)))
# The same with four elements per thread step through vec4 views (see elementwise.wgsl): contiguous
# f32/i32 operands whose offsets and element count are multiples of 4.
VEC4 = {
    UNARY: Kernel(SHADER, "unary4", _LAYOUT, ("OP", "INT_MATH", "OUT_DTYPE", *_IN(0))),
    UNARY_BACKWARD: Kernel(SHADER, "unary_backward4", _LAYOUT, ("OP", "OUT_DTYPE", *_IN(0), *_IN(1), *_IN(2))),
    BINARY: Kernel(SHADER, "binary4", _LAYOUT, ("OP", "INT_MATH", "OUT_DTYPE", *_IN(0), *_IN(1))),
}
# The vec4 entry points over strided views (elementwise.wgsl's unary4s, ...): the innermost merged dim contiguous in
# every 32-bit operand, its size, the offsets and the other strides multiples of 4 (strided4_fits).
STRIDED4 = {
    UNARY: Kernel(SHADER, "unary4s", _LAYOUT, ("OP", "INT_MATH", "OUT_DTYPE", *_IN(0))),
    UNARY_BACKWARD: Kernel(SHADER, "unary_backward4s", _LAYOUT, ("OP", "OUT_DTYPE", *_IN(0), *_IN(1), *_IN(2))),
    BINARY: Kernel(SHADER, "binary4s", _LAYOUT, ("OP", "INT_MATH", "OUT_DTYPE", *_IN(0), *_IN(1))),
}
# unary_backward4 of a sum in0 + in3 (in3 at binding 7): a captured step's fused gradient accumulation (fusion.py)
ADD_UNARY_BACKWARD4 = Kernel(SHADER, "add_unary_backward4", _LAYOUT + ((7, "read"),),
                             ("OP", "OUT_DTYPE", *_IN(0), *_IN(1), *_IN(2)))
# Contiguous float16 operands, eight halves per thread step (elementwise.wgsl's float16 entry points):
# offsets and element count multiples of 8 (half8_fits); f16.py routes other float16 work through float32.
HALF8 = {
    UNARY: Kernel(SHADER, "unary_h8", _LAYOUT, ("OP", *_IN(0)[1:])),
    UNARY_BACKWARD: Kernel(SHADER, "unary_backward_h8", _LAYOUT, ("OP", *_IN(0)[1:], *_IN(1)[1:], *_IN(2)[1:])),
    BINARY: Kernel(SHADER, "binary_h8", _LAYOUT, ("OP", *_IN(0)[1:], *_IN(1)[1:])),
}
# Mixed operands, some float16 and the others float32 (or bool: where's condition), into a float32 or bool `out`
# (PyTorch's promotion of half and float): the halves read as they are, four elements a thread step over views
# that mixed4_fits; the scalar entry points read halves too, for every other layout (elementwise.wgsl).
MIXED4 = {
    BINARY: Kernel(SHADER, "binary4m", _LAYOUT, ("OP", "CONTIGUOUS", "OUT_DTYPE", *_IN(0), *_IN(1))),
    UNARY_BACKWARD: Kernel(SHADER, "unary_backward4m", _LAYOUT, ("OP", "CONTIGUOUS", "OUT_DTYPE", *_IN(0), *_IN(1),
                                                                 *_IN(2))),
}
# A float16 out of float32 (or mixed) operands, eight results a thread step each rounded once (half_out8_fits).
HALF_OUT8 = {BINARY: Kernel(SHADER, "binary8h", _LAYOUT, ("OP", "CONTIGUOUS", *_IN(0), *_IN(1)))}
UNARY_FROM_U8X4 = Kernel(SHADER, "unary_from_u8x4", _LAYOUT, ("OP", "INT_MATH", "OUT_DTYPE", "IN0_DTYPE"))
# int64 outputs that an op can take out of the int32 range (see elementwise.wgsl): checked, errors at binding 8.
_CHECKED_LAYOUT = _LAYOUT + ((8, "write"),)
UNARY_I64 = Kernel(SHADER, "unary_i64", _CHECKED_LAYOUT, ("OP", "INT_MATH", "CONTIGUOUS", *_IN(0), "ERROR_CODE"))
BINARY_I64 = Kernel(SHADER, "binary_i64", _CHECKED_LAYOUT, ("OP", "INT_MATH", "CONTIGUOUS", *_IN(0), *_IN(1),
                                                            "ERROR_CODE"))
CHECKED = {UNARY: UNARY_I64, BINARY: BINARY_I64}
# int64 scalars and uploads outside the int32 range: refused on the host, as the kernels refuse their results
INT64_RANGE_MESSAGE = ("{op}: an int64 result (element {{value}} of {{size}}) is outside the int32 range "
                       "[-2147483648, 2147483647], the values WebGPU holds in an int64 tensor (WGSL has no 64-bit "
                       "integers); compute it on the CPU device")
WHERE = Kernel(SHADER, "where_select", _LAYOUT, ("INT_MATH", "CONTIGUOUS", "OUT_DTYPE", *_IN(0), *_IN(1), *_IN(2)))
MIXED4[WHERE] = Kernel(SHADER, "where4m", _LAYOUT, ("CONTIGUOUS", "OUT_DTYPE", *_IN(0), *_IN(1), *_IN(2)))
# uint8 outputs: four elements share a word, so they are written with atomics through binding 6.
# (Binding 0 is only read for in-place operands, never here, but the entry point names it: a spare.)
UNARY_TO_U8 = Kernel(
    SHADER, "unary_to_u8", ((0, "write"), (1, "read"), (4, "read"), (5, "uniform"), (6, "write")),
    ("OP", "INT_MATH", "CONTIGUOUS", *_IN(0)),
)


def heavy_kernels(kind, name):
    """{kernel: its twin} for heavy record `name` ("unary" or "binary"): the same entry points compiled from
    elementwise_special.wgsl with that record's cases alone, so that its pipelines compile only the special
    functions it calls (lavapipe: 0.06-0.4 s a pipeline, against ~1 s with every heavy record's cases and 2 s
    with every record's). VEC4, STRIDED4, HALF8 and CHECKED map the twins as they map the originals."""
    codes = ops()
    twins = codes.heavy.get((kind, name))
    if twins is None:
        rec = codes.records[kind][name]
        splices = _splices(*(({name: rec}, {}) if kind == "unary" else ({}, {name: rec})))
        shader = Shader("elementwise_special.wgsl", lambda: (codes.constants, splices))
        twins = {k: Kernel(shader, k.entry, k.bindings, k.overrides) for k in (UNARY, UNARY_BACKWARD, BINARY, UNARY_TO_U8)}
        for kernel, twin in list(twins.items()):
            for variants in (VEC4, STRIDED4, HALF8, MIXED4, HALF_OUT8, CHECKED):
                if kernel in variants:
                    v = variants[kernel]
                    variants[twin] = twins[v] = Kernel(shader, v.entry, v.bindings, v.overrides)
                    if variants is CHECKED:
                        _CHECKED_KERNELS.add(variants[twin])
        codes.heavy[(kind, name)] = twins
    return twins

# n, rank, a_slot, b_slot | a, b, ai, bi | offsets x4 | shape x8 | strides 8 dims x 4 operands
_PARAMS = struct.Struct("<4I2f2i4i8I32i")
WORKGROUP = 256


def launch(rt, kernel, op_code, out, inputs, a=0.0, b=0.0, int_math=False):
    """Record `kernel` computing `out` from up to three input views (already checked, same shape)."""
    if out.numel == 0:
        return
    to_u8 = kernel.entry == "unary_to_u8"
    bound = []  # the views to bind; None: read through `out` (in place, the same element each thread writes)
    for x in inputs:
        if x.storage is out.storage:
            if same_view(x, out) and not to_u8:
                bound.append(None)
                continue
            x = materialize(rt, x)  # overlapping views of one buffer: read a copy
        bound.append(x)

    # Everything but the buffers depends only on this key: a repeated call skips the packing.
    key = (kernel, op_code, int_math, _scalar_key(a), _scalar_key(b), out.shape, out.strides, out.offset,
           out.dtype, tuple(None if x is None else (x.strides, x.offset, x.dtype) for x in bound))
    prepared = rt.memo.get(key)
    if prepared is None:
        prepared = rt.memo[key] = _prepare(rt, kernel, op_code, out, bound, a, b, int_math)

    storages = [rt.dummy if x is None else x.storage for x in bound]
    storages += [rt.dummy] * (3 - len(storages))
    if to_u8:
        storages = [rt.spare(0), storages[0], rt.scalars, out.storage]
    else:
        storages = [out.storage, *storages, rt.scalars]
        if prepared.kernel in _CHECKED_KERNELS:
            storages.append(rt.errors)
    rt.run(prepared, storages)


def _scalar_key(value):
    """A scalar as a memo key part: floats by their bits (-0.0 and NaN included), dynamic ones by slot."""
    if isinstance(value, float):
        return value.hex()
    if isinstance(value, DynamicScalar):
        return ("slot", value.slot)
    return value


def _prepare(rt, kernel, op_code, out, bound, a, b, int_math):
    """The Launch for `launch`: merged dims, uniform, specialisation."""
    views = [out] + [out if x is None else x for x in bound]
    views += [out] * (4 - len(views))
    dims = merge_dims(out.shape, [v.strides for v in views])
    if len(dims) > MAX_RANK:
        raise ValueError(f"elementwise kernels walk at most {MAX_RANK} dims after merging; got {len(dims)} for shape {out.shape}")
    contiguous = not dims or (len(dims) == 1 and all(s == 1 for s in dims[0][1]))
    shape = [d[0] for d in dims] + [1] * (MAX_RANK - len(dims))
    strides = []
    for d in range(MAX_RANK):
        strides.extend(dims[d][1] if d < len(dims) else (0, 0, 0, 0))

    a_slot, a_f, a_i = scalar_fields(a)
    b_slot, b_f, b_i = scalar_fields(b)
    n = out.numel
    params = _PARAMS.pack(n, len(dims), a_slot, b_slot, a_f, b_f, a_i, b_i, *(v.offset for v in views), *shape, *strides)

    slots = tuple(s for s in (a_slot, b_slot) if s != 0xFFFFFFFF)
    mixed = out.dtype is not float16 and any(v.dtype is float16 for v in views)
    if mixed and (kernel not in MIXED4 or int_math or out.dtype not in (float32, bool_)):
        raise TypeError("elementwise kernels read float16 operands beside others only in binary, unary_backward "
                        "and where with a float32 or bool out (f16.py routes other float16 work)")
    if out.dtype is float16 and not (kernel in HALF8 and contiguous and half8_fits(out, views)):
        if not (kernel in HALF_OUT8 and not int_math and half_out8_fits(dims, views)):
            raise TypeError("elementwise kernels take a float16 out only where every operand is contiguous float16 "
                            "with offsets and size multiples of 8, or in binary over views that half_out8_fits "
                            "(f16.py routes other float16 work)")
        values = {"OP": op_code, "CONTIGUOUS": contiguous, **_operand_values(views, bound)}
        kernel = HALF_OUT8[kernel]
        groups = min(-(-n // (WORKGROUP * 8)), rt.limits["max_compute_workgroups_per_dimension"])
        return rt.launch(kernel, kernel.constants(values), params, (groups, 1, 1), slots)
    if out.dtype is float16:
        half = HALF8[kernel]
        values = {"OP": op_code, **{f"IN{k}_FROM_OUT": k < len(bound) and bound[k] is None for k in range(3)}}
        groups = min(-(-n // (WORKGROUP * 8)), rt.limits["max_compute_workgroups_per_dimension"])
        return rt.launch(half, half.constants(values), params, (groups, 1, 1), slots)
    values = {"OP": op_code, "INT_MATH": int_math, "CONTIGUOUS": contiguous, "OUT_DTYPE": dtype_code(out.dtype)}
    if kernel in _CHECKED_KERNELS:
        values["ERROR_CODE"] = rt.error_code(INT64_RANGE_MESSAGE.format(op=_op_name(kernel, op_code)), RuntimeError)
    values.update(_operand_values(views, bound))
    per_thread = 1
    if mixed:
        if mixed4_fits(dims, views):
            kernel, per_thread = MIXED4[kernel], 4
    elif (kernel in VEC4 and contiguous and n % 4 == 0 and all(v.offset % 4 == 0 for v in views)
            and all(v.dtype in (float32, int32) for v in views)):
        kernel, per_thread = VEC4[kernel], 4
    elif kernel in STRIDED4 and strided4_fits(dims, views):
        kernel, per_thread = STRIDED4[kernel], 4
    elif (kernel is UNARY and contiguous and n % 4 == 0 and bound and bound[0] is not None and views[1].dtype is uint8
          and out.dtype in (float32, int32) and out.offset % 4 == 0 and views[1].offset % 4 == 0):
        kernel, per_thread = UNARY_FROM_U8X4, 4  # uint8 words in, vec4s out
    groups = min(-(-n // (WORKGROUP * per_thread)), rt.limits["max_compute_workgroups_per_dimension"])
    return rt.launch(kernel, kernel.constants(values), params, (groups, 1, 1), slots)


def strided4_fits(dims, views):
    """Whether STRIDED4's vec4 walk serves merged `dims` ([(size, strides of out, in0, in1, in2)], innermost last)
    of `views`: 32-bit operands, the innermost dim contiguous in each with a size that is a multiple of 4, and
    every offset and outer stride a multiple of 4."""
    return (bool(dims) and dims[-1][0] % 4 == 0 and all(s == 1 for s in dims[-1][1])
            and all(s % 4 == 0 for _, strides in dims[:-1] for s in strides)
            and all(v.offset % 4 == 0 and v.dtype in (float32, int32) for v in views))


def _operand_values(views, bound):
    """The IN{k}_DTYPE and IN{k}_FROM_OUT overrides of the bound inputs (views: out, then each input)."""
    values = {}
    for k in range(3):
        x = views[k + 1] if k < len(bound) else None
        values[f"IN{k}_DTYPE"] = dtype_code(x.dtype) if x is not None else 0
        values[f"IN{k}_FROM_OUT"] = k < len(bound) and bound[k] is None
    return values


def half_out8_fits(dims, views):
    """Whether HALF_OUT8 serves merged `dims` of `views` (out float16, the inputs float32 or float16): mixed4_fits,
    with out's offset, its outer strides and the innermost size multiples of 8 (eight halves: one vec4 of words)."""
    out = views[0]
    return (mixed4_fits(dims, views) and dims[-1][0] % 8 == 0 and out.offset % 8 == 0
            and all(strides[0] % 8 == 0 for _, strides in dims[:-1])
            and all(v.dtype in (float16, float32) for v in views))


def mixed4_fits(dims, views):
    """Whether MIXED4's walk serves merged `dims` of `views` (float16 beside 32-bit operands): the innermost dim
    contiguous in each with a size that is a multiple of 4, every offset and outer stride a multiple of 4 (a quad of
    halves is then one half of a vec4 of words)."""
    return (bool(dims) and dims[-1][0] % 4 == 0 and all(s == 1 for s in dims[-1][1])
            and all(s % 4 == 0 for _, strides in dims[:-1] for s in strides) and all(v.offset % 4 == 0 for v in views))


_CHECKED_KERNELS = set(CHECKED.values())  # (and heavy records' twins, as heavy_kernels makes them)
_HAND_WRITTEN_NAMES = {"identity": "conversion to int64", "fill": "fill of an int64 tensor",
                       "affine": "int64 arithmetic with a scalar"}


def _op_name(kernel, code):
    names = ops().binary if kernel.entry == "binary_i64" else ops().unary
    name = next((n for n, c in names.items() if c == code), "elementwise op")
    return _HAND_WRITTEN_NAMES.get(name, name)


def _int64_kernel(kernel, out, int_math, overflows, scalars=()):
    """The kernel for `out`: the checked int64 entry point where out is int64 and its values may leave the int32
    range (integer math of an op that can overflow, or float results converted), else `kernel`. Integer
    scalars outside int32 are refused here: the kernels hold scalars in 32 bits."""
    if out.dtype is not int64:
        return kernel
    for s in scalars:
        if isinstance(s, int) and not isinstance(s, bool) and not INT32_MIN <= s <= INT32_MAX:
            raise RuntimeError(f"int64 on WebGPU: the scalar {s} is outside the int32 range [{INT32_MIN}, "
                               f"{INT32_MAX}], the values WebGPU holds in an int64 tensor (see webgrad.dtypes); "
                               "compute with it on the CPU device")
    return CHECKED[kernel] if (overflows or not int_math) else kernel


def materialize(rt, x):
    """A contiguous copy of view x in a fresh storage of the same dtype."""
    tmp = contiguous_view(rt.storage(x.numel, x.dtype), x.shape, x.dtype)
    copy(rt, tmp, x)
    return tmp


def _via_int32(rt, out, compute):
    """Run `compute(view)` into an int32 scratch view of out's shape, then convert into uint8 `out`."""
    tmp = contiguous_view(rt.storage(out.numel, int32), out.shape, int32)
    compute(tmp)
    launch(rt, UNARY_TO_U8, IDENTITY, out, [tmp], int_math=True)


# ------------------------------------------------------------------ the backend methods


@kernels.fill.implement("webgpu")
def fill(rt, out, value):
    check_view(out, "out")
    integral = is_integral(value)
    kernel = UNARY_TO_U8 if out.dtype is uint8 else UNARY
    int_math = integral and not out.dtype.is_floating
    launch(rt, _int64_kernel(kernel, out, int_math, False, (value,)), FILL, out, [], a=value, int_math=int_math)


@kernels.copy.implement("webgpu")
def copy(rt, out, x):
    check_view(out, "out")
    check_view(x, "x")
    check_same_shape(out, ("x", x))
    if out.numel == 0:
        return
    if (out.dtype is x.dtype and out.dtype in _WORD_DTYPES and out.storage is not x.storage
            and out.is_contiguous() and x.is_contiguous()):
        rt.copy(x.storage, 4 * x.offset, out.storage, 4 * out.offset, 4 * out.numel)
        return
    kernel = UNARY_TO_U8 if out.dtype is uint8 else UNARY
    int_math = not out.dtype.is_floating and not x.dtype.is_floating
    launch(rt, _int64_kernel(kernel, out, int_math, False), IDENTITY, out, [x], int_math=int_math)


_WORD_DTYPES = (float32, int32, int64)  # one 32-bit word per element on the GPU


def half8_fits(out, inputs):
    """Whether unary / unary_backward / binary on these views run natively in float16 (HALF8): every
    view float16 and contiguous, offsets and element count multiples of 8."""
    return out.numel % 8 == 0 and all(v.dtype is float16 and v.offset % 8 == 0 and v.is_contiguous()
                                      for v in (out, *inputs))


def _record(op, kind, codes):
    rec = codes.records[kind].get(op)
    if rec is None:
        raise ValueError(f"unknown {kind} op {op!r}; the op table (webgrad/ops/table.py) has no such record")
    return rec


@kernels.unary.implement("webgpu")
def unary(rt, op, out, x, a=0.0, b=0.0):
    codes = ops()
    rec = _record(op, "unary", codes)
    check_view(out, "out")
    check_view(x, "x")
    check_same_shape(out, ("x", x))
    if rec.result == table.BOOL and out.dtype is not bool_:
        raise TypeError(f"unary {op!r} writes bool, but out is {out.dtype}")
    int_math = (
        rec.int_exact and not x.dtype.is_floating and not out.dtype.is_floating
        and is_integral(a) and is_integral(b)
    )
    kernel = UNARY_TO_U8 if out.dtype is uint8 else UNARY
    if rec.heavy:
        kernel = heavy_kernels("unary", op)[kernel]
    if out.dtype is int64:
        # clamp's bounds only bound (beyond int32 they change nothing); other ops' scalars must fit
        scalars = () if op == "clamp" else (_integer(a), _integer(b))
        kernel = _int64_kernel(kernel, out, int_math, rec.int_overflow is not None, scalars)
    launch(rt, kernel, codes.unary[op], out, [x], a, b, int_math)


def _integer(value):
    """An integer-valued Python scalar as an int (kernels get a float for integer parameters too), else as is."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


@kernels.unary_backward.implement("webgpu")
def unary_backward(rt, op, out, grad, x, y, a=0.0, b=0.0):
    codes = ops()
    if op not in codes.backward:
        raise ValueError(f"unary op {op!r} has no derivative kernel in the op table")
    check_view(out, "out")
    if out.dtype not in (float32, float16):
        raise TypeError(f"unary_backward: out must be float32 or float16, not {out.dtype}")
    for name, v in (("grad", grad), ("x", x), ("y", y)):
        check_view(v, name)
    check_same_shape(out, ("grad", grad), ("x", x), ("y", y))
    kernel = heavy_kernels("unary", op)[UNARY_BACKWARD] if codes.records["unary"][op].heavy else UNARY_BACKWARD
    launch(rt, kernel, codes.backward[op], out, [grad, x, y], a, b)


@kernels.binary.implement("webgpu")
def binary(rt, op, out, x, y):
    codes = ops()
    rec = _record(op, "binary", codes)
    check_view(out, "out")
    check_view(x, "x")
    check_view(y, "y")
    check_same_shape(out, ("x", x), ("y", y))
    bool_result = rec.result == table.BOOL
    if bool_result and out.dtype is not bool_:
        raise TypeError(f"binary {op!r} writes bool, but out is {out.dtype}")
    int_math = (
        rec.int_exact and not x.dtype.is_floating and not y.dtype.is_floating
        and (bool_result or not out.dtype.is_floating)
    )
    code = codes.binary[op]
    kernel = heavy_kernels("binary", op)[BINARY] if rec.heavy else BINARY
    if out.dtype is int64:
        launch(rt, _int64_kernel(kernel, out, int_math, rec.int_overflow is not None), code, out, [x, y],
               int_math=int_math)
    elif out.dtype is uint8:
        _via_int32(rt, out, lambda tmp: launch(rt, kernel, code, tmp, [x, y], int_math=int_math))
    else:
        launch(rt, kernel, code, out, [x, y], int_math=int_math)


# float16 (the records' HALF policy): elementwise.wgsl's float16 entry points where every view fits HALF8; float16
# operands beside float32 ones into a float32 (or bool) out read as they are (MIXED4, or the scalar entry points);
# else NotImplemented, and f16.run goes through float32.
@kernels.unary.implement("webgpu", half=True)
def unary_half(rt, op, out, x, a=0.0, b=0.0):
    return unary(rt, op, out, x, a, b) if half8_fits(out, (x,)) else NotImplemented


def _reads_mixed(out, inputs):
    """Whether the mixed entry points take these views: out float32 or bool, the inputs float16 and float32 (or
    bool, where's condition), at least one of them float16."""
    return out.dtype in (float32, bool_) and all(v.dtype in (float16, float32, bool_) for v in inputs)


@kernels.unary_backward.implement("webgpu", half=True)
def unary_backward_half(rt, op, out, grad, x, y, a=0.0, b=0.0):
    if half8_fits(out, (grad, x, y)) or _reads_mixed(out, (grad, x, y)):
        return unary_backward(rt, op, out, grad, x, y, a, b)
    return NotImplemented


@kernels.binary.implement("webgpu", half=True)
def binary_half(rt, op, out, x, y):
    if half8_fits(out, (x, y)) or _reads_mixed(out, (x, y)):
        return binary(rt, op, out, x, y)
    if (out.dtype is float16 and x.dtype in (float16, float32) and y.dtype in (float16, float32)
            and out.storage is not x.storage and out.storage is not y.storage
            and half_out8_fits(merge_dims(out.shape, [out.strides, x.strides, y.strides]), (out, x, y))):
        return binary(rt, op, out, x, y)  # (HALF_OUT8: a half result of float32 operands, rounded once)
    return NotImplemented


@kernels.where.implement("webgpu", half=True)
def where_half(rt, out, cond, x, y):
    return where(rt, out, cond, x, y) if _reads_mixed(out, (x, y)) and out.dtype is float32 else NotImplemented


@kernels.where.implement("webgpu")
def where(rt, out, cond, x, y):
    check_view(out, "out")
    check_view(cond, "cond", dtype=bool_)
    check_view(x, "x")
    check_view(y, "y")
    check_same_shape(out, ("cond", cond), ("x", x), ("y", y))
    int_math = not out.dtype.is_floating
    if out.dtype is uint8:
        _via_int32(rt, out, lambda tmp: launch(rt, WHERE, 0, tmp, [cond, x, y], int_math=True))
    else:
        launch(rt, WHERE, 0, out, [cond, x, y], int_math=int_math)
