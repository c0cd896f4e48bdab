"""package/webgrad/_tensor.pyi declares every method Tensor has once webgrad imports (most are attached from the
op tables), so type checkers and IDEs see them: it must match what `python -m tools.tensor_stub` writes now."""

import ast

from tools import tensor_stub

import webgrad as wg


def test_the_stub_is_current():
    assert tensor_stub.STUB.read_text(encoding="utf-8") == tensor_stub.render(), \
        "package/webgrad/_tensor.pyi is out of date: run python -m tools.tensor_stub"


def test_the_stub_declares_every_public_method_and_parses():
    tree = ast.parse(tensor_stub.STUB.read_text(encoding="utf-8"))
    tensor = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Tensor")
    declared = {n.name for n in tensor.body if isinstance(n, ast.FunctionDef)}
    declared |= {n.target.id for n in tensor.body if isinstance(n, ast.AnnAssign)}
    public = {name for name in dir(wg.Tensor) if not name.startswith("_")}
    assert public <= declared, sorted(public - declared)
    for name in ("relu", "cumsum", "masked_fill", "topk", "add_", "backward", "shape", "__add__", "__getitem__"):
        assert name in declared
