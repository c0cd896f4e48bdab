"""bfloat16, int8 and int16 on WebGPU, for every kernel at once (shaders/narrow.wgsl).

WGSL has no bfloat16, and storage arrays hold 32-bit words (a byte or a half-word store would need atomics), so
a storage of one of these *narrow* dtypes holds one word per element: bfloat16 as float32 words whose values are
bfloat16's (the low 16 bits zero), int8 and int16 as int32 words whose values lie in their range. It keeps its
narrow dtype (element_size(), promotion and the canonical bytes are torch's); only the device memory is wide.

Kernels know nothing of this. Once a narrow storage exists the backend routes every kernel call through
:func:`run`: each narrow view becomes its *wide* twin (the same storage, strides and offset seen as float32 or
int32), the kernel runs on those as it runs on float32 and int32 tensors (so products and reductions accumulate
in float32, as PyTorch's do for bfloat16), and each narrow view the kernel wrote (its record's out, inout and
views arguments: _backends/kernels.py) is then narrowed in place by one more dispatch: rounded to bfloat16 to
nearest even, or wrapped into int8's or int16's range. That is the CPU backend's rule (one rounding per kernel
output, _backends/cpu: _round_bfloat16_outputs) on the device; the dispatches are ordinary records, so a captured
step records and replays them with the rest.

Bytes cross the host in the canonical layout (webgrad/dtypes.py): :func:`words` widens them for an upload,
:func:`canonical` narrows words read back (exact both ways: the words hold narrow values).
"""

import struct

from ... import dtypes
from ..._view import View
from .. import kernels
from .dispatch import Kernel, Shader, grid
from .views import MAX_RANK, WIDE, holds_dtype, merge_dims

NARROW = (dtypes.bfloat16, dtypes.int8, dtypes.int16)

SHADER = Shader("narrow.wgsl", {})
_LAYOUT = ((0, "write"), (1, "uniform"))
NARROWING = {dtypes.bfloat16: Kernel(SHADER, "round_bf16", _LAYOUT),
             dtypes.int8: Kernel(SHADER, "wrap_i8", _LAYOUT),
             dtypes.int16: Kernel(SHADER, "wrap_i16", _LAYOUT)}
_PARAMS = struct.Struct("<2Ii4x8I8i")
_WRITTEN = (kernels.OUT, kernels.INOUT, kernels.VIEWS)
_SIGN = bytes(0xFF if b >= 0x80 else 0 for b in range(256))  # a byte -> the byte its sign extends into


def wide(view):
    """The float32 or int32 view a kernel reads and writes for a narrow view (other views as they are)."""
    dtype = WIDE.get(view.dtype)
    return view if dtype is None else View(view.storage, view.shape, view.strides, view.offset, dtype)


def run(rt, kernel, args, kwargs, run_wide):
    """Run `kernel` (a record of _backends/kernels.py) through `run_wide(kernel, args, kwargs)` on the wide twins
    of the narrow views among its arguments, then narrow in place each narrow view it wrote."""
    if not (_holds_narrow(args) or kwargs and _holds_narrow(kwargs.values())):
        return run_wide(kernel, args, kwargs)
    written = []
    wide_args = [_widened(value, arg.kind, written) for value, arg in zip(args, kernel.args)]
    wide_args += args[len(wide_args):]
    wide_kwargs = {}
    if kwargs:
        kinds = {arg.name: arg.kind for arg in kernel.args}
        wide_kwargs = {name: _widened(value, kinds.get(name, kernels.ARG), written) for name, value in kwargs.items()}
    result = run_wide(kernel, tuple(wide_args), wide_kwargs)
    for view, dtype in written:
        narrow_(rt, view, dtype)
    return result


def narrow_(rt, view, dtype):
    """Round (bfloat16) or wrap (int8, int16) in place the elements of `view`, the wide twin of a `dtype` view."""
    n = view.numel
    if n == 0:
        return
    key = (NARROWING[dtype], view.shape, view.strides, view.offset)
    launch = rt.memo.get(key)
    if launch is None:
        dims = merge_dims(view.shape, [view.strides])
        if len(dims) > MAX_RANK:
            raise ValueError(f"{dtype} outputs on WebGPU span at most {MAX_RANK} dims after merging; got {len(dims)}")
        full = dims + [(1, (0,))] * (MAX_RANK - len(dims))
        params = _PARAMS.pack(n, len(dims), view.offset, *(size for size, _ in full), *(s[0] for _, s in full))
        launch = rt.memo[key] = rt.launch(NARROWING[dtype], (), params, grid(-(-n // 256)))
    rt.run(launch, (view.storage,))


def _holds_narrow(values):
    return holds_dtype(values, WIDE)


def _widened(value, kind, written):
    """`value` with its narrow views made wide; those of a written argument are noted in `written`."""
    if isinstance(value, View):
        if value.dtype not in WIDE:
            return value
        twin = wide(value)
        if kind in _WRITTEN:
            written.append((twin, value.dtype))
        return twin
    if isinstance(value, (list, tuple)) and any(isinstance(v, View) and v.dtype in WIDE for v in value):
        return type(value)(_widened(v, kind, written) if isinstance(v, View) else v for v in value)
    return value


# ------------------------------------------------------------------ bytes across the host


def words(data, dtype):
    """Canonical bytes of a narrow dtype -> the little-endian 32-bit words its storage holds (exact)."""
    data = bytes(data)
    if dtype is dtypes.bfloat16:
        return dtypes.bf16_unpack(data)
    out = bytearray(len(data) * 4 // dtype.itemsize)
    if dtype is dtypes.int8:
        out[0::4] = data
        sign = data.translate(_SIGN)
        out[1::4] = out[2::4] = out[3::4] = sign
    else:  # int16
        out[0::4], out[1::4] = data[0::2], data[1::2]
        sign = data[1::2].translate(_SIGN)
        out[2::4] = out[3::4] = sign
    return bytes(out)


def canonical(data, dtype):
    """The 32-bit words of a narrow storage (little-endian bytes) -> its canonical bytes. The words hold narrow
    values, so this only drops bytes: bfloat16 keeps each word's top half, int8 its low byte, int16 its low two."""
    data = bytes(data)
    if dtype is dtypes.int8:
        return data[0::4]
    out = bytearray(len(data) // 2)
    low = 2 if dtype is dtypes.bfloat16 else 0
    out[0::2], out[1::2] = data[low::4], data[low + 1::4]
    return bytes(out)
