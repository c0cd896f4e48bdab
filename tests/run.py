#!/usr/bin/env python3
"""The test command: `python tests/run.py [pytest args...]`.

Sets up what the tests need (see tools/bootstrap.py: .venv with `.[test]`,
npm packages, Chromium + lavapipe), then runs pytest from the repo root inside
the venv. With no arguments pytest runs `tests` and `e2e` (pyproject's
testpaths); arguments are passed through unchanged, e.g. `-k boot` or `tests/`
(paths are relative to the repo root).

pytest's exit code is returned as is. Exit code 5 (no tests collected) stays a
failure on purpose: the suite always has tests, so collecting none means a
broken filter or a broken install, and CI must not pass on it.
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools import bootstrap  # noqa: E402  (stdlib only; runs before the venv exists)


def main(argv: list[str]) -> int:
    try:
        python = bootstrap.ensure_venv("test")
        bootstrap.ensure_npm()
        bootstrap.ensure_browser()  # warns instead of failing when not root
        bootstrap.build_wheel(python)  # the e2e tests serve it to Pyodide
    except (bootstrap.SetupError, OSError, subprocess.CalledProcessError) as e:
        print(f"tests/run.py: set-up failed: {e}", file=sys.stderr)
        return 2
    # One BLAS thread: the CPU reference shares 2 cores with lavapipe and Chromium, and a threaded
    # OpenBLAS on an oversubscribed machine made CPU convolution tests ~4x slower.
    env = {"OPENBLAS_NUM_THREADS": "1", **os.environ}
    return subprocess.call([str(python), "-m", "pytest", *argv], cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
