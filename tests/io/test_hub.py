"""webgrad.hub against torch.hub, without the network: file:// URLs and an http.server on 127.0.0.1. The cache
folder, the hash-prefix check, the legacy single-file zip, a local hubconf.py, and the refusal of GitHub
repositories."""

import functools
import hashlib
import http.server
import os
import subprocess
import sys
import threading
import urllib.error
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.hub

import webgrad as wg
from helpers import PACKAGE_DIR


def _checkpoint(folder, name="weights.pth"):
    """A state dict saved by torch in folder/name; returns (its path, the state dict)."""
    torch.manual_seed(0)
    state = torch.nn.Linear(4, 3).state_dict()
    path = Path(folder) / name
    torch.save(state, path)
    return path, state


def _same(loaded, state):
    assert list(loaded) == list(state)
    for key, value in state.items():
        np.testing.assert_array_equal(loaded[key].numpy(), value.numpy())


@pytest.fixture
def server(tmp_path):
    """(served folder, base URL) of an http.server in a thread, on 127.0.0.1."""
    served = tmp_path / "served"
    served.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(served)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield served, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def hub_dir():
    """Restores the hub's folder (set_dir) after the test, in both libraries."""
    yield
    wg.hub._hub_dir = None
    torch.hub._hub_dir = None


def test_load_state_dict_from_url_downloads_once_then_reads_the_cache(tmp_path, capsys):
    path, state = _checkpoint(tmp_path)
    model_dir = tmp_path / "cache"
    loaded = wg.hub.load_state_dict_from_url(path.as_uri(), model_dir=str(model_dir), progress=False)
    _same(loaded, state)
    assert f'Downloading: "{path.as_uri()}" to {model_dir / "weights.pth"}' in capsys.readouterr().out
    assert sorted(os.listdir(model_dir)) == ["weights.pth"]  # no temporary file left behind
    path.unlink()  # the second call must not need the source
    _same(wg.hub.load_state_dict_from_url(path.as_uri(), model_dir=str(model_dir)), state)
    assert "Downloading" not in capsys.readouterr().out
    model = wg.nn.Linear(4, 3)
    model.load_state_dict(loaded)


def test_default_cache_is_torch_home_hub_checkpoints(tmp_path, monkeypatch, hub_dir):
    path, state = _checkpoint(tmp_path, "net-0123.pt")
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "home"))
    assert wg.hub.get_dir() == torch.hub.get_dir() == str(tmp_path / "home" / "hub")
    _same(wg.hub.load_state_dict_from_url(path.as_uri(), progress=False, file_name="renamed.pt"), state)
    assert os.path.exists(tmp_path / "home" / "hub" / "checkpoints" / "renamed.pt")
    monkeypatch.delenv("TORCH_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert wg.hub.get_dir() == torch.hub.get_dir() == str(tmp_path / "xdg" / "torch" / "hub")
    wg.hub.set_dir(tmp_path / "mine")
    torch.hub.set_dir(tmp_path / "mine")
    assert wg.hub.get_dir() == torch.hub.get_dir() == str(tmp_path / "mine")


def test_check_hash_accepts_the_right_prefix_and_refuses_a_wrong_one(tmp_path, server):
    served, base = server
    data, state = _checkpoint(served)
    digest = hashlib.sha256(data.read_bytes()).hexdigest()
    good, bad = served / f"lin-{digest[:10]}.pth", served / "lin-deadbeef.pth"
    good.write_bytes(data.read_bytes())
    bad.write_bytes(data.read_bytes())
    model_dir = tmp_path / "cache"
    _same(wg.hub.load_state_dict_from_url(f"{base}/{good.name}", str(model_dir), check_hash=True, progress=False),
          state)
    with pytest.raises(RuntimeError, match='invalid hash value \\(expected "deadbeef", got "' + digest):
        wg.hub.load_state_dict_from_url(f"{base}/{bad.name}", str(model_dir), check_hash=True, progress=False)
    with pytest.raises(RuntimeError, match="invalid hash value"):  # torch's own check, for comparison
        torch.hub.load_state_dict_from_url(f"{base}/{bad.name}", str(tmp_path / "t"), check_hash=True,
                                           progress=False)
    assert sorted(os.listdir(model_dir)) == [good.name]  # the bad download left nothing behind


def test_download_url_to_file_over_http_with_progress(tmp_path, server, capsys):
    served, base = server
    payload = np.random.default_rng(0).bytes(300_000)  # more than one read chunk
    (served / "blob.bin").write_bytes(payload)
    dst = tmp_path / "out.bin"
    wg.hub.download_url_to_file(f"{base}/blob.bin", str(dst), hash_prefix=hashlib.sha256(payload).hexdigest()[:8])
    assert dst.read_bytes() == payload
    assert capsys.readouterr().err  # a progress bar (tqdm's or the plain one) on stderr
    wg.hub.download_url_to_file(f"{base}/blob.bin", str(tmp_path / "quiet.bin"), progress=False)
    assert capsys.readouterr().err == ""


def test_missing_file_raises_as_torch(tmp_path, server):
    _, base = server
    with pytest.raises(urllib.error.HTTPError):
        torch.hub.download_url_to_file(f"{base}/nothing.pth", str(tmp_path / "t.pth"), progress=False)
    with pytest.raises(urllib.error.HTTPError):
        wg.hub.download_url_to_file(f"{base}/nothing.pth", str(tmp_path / "w.pth"), progress=False)
    assert os.listdir(tmp_path) == ["served"]  # no partial download left


def test_legacy_single_file_zip_is_unpacked(tmp_path):
    path, state = _checkpoint(tmp_path, "inner.pth")
    with zipfile.ZipFile(tmp_path / "legacy.zip", "w") as zf:
        zf.write(path, "inner.pth")
    url = (tmp_path / "legacy.zip").as_uri()
    with pytest.warns(FutureWarning, match="old format"):
        loaded = wg.hub.load_state_dict_from_url(url, str(tmp_path / "w"), progress=False)
    _same(loaded, state)
    with pytest.warns(FutureWarning):
        _same(torch.hub.load_state_dict_from_url(url, str(tmp_path / "t"), progress=False), state)
    assert sorted(os.listdir(tmp_path / "w")) == sorted(os.listdir(tmp_path / "t")) == ["inner.pth", "legacy.zip"]


def test_weights_only_and_map_location_reach_the_loader(tmp_path):
    path, state = _checkpoint(tmp_path)
    loaded = wg.hub.load_state_dict_from_url(path.as_uri(), str(tmp_path / "c"), map_location="cpu",
                                             weights_only=True, progress=False)
    _same(loaded, state)
    assert all(v.device.type == "cpu" for v in loaded.values())


def test_github_repositories_are_refused_clearly():
    for call in (lambda: wg.hub.load("pytorch/vision", "resnet18"), lambda: wg.hub.list("pytorch/vision"),
                 lambda: wg.hub.help("pytorch/vision", "resnet18")):
        with pytest.raises(RuntimeError, match="does not download GitHub repositories.*source='local'"):
            call()
    with pytest.raises(ValueError, match='Unknown source: "svn"'):
        wg.hub.load("x", "y", source="svn")
    with pytest.raises(ValueError, match='Unknown source: "svn"'):
        torch.hub.load("x", "y", source="svn")


def test_load_runs_a_local_hubconf(tmp_path):
    (tmp_path / "helper_for_hubconf.py").write_text("SCALE = 3\n")
    (tmp_path / "hubconf.py").write_text(
        "dependencies = ['numpy']\n"
        "from helper_for_hubconf import SCALE\n"
        "def tripled(x, offset=0):\n    return x * SCALE + offset\n"
        "not_callable = 5\n")
    for hub in (wg.hub, torch.hub):
        assert hub.load(str(tmp_path), "tripled", 2, source="local", offset=1) == 7
        with pytest.raises(RuntimeError, match="Cannot find callable missing in hubconf"):
            hub.load(str(tmp_path), "missing", source="local")
        with pytest.raises(RuntimeError, match="Cannot find callable not_callable in hubconf"):
            hub.load(str(tmp_path), "not_callable", source="local")
    assert str(tmp_path) not in sys.path
    (tmp_path / "hubconf.py").write_text("dependencies = ['no_such_package_xyz', 'numpy']\ndef f():\n    pass\n")
    for hub in (wg.hub, torch.hub):
        with pytest.raises(RuntimeError, match="Missing dependencies: no_such_package_xyz"):
            hub.load(str(tmp_path), "f", source="local")


def test_browser_bytes_decoding_restores_every_byte():
    """What Pyodide's synchronous XMLHttpRequest gives with the x-user-defined charset: bytes below 0x80 as
    themselves, the others as U+F780..U+F7FF."""
    raw = bytes(range(256)) * 3
    text = "".join(chr(b) if b < 0x80 else chr(0xF700 + b) for b in raw)
    assert wg.hub.decode_user_defined(text) == raw


def test_torch_hub_resolves_under_as_torch():
    code = ("import webgrad; webgrad.as_torch()\n"
            "import torch.hub\n"
            "from torch.hub import load_state_dict_from_url\n"
            "import torch.nn.utils.prune, torch.nn.utils.fusion\n"
            "assert torch.hub is webgrad.hub and load_state_dict_from_url is webgrad.hub.load_state_dict_from_url\n"
            "assert torch.nn.utils.prune.l1_unstructured and torch.nn.utils.fusion.fuse_conv_bn_eval\n")
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
