"""Shaders whose element types are spliced in: ``//! splice ELEMENT_TYPES`` becomes WGSL aliases (f32 or
f16) and the f32 -> alias conversions of their stores, so that one .wgsl file serves float32 and float16
operands (conv_gemm.wgsl, batch_norm.wgsl). A module that uses f16 starts with `enable f16;` (the
adapter's shader-f16 feature: f16.py checks it before any float16 storage exists)."""

from . import shaders
from .dispatch import Shader


class F16Shader(Shader):
    """A shader whose module starts with `enable f16;` (it must precede every declaration)."""

    __slots__ = ()

    def source(self):
        return "enable f16;\n" + super().source()


_TYPED = {}


def element_types(types):
    """The text for a shader's ``//! splice ELEMENT_TYPES``: for each (alias, "f32" or "f16") of `types`,
    ``alias NAME = type;`` and the f32 -> NAME conversions of a store, ``to_NAME(f32)`` and
    ``to_NAME4(vec4<f32>)`` (float16: f16_round.wgsl's to_f16, IEEE overflow to inf)."""
    text = [shaders.read("f16_round.wgsl")] if "f16" in dict(types).values() else []
    for name, t in types:
        text.append(f"alias {name} = {t};")
        if t == "f16":
            text.append(f"fn to_{name}(x: f32) -> f16 {{ return to_f16(x); }}\n"
                        f"fn to_{name}4(x: vec4<f32>) -> vec4<f16> {{\n"
                        "    return vec4<f16>(to_f16(x.x), to_f16(x.y), to_f16(x.z), to_f16(x.w));\n}")
        else:
            text.append(f"fn to_{name}(x: f32) -> f32 {{ return x; }}\n"
                        f"fn to_{name}4(x: vec4<f32>) -> vec4<f32> {{ return x; }}")
    return "\n".join(text) + "\n"


def typed_shader(name, types, splices=(), constants=()):
    """Shader file `name` with its ELEMENT_TYPES spliced for `types` ((alias, "f32" or "f16"), ...), the other
    splices (NAME, text) of `splices` and the integer constants (NAME, value) of `constants`, one object per
    combination (so its pipelines are cached); float16 ones start with `enable f16;`."""
    key = (name, tuple(types), tuple(splices), tuple(constants))
    shader = _TYPED.get(key)
    if shader is None:
        cls = F16Shader if "f16" in dict(types).values() else Shader
        shader = _TYPED[key] = cls(name, lambda: (dict(constants),
                                                  dict(splices, ELEMENT_TYPES=element_types(types))))
    return shader
