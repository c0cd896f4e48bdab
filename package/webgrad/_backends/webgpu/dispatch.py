"""What a dispatch is made of, for every kernel family: shaders, entry points, planned launches, grids, the
dtype codes shaders share, and dynamic scalars.

A leaf of the WebGPU backend: the families import it, and it imports nothing of theirs or the runtime's.
"""

import struct

from . import shaders

# Dtype codes, the same in every shader (injected as DT_* constants by shaders.source).
# int64 is stored as int32 words (in the int32 range: see webgrad/dtypes.py); its own code lets a kernel check.
DTYPE_CODES = {"float32": 0, "int32": 1, "uint8": 2, "bool": 3, "float16": 4, "int64": 5}  # float16: f16.py's kernels
DTYPE_CONSTANTS = {"DT_F32": 0, "DT_I32": 1, "DT_U8": 2, "DT_BOOL": 3, "DT_I64": 5}


def dtype_code(dtype):
    return DTYPE_CODES[dtype.name]


def pow2_at_least(n):
    """The least power of two >= n (1 for n <= 1)."""
    return 1 << max(n - 1, 0).bit_length()


class Shader:
    """A .wgsl file plus the integer constants and splices injected into it (see shaders.source); or,
    when `code` is given, that WGSL text as is (kernels users write: webgrad.webgpu.Kernel, custom_kernel.py).

    `constants` is a dict, or a function returning (constants, splices), called when a runtime first
    compiles the shader: elementwise.wgsl takes its op codes and cases from the op table that way."""

    __slots__ = ("name", "constants", "code")

    def __init__(self, name, constants, code=None):
        self.name = name
        self.constants = constants
        self.code = code

    def source(self):
        if self.code is not None:
            return self.code
        constants, splices = self.constants() if callable(self.constants) else (self.constants, None)
        return shaders.source(self.name, dict(DTYPE_CONSTANTS, **constants), splices)

    def __repr__(self):
        return f"Shader({self.name!r})"


class Kernel:
    """One entry point of a shader with its explicit bind group layout.

    bindings: ((binding number, kind), ...) with kind "read" (read-only storage), "write" (read-write
    storage) or "uniform". Explicit layouts (rather than layout "auto") keep every binding even when a
    specialisation does not use it, so one bind group fits every pipeline of the kernel.
    overrides: the names of the override constants the entry point uses; :meth:`constants` passes
    exactly these (WebGPU implementations may reject constants an entry point does not use).
    """

    __slots__ = ("shader", "entry", "bindings", "overrides", "storage_bindings", "uniform_binding")

    def __init__(self, shader, entry, bindings, overrides=()):
        self.shader = shader
        self.entry = entry
        self.bindings = tuple(bindings)
        self.overrides = tuple(overrides)
        self.storage_bindings = tuple(n for n, kind in self.bindings if kind != "uniform")
        uniforms = [n for n, kind in self.bindings if kind == "uniform"]
        self.uniform_binding = uniforms[0] if uniforms else None

    def constants(self, values):
        """The pipeline key part for this entry: ((name, number), ...) for its overrides, from a dict
        that may hold more (booleans become 0/1)."""
        return tuple((name, int(values[name])) for name in self.overrides)

    def __repr__(self):
        return f"Kernel({self.shader.name}:{self.entry})"


class PlannedDispatch:
    """A dispatch planned once (a family caches these, e.g. with functools.lru_cache): the kernel, its
    override constants (picked from a dict by Kernel.constants), the packed Params and the grid.
    Runtime.record runs it on storages, its Launch kept in the runtime's memo under it."""

    __slots__ = ("kernel", "constants", "params", "workgroups")

    def __init__(self, kernel, constants, params, workgroups):
        self.kernel = kernel
        self.constants = kernel.constants(constants)
        self.params = params
        self.workgroups = workgroups

    def __repr__(self):
        return f"{type(self).__name__}({self.kernel.entry}, {dict(self.constants)}, workgroups={self.workgroups})"


class Launch:
    """A pipeline with its uniform buffer, grid and dynamic scalar slots: a dispatch without buffers."""

    __slots__ = ("kernel", "pipeline", "uniform", "groups", "slots", "constants", "params")

    def __init__(self, kernel, pipeline, uniform, groups, slots, constants=(), params=None):
        self.kernel = kernel
        self.pipeline = pipeline
        self.uniform = uniform
        self.groups = groups
        self.slots = slots
        self.constants = constants  # what made it (fusion.py reads a captured step's dispatches by them)
        self.params = params


def grid(groups, max_per_dim=65535):
    """Workgroup counts (x, y, 1) covering `groups` workgroups; kernels that use more than 65535 read
    their linear id as wid.x + wid.y * num_workgroups.x and skip ids past the end."""
    if groups <= max_per_dim:
        return (max(groups, 1), 1, 1)
    return (max_per_dim, -(-groups // max_per_dim), 1)


# Words of counters at the start of Runtime.tickets (the kernels' partials follow them).
TICKET_COUNTERS = 4096


class DynamicScalar:
    """A scalar kernels read from GPU memory when they run, so it can change between replays.

    kind "f32" (op parameters such as a learning rate) or "u32" (random seeds and offsets).
    Pass it wherever a kernel takes a scalar that may change (unary/unary_backward `a`, `b`, `fill`'s
    value, `random`'s seed and offset); change it with :meth:`set`.
    """

    __slots__ = ("_runtime", "slot", "kind", "_value", "__weakref__")

    def __init__(self, runtime, slot, kind, value):
        self._runtime = runtime
        self.slot = slot
        self.kind = kind
        self._value = None
        self.set(value)

    @property
    def value(self):
        return self._value

    def set(self, value):
        if self.kind == "f32":
            word = struct.pack("<f", float(value))
        else:
            word = struct.pack("<I", int(value) & 0xFFFFFFFF)
        self._runtime._write_scalar(self.slot, word)
        self._value = value

    def __del__(self):
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            runtime._free_scalar_slots.append(self.slot)

    def __repr__(self):
        return f"DynamicScalar({self._value!r}, {self.kind}, slot {self.slot})"

