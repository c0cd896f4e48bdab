"""bfloat16, int8 and int16 on WebGPU in the browser (Chromium's Tint compiles the narrowing kernel,
shaders/narrow.wgsl): values rounded and wrapped as the real torch's, compared here with torch on the CPU."""

import torch


def test_bfloat16_int8_int16_on_webgpu_in_the_browser(run_python):
    got = run_python("""
import webgrad as wg
x = wg.tensor([1.0, 1.00390625, 3.14159, -2.7182817], dtype=wg.bfloat16, device="webgpu")
w = wg.tensor([[0.5, -1.25], [2.0, 0.1], [1.5, 3.3], [-0.7, 0.9]], dtype=wg.bfloat16, device="webgpu")
i8 = wg.tensor([100, 120, -128, 7], dtype=wg.int8, device="webgpu")
i16 = wg.tensor([30000, -30000, 5, 1], dtype=wg.int16, device="webgpu")
[x.tolist(), (x * 3).tolist(), (x @ w).tolist(), x.float().exp().bfloat16().tolist(), str(x.dtype).split(".")[1],
 (i8 + 100).tolist(), (i8 * 3).tolist(), (i16 + 10000).tolist(), str((i8 + i16).dtype).split(".")[1],
 x.element_size()]
""")
    x = torch.tensor([1.0, 1.00390625, 3.14159, -2.7182817], dtype=torch.bfloat16)
    w = torch.tensor([[0.5, -1.25], [2.0, 0.1], [1.5, 3.3], [-0.7, 0.9]], dtype=torch.bfloat16)
    i8 = torch.tensor([100, 120, -128, 7], dtype=torch.int8)
    i16 = torch.tensor([30000, -30000, 5, 1], dtype=torch.int16)
    want = [x.tolist(), (x * 3).tolist(), (x @ w).tolist(), x.float().exp().bfloat16().tolist(), "bfloat16",
            (i8 + 100).tolist(), (i8 * 3).tolist(), (i16 + 10000).tolist(), "int16", 2]
    assert got == want
