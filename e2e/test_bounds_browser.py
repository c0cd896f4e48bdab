"""Out-of-range indices in the browser (Pyodide, the JS binding, SwiftShader): the error word travels
with the read-back and the IndexError reaches Python there, as with wgpu-py (tests/backends/webgpu/test_bounds.py)."""

CODE = """
import webgrad as wg
import webgrad.nn.functional as F
out = []
logits = wg.randn(2, 3, device="webgpu")
for make in (lambda: F.cross_entropy(logits, wg.tensor([0, 3], device="webgpu")),
             lambda: logits.index_select(0, wg.tensor([5], device="webgpu")),
             lambda: wg.nn.Embedding(3, 2, device="webgpu")(wg.tensor([-1], device="webgpu"))):
    t = make()
    try:
        t.tolist()
        out.append("no error")
    except IndexError as e:
        out.append(str(e))
out.append(str(F.cross_entropy(logits, wg.tensor([0, 2], device="webgpu")).item() > 0))
"\\n".join(out)
"""


def test_index_errors_reach_python_in_the_browser(app_page, run_python):
    # app_page: the dashboard has finished loading its data first. The error word is the device's, so an
    # error surfaces at the next read-back of any task: the app's own reads, interleaved with this code's
    # while it loads, would otherwise take it (as a CUDA device-side assert surfaces at any next sync).
    lines = run_python(CODE).split("\n")
    assert lines == [
        "cross_entropy: target 3 is out of bounds for 3 classes",
        "index_select(): index 5 is out of range for dimension 0 with size 2",
        "embedding(): index -1 is out of range for 3 embeddings",
        "True",
    ]
