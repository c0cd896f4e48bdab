// GPU time of the work webgrad submits, from WebGPU timestamp queries, measured in the worker without
// touching webgrad's binding: every compute pass the device encodes (without timestamps of its own) is
// bracketed by a pair of timestamps; when a command buffer is submitted, its pairs are resolved and read
// back, and their durations are added to a running total. The trainer (webgrad.apps.mnist.gputimer)
// reads the total at each loss read-back and shows GPU ms per step.
//
// self.webgradGpuTimer = {available, reason, ns, passes}: `reason` says why there is no timer (no
// 'timestamp-query' on this adapter). Browsers may round timestamps (Chrome: to 100 µs unless its
// developer features are on), so short passes count as 0 or 100 µs: the sum over a step is what is
// meaningful, not each pass.

const PAIRS = 128; // timed passes per command buffer; passes beyond are not timed (and counted)

export function installGpuTimer(device) {
  const timer = { available: false, reason: "", ns: 0, passes: 0, untimed: 0 };
  self.webgradGpuTimer = timer;
  if (!device.features.has("timestamp-query")) {
    timer.reason = "not available: this GPU adapter has no timestamp queries ('timestamp-query')";
    return timer;
  }
  timer.available = true;
  const free = []; // {querySet, resolve, read}: reused once their read-back is done
  const take = () => free.pop() || {
    querySet: device.createQuerySet({ type: "timestamp", count: 2 * PAIRS }),
    resolve: device.createBuffer({ size: 16 * PAIRS, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC }),
    read: device.createBuffer({ size: 16 * PAIRS, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST }),
  };
  const slots = new WeakMap(); // encoder -> {set, pairs}; then command buffer -> the same
  const encoders = new WeakSet(); // the encoders of this device

  const createCommandEncoder = device.createCommandEncoder;
  device.createCommandEncoder = function (...args) {
    const encoder = createCommandEncoder.apply(this, args);
    encoders.add(encoder);
    return encoder;
  };
  const proto = GPUCommandEncoder.prototype;
  const beginComputePass = proto.beginComputePass;
  proto.beginComputePass = function (descriptor) {
    if (!encoders.has(this) || descriptor?.timestampWrites) return beginComputePass.call(this, descriptor);
    let slot = slots.get(this);
    if (!slot) slots.set(this, slot = { set: take(), pairs: 0 });
    if (slot.pairs === PAIRS) {
      timer.untimed++;
      return beginComputePass.call(this, descriptor);
    }
    const i = 2 * slot.pairs++;
    return beginComputePass.call(this, { ...(descriptor || {}), timestampWrites: {
      querySet: slot.set.querySet, beginningOfPassWriteIndex: i, endOfPassWriteIndex: i + 1 } });
  };
  const finish = proto.finish;
  proto.finish = function (...args) {
    const slot = slots.get(this);
    if (slot) {
      const bytes = 16 * slot.pairs;
      this.resolveQuerySet(slot.set.querySet, 0, 2 * slot.pairs, slot.set.resolve, 0);
      this.copyBufferToBuffer(slot.set.resolve, 0, slot.set.read, 0, bytes);
    }
    const commands = finish.apply(this, args);
    if (slot) slots.set(commands, slot);
    return commands;
  };
  const submit = device.queue.submit;
  device.queue.submit = function (buffers) {
    const result = submit.call(this, buffers);
    for (const commands of buffers) {
      const slot = slots.get(commands);
      if (!slot) continue;
      const { set, pairs } = slot;
      set.read.mapAsync(GPUMapMode.READ, 0, 16 * pairs).then(() => {
        const t = new BigUint64Array(set.read.getMappedRange(0, 16 * pairs));
        for (let k = 0; k < pairs; k++) {
          const d = t[2 * k + 1] - t[2 * k];
          if (d > 0n) timer.ns += Number(d);
        }
        timer.passes += pairs;
        set.read.unmap();
        free.push(set);
      }, () => {}); // a lost device: nothing more to count
    }
    return result;
  };
  return timer;
}
