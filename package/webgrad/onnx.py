"""torch.onnx: importable, so scripts that export a model at the end run; export itself is refused.

webgrad has no ONNX exporter. A model trained under webgrad.as_torch() can be exported from PyTorch: save
its weights with torch.save(model.state_dict(), "model.pt"), load them into the same model in PyTorch,
and call torch.onnx.export there.
"""


class OnnxExporterError(RuntimeError):
    """Raised by export: webgrad cannot write ONNX graphs."""


def export(model, args=(), f=None, *pargs, **kwargs):
    raise OnnxExporterError(
        "torch.onnx.export is not supported by webgrad (it has no ONNX exporter). Save the weights with "
        "torch.save(model.state_dict(), path), load them into the model in PyTorch and export from there")


def is_in_onnx_export():
    """False: no ONNX export is ever running (model code checks this to pick an export-friendly path)."""
    return False
