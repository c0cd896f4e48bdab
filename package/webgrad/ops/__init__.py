"""The ops, one module per family: forward, backward and CPU-side rules side by side.

    table.py        the op table: one record per elementwise op (CPU reference, WGSL, derivative, exposure)
    core.py         helpers every family uses (results, broadcasting, casts)
    elementwise.py  the table's ops made differentiable, plus arithmetic with scalars, comparisons, where
    reduce.py  matmul.py  shape.py  loss.py  conv.py  inplace.py   the hand-written families
    api.py          where ops become public: Tensor methods and operators, webgrad.* functions

This package imports nothing at import time, so backends can read ``ops.table`` as plain data. It is also
torch.ops under webgrad.as_torch(): namespaces.py answers ``torch.ops.aten`` and torch.library's namespaces.
"""


def __getattr__(name):
    """torch.ops' names (torch.ops.aten, torch.ops.<namespace> of torch.library, load_library), answered by
    namespaces.py only for those names, so the op families above import as submodules."""
    if name in ("aten", "load_library") or (not name.startswith("_") and _has_custom_namespace(name)):
        from . import namespaces
        return getattr(namespaces, name) if name in ("aten", "load_library") else namespaces.namespace(name)
    raise AttributeError(f"module 'webgrad.ops' has no attribute {name!r}")


def _has_custom_namespace(name):
    import sys
    namespaces = sys.modules.get(__name__ + ".namespaces")
    return namespaces is not None and name in namespaces._custom
