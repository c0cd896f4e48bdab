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
