"""webgrad.save / webgrad.load (safetensors): round trips on every device, byte-for-byte agreement with the
reference writer, files exchanged both ways with the `safetensors` package, and broken files."""

import io
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest
import safetensors
import safetensors.numpy
import safetensors.torch
import torch

import webgrad as wg
from helpers import PACKAGE_DIR, DEVICES


def _state(device):
    state = {
        "fc.weight": wg.randn(3, 4, device=device),
        "fc.bias": wg.tensor([0.5, -1.5, 2.0], device=device),
        "steps": wg.tensor([7, -2, 2**31 - 1], device=device),
        "pixels": wg.tensor(bytes([0, 1, 255]), device=device),
        "mask": wg.tensor([[True, False], [False, True]], device=device),
        "scalar": wg.tensor(3.25, device=device),
        "empty": wg.zeros(0, 5, device=device),
        "odd": wg.tensor(bytes([9]), device=device),  # 1 byte: the next tensor would be misaligned without sorting
    }
    if device == "cpu":
        state["precise"] = wg.tensor([1 / 3, 1e300], dtype=wg.float64)
    return state


def _same(a, b):
    assert a.dtype is b.dtype and tuple(a.shape) == tuple(b.shape) and a.tolist() == b.tolist()


def test_round_trip_on_device(device, tmp_path):
    state = _state(device)
    path = tmp_path / "model.safetensors"
    wg.save(state, path)
    loaded = wg.load(path, device=device)
    assert sorted(loaded) == sorted(state)
    for name, t in state.items():
        assert loaded[name].device == device
        _same(loaded[name], t)
    on_cpu = wg.load(str(path), device="cpu")
    assert on_cpu["fc.weight"].device == "cpu" and on_cpu["fc.weight"].tolist() == state["fc.weight"].tolist()
    # a binary file object works as well as a path, and views are stored as their own values
    buf = io.BytesIO()
    wg.save({"t": state["fc.weight"].t(), "row": state["fc.weight"][1]}, buf)
    back = wg.load(io.BytesIO(buf.getvalue()), device=device)
    _same(back["t"], state["fc.weight"].t())
    _same(back["row"], state["fc.weight"][1])


def test_output_is_byte_identical_to_the_reference_writer():
    state = _state("cpu")
    ours = io.BytesIO()
    wg.save(state, ours, metadata={"format": "pt"})  # one key: the reference orders several arbitrarily (a HashMap)
    reference = safetensors.numpy.save({k: v.numpy() for k, v in state.items()}, metadata={"format": "pt"})
    assert ours.getvalue() == reference
    empty = io.BytesIO()
    wg.save({}, empty)
    assert empty.getvalue() == safetensors.numpy.save({}) and wg.load(io.BytesIO(empty.getvalue())) == {}


def test_files_written_by_webgrad_load_in_safetensors(tmp_path):
    state = _state("cpu")
    path = str(tmp_path / "w.safetensors")
    wg.save(state, path, metadata={"note": "from webgrad"})
    with safetensors.safe_open(path, "np") as f:
        assert f.metadata() == {"note": "from webgrad"}
    by_numpy = safetensors.numpy.load_file(path)
    by_torch = safetensors.torch.load_file(path)
    for name, t in state.items():
        expected = t.numpy()
        np.testing.assert_array_equal(by_numpy[name], expected)
        assert by_numpy[name].dtype == expected.dtype
        np.testing.assert_array_equal(by_torch[name].numpy(), expected)


def test_files_written_by_safetensors_load_in_webgrad(device, tmp_path):
    arrays = {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3) / 7,
        "i32": np.array([-(2**31), 0, 2**31 - 1], dtype=np.int32),
        "u8": np.array([[0, 128, 255]], dtype=np.uint8),
        "bool": np.array([True, False, True]),
        "i64": np.array([[-(2**31), 5], [2**31 - 1, 0]], dtype=np.int64),
        "f16": np.array([1.5, -65504, 6e-8, np.inf, -0.0], dtype=np.float16),
        "empty_i64": np.zeros((0, 2), dtype=np.int64),
    }
    path = str(tmp_path / "np.safetensors")
    safetensors.numpy.save_file(arrays, path)
    loaded = wg.load(path, device=device)
    kinds = {"f32": wg.float32, "i32": wg.int32, "u8": wg.uint8, "bool": wg.bool, "i64": wg.int64, "f16": wg.float16,
             "empty_i64": wg.int64}
    for name, a in arrays.items():
        t = loaded[name]
        assert t.dtype is kinds[name] and tuple(t.shape) == a.shape and t.device == device, name
        assert t.tolist() == a.tolist(), name

    tensors = {"bf16": torch.tensor([[1.0, -2.5], [3.0e38, 1.0e-20]], dtype=torch.bfloat16),
               "f16": torch.tensor([0.1, 2.0], dtype=torch.float16),
               "long": torch.arange(-3, 3).reshape(2, 3)}
    path = str(tmp_path / "pt.safetensors")
    safetensors.torch.save_file(tensors, path)
    loaded = wg.load(path, device=device)
    for name, t in tensors.items():
        assert loaded[name].dtype is {torch.bfloat16: wg.bfloat16, torch.float16: wg.float16}.get(t.dtype, wg.int64)
        assert loaded[name].tolist() == t.tolist(), name


def test_float64_on_a_device_without_it_names_the_tensor(device):
    if device == "cpu":
        pytest.skip("the CPU has float64")
    buf = io.BytesIO()
    wg.save({"precise": wg.tensor([0.1], dtype=wg.float64)}, buf)
    with pytest.raises(TypeError, match="tensor 'precise': .*float64"):
        wg.load(io.BytesIO(buf.getvalue()), device=device)


def test_int64_beyond_int32_loads_exactly_on_cpu_and_is_refused_on_webgpu(device, tmp_path):
    path = str(tmp_path / "big.safetensors")
    safetensors.numpy.save_file({"ok": np.ones(2, np.float32), "step": np.array([2**40, -3], dtype=np.int64)}, path)
    if device == "cpu":
        step = wg.load(path)["step"]
        assert step.dtype is wg.int64 and step.tolist() == [2**40, -3]
        buf = io.BytesIO()  # and saves back as I64
        wg.save({"step": step}, buf)
        assert safetensors.numpy.load(buf.getvalue())["step"].tolist() == [2**40, -3]
        return
    with pytest.raises(RuntimeError, match=r"tensor 'step': .*int64 value 1099511627776 is outside the range WebGPU"):
        wg.load(path, device=device)


def test_unloadable_dtypes_are_clear_errors(tmp_path):
    path = str(tmp_path / "big.safetensors")
    safetensors.numpy.save_file({"ok": np.ones(2, np.float32), "codes": np.array([1, 2], np.uint16)}, path)
    with pytest.raises(ValueError, match="tensor 'codes' has dtype U16, which webgrad cannot load"):
        wg.load(path)


def _safetensors_file():
    # webgrad.save picks the format by name: a .safetensors name asks for this one (other objects and
    # names get PyTorch's format, which stores nested objects: see test_torch_checkpoint.py)
    f = io.BytesIO()
    f.name = "ck.safetensors"
    return f


def test_save_rejects_what_it_cannot_store():
    with pytest.raises(TypeError, match="expected a dict name -> Tensor, got list"):
        wg.save([wg.ones(1)], _safetensors_file())
    with pytest.raises(TypeError, match="'lr' is a float"):
        wg.save({"lr": 0.1}, _safetensors_file())
    with pytest.raises(TypeError, match="keys must be strings"):
        wg.save({1: wg.ones(1)}, _safetensors_file())
    with pytest.raises(TypeError, match="metadata must be a dict of str -> str"):
        wg.save({}, _safetensors_file(), metadata={"epoch": 3})

    class Model:
        def state_dict(self):
            return {}
    with pytest.raises(TypeError, match=r"pass model.state_dict\(\)"):
        wg.save(Model(), _safetensors_file())


# ----------------------------------------------------------------------------------------------- broken files
def _file(header, data=b"", length=None, pad=True):
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text) if length is None else length) + text + data


GOOD = _file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
              "b": {"dtype": "U8", "shape": [3], "data_offsets": [8, 11]}}, bytes(11))


@pytest.mark.parametrize("raw,message", [
    (b"\x10\0\0", "file is 3 bytes, too short for the 8-byte header length"),
    (_file({}, length=10**12), "header length 1000000000000 is over the"),
    (_file({}, length=4096), "header length 4096 runs past the end of the 16-byte file"),
    (_file(b"{not json"), "the header is not valid JSON"),
    (_file(b"\xff\xfe{}"), "the header is not valid UTF-8"),
    (_file([1, 2]), "the header must be a JSON object, got list"),
    (_file({"__metadata__": {"a": 1}}), r"__metadata__\['a'\] must be a string, got 1"),
    (_file({"a": {"dtype": "F32", "shape": [2]}}, bytes(8)), "tensor 'a': header entry needs dtype, shape"),
    (_file({"a": {"dtype": "Q9", "shape": [2], "data_offsets": [0, 8]}}, bytes(8)), "tensor 'a': unknown or unsupported dtype 'Q9'"),
    (_file({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, bytes(8)), "dim 0 of its shape must be a non-negative int"),
    (_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, bytes(8)), "0 <= begin <= end"),
    (_file({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, bytes(8)),
     r"tensor 'a': shape \[3\] of F32 needs 12 bytes, but data_offsets \[0, 8\] span 8"),
    (_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12)),
     "tensor 'b'.* overlap tensor 'a'"),
    (_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12)),
     "leave a gap of 4 bytes after the header"),
    (_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, bytes(8 + 3)),
     "use 8 bytes of data but the file holds 11: 3 unused trailing"),
    (_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [100, 108]}}, bytes(8)),
     r"tensor 'a': data_offsets \[100, 108\] run past the end of the 8-byte data section"),
    (GOOD[:-1], r"tensor 'b': data_offsets \[8, 11\] run past the end of the 10-byte data section \(truncated"),
    (GOOD[:20], "runs past the end"),
    (_file({"m": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}}, b"\x01\x07"), "bytes other than 0 and 1"),
], ids=["tiny", "huge-header", "header-past-end", "bad-json", "bad-utf8", "not-object", "bad-metadata",
        "missing-key", "unknown-dtype", "bad-shape", "reversed-offsets", "size-mismatch", "overlap", "gap", "trailing",
        "out-of-range", "truncated-data", "truncated-header", "bad-bool"])
def test_broken_files_raise_value_errors(raw, message):
    with pytest.raises(ValueError, match=message):
        wg.load(io.BytesIO(raw))


def test_good_fixture_loads_and_every_truncation_fails():
    assert {k: v.tolist() for k, v in wg.load(io.BytesIO(GOOD)).items()} == {"a": [0.0, 0.0], "b": [0, 0, 0]}
    for cut in range(len(GOOD)):
        with pytest.raises(ValueError):
            wg.load(io.BytesIO(GOOD[:cut]))


def test_parser_needs_no_numpy(tmp_path):
    """The safetensors reader (parse + dtype conversion) runs with NumPy blocked, as in Pyodide."""
    path = str(tmp_path / "bf16.safetensors")
    safetensors.torch.save_file({"w": torch.tensor([1.0, -2.5], dtype=torch.bfloat16),
                                 "n": torch.tensor([4, -5])}, path)
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'numpy' or name.startswith('numpy.'):\n"
        "            raise ImportError('numpy blocked for this test')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import array\n"
        "from webgrad.io.safetensors import parse, _convert\n"
        "from webgrad.dtypes import bf16_unpack\n"
        f"entries, meta = parse(open({path!r}, 'rb').read())\n"
        "for name in sorted(entries):\n"
        "    dtype, shape, data = entries[name]\n"
        "    dt, raw = _convert(name, dtype, data)\n"
        "    values = (array.array('f', bf16_unpack(raw)) if dt.name == 'bfloat16'\n"
        "              else array.array(dt.fmt, bytes(raw)))\n"
        "    print(name, dtype, shape, dt.name, values.tolist())\n"
        "import webgrad, webgrad.webgpu\n"
        "if webgrad.webgpu.is_available():  # load onto the GPU and save back, still without NumPy\n"
        f"    state = webgrad.load({path!r}, device='webgpu')\n"
        f"    webgrad.save(state, {path!r} + '.copy')\n"
        f"    print(sorted((k, v.tolist()) for k, v in webgrad.load({path!r} + '.copy', device='webgpu').items()))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    on_gpu = ["[('n', [4, -5]), ('w', [1.0, -2.5])]"] if "webgpu" in DEVICES else []
    assert out.stdout.splitlines() == ["n I64 (2,) int64 [4, -5]", "w BF16 (2,) bfloat16 [1.0, -2.5]"] + on_gpu
