"""Loading WGSL kernel files, and the one template step applied to them.

Every kernel lives in a ``.wgsl`` file at the repository's top-level ``shaders/``; the wheel ships the
same files as package data at ``webgrad/shaders/``. We look next to the installed package first and
fall back to the source checkout (an editable install puts ``package/`` on ``sys.path``, so there is no
``webgrad/shaders`` beside the code).

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


def shader_dirs():
    """Folders searched for .wgsl files, in order."""
    here = os.path.dirname(os.path.abspath(__file__))
    package_root = os.path.dirname(os.path.dirname(here))  # .../webgrad
    repo_root = os.path.dirname(os.path.dirname(package_root))  # .../<repo>  (source checkout)
    return [os.path.join(package_root, "shaders"), os.path.join(repo_root, "shaders")]


def read(name):
    """The text of shader file `name` (e.g. "elementwise.wgsl")."""
    for folder in shader_dirs():
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                return f.read()
    raise FileNotFoundError(
        f"WGSL file {name!r} not found in {shader_dirs()}: the webgrad install is incomplete "
        "(the wheel must carry webgrad/shaders/)"
    )


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
