// webgrad's JavaScript helper for the browser binding (browser.py). Every call from Python into
// JavaScript through Pyodide's FFI costs microseconds, so the binding never makes per-dispatch WebGPU
// calls: it hands this helper whole arrays of recorded commands, one FFI call per submit (and per
// graph replay). browser.py evaluates this file with pyodide.code.run_js; its value is the object below.
({
  // Encode every record of every segment into one command encoder and submit it.
  // segments: an Array of Arrays of records, each record one of
  //   [0, pipeline, bindGroup, x, y, z]                        a compute dispatch
  //   [1, srcBuffer, srcOffset, dstBuffer, dstOffset, size]    a buffer-to-buffer copy
  // Consecutive dispatches share one compute pass: WebGPU orders and synchronises the dispatches of
  // a pass, and a pass per dispatch would cost more.
  // errors: the object `watch` returned, or absent; the value is its errors so far ("" if none), so
  // that the binding learns them in this same FFI call rather than in one more per submit.
  submit(device, segments, errors) {
    const encoder = device.createCommandEncoder();
    let pass = null;
    for (const records of segments) {
      for (const r of records) {
        if (r[0] === 0) {
          if (pass === null) pass = encoder.beginComputePass();
          pass.setPipeline(r[1]);
          pass.setBindGroup(0, r[2]);
          pass.dispatchWorkgroups(r[3], r[4], r[5]);
        } else {
          if (pass !== null) {
            pass.end();
            pass = null;
          }
          encoder.copyBufferToBuffer(r[1], r[2], r[3], r[4], r[5]);
        }
      }
    }
    if (pass !== null) pass.end();
    device.queue.submit([encoder.finish()]);
    return errors ? errors.take() : "";
  },

  // The first `size` bytes of a MAP_READ buffer: a promise of a Uint8Array (a copy: the mapped range
  // is detached by unmap).
  async read(buffer, size) {
    await buffer.mapAsync(GPUMapMode.READ, 0, size);
    const copy = new Uint8Array(buffer.getMappedRange(0, size).slice(0));
    buffer.unmap();
    return copy;
  },

  // Validation and out-of-memory errors reach JavaScript asynchronously; keep them until Python asks.
  watch(device) {
    const errors = [];
    device.addEventListener("uncapturederror", (event) => errors.push(String(event.error.message)));
    device.lost.then((info) => errors.push(`the GPU device was lost (${info.reason}): ${info.message}`));
    return { take: () => errors.splice(0, errors.length).join("\n") };
  },

  // Run `create()` inside a validation error scope: a promise of [object, error message or ""].
  // The scope is popped even when `create` throws: a scope left pushed would swallow every later
  // validation error of the device (and the next submit could not report it).
  async checked(device, create) {
    device.pushErrorScope("validation");
    let object;
    try {
      object = create();
    } finally {
      var error = await device.popErrorScope();
    }
    return [object, error ? String(error.message) : ""];
  },
})
