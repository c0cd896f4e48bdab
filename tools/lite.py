"""Build the JupyterLite site (webgrad in a notebook, offline): `python -m tools.lite [--force]`.

Output: build/lite/ (gitignored), a static site that serve.py mounts at /lite/ (`python serve.py
--lite`). Nothing in it reaches the internet:

* Pyodide comes from node_modules/pyodide (npm, package.json), copied into the site's
  static/pyodide/ — the kernel loads it from there (jupyterlite's well-known local-Pyodide path).
* The kernel's start-up wheels (micropip, IPython and friends: tools/lite_requirements.txt, pinned
  with hashes) are pip-downloaded into build/lite-wheels/ once, placed beside pyodide.mjs and listed
  in a pyodide-lock.json written for them (tools/pyodide_lock.py).
* The webgrad wheel (dist/, tools/bootstrap.build_wheel) is offered to `%pip install webgrad`
  through piplite; the PyPI fallback is disabled, so `%pip install numpy` says "not available"
  instead of hanging on a blocked request.
* The notebooks of notebooks/ are the site's contents.

Notebooks fetch MNIST from /data/ on the same server (serve.py serves it; `serve.py --build DIR`
writes data/ and lite/ side by side, so any static server rooted at DIR works too).

The build is skipped when its inputs are unchanged (a hash stamp in build/lite/). This module needs
the repo's .venv with the `lite` extra (jupyterlite-core, the Pyodide kernel, jupyter_server);
run from another Python, main() sets that up and re-runs itself there.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # `python tools/lite.py`: make `tools` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import bootstrap  # noqa: E402

ROOT = bootstrap.ROOT
SITE = ROOT / "build" / "lite"  # the output
STAGING = ROOT / "build" / "lite-src"  # the generated JupyterLite project ("lite dir")
WHEEL_CACHE = ROOT / "build" / "lite-wheels"  # pip-downloaded kernel wheels, kept across builds
NOTEBOOKS = ROOT / "notebooks"
REQUIREMENTS = Path(__file__).with_name("lite_requirements.txt")
PYODIDE = bootstrap.NODE_MODULES / "pyodide"
PYODIDE_CORE = ["pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip"]
STAMP = ".webgrad-lite.json"
KERNEL_PLUGIN = "@jupyterlite/pyodide-kernel-extension:kernel"
# lab for a full IDE, notebooks for one notebook per tab (what the dashboard links to and the tests
# drive), tree as the file browser both open from. repl/consoles/edit are left out (smaller site).
APPS = ["lab", "notebooks", "tree"]


# The site's Content-Security-Policy (serve.py sends it for /lite/; `serve.py --build` writes it for static
# hosts): csp() adds the hashes of the inline scripts the built pages hold (JupyterLite's loaders), so no
# other inline script runs. Nothing remote. JupyterLab needs more than the dashboard: inline styles (its
# pages, widgets and editors write <style> elements and style attributes, as do webgrad's HTML outputs),
# JavaScript compiled at run time (the kernel's Pyodide runs code with eval), WebAssembly, and data: images
# (JupyterLab's icons, the digits webgrad.notebook draws). e2e/test_csp_lite.py runs a notebook under it.
CSP_DIRECTIVES = [
    "default-src 'self'", "script-src 'self' 'wasm-unsafe-eval' 'unsafe-eval'", "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:", "connect-src 'self'", "worker-src 'self'", "object-src 'none'", "base-uri 'self'",
    "form-action 'none'",
]
_INLINE_SCRIPT = re.compile(rb"<script(?P<attrs>(?:\s[^>]*)?)>(?P<body>.*?)</script>", re.S | re.I)
_csp_cache: dict = {}


def csp(site: Path = SITE) -> str:
    """The policy of the site built in `site`: CSP_DIRECTIVES, with script-src naming each inline script of its
    pages by its SHA-256 (data blocks, type="application/json", are not scripts and need none)."""
    stamp = site / STAMP
    key = (str(site), stamp.stat().st_mtime_ns if stamp.is_file() else None)
    if key not in _csp_cache:
        hashes = set()
        for page in sorted(site.rglob("*.html")) if key[1] is not None else ():
            for m in _INLINE_SCRIPT.finditer(page.read_bytes()):
                kind = re.search(rb"""type\s*=\s*["']?([^"'\s>]+)""", m["attrs"], re.I)
                if b"src=" in m["attrs"].lower() or (kind and b"json" in kind.group(1).lower()):
                    continue
                hashes.add("'sha256-" + base64.b64encode(hashlib.sha256(m["body"]).digest()).decode() + "'")
        directives = [d + "".join(" " + h for h in sorted(hashes)) if d.startswith("script-src") else d
                      for d in CSP_DIRECTIVES]
        _csp_cache[key] = "; ".join(directives)
    return _csp_cache[key]


class LiteError(RuntimeError):
    """The site cannot be built; the message says why and what to do."""


def log(msg: str) -> None:
    print(f"[lite] {msg}", file=sys.stderr, flush=True)


def _requirements() -> dict[str, str]:
    """{'name==version': sha256} of the pinned kernel wheels, in the file's order."""
    pins = {}
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            req, _, digest = line.partition(" --hash=sha256:")
            pins[req.strip()] = digest.strip()
    return pins


def _kernel_versions() -> dict[str, str]:
    from importlib import metadata

    versions = {}
    for dist in ("jupyterlite-core", "jupyterlite-pyodide-kernel"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            raise LiteError(f"{dist} is not installed in {sys.executable}: build with `python -m tools.lite` "
                            "(it installs the .venv's `lite` extra first)") from None
    return versions


def fetch_kernel_wheels() -> list[Path]:
    """The pinned wheels in WHEEL_CACHE, pip-downloading any that are missing or do not match their hash."""
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    wanted = _requirements()

    def cached():
        found = {}
        for whl in WHEEL_CACHE.glob("*.whl"):
            name, version = whl.name.split("-")[:2]
            req = f"{name.lower().replace('_', '-')}=={version}"
            if wanted.get(req) == hashlib.sha256(whl.read_bytes()).hexdigest():
                found[req] = whl
            else:
                whl.unlink()  # not pinned (any more), or corrupt: pip fetches the pinned one again
        return found

    if not all(req in cached() for req in wanted):
        # --python-version: the wheels are for Pyodide's Python, not this one (micropip needs >= 3.12).
        bootstrap.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                       "--python-version", "3.14", "--require-hashes", "-r", str(REQUIREMENTS),
                       "-d", str(WHEEL_CACHE)])
    found = cached()
    missing = [req for req in wanted if req not in found]
    if missing:
        raise LiteError(f"pip did not download {missing} into {WHEEL_CACHE}")
    return [found[req] for req in wanted]


def _hash_inputs(wheel: Path, kernel_wheels: list[Path]) -> str:
    h = hashlib.sha256()
    files = [Path(__file__), Path(__file__).with_name("pyodide_lock.py"), REQUIREMENTS, wheel,
             PYODIDE / "package.json", *sorted(NOTEBOOKS.glob("*.ipynb")), *kernel_wheels]
    for f in files:
        h.update(f.name.encode() + b"\0" + hashlib.sha256(f.read_bytes()).digest())
    h.update(json.dumps(_kernel_versions(), sort_keys=True).encode())
    h.update(json.dumps(APPS).encode())
    return h.hexdigest()


def _stage(wheel: Path, kernel_wheels: list[Path]) -> None:
    """Write the JupyterLite project that `jupyter lite build` turns into the site."""
    from tools.pyodide_lock import write_lock

    if STAGING.exists():
        shutil.rmtree(STAGING)
    pyodide_dir = STAGING / "static" / "pyodide"
    pyodide_dir.mkdir(parents=True)
    for name in PYODIDE_CORE:
        if not (PYODIDE / name).is_file():
            raise LiteError(f"{PYODIDE / name} is missing: run `npm ci` (or any set-up command) first")
        shutil.copy2(PYODIDE / name, pyodide_dir / name)
    for whl in kernel_wheels:
        shutil.copy2(whl, pyodide_dir / whl.name)
    write_lock(PYODIDE / "pyodide-lock.json", [pyodide_dir / w.name for w in kernel_wheels],
               pyodide_dir / "pyodide-lock.json")
    # Build-time settings: the webgrad wheel goes into the site's piplite index (%pip install webgrad).
    (STAGING / "jupyter_lite_config.json").write_text(json.dumps({
        "LiteBuildConfig": {"apps": APPS, "no_sourcemaps": True, "no_unused_shared_packages": True},
        "PipliteAddon": {"piplite_urls": [str(wheel)]},
    }, indent=2) + "\n")
    # Run-time settings, merged into the site's jupyter-lite.json.
    (STAGING / "jupyter-lite.json").write_text(json.dumps({
        "jupyter-lite-schema-version": 0,
        "jupyter-config-data": {
            "appName": "webgrad notebooks",
            # window.jupyterapp: e2e/test_jupyterlite.py runs cells and reads outputs through it.
            "exposeAppInBrowser": True,
            "litePluginSettings": {KERNEL_PLUGIN: {"disablePyPIFallback": True}},
        },
    }, indent=2) + "\n")
    # Render every cell, not only those in view (JupyterLab's default "full" windowing): a notebook's
    # live chart keeps updating while scrolled away, and a whole-page screenshot shows every output.
    (STAGING / "overrides.json").write_text(json.dumps({
        "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
    }, indent=2) + "\n")


def build(out: Path = SITE, force: bool = False) -> Path:
    """Build the site into `out` unless it is up to date; returns `out`."""
    _kernel_versions()  # fail early, with the fix, outside the .venv
    wheel = bootstrap.build_wheel(Path(sys.executable))
    kernel_wheels = fetch_kernel_wheels()
    key = _hash_inputs(wheel, kernel_wheels)
    stamp = out / STAMP
    if not force and stamp.is_file() and json.loads(stamp.read_text()).get("inputs") == key:
        return out
    log(f"building the JupyterLite site into {out}")
    _stage(wheel, kernel_wheels)
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    cmd = [sys.executable, "-m", "jupyterlite_core", "build", "--lite-dir", str(STAGING),
           "--output-dir", str(tmp), "--contents", str(NOTEBOOKS)]
    # The build runs in STAGING so that its doit database and caches stay out of the repo's root.
    proc = subprocess.run(cmd, cwd=STAGING, capture_output=True, text=True)
    if proc.returncode != 0:
        raise LiteError(f"`{' '.join(cmd)}` failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    _check(tmp)
    (tmp / STAMP).write_text(json.dumps({"inputs": key, "wheel": wheel.name}, indent=2) + "\n")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)  # a half-built site is never served
    log(f"site ready: {out} ({_size_mb(out):.1f} MB)")
    return out


def _check(site: Path) -> None:
    """The settings a silent offline hang would come from, verified in the built site."""
    config = json.loads((site / "jupyter-lite.json").read_text())["jupyter-config-data"]
    kernel = config["litePluginSettings"][KERNEL_PLUGIN]
    problems = []
    if not kernel.get("disablePyPIFallback"):
        problems.append("disablePyPIFallback is not set")
    if kernel.get("pyodideUrl") != "./static/pyodide/pyodide.mjs":
        problems.append(f"pyodideUrl is {kernel.get('pyodideUrl')!r}, not the local Pyodide")
    if not any("webgrad" in url for url in kernel.get("pipliteUrls", [])) and \
            not list((site / "pypi").glob("webgrad-*.whl")):
        problems.append("the webgrad wheel is not in the piplite index")
    for name in PYODIDE_CORE + ["pyodide-lock.json"]:
        if not (site / "static" / "pyodide" / name).is_file():
            problems.append(f"static/pyodide/{name} is missing")
    if problems:
        raise LiteError("the built site is not usable offline: " + "; ".join(problems))


def _size_mb(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 1e6


def _in_venv() -> bool:
    return Path(sys.prefix).resolve() == bootstrap.VENV.resolve()


def ensure_site(force: bool = False) -> Path:
    """Set up what the build needs (npm packages, the .venv's `lite` extra), then build; from any
    Python (outside the .venv the build runs in a .venv subprocess). Returns the site's folder."""
    bootstrap.ensure_npm()
    python = bootstrap.ensure_venv("lite")
    if _in_venv():
        return build(SITE, force)
    subprocess.run([str(python), "-m", "tools.lite", *(["--force"] if force else [])], cwd=ROOT, check=True)
    return SITE


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="rebuild even if the inputs are unchanged")
    args = ap.parse_args(argv)
    try:
        site = ensure_site(args.force)
    except (LiteError, bootstrap.SetupError, subprocess.CalledProcessError) as e:
        print(f"tools/lite.py: {e}", file=sys.stderr)
        return 1
    if _in_venv():  # (outside it, the .venv subprocess has printed it)
        print(site)
    return 0


if __name__ == "__main__":
    sys.exit(main())
