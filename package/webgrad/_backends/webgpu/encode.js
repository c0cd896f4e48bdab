// webgrad's JavaScript helper for the browser binding (browser.py). Every call from Python into
// JavaScript through Pyodide's FFI costs microseconds, so the binding never makes per-dispatch WebGPU
// calls: it hands this helper whole arrays of recorded commands, one FFI call per submit (and per
// graph replay). browser.py evaluates this file with pyodide.code.run_js; its value is the object the
// function below returns.
(() => {
// Encode one record list into `encoder`, a compute pass per run of consecutive dispatches; a pipeline
// already set in the pass is not set again.
function encode(encoder, records) {
  let pass = null;
  let pipeline = null;
  for (const r of records) {
    if (r[0] === 0) {
      if (pass === null) {
        pass = encoder.beginComputePass();
        pipeline = null;
      }
      if (r[1] !== pipeline) {
        pipeline = r[1];
        pass.setPipeline(pipeline);
      }
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
  if (pass !== null) pass.end();
}

// queue.writeBuffer for each [buffer, offset, Uint8Array] of `writes`, in order.
function write(queue, writes) {
  for (const [buffer, offset, data] of writes) queue.writeBuffer(buffer, offset, data);
}

return {
  encode,
  write,

  // Encode every record of every segment into one command encoder and submit it.
  // segments: an Array of Arrays of records, each record one of
  //   [0, pipeline, bindGroup, x, y, z]                        a compute dispatch
  //   [1, srcBuffer, srcOffset, dstBuffer, dstOffset, size]    a buffer-to-buffer copy
  // Consecutive dispatches share one compute pass (see encode): WebGPU orders and synchronises the
  // dispatches of a pass, and a pass per dispatch would cost more.
  // errors: the object `watch` returned, or absent; the value is its errors so far ("" if none), so
  // that the binding learns them in this same FFI call rather than in one more per submit.
  // writes: null, or the binding's deferred queue writes (see write), issued first.
  submit(device, segments, errors, writes) {
    if (writes) write(device.queue, writes);
    const encoder = device.createCommandEncoder();
    for (const records of segments) encode(encoder, records);
    device.queue.submit([encoder.finish()]);
    return errors ? errors.take() : "";
  },

  // Profiling (webgrad.bench.replay_profile; the device needs "timestamp-query"): GPU nanoseconds of a
  // record list, `repeats` times, each its own submit and wait. mode "each": every dispatch in a compute
  // pass of its own, an array of per-dispatch durations per repeat; mode "span": the records encoded as
  // submit() does, between two empty timestamped passes, an array of one duration per repeat.
  async timestamps(device, records, mode, repeats) {
    const n = mode === "each" ? records.filter((r) => r[0] === 0).length : 1;
    const querySet = device.createQuerySet({ type: "timestamp", count: 2 * n });
    const resolve = device.createBuffer({ size: 16 * n, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
    const read = device.createBuffer({ size: 16 * n, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const out = [];
    for (let k = 0; k < repeats; k++) {
      const encoder = device.createCommandEncoder();
      if (mode === "each") {
        let i = 0;
        for (const r of records) {
          if (r[0] !== 0) {
            encoder.copyBufferToBuffer(r[1], r[2], r[3], r[4], r[5]);
            continue;
          }
          const pass = encoder.beginComputePass({ timestampWrites: {
            querySet, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 } });
          pass.setPipeline(r[1]);
          pass.setBindGroup(0, r[2]);
          pass.dispatchWorkgroups(r[3], r[4], r[5]);
          pass.end();
          i++;
        }
      } else {
        encoder.beginComputePass({ timestampWrites: { querySet, beginningOfPassWriteIndex: 0 } }).end();
        encode(encoder, records);
        encoder.beginComputePass({ timestampWrites: { querySet, endOfPassWriteIndex: 1 } }).end();
      }
      encoder.resolveQuerySet(querySet, 0, 2 * n, resolve, 0);
      encoder.copyBufferToBuffer(resolve, 0, read, 0, 16 * n);
      device.queue.submit([encoder.finish()]);
      await read.mapAsync(GPUMapMode.READ);
      const stamps = new BigUint64Array(read.getMappedRange());
      const durations = [];
      for (let j = 0; j < n; j++) {
        durations.push(stamps[2 * j + 1] > stamps[2 * j] ? Number(stamps[2 * j + 1] - stamps[2 * j]) : 0);
      }
      read.unmap();
      out.push(durations);
    }
    querySet.destroy();
    resolve.destroy();
    read.destroy();
    return out;
  },

  // Profiling: host milliseconds of submitting a record list `n` times (each a submit of its own, no
  // wait), split into [encoding the commands, encoder.finish(), queue.submit()].
  timeSubmit(device, records, n) {
    const parts = [0, 0, 0];
    for (let k = 0; k < n; k++) {
      const t0 = performance.now();
      const encoder = device.createCommandEncoder();
      encode(encoder, records);
      const t1 = performance.now();
      const commands = encoder.finish();
      const t2 = performance.now();
      device.queue.submit([commands]);
      const t3 = performance.now();
      parts[0] += t1 - t0;
      parts[1] += t2 - t1;
      parts[2] += t3 - t2;
    }
    return parts;
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
};
})()
