"""Shaders whose element types are spliced in: ``//! splice ELEMENT_TYPES`` becomes WGSL aliases (f32 or
f16) and the f32 -> alias conversions of their stores, so that one .wgsl file serves float32 and float16
operands (conv_gemm.wgsl, batch_norm.wgsl). A module that uses f16 starts with `enable f16;` (the
adapter's shader-f16 feature: f16.py checks it before any float16 storage exists).

A third element type, "f32h", is float32 storage whose values pass through float16: every value read is
rounded to float16 first and every value stored is rounded to float16 (then kept as f32). A kernel reading an
f32h operand computes exactly what it computes on a float16 copy of it, and one storing f32h what a float16
result cast back to float32 holds; cast_folding.py folds autocast's casts of a product's result back to float32
into the product that way."""

from . import shaders
from .dispatch import Shader


class F16Shader(Shader):
    """A shader whose module starts with `enable f16;` (it must precede every declaration)."""

    __slots__ = ()

    def source(self):
        return "enable f16;\n" + super().source()


_TYPED = {}


HALF_TYPES = ("f16", "f32h")  # element types whose shader needs `enable f16;`


def uses_f16(types):
    """Whether a shader of element `types` ((alias, type), ...) needs shader-f16."""
    return any(t in HALF_TYPES for _, t in types)


def element_types(types):
    """The text for a shader's ``//! splice ELEMENT_TYPES``: for each (alias, "f32", "f16" or "f32h") of
    `types`, ``alias NAME = type;`` (f32h: f32), the f32 -> NAME conversions of a store, ``to_NAME(f32)`` and
    ``to_NAME4(vec4<f32>)`` (float16: f16_round.wgsl's to_f16, IEEE overflow to inf), and the conversion of a
    loaded vec4 into the f32 a kernel computes in, ``from_NAME4(vec4<NAME>)`` (f32h: rounded through f16)."""
    text = [shaders.read("f16_round.wgsl")] if uses_f16(types) else []
    for name, t in types:
        text.append(f"alias {name} = {'f32' if t == 'f32h' else t};")
        if t == "f16":
            text.append(f"fn to_{name}(x: f32) -> f16 {{ return to_f16(x); }}\n"
                        f"fn to_{name}4(x: vec4<f32>) -> vec4<f16> {{\n"
                        "    return vec4<f16>(to_f16(x.x), to_f16(x.y), to_f16(x.z), to_f16(x.w));\n}\n"
                        f"fn from_{name}4(x: vec4<f16>) -> vec4<f32> {{ return vec4<f32>(x); }}")
        elif t == "f32h":
            text.append(f"fn to_{name}(x: f32) -> f32 {{ return f32(to_f16(x)); }}\n"
                        f"fn to_{name}4(x: vec4<f32>) -> vec4<f32> {{\n"
                        "    return vec4<f32>(vec4<f16>(to_f16(x.x), to_f16(x.y), to_f16(x.z), to_f16(x.w)));\n}\n"
                        f"fn from_{name}4(x: vec4<f32>) -> vec4<f32> {{ return to_{name}4(x); }}")
        else:
            text.append(f"fn to_{name}(x: f32) -> f32 {{ return x; }}\n"
                        f"fn to_{name}4(x: vec4<f32>) -> vec4<f32> {{ return x; }}\n"
                        f"fn from_{name}4(x: vec4<f32>) -> vec4<f32> {{ return x; }}")
    return "\n".join(text) + "\n"


def typed_shader(name, types, splices=(), constants=()):
    """Shader file `name` with its ELEMENT_TYPES spliced for `types` ((alias, "f32", "f16" or "f32h"), ...), the
    other splices (NAME, text) of `splices` and the integer constants (NAME, value) of `constants`, one object per
    combination (so its pipelines are cached); float16 ones start with `enable f16;`."""
    key = (name, tuple(types), tuple(splices), tuple(constants))
    shader = _TYPED.get(key)
    if shader is None:
        cls = F16Shader if uses_f16(types) else Shader
        shader = _TYPED[key] = cls(name, lambda: (dict(constants),
                                                  dict(splices, ELEMENT_TYPES=element_types(types))))
    return shader
