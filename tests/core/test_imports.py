"""The package's import structure: imports form no cycle, counting those inside functions (an import
deferred into a function to dodge a cycle is still a cycle in the design), and every module imports on its
own in a fresh interpreter (so none of them works only because another was imported first)."""

import ast
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "package" / "webgrad"
# Modules that need a platform or an optional extra to import at all.
PLATFORM_ONLY = {
    "webgrad._backends.webgpu.browser": "Pyodide's js module",
}


def _module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(module, level, name, is_package):
    """The absolute module a relative import refers to."""
    if level == 0:
        return name
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _top_level_imports(module, path, inside_functions=False):
    """webgrad modules imported at module level (and, with inside_functions, anywhere in the module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    found = set()

    def visit(nodes):
        for node in nodes:
            if inside_functions and not isinstance(node, (ast.Import, ast.ImportFrom)):
                visit(ast.iter_child_nodes(node))
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("webgrad"))
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(module, node.level, node.module, is_package)
                if not target.startswith("webgrad"):
                    continue
                for a in node.names:  # `from . import x` imports submodule x; `from .m import f` imports m
                    sub = f"{target}.{a.name}"
                    found.add(sub if sub in MODULES else target)
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
                visit(getattr(node, "finalbody", []))

    visit(tree.body)
    # A package's own __init__ is imported before any of its submodules anyway: not an edge that orders.
    return {m for m in found if m in MODULES and m != module and not module.startswith(m + ".")}


@pytest.mark.parametrize("inside_functions", [False, True], ids=["module-level", "with-function-level"])
def test_imports_form_no_cycle(inside_functions):
    graph = {m: _top_level_imports(m, p, inside_functions) for m, p in MODULES.items()}
    # Package __init__ files re-export their children; the layering is about the modules themselves.
    graph = {m: {d for d in deps if not (MODULES[d].name == "__init__.py" and d != "webgrad")} for m, deps in graph.items()
             if MODULES[m].name != "__init__.py"}
    state, stack, cycles = {}, [], []

    def dfs(m):
        state[m] = "open"
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == "open":
                cycles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                dfs(d)
        stack.pop()
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            dfs(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_backends_never_import_the_frontend():
    frontend = ("webgrad._tensor", "webgrad.autograd", "webgrad.nn", "webgrad.optim", "webgrad.replay")
    for m, p in MODULES.items():
        if m.startswith("webgrad._backends"):
            bad = sorted(d for d in _top_level_imports(m, p) if d.startswith(frontend) or
                         (d.startswith("webgrad.ops") and d != "webgrad.ops.table"))
            assert not bad, f"{m} imports {bad}"


def _import_alone(module):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PACKAGE.parent), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, env=env, timeout=120)
    return module, proc.returncode, proc.stderr[-2000:]


@pytest.mark.skipif(sys.platform == "emscripten", reason="needs subprocesses")
def test_each_module_imports_alone_in_a_fresh_interpreter():
    modules = [m for m in MODULES if m not in PLATFORM_ONLY]
    with ThreadPoolExecutor(max_workers=2) as pool:
        failures = [(m, err) for m, rc, err in pool.map(_import_alone, modules) if rc != 0]
    assert not failures, "\n\n".join(f"{m}:\n{err}" for m, err in failures)
