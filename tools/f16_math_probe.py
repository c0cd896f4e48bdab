"""Is half-precision math faster than float32 on this GPU through WGSL (no tensor cores)?

    python tools/f16_math_probe.py [--fma-only] [--sizes M,N,K ...]

Needs wgpu-py and an adapter with `shader-f16`. Two measurements, each the best of 5 submits of --reps
dispatches (wall clock around each submit) after half a second of the same submits:

  fma      chains of independent fma() (16 accumulators a thread, 1024 steps) on vec4<f32>, vec4<f16> and
           vec2<f16>: the rate the driver's code for each type reaches (TFLOP/s, 2 per lane per fma)
  product  one 128x128-tile product kernel (16x16 threads, 8x8 outputs each, tiles staged through workgroup
           memory, half operands) with its multiply-adds in f32, or in f16 with the sums of each BK k added
           into f32 accumulators (BK 8, 16 and 32; "every 2": two tiles' sums): TFLOP/s and the largest error
           against float64, beside the error of rounding the exact product to half alone

The product kernel is a probe, not webgrad's: it wants M, N multiples of 128 and K a multiple of BK.
On an H200: fma 53.6 TFLOP/s on vec4<f32>, 61.0 on vec4<f16>, 56.0 on vec2<f16>; at 4096^3 the
product ran 17.5 in f32 and 22.8 in f16 (BK 16), against 35.7 for webgrad's tuned f32 kernel.
"""
import argparse
import struct
import time

try:
    import numpy as np
    import wgpu
except ImportError:
    raise SystemExit("f16_math_probe: needs wgpu-py and numpy (pip install wgpu numpy)")


def fma_source(vec, accumulators=16, steps=1024):
    scalar = "f16" if "f16" in vec else "f32"
    lines = ["enable f16;" if scalar == "f16" else "",
             f"@group(0) @binding(0) var<storage, read_write> out: array<{vec}>;",
             "@compute @workgroup_size(256)",
             "fn main(@builtin(global_invocation_id) g: vec3<u32>) {",
             f"    let x = {scalar}(g.x & 7u) * {scalar}(0.001);"]
    lines += [f"    var a{i} = {vec}(x + {scalar}({i}));" for i in range(accumulators)]
    lines += [f"    let b = {vec}({scalar}(0.999));", f"    let c = {vec}({scalar}(0.0001));",
              f"    for (var i = 0u; i < {steps}u; i++) {{"]
    lines += [f"        a{i} = fma(a{i}, b, c);" for i in range(accumulators)]
    lines += ["    }", "    out[g.x] = " + " + ".join(f"a{i}" for i in range(accumulators)) + ";", "}"]
    return "\n".join(lines), accumulators * steps


def product_source(math, bk, flush_every):
    """C = A @ B, A [M, K] and B [K, N] row-major halves, C half; multiply-adds in `math` (f32 or f16)."""
    t = f"vec4<{math}>"
    regs = "\n".join(f"var<private> c{r}{h}: vec4<f32>; var<private> h{r}{h}: {t};" for r in range(8) for h in range(2))
    fmas = "\n".join(f"    h{r}{h} = fma({t}(a{r // 4}.{'xyzw'[r % 4]}), b{h}, h{r}{h});" for r in range(8) for h in range(2))
    flush = "\n".join(f"    c{r}{h} += vec4<f32>(h{r}{h}); h{r}{h} = {t}(0.0);" for r in range(8) for h in range(2))
    stores = "\n".join(f"    O[((row0 + ty * 4u + {r % 4 + 64 * (r // 4)}u) * p.N + col0 + tx * 4u + {64 * h}u) / 4u]"
                       f" = vec4<f16>(c{r}{h});" for r in range(8) for h in range(2))
    return f"""enable f16;
struct P {{ M: u32, N: u32, K: u32, pad: u32 }}
@group(0) @binding(0) var<storage, read> A: array<vec4<f16>>;
@group(0) @binding(1) var<storage, read> B: array<vec4<f16>>;
@group(0) @binding(2) var<storage, read_write> O: array<vec4<f16>>;
@group(0) @binding(3) var<uniform> p: P;
const BK: u32 = {bk}u;
var<workgroup> ta: array<{t}, {bk * 32}>;  // [k][m / 4]
var<workgroup> tb: array<{t}, {bk * 32}>;  // [k][n / 4]
{regs}
var<private> tx: u32; var<private> ty: u32; var<private> row0: u32; var<private> col0: u32;
fn kstep(k: u32) {{
    let a0 = ta[k * 32u + ty]; let a1 = ta[k * 32u + 16u + ty];
    let b0 = tb[k * 32u + tx]; let b1 = tb[k * 32u + 16u + tx];
{fmas}
}}
fn flush() {{
{flush}
}}
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {{
    tx = lid.x; ty = lid.y; row0 = wid.y * 128u; col0 = wid.x * 128u;
    let t = ty * 16u + tx;
    var tiles = 0u;
    for (var k0 = 0u; k0 < p.K; k0 += BK) {{
        for (var l = 0u; l < BK / 8u; l++) {{
            let i = t + l * 256u;
            let m = i / (BK / 4u); let kk = (i % (BK / 4u)) * 4u;
            let va = {t}(A[((row0 + m) * p.K + k0 + kk) / 4u]);
            ta[kk * 32u + m / 4u][m % 4u] = va.x; ta[(kk + 1u) * 32u + m / 4u][m % 4u] = va.y;
            ta[(kk + 2u) * 32u + m / 4u][m % 4u] = va.z; ta[(kk + 3u) * 32u + m / 4u][m % 4u] = va.w;
            tb[(i / 32u) * 32u + i % 32u] = {t}(B[((k0 + i / 32u) * p.N) / 4u + col0 / 4u + i % 32u]);
        }}
        workgroupBarrier();
        for (var k = 0u; k < BK; k += 4u) {{ kstep(k); kstep(k + 1u); kstep(k + 2u); kstep(k + 3u); }}
        workgroupBarrier();
        tiles += 1u;
        if (tiles % {flush_every}u == 0u) {{ flush(); }}
    }}
    flush();
{stores}
}}
"""


class Probe:
    def __init__(self, reps, warm=0.5):
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        if adapter is None or "shader-f16" not in adapter.features:
            raise SystemExit("f16_math_probe: needs an adapter with shader-f16")
        self.device = adapter.request_device_sync(required_features=["shader-f16"])
        self.reps, self.warm = reps, warm
        print(f"wgpu {wgpu.__version__} on {adapter.info.get('device')} ({adapter.info.get('backend_type')})")

    def time(self, code, buffers, groups, readback):
        d = self.device
        pipe = d.create_compute_pipeline(layout="auto", compute={"module": d.create_shader_module(code=code),
                                                                 "entry_point": "main"})
        bind = d.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
            {"binding": i, "resource": {"buffer": b}} for i, b in enumerate(buffers)])

        def submit(reps):
            enc = d.create_command_encoder()
            for _ in range(reps):
                cp = enc.begin_compute_pass()
                cp.set_pipeline(pipe)
                cp.set_bind_group(0, bind)
                cp.dispatch_workgroups(*groups)
                cp.end()
            d.queue.submit([enc.finish()])
            return d.queue.read_buffer(readback)

        first = submit(1)
        start = time.perf_counter()
        while time.perf_counter() - start < self.warm:  # clocks up (an idle GPU starts slow)
            submit(self.reps)
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            submit(self.reps)
            best = min(best, (time.perf_counter() - start) / self.reps)
        return best, first

    def fma(self, groups=8192):
        usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC
        out = self.device.create_buffer(size=groups * 256 * 16, usage=usage)
        for vec, lanes in (("vec4<f32>", 4), ("vec4<f16>", 4), ("vec2<f16>", 2)):
            code, fmas = fma_source(vec)
            seconds, _ = self.time(code, [out], (groups,), out)
            print(f"fma {vec:10} {groups * 256 * fmas * lanes * 2 / seconds / 1e12:6.1f} TFLOP/s")

    def product(self, m, n, k):
        rng = np.random.default_rng(0)
        a = (rng.standard_normal((m, k)) * 0.5).astype(np.float16)
        b = (rng.standard_normal((k, n)) * 0.5).astype(np.float16)
        exact = a.astype(np.float64) @ b.astype(np.float64)
        scale = np.abs(exact).max()
        rounding = np.abs(exact.astype(np.float16).astype(np.float64) - exact).max() / scale
        usage = wgpu.BufferUsage
        d = self.device
        buffers = [d.create_buffer_with_data(data=a.tobytes(), usage=usage.STORAGE),
                   d.create_buffer_with_data(data=b.tobytes(), usage=usage.STORAGE),
                   d.create_buffer(size=m * n * 2, usage=usage.STORAGE | usage.COPY_SRC),
                   d.create_buffer_with_data(data=struct.pack("<4I", m, n, k, 0), usage=usage.UNIFORM)]
        print(f"product {m}x{n}x{k}: rounding the exact product to half alone: max error {rounding:.2e} of max|C|")
        for math, bk, every in (("f32", 16, 1), ("f16", 8, 1), ("f16", 16, 1), ("f16", 16, 2), ("f16", 32, 1)):
            if k % bk:
                continue
            seconds, raw = self.time(product_source(math, bk, every), buffers, (n // 128, m // 128), buffers[2])
            got = np.frombuffer(raw, np.float16).reshape(m, n).astype(np.float64)
            err = np.abs(got - exact).max() / scale
            sums = "f32" if math == "f32" else f"f16 over {bk * every} k (BK {bk})"
            print(f"  multiply-adds in {math}, sums in {sums:20}: {2 * m * n * k / seconds / 1e12:6.1f} TFLOP/s, "
                  f"max error {err:.2e}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", nargs="+", default=["4096,4096,4096"], help="products M,N,K (M, N multiples of 128)")
    p.add_argument("--fma-only", action="store_true")
    p.add_argument("--reps", type=int, default=10, help="dispatches per timed submit")
    args = p.parse_args(argv)
    probe = Probe(args.reps)
    probe.fma()
    if not args.fma_only:
        for size in args.sizes:
            m, n, k = (int(v) for v in size.split(","))
            if m % 128 or n % 128:
                raise SystemExit(f"f16_math_probe: M and N must be multiples of 128, not {size}")
            probe.product(m, n, k)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
