"""webgrad's dashboard (MNIST first, and CIFAR-10, CIFAR-100, the user's own images, or a text for a GPT), the
Python side of the page in the repository's web/ folder: the worker (web/worker.js) installs the webgrad wheel
in Pyodide, imports this module and feeds the App that `start(js_post)` gives with the page's messages. See
app.py for the messages, train.py for the training runs, data.py for the datasets on the GPU, models.py for the
models (webgrad.models') and their files, resume.py and checkpoint.py for checkpoints, gputimer.py for GPU time
per step, bench.py for the in-page benchmark. In CPython, App(post, device="cpu") runs the same code.
"""

from .app import App  # noqa: F401


def start(js_post):
    """An App whose messages go to `js_post` (a JS function) as plain JS objects. (Pyodide's modules are
    imported here, not at the top: the module imports in CPython too.)"""
    from js import Object
    from pyodide.ffi import to_js

    import webgrad

    # Pyodide has no NumPy, so no CPU device: a tensor made without device= (a GPT's x[:, [-1]] makes one of its
    # index list) must go to the GPU.
    webgrad.set_default_device("webgpu")

    def post(msg):
        js_post(to_js(msg, dict_converter=Object.fromEntries))

    return App(post)


def from_js(msg):
    """A page message (a JsProxy of a plain object) as a dict; typed arrays become bytes."""
    from pyodide.ffi import JsBuffer, JsProxy

    out = {}
    for key, value in msg.to_py(depth=1).items():
        if isinstance(value, JsBuffer):
            value = value.to_bytes()
        elif isinstance(value, JsProxy):
            value = value.to_py()
        out[key] = value
    return out
