"""float16 in the browser: headless Chromium's SwiftShader has no shader-f16, so float16 on WebGPU is a
clear error there (naming the feature), autocast refuses to start, and float32 work is untouched."""


def test_float16_without_shader_f16_is_a_clear_error(run_python):
    got = run_python("""
import webgrad as wg
rt = wg.device("webgpu").backend.runtime
x = wg.ones(3, device="webgpu")
errors = []
for attempt in (lambda: x.half(), lambda: wg.zeros(2, dtype=wg.float16, device="webgpu"),
                lambda: wg.autocast(device_type="webgpu").__enter__()):
    try:
        attempt()
        errors.append(None)
    except TypeError as e:
        errors.append(str(e))
with wg.autocast(device_type="webgpu", enabled=False):
    y = x @ x
[rt.has_f16, sorted(rt.features), errors, y.item(), (x * 2).tolist()]
""")
    has_f16, features, errors, dot, doubled = got
    assert has_f16 is False and "shader-f16" not in features
    assert all(e is not None and "needs the adapter feature 'shader-f16'" in e for e in errors), errors
    assert dot == 3.0 and doubled == [2.0, 2.0, 2.0]
