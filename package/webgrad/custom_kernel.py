"""Kernels users write themselves: ``webgrad.webgpu.Kernel`` runs your WGSL on webgrad tensors.

    SOURCE = '''
    @group(0) @binding(0) var<storage, read> x: array<f32>;          // inputs first, read-only
    @group(0) @binding(1) var<storage, read_write> y: array<f32>;    // then outputs
    struct Params { n: u32, alpha: f32 }
    @group(0) @binding(2) var<uniform> p: Params;                    // then the parameters, if any

    @compute @workgroup_size(64)
    fn main(@builtin(global_invocation_id) id: vec3<u32>) {
        if (id.x < p.n) { y[id.x] = select(p.alpha * x[id.x], x[id.x], x[id.x] > 0.0); }
    }'''
    leaky = webgrad.webgpu.Kernel(SOURCE, inputs=1, outputs=1, params="If")
    y = leaky([x], [x.shape], grid=-(-n // 64), params=(n, 0.01))

The binding convention is the whole interface: inputs at bindings 0..k-1 (``var<storage, read>``),
outputs after them (``var<storage, read_write>``), and, when `params` is given, a uniform struct of
32-bit scalars at the next binding, packed from a :mod:`struct` format of ``I`` (u32), ``i`` (i32) and
``f`` (f32) characters. Tensors are float32 (``array<f32>``) or int32 (``array<i32>``), on the
"webgpu" device; inputs are made dense first (contiguous, from element 0), so element i of the
array is element i of the tensor in row-major order.

Two rules of the runtime show through:

* Buffers come from a pool and may be longer than the tensor: pass the element count in `params`
  and bound-check against it; ``arrayLength`` counts the buffer, not the tensor.
* A kernel call only records the dispatch: it runs with the surrounding work, at the next read-back
  or sync, and joins graph capture (``webgrad.replayable``) like the built-in kernels.

A kernel is not differentiable by itself: pair a forward and a backward kernel in a
``webgrad.autograd.Function`` (see notebooks/03-custom-kernel.ipynb).
"""

import itertools
import struct

from . import devices, dtypes
from ._tensor import Tensor
from ._backends.webgpu.dispatch import Kernel as _EntryPoint, Shader

_PARAM_CHARS = frozenset("Iif")  # 4-byte scalars: packed back to back they match WGSL's struct layout
_ids = itertools.count()


class Kernel:
    """One compute entry point of user WGSL, callable on tensors (see the module docstring).

    source: WGSL text; entry: the entry point's name; inputs, outputs: how many tensors of each the
    entry point binds; params: a struct format ("If") for the uniform at binding inputs + outputs,
    or None when the kernel takes no uniform. The shader compiles on the first call (with the compiler's
    messages in the error when it fails, where Python can wait for them: JSPI).
    """

    def __init__(self, source, entry="main", inputs=1, outputs=1, params=None, name=None):
        if not isinstance(source, str) or "@compute" not in source:
            raise ValueError("Kernel(source): source must be WGSL text with a @compute entry point")
        if not (isinstance(inputs, int) and isinstance(outputs, int) and inputs >= 0 and outputs >= 1):
            raise ValueError(f"Kernel: needs inputs >= 0 and outputs >= 1 tensors, got {inputs} and {outputs}")
        if params is not None and (not params or not set(params) <= _PARAM_CHARS):
            raise ValueError(f"Kernel(params={params!r}): use struct characters I (u32), i (i32) and f (f32), "
                             "one per field of the WGSL uniform struct")
        self.entry = entry
        self.inputs, self.outputs, self.params = inputs, outputs, params
        self.name = name or f"{entry}#{next(_ids)}"
        bindings = [(n, "read") for n in range(inputs)] + [(inputs + n, "write") for n in range(outputs)]
        if params is not None:
            bindings.append((inputs + outputs, "uniform"))
        self._kernel = _EntryPoint(Shader(f"user:{self.name}", {}, code=source), entry, bindings)

    def __call__(self, inputs, outputs, grid, params=()):
        """Dispatch the kernel on `grid` workgroups; returns the output tensor (a tuple if several).

        inputs: tensors on "webgpu" (float32 or int32); outputs: for each, a shape (a new float32
        tensor) or a dense tensor to write into; grid: workgroup counts, an int or up to 3 ints;
        params: the values of the uniform struct, in order.
        """
        inputs, outputs = list(inputs), list(outputs)
        if len(inputs) != self.inputs or len(outputs) != self.outputs:
            raise ValueError(f"{self}: takes {self.inputs} inputs and {self.outputs} outputs, "
                             f"got {len(inputs)} and {len(outputs)}")
        device = devices.get("webgpu")
        ins = [_dense_input(t, i) for i, t in enumerate(inputs)]
        outs = [_output(o, i, device) for i, o in enumerate(outputs)]
        in_storages = {id(t._view.storage) for t in ins}
        if any(id(o._view.storage) in in_storages for o in outs):
            raise ValueError(f"{self}: an output shares memory with an input; WebGPU cannot bind one buffer "
                             "both read-only and writable in a dispatch (make the output a new tensor)")
        runtime = device.backend.runtime
        groups = _grid(grid, runtime.limits["max_compute_workgroups_per_dimension"])
        uniform = None
        if self.params is not None:
            try:
                uniform = struct.pack("<" + self.params, *params)
            except struct.error as e:
                raise ValueError(f"{self}: params {tuple(params)!r} do not match the format {self.params!r}: {e}") from None
        elif params:
            raise ValueError(f"{self}: was made without params=, so it takes no parameters")
        storages = [t._view.storage for t in ins + outs]
        runtime.dispatch(self._kernel, (), storages, uniform, groups)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __repr__(self):
        return f"webgrad.webgpu.Kernel({self.name!r}, inputs={self.inputs}, outputs={self.outputs}, params={self.params!r})"


def _check_tensor(t, what):

    if not isinstance(t, Tensor):
        raise TypeError(f"{what} must be a webgrad Tensor, not {type(t).__name__}")
    if t.device.type != "webgpu":
        raise ValueError(f"{what} is on {t.device}; custom kernels run on 'webgpu' tensors (use .to('webgpu'))")
    if t.dtype not in (dtypes.float32, dtypes.int32):
        raise TypeError(f"{what} is {t.dtype.name}; custom kernels take float32 or int32 tensors "
                        "(uint8 and bool are packed differently on the GPU: convert with .float() or .int())")


def _dense_input(t, i):
    _check_tensor(t, f"input {i}")
    if not t.is_contiguous() or t.storage_offset() != 0:
        t = t.detach().clone()  # a fresh, contiguous tensor starting at element 0
    return t


def _output(spec, i, device):

    if isinstance(spec, Tensor):
        _check_tensor(spec, f"output {i}")
        if not spec.is_contiguous() or spec.storage_offset() != 0:
            raise ValueError(f"output {i} must be dense (contiguous, from element 0): the kernel writes its storage")
        return spec
    shape = (spec,) if isinstance(spec, int) else tuple(spec)
    if any(not isinstance(s, int) or s < 0 for s in shape):
        raise ValueError(f"output {i}: expected a shape or a tensor, got {spec!r}")
    return Tensor._empty(shape, dtypes.float32, device)


def _grid(grid, limit):
    groups = (grid,) if isinstance(grid, int) else tuple(grid)
    if not 1 <= len(groups) <= 3 or any(not isinstance(g, int) or g < 1 for g in groups):
        raise ValueError(f"grid must be 1 to 3 positive workgroup counts, got {grid!r}")
    if max(groups) > limit:
        raise ValueError(f"grid {groups}: at most {limit} workgroups per dimension on this GPU; use y/z for more")
    return groups + (1,) * (3 - len(groups))
