// The runtime's error word (_backends/webgpu/runtime.py, Runtime.error_code): a kernel cannot raise,
// so one that meets a bad value (an index out of range, a non-finite norm) records it here and the host
// raises at its next read-back. Pulled in with `//! include "errors.wgsl"`; the including shader
// declares the binding itself (its number differs per shader):
//     @group(0) @binding(N) var<storage, read_write> errors: array<atomic<u32>>;
// Words: [code, value (i32 bits), size, unused]; code 0 means no error.

// Record error `code` with `value` and `size` unless an error is already recorded (the first wins:
// the host reports one error, the earliest one a thread claimed).
fn report_error(code: u32, value: i32, size: u32) {
    loop {
        // The weak exchange may fail spuriously, so retry until it succeeds or another code is there.
        let r = atomicCompareExchangeWeak(&errors[0], 0u, code);
        if (r.exchanged) {
            atomicStore(&errors[1], bitcast<u32>(value));
            atomicStore(&errors[2], size);
            return;
        }
        if (r.old_value != 0u) { return; }
    }
}
