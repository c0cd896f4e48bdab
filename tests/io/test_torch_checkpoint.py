"""Checkpoints both ways with the real PyTorch: torch.save -> webgrad.load and webgrad.save -> torch.load
(weights_only=True), nested dicts and optimizer state included, tensors bit-identical; hostile pickles
refused without running anything."""

import io
import os
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES


def _same_bits(w, t):
    a, b = w.detach().to("cpu").numpy(), t.detach().numpy()
    assert a.shape == b.shape
    assert a.tobytes() == b.astype(a.dtype).tobytes() and (a.dtype == b.dtype or b.dtype == np.int64)


def _walk_pairs(w, t):
    """Compare a webgrad object with the torch one it should equal, recursively."""
    if isinstance(t, torch.Tensor):
        assert isinstance(w, wg.Tensor)
        _same_bits(w, t)
    elif isinstance(t, dict):
        assert type(w) is type(t) or (isinstance(w, dict) and isinstance(t, dict))
        assert list(w) == list(t)
        for k in t:
            _walk_pairs(w[k], t[k])
    elif isinstance(t, (list, tuple)):
        assert type(w) is type(t) and len(w) == len(t)
        for a, b in zip(w, t):
            _walk_pairs(a, b)
    else:
        assert w == t and type(w) is type(t)


def _torch_checkpoint():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(5, 3)).pow(2).sum().backward()
    opt.step()
    return model, opt, {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3,
                        "history": [0.5, 0.25], "meta": {"name": "mlp", "flags": (True, None)},
                        "labels": torch.tensor([1, 2, 3]), "view": torch.arange(10.0)[2:8:2],
                        "f64": torch.randn(2, dtype=torch.float64), "mask": torch.tensor([True, False]),
                        "bytes": torch.tensor([0, 255], dtype=torch.uint8)}


@pytest.mark.parametrize("device", DEVICES)
def test_torch_save_loads_in_webgrad(tmp_path, device):
    _, _, ck = _torch_checkpoint()
    path = tmp_path / "ck.pth"
    torch.save(ck, path)
    if device != "cpu":
        ck.pop("f64")  # WebGPU has no float64
        torch.save(ck, path)
    got = wg.load(path, map_location=device)
    _walk_pairs(got, ck)
    assert got["model"]["0.weight"].device == device
    assert got["labels"].dtype is wg.int64


def test_torch_optimizer_state_resumes_in_webgrad(tmp_path):
    tmodel, topt, ck = _torch_checkpoint()
    torch.save(ck, tmp_path / "ck.pt")
    loaded = wg.load(tmp_path / "ck.pt", weights_only=True)
    model = wg.nn.Sequential(wg.nn.Linear(3, 4), wg.nn.ReLU(), wg.nn.Linear(4, 2))
    model.load_state_dict(loaded["model"])
    opt = wg.optim.Adam(model.parameters(), lr=0.01)
    opt.load_state_dict(loaded["optimizer"])
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    for m, o, lib in ((tmodel, topt, torch), (model, opt, wg)):
        o.zero_grad()
        m(lib.tensor(x)).pow(2).sum().backward()
        o.step()
    for w, t in zip(model.parameters(), tmodel.parameters()):
        np.testing.assert_allclose(w.detach().numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_webgrad_save_loads_in_torch_weights_only(tmp_path):
    model = wg.nn.Sequential(wg.nn.Linear(3, 4), wg.nn.ReLU(), wg.nn.Linear(4, 2))
    opt = wg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(wg.randn(5, 3)).sum().backward()
    opt.step()
    ck = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3, "loss": 0.125,
          "nested": [{"a": wg.tensor([1, 2]), "b": (wg.tensor([True]), "s")}], "big": 2**40, "neg": -7,
          "u8": wg.tensor([0, 255], dtype=wg.uint8), "f64": wg.tensor([1.5], dtype=wg.float64)}
    for name in ("ck.pt", "ck.pth", "ck.ckpt"):
        wg.save(ck, tmp_path / name)
        got = torch.load(tmp_path / name, weights_only=True)
        _walk_pairs(ck, got)
    # a torch model takes the weights as they are
    tmodel = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    tmodel.load_state_dict(got["model"])
    x = np.ones((1, 3), np.float32)
    np.testing.assert_allclose(tmodel(torch.tensor(x)).detach().numpy(), model(wg.tensor(x)).detach().numpy(),
                               rtol=1e-6)
    # and webgrad reads its own file back
    _walk_pairs(wg.load(tmp_path / "ck.pt"), got)


def test_file_objects_and_names():
    buf = io.BytesIO()
    wg.save({"w": wg.ones(2), "epoch": 1}, buf)  # nested/mixed: the torch format
    buf.seek(0)
    assert torch.load(buf, weights_only=True)["epoch"] == 1
    buf.seek(0)
    assert wg.load(buf)["w"].tolist() == [1.0, 1.0]
    flat = io.BytesIO()
    wg.save({"w": wg.ones(2)}, flat)  # a flat dict of tensors in a file object: safetensors, as before
    assert not flat.getvalue().startswith(b"PK")
    flat.seek(0)
    assert wg.load(flat)["w"].tolist() == [1.0, 1.0]


class _Evil:
    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _zip_with_pickle(payload):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/data.pkl", payload)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")
    return buf.getvalue()


def test_hostile_checkpoint_is_refused_unrun(tmp_path):
    marker = tmp_path / "pwned"
    evil = _Evil()
    evil.marker = marker
    path = tmp_path / "evil.pt"
    path.write_bytes(_zip_with_pickle(pickle.dumps({"w": evil}, protocol=2)))
    with pytest.raises(pickle.UnpicklingError, match=r"Unsupported global: GLOBAL (posix|os)\.system"):
        wg.load(path)
    assert not marker.exists()
    # a class of the saver's own code is refused as well
    path.write_bytes(_zip_with_pickle(pickle.dumps({"d": OrderedDict(a=zipfile.ZipInfo("x"))}, protocol=2)))
    with pytest.raises(pickle.UnpicklingError, match="zipfile.ZipInfo"):
        wg.load(path)


def test_errors_name_the_format(tmp_path):
    legacy = tmp_path / "old.pth"
    torch.save({"w": torch.ones(2)}, legacy, _use_new_zipfile_serialization=False)
    with pytest.raises(ValueError, match="legacy format"):
        wg.load(legacy)
    junk = tmp_path / "junk.pth"
    junk.write_bytes(b"\xff" * 64)
    with pytest.raises(ValueError, match="not a zip archive"):
        wg.load(junk)
    # any other object is pickled whole, as torch.save does; a weights-only load refuses it as torch's does
    wg.save({"x": object()}, tmp_path / "x.pt")
    with pytest.raises(pickle.UnpicklingError, match="Unsupported global: GLOBAL object was not an allowed global"):
        wg.load(tmp_path / "x.pt")
    assert type(wg.load(tmp_path / "x.pt", weights_only=False)["x"]) is object


@pytest.mark.parametrize("device", DEVICES)
def test_int64_beyond_int32_loads_on_cpu_and_is_refused_on_webgpu(tmp_path, device):
    big = tmp_path / "big.pt"
    torch.save({"x": torch.tensor([2**40, -2**62])}, big)
    if device == "cpu":
        x = wg.load(big)["x"]
        assert x.dtype is wg.int64 and x.tolist() == [2**40, -2**62]
        wg.save({"x": x}, tmp_path / "back.pt")  # and saves back as a LongStorage
        back = torch.load(tmp_path / "back.pt", weights_only=True)["x"]
        assert back.dtype is torch.int64 and back.tolist() == [2**40, -2**62]
        return
    with pytest.raises(RuntimeError, match="int64 value 1099511627776 is outside the range WebGPU"):
        wg.load(big, map_location=device)


def test_load_needs_no_torch(tmp_path):
    import subprocess
    import sys
    path = tmp_path / "ck.pth"
    torch.save({"w": torch.arange(6.0).reshape(2, 3), "epoch": 2}, path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    # torch made unimportable in the loading process
    code = ("import sys; sys.modules['torch'] = None\n"
            "import webgrad as wg\n"
            "ck = wg.load(sys.argv[1])\n"
            "print(ck['epoch'], ck['w'].tolist())\n")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2 [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]"


def test_torch_force_weights_only_environment_variables_act_as_in_torch(tmp_path, monkeypatch):
    """Scripts written before PyTorch 2.6 torch.load a pickled NumPy array: TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1
    lets a load that passes no weights_only read it (with PyTorch's warning); TORCH_FORCE_WEIGHTS_ONLY_LOAD=1 makes
    even weights_only=False refuse it; both set is an error."""
    path = tmp_path / "traindata.pt"
    torch.save(np.arange(6.0).reshape(2, 3), path)
    for lib in (wg, torch):
        with pytest.raises(pickle.UnpicklingError):
            lib.load(path)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    for lib in (wg, torch):
        with pytest.warns(UserWarning, match="TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD detected"):
            data = lib.load(path)
        assert isinstance(data, np.ndarray) and data.tolist() == [[0, 1, 2], [3, 4, 5]]
        with pytest.raises(pickle.UnpicklingError):
            lib.load(path, weights_only=True)
    monkeypatch.setenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "1")
    for lib in (wg, torch):
        with pytest.raises(RuntimeError, match="Only one of"):
            lib.load(path)
    monkeypatch.delenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
    for lib in (wg, torch):
        with pytest.raises(pickle.UnpicklingError):
            lib.load(path, weights_only=False)
