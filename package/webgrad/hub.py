"""torch.hub: download checkpoints by URL into a local cache, and load models from a local hubconf.py.

load_state_dict_from_url(url) downloads the file once into ``<hub dir>/checkpoints`` (the hub dir is
``$TORCH_HOME/hub``, ``$TORCH_HOME`` defaulting to ``$XDG_CACHE_HOME/torch``, that to ``~/.cache/torch``; or
set_dir's folder), checks the SHA-256 prefix in a ``name-<hash>.ext`` file name when check_hash is set, and reads
it with webgrad.load (PyTorch's zip format, safetensors). Natively the download goes through urllib (http, https,
file URLs); in the browser (Pyodide) through a synchronous XMLHttpRequest, so the server must allow the page's
origin (CORS).

hub.load(..., source="local") runs a hubconf.py from a folder, as PyTorch's does. Loading from a GitHub repository
(hub.load with source="github", hub.list, hub.help) downloads and runs that repository's code, which webgrad does
not do: those raise a RuntimeError saying so.
"""

import hashlib
import importlib.util
import io
import os
import re
import shutil
import sys
import tempfile
import uuid
import warnings
import zipfile

from .io import load as _load_checkpoint

__all__ = ["download_url_to_file", "get_dir", "help", "list", "load", "load_state_dict_from_url", "set_dir"]

# the hash prefix in a file name: bfd8deac in resnet18-bfd8deac.pth
HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")
ENV_TORCH_HOME = "TORCH_HOME"
ENV_XDG_CACHE_HOME = "XDG_CACHE_HOME"
DEFAULT_CACHE_DIR = "~/.cache"
VAR_DEPENDENCY = "dependencies"
MODULE_HUBCONF = "hubconf.py"
READ_DATA_CHUNK = 128 * 1024

_hub_dir = None


def _get_torch_home():
    default = os.path.join(os.getenv(ENV_XDG_CACHE_HOME, DEFAULT_CACHE_DIR), "torch")
    return os.path.expanduser(os.getenv(ENV_TORCH_HOME, default))


def get_dir():
    """The hub's cache folder: set_dir's, else ``$TORCH_HOME/hub``."""
    if os.getenv("TORCH_HUB"):
        warnings.warn("TORCH_HUB is deprecated, please use env TORCH_HOME instead", stacklevel=2)
    if _hub_dir is not None:
        return _hub_dir
    return os.path.join(_get_torch_home(), "hub")


def set_dir(d):
    """Use the folder `d` (a str or os.PathLike; ~ expanded) as the hub's cache folder."""
    global _hub_dir
    _hub_dir = os.path.expanduser(d)


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """Download `url` to the path `dst`. hash_prefix: the file's SHA-256 hex digest must start with it, or
    RuntimeError (and dst is left untouched). progress: a progress bar on stderr. The data goes to a temporary
    file beside dst, moved into place only once complete, so a broken download never replaces a good file."""
    dst = os.path.expanduser(dst)
    for _ in range(tempfile.TMP_MAX):
        tmp_dst = dst + "." + uuid.uuid4().hex + ".partial"
        try:
            f = open(tmp_dst, "x+b")  # noqa: SIM115 (closed in the finally below)
        except FileExistsError:
            continue
        break
    else:
        raise FileExistsError(f"No usable temporary file name found for {dst}")
    try:
        stream, size = _open_url(url)
        sha256 = hashlib.sha256() if hash_prefix is not None else None
        with stream, _progress_bar(size, progress) as bar:
            while True:
                buffer = stream.read(READ_DATA_CHUNK)
                if len(buffer) == 0:
                    break
                f.write(buffer)
                if sha256 is not None:
                    sha256.update(buffer)
                bar.update(len(buffer))
        f.close()
        if sha256 is not None:
            digest = sha256.hexdigest()
            if digest[:len(hash_prefix)] != hash_prefix:
                raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got "{digest}")')
        shutil.move(f.name, dst)
    finally:
        f.close()
        if os.path.exists(f.name):
            os.remove(f.name)


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True, check_hash=False,
                             file_name=None, weights_only=False):
    """The object saved at `url` (a state dict, usually), downloaded once into model_dir (default
    ``<get_dir()>/checkpoints``) under file_name (default: the URL's file name) and read from there afterwards.

    check_hash: the file name must look like ``name-<sha256 prefix>.ext`` and the download must match that
    prefix (RuntimeError otherwise). map_location: where the tensors go, as webgrad.load's. weights_only (False,
    as PyTorch's hub): False runs whatever the file's pickle names, so pass True for files from sources you do
    not trust (tensors and plain containers only). A zip holding a single file (PyTorch's pre-1.6 way of
    shipping checkpoints) is unpacked into model_dir first."""
    if os.getenv("TORCH_MODEL_ZOO"):
        warnings.warn("TORCH_MODEL_ZOO is deprecated, please use env TORCH_HOME instead", stacklevel=2)
    if model_dir is None:
        model_dir = os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    from urllib.parse import urlparse
    filename = file_name if file_name is not None else os.path.basename(urlparse(url).path)
    cached_file = os.path.join(model_dir, filename)
    if not os.path.exists(cached_file):
        sys.stdout.write(f'Downloading: "{url}" to {cached_file}\n')
        hash_prefix = None
        if check_hash:
            match = HASH_REGEX.search(filename)
            hash_prefix = match.group(1) if match else None
        download_url_to_file(url, cached_file, hash_prefix, progress=progress)
    if _is_legacy_zip_format(cached_file):
        warnings.warn("Falling back to the old format < 1.6. This support will be deprecated in favor of default "
                      "zipfile format introduced in 1.6. Please redo torch.save() to save it in the new zipfile "
                      "format.", FutureWarning, stacklevel=2)
        cached_file = _extract_single_member(cached_file, model_dir)
    return _load_checkpoint(cached_file, map_location=map_location, weights_only=weights_only)


def load(repo_or_dir, model, *args, source="github", trust_repo="check", force_reload=False, verbose=True,
         skip_validation=False, **kwargs):
    """The entry point `model` of the hubconf.py in the folder repo_or_dir (source="local"), called with *args
    and **kwargs. source="github" (download and run a GitHub repository's code) raises RuntimeError: webgrad
    does not fetch repositories, natively or in the browser; clone the repository and pass its folder with
    source="local"."""
    source = source.lower()
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    if source == "github":
        _refuse_github("load", repo_or_dir)
    return _load_local(repo_or_dir, model, *args, **kwargs)


def list(github, force_reload=False, skip_validation=False, trust_repo="check", verbose=True):  # noqa: A001
    """PyTorch's hub.list reads a GitHub repository's hubconf.py: not available in webgrad (RuntimeError)."""
    _refuse_github("list", github)


def help(github, model, force_reload=False, skip_validation=False, trust_repo="check"):  # noqa: A001
    """PyTorch's hub.help reads a GitHub repository's hubconf.py: not available in webgrad (RuntimeError)."""
    _refuse_github("help", github)


def _refuse_github(function, github):
    raise RuntimeError(
        f"torch.hub.{function}('{github}'): webgrad does not download GitHub repositories or run their hubconf.py "
        "(it works offline and in the browser, where there is no git and no repository to import). Clone the "
        "repository and call torch.hub.load(folder, model, source='local'), or download its weights with "
        "torch.hub.load_state_dict_from_url(url) and build the model yourself.")


def _load_local(hubconf_dir, model, *args, **kwargs):
    """Import hubconf_dir/hubconf.py (with hubconf_dir on sys.path), check its `dependencies`, call `model`."""
    hubconf_dir = os.fspath(hubconf_dir)
    sys.path.insert(0, hubconf_dir)
    try:
        spec = importlib.util.spec_from_file_location(MODULE_HUBCONF, os.path.join(hubconf_dir, MODULE_HUBCONF))
        hub_module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(hub_module)
        if not isinstance(model, str):
            raise ValueError("Invalid input: model should be a string of function name")
        missing = [name for name in getattr(hub_module, VAR_DEPENDENCY, None) or []
                   if importlib.util.find_spec(name) is None]
        if missing:
            raise RuntimeError(f"Missing dependencies: {', '.join(missing)}")
        entry = getattr(hub_module, model, None) if model in dir(hub_module) else None
        if entry is None or not callable(entry):
            raise RuntimeError(f"Cannot find callable {model} in hubconf")
        return entry(*args, **kwargs)
    finally:
        sys.path.remove(hubconf_dir)


def _open_url(url):
    """(a readable binary stream with close(), its size in bytes or None) for url."""
    if sys.platform == "emscripten":
        data = _browser_fetch(url)
        return io.BytesIO(data), len(data)
    from urllib.request import Request, urlopen
    response = urlopen(Request(url, headers={"User-Agent": "torch.hub"}))
    length = response.info().get_all("Content-Length")
    return response, int(length[0]) if length else None


def _browser_fetch(url):
    """The bytes at url, fetched in Pyodide (which has no sockets for urllib) by a synchronous XMLHttpRequest.
    pyodide.http.open_url makes the same request but decodes the body as text, which breaks binary files; here
    the 'x-user-defined' charset makes each byte b arrive as one UTF-16 unit whose low byte is b."""
    try:
        from js import XMLHttpRequest
    except ImportError:
        raise RuntimeError(f"torch.hub cannot download {url}: this Python runs in WebAssembly without a browser's "
                           "XMLHttpRequest (and without sockets for urllib). Fetch the file from JavaScript, write "
                           "it to Pyodide's file system and pass its path to torch.load") from None
    request = XMLHttpRequest.new()
    request.open("GET", url, False)
    request.overrideMimeType("text/plain; charset=x-user-defined")
    request.send(None)
    if not 200 <= request.status < 300 and request.status != 0:  # 0: a file:// or data: URL, which has no status
        raise RuntimeError(f"torch.hub: downloading {url} failed with HTTP status {request.status} "
                           f"{request.statusText}")
    return decode_user_defined(request.responseText)


def decode_user_defined(text):
    """The bytes a response decoded with the 'x-user-defined' charset stood for: each character is U+00xx (xx
    below 0x80) or U+F7xx, and its low byte is the original byte."""
    return text.encode("utf-16-le")[0::2]


class _Progress:
    """A progress line on stderr, where tqdm is not installed."""

    def __init__(self, total, disable):
        self.total, self.disable, self.n = total, disable, 0

    def update(self, n):
        if self.disable:
            return
        self.n += n
        if self.total:
            sys.stderr.write(f"\r{100 * self.n / float(self.total):.1f}%")
        else:
            sys.stderr.write(f"\r{self.n:.1f} bytes")
        sys.stderr.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if not self.disable:
            sys.stderr.write("\n")


def _progress_bar(total, progress):
    try:
        from tqdm import tqdm
    except ImportError:
        return _Progress(total, disable=not progress)
    return tqdm(total=total, disable=not progress, unit="B", unit_scale=True, unit_divisor=1024)


def _is_legacy_zip_format(filename):
    """A zip archive holding one file: how checkpoints were shipped before torch.save's zip format (whose
    archives hold several records)."""
    if zipfile.is_zipfile(filename):
        with zipfile.ZipFile(filename) as zf:
            members = zf.infolist()
        return len(members) == 1 and not members[0].is_dir()
    return False


def _extract_single_member(filename, model_dir):
    """Unpack the one file of the zip `filename` into model_dir (refusing names that would land outside it);
    returns the unpacked file's path."""
    with zipfile.ZipFile(filename) as zf:
        member = zf.infolist()[0]
        name = os.path.normpath(member.filename)
        target = os.path.realpath(os.path.join(model_dir, name))
        if os.path.isabs(name) or ".." in re.split(r"[/\\]", name) or \
                os.path.commonpath([target, os.path.realpath(model_dir)]) != os.path.realpath(model_dir):
            raise ValueError(f"Archive entry escapes target directory: {member.filename}")
        zf.extract(member, model_dir)
    return os.path.join(model_dir, member.filename)
