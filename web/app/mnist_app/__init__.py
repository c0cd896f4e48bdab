"""webgrad's MNIST trainer, the Python side of the page (web/): `start(js_post)` gives the App that the
worker (web/worker.js) feeds with the page's messages. See app.py for the messages, train.py for the
training loop, data.py for the data on the GPU and models.py for the two models.
"""

from .app import App  # noqa: F401


def start(js_post):
    """An App whose messages go to `js_post` (a JS function) as plain JS objects."""
    from js import Object
    from pyodide.ffi import to_js

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
