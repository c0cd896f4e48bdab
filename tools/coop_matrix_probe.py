"""Does wgpu-native (wgpu-py, the native binding) let WGSL reach this GPU's matrix units (tensor cores)?

    python tools/coop_matrix_probe.py

Prints whether the adapter offers wgpu's `cooperative-matrix` feature (naga's `enable
wgpu_cooperative_matrix;`) and whether a device can be opened with it. wgpu marks the feature experimental
and grants it only to devices requested with experimental features enabled, which wgpu-native's C API
(and so wgpu-py, 0.32 here) gives no way to ask for: on an H200 the adapter offers the feature (wgpu logs 6
configurations) and the device request is refused. tools/coop_matrix_probe.mjs is the browser path's
counterpart (Dawn's subgroup matrices). Exit status 0 when the question was answered either way.
"""
import sys

try:
    import wgpu
except ImportError:
    raise SystemExit("coop_matrix_probe: needs wgpu-py (pip install wgpu)")


def main():
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    if adapter is None:
        print("no WebGPU adapter")
        return 1
    print(f"wgpu {wgpu.__version__} on {adapter.info.get('device')} ({adapter.info.get('backend_type')})")
    offered = "cooperative-matrix" in adapter.features
    print(f"cooperative-matrix offered: {offered}")
    if not offered:
        return 0
    try:
        adapter.request_device_sync(required_features=["cooperative-matrix"])
    except Exception as e:  # wgpu raises RuntimeError with the validation message
        print("device with cooperative-matrix: refused:", " ".join(str(e).split())[-200:])
        return 0
    print("device with cooperative-matrix: granted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
