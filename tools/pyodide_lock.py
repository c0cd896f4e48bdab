"""Write the pyodide-lock.json that lets Pyodide (and the JupyterLite kernel on it) start offline.

Pyodide's `loadPackage(name)` only installs what its lock file lists, from files next to pyodide.mjs,
and checks each file's sha256. The lock in the npm package names wheels the npm package does not ship
(they live on a CDN) with hashes of Pyodide's own rebuilds, so offline it is useless as is. This
module writes a new lock: the npm lock's `info` block (ABI, platform, Python version: these must match
the runtime) and one entry per wheel we place beside pyodide.mjs, with the wheel's real sha256, its
import names and its dependencies (read from the wheel's METADATA, markers evaluated for Pyodide).

Used by tools/lite.py; runs in the repo's .venv (needs `packaging`).
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename


def pyodide_environment(python: str) -> dict[str, str]:
    """PEP 508 marker values inside Pyodide (sys.platform is "emscripten"), for Python `python`."""
    env = default_environment()
    major_minor = ".".join(python.split(".")[:2])
    env.update({
        "python_version": major_minor,
        "python_full_version": python,
        "sys_platform": "emscripten",
        "platform_system": "Emscripten",
        "os_name": "posix",
        "platform_machine": "wasm32",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
    })
    return env


def _dist_info(wheel: zipfile.ZipFile) -> str:
    names = {n.split("/")[0] for n in wheel.namelist() if n.split("/")[0].endswith(".dist-info")}
    if len(names) != 1:
        raise ValueError(f"{wheel.filename}: expected one .dist-info folder, found {sorted(names)}")
    return names.pop()


def import_names(wheel: zipfile.ZipFile) -> list[str]:
    """Top-level modules and packages of a wheel (what `import` sees): top_level.txt if present, else
    the wheel's top-level .py files and folders (many modern wheels have no top_level.txt)."""
    dist_info = _dist_info(wheel)
    try:
        listed = wheel.read(f"{dist_info}/top_level.txt").decode().split()
        if listed:
            return sorted(set(listed))
    except KeyError:
        pass
    tops = set()
    for name in wheel.namelist():
        first = name.split("/")[0]
        if first.endswith((".dist-info", ".data")):
            continue
        if "/" in name:
            tops.add(first)
        elif first.endswith(".py"):
            tops.add(first[:-3])
    return sorted(t for t in tops if re.match(r"^[A-Za-z_]\w*$", t))


def dependencies(wheel: zipfile.ZipFile, env: dict[str, str]) -> list[str]:
    """Canonical names of the wheel's requirements that apply in `env` (extras are not installed)."""
    metadata = Parser().parsestr(wheel.read(f"{_dist_info(wheel)}/METADATA").decode())
    deps = set()
    for line in metadata.get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate({**env, "extra": ""}):
            deps.add(canonicalize_name(req.name))
    return sorted(deps)


def entry(path: Path, env: dict[str, str]) -> dict:
    """The lock entry of one pure-Python wheel."""
    name, version, _build, _tags = parse_wheel_filename(path.name)
    with zipfile.ZipFile(path) as wheel:
        imports, depends = import_names(wheel), dependencies(wheel, env)
    return {
        "name": str(name),  # parse_wheel_filename gives the canonical name: the lock's key too
        "version": str(version),
        "file_name": path.name,
        "install_dir": "site",
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "package_type": "package",
        "imports": imports,
        "depends": depends,
        "unvendored_tests": False,
        "tool": {},
    }


def write_lock(npm_lock: Path, wheels: list[Path], out: Path) -> dict:
    """Write a lock for `wheels` (which must sit in out's folder) keeping npm_lock's `info`; returns it.

    Fails when a dependency is not among the wheels: Pyodide would otherwise hang on it at start-up.
    """
    info = json.loads(npm_lock.read_text())["info"]
    env = pyodide_environment(info["python"])
    packages = {}
    for path in sorted(wheels):
        if path.parent.resolve() != out.parent.resolve():
            raise ValueError(f"{path} must sit next to {out} (lock file names resolve beside pyodide.mjs)")
        e = entry(path, env)
        packages[e["name"]] = e
    for e in packages.values():
        missing = [d for d in e["depends"] if d not in packages]
        if missing:
            raise ValueError(f"{e['file_name']} needs {missing}, which are not in the lock: add them to "
                             "tools/lite_requirements.txt")
    lock = {"info": info, "packages": packages}
    out.write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n")
    return lock
