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
await js.Promise.new(lambda resolve, reject: js.setTimeout(resolve, 200))
try:
    binding.submit([[]])
    first = ""
except RuntimeError as e:
    first = str(e)
binding.submit([[]])  # taken once: the next submit is clean
first
""")
    assert got.startswith("WebGPU reported:") and "usage" in got.lower(), got
