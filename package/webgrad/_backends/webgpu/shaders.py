"""Loading WGSL kernel files, and the one template step applied to them.

Every kernel lives in a ``.wgsl`` file in the package's ``webgrad/shaders/`` folder. In a checkout that
folder is a symlink to the repository's top-level ``shaders/`` (where the kernels are edited); the
wheel stores the files themselves there. Nothing outside the package is searched.

The template step, applied by :func:`source`, is deliberately tiny:

* ``//! include "name.wgsl"`` on a line of its own is replaced by that file's text (once per file);
* ``const NAME: u32 = <n>u;`` lines are prepended for the named integer constants the Python side
  passes (op codes and dtype codes), so a table in Python is the single source of their numbering;
* ``//! splice NAME`` on a line of its own is replaced by the text the Python side passes for NAME
  (the ``case`` lines that ops/table.py generates for elementwise.wgsl's ``switch`` statements).

Everything else a kernel varies (op, dtypes, contiguity, workgroup shape) is a WGSL ``override``
constant, specialised when the pipeline is created.
"""

import os
import re

_INCLUDE = re.compile(r'^\s*//!\s*include\s+"([^"]+)"\s*$', re.MULTILINE)
_SPLICE = re.compile(r'^[ \t]*//!\s*splice\s+([A-Za-z_][A-Za-z0-9_]*)[ \t]*$', re.MULTILINE)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# .../webgrad/_backends/webgpu/shaders.py -> .../webgrad/shaders
FOLDER = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "shaders")


def read(name):
    """The text of shader file `name` (e.g. "elementwise.wgsl")."""
    path = os.path.join(FOLDER, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"WGSL file {name!r} not found in {FOLDER}: the webgrad install is incomplete (the wheel must "
            "carry webgrad/shaders/; in a checkout, package/webgrad/shaders must link to ../../shaders)")
    with open(path, encoding="utf-8") as f:
        return f.read()


def source(name, constants=None, splices=None):
    """The WGSL source of `name` with includes expanded, `constants` (name -> int) prepended and each
    ``//! splice NAME`` line replaced by ``splices[NAME]`` (a missing NAME is an error)."""
    seen = {name}

    def expand(match):
        included = match.group(1)
        if included in seen:
            return ""
        seen.add(included)
        return _INCLUDE.sub(expand, read(included))

    body = _INCLUDE.sub(expand, read(name))

    def splice(match):
        key = match.group(1)
        if splices is None or key not in splices:
            raise ValueError(f"{name}: no text given for '//! splice {key}'")
        return splices[key]

    body = _SPLICE.sub(splice, body)
    header = []
    for key, value in (constants or {}).items():
        if not _NAME.match(key) or not isinstance(value, int) or value < 0:
            raise ValueError(f"bad shader constant {key}={value!r}")
        header.append(f"const {key}: u32 = {value}u;")
    return "\n".join(header) + "\n" + body
