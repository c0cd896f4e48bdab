"""WEBGRAD_SHADER_CHECKS (native.py's shader_module): a measurement switch that leaves out naga's runtime checks.
Every setting must still compile and run a kernel to the same result, and a bad value must say what it takes."""

import numpy as np
import pytest

wgpu = pytest.importorskip("wgpu")

from webgrad._backends.webgpu.native import SHADER_CHECKS, shader_module  # noqa: E402

from test_matmul_kernel import runner  # noqa: E402,F401  (its wgpu-py device, on the default adapter)

# A loop and an index into a workgroup array: the two things naga guards
_DOUBLE_SUMS = """
@group(0) @binding(0) var<storage, read_write> data: array<f32>;
var<workgroup> tile: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) i: u32) {
    tile[i] = data[i];
    workgroupBarrier();
    var s = 0.0;
    for (var k = 0u; k <= i; k++) { s += tile[k]; }
    data[i] = 2.0 * s;
}
"""


@pytest.mark.parametrize("checks", sorted(SHADER_CHECKS))
def test_every_setting_compiles_and_runs_alike(runner, monkeypatch, checks):  # noqa: F811
    device = runner.device
    monkeypatch.setenv("WEBGRAD_SHADER_CHECKS", checks)
    x = np.arange(64, dtype=np.float32) / 7
    buf = device.create_buffer_with_data(data=x, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
    module = shader_module(device, _DOUBLE_SUMS, f"double_sums_{checks}")
    pipeline = device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})
    group = device.create_bind_group(layout=pipeline.get_bind_group_layout(0),
                                     entries=[{"binding": 0, "resource": {"buffer": buf}}])
    encoder = device.create_command_encoder()
    compute = encoder.begin_compute_pass()
    compute.set_pipeline(pipeline)
    compute.set_bind_group(0, group)
    compute.dispatch_workgroups(1)
    compute.end()
    device.queue.submit([encoder.finish()])
    out = np.frombuffer(device.queue.read_buffer(buf), np.float32)
    np.testing.assert_allclose(out, 2 * np.cumsum(x), rtol=1e-6)


def test_a_bad_setting_names_the_choices(runner, monkeypatch):  # noqa: F811
    monkeypatch.setenv("WEBGRAD_SHADER_CHECKS", "off")
    with pytest.raises(ValueError, match="WEBGRAD_SHADER_CHECKS='off': expected one of all, bounds, loops, none"):
        shader_module(runner.device, _DOUBLE_SUMS, "bad")
