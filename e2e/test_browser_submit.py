"""The browser binding's submit (browser.py + encode.js): one FFI call that encodes, submits and hands
back the errors WebGPU reported since the last call, raised in Python there (headless Chromium)."""


def test_a_reported_error_is_raised_by_the_next_submit(run_python):
    got = run_python("""
import js
from webgrad._backends.webgpu.browser import _js_object
from webgrad._backends.webgpu.runtime import default_runtime
binding = default_runtime().binding
binding.submit([[]])  # nothing reported yet: no error
# MAP_READ with STORAGE is an invalid usage: a validation error, reported asynchronously (uncapturederror)
binding._device.createBuffer(_js_object({"size": 16, "usage": 0x01 | 0x80}))
# Chromium delivers a device's errors when it processes the device's events, which pending work
# triggers: an idle device holds them back, so wait for the queue (as a read-back or synchronize does).
await binding._device.queue.onSubmittedWorkDone()
await js.Promise.new(lambda resolve, reject: js.setTimeout(resolve, 50))
try:
    binding.submit([[]])
    first = ""
except RuntimeError as e:
    first = str(e)
binding.submit([[]])  # taken once: the next submit is clean
first
""")
    assert got.startswith("WebGPU reported:") and "usage" in got.lower(), got


def test_writes_go_with_the_next_submit_in_order(run_python):
    # browser.py defers queue writes to the next submit's FFI call (or a read-back, wait or destroy before
    # it); they must land in call order and before the work submitted with them.
    got = run_python("""
import struct
import webgrad as wg
from webgrad._backends.webgpu.runtime import default_runtime
rt = default_runtime()
binding = rt.binding
wg.webgpu.synchronize()
x = wg.tensor([1.0, 2.0, 3.0, 4.0], device="webgpu")  # deferred: no submit yet
pending = len(binding._writes)
storage = x._view.storage
rt.write(storage, struct.pack("<2f", 10.0, 20.0))  # two writes into one buffer: the later one wins
rt.write(storage, struct.pack("<f", 30.0), 4)
doubled = (x * 2).tolist()  # the writes land before the multiply submitted with them
after = len(binding._writes)
big = wg.tensor([1.0] * 40000, device="webgpu")  # 160 KB: written at once, after the pending ones
total = float(big.sum().item())
rt.write(storage, struct.pack("<f", 7.0), 12)
read = x.tolist()  # a read-back issues the pending write first
[pending, doubled, after, total, read]
""")
    pending, doubled, after, total, read = got
    assert pending >= 1, got
    assert doubled == [20.0, 60.0, 6.0, 8.0], got
    assert after == 0 and total == 40000.0, got
    assert read == [10.0, 30.0, 3.0, 7.0], got
