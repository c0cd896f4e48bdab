"""int8 (Tensor.char()) and int16 (torch.short) on the CPU against the real torch: creation and its overflow
error, wrapping arithmetic, promotion (uint8 + int8 is int16), reductions to int64, conversions, NumPy sharing,
checkpoints; WebGPU's clear refusal."""

import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import webgrad as wg  # noqa: E402

SMALL = ["int8", "int16"]


def _same(ours, theirs):
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    assert ours.tolist() == theirs.tolist()


@pytest.mark.parametrize("name", SMALL)
def test_arithmetic_wraps_as_torch(name):
    g = np.random.default_rng(0)
    info = np.iinfo(name)
    a_np = g.integers(info.min, info.max + 1, 64).astype(name)
    b_np = g.integers(info.min, info.max + 1, 64).astype(name)
    b_np[b_np == 0] = 3
    a, b = wg.tensor(a_np), wg.tensor(b_np)
    ta, tb = torch.tensor(a_np), torch.tensor(b_np)
    for op in (lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y, lambda x, y: x // y,
               lambda x, y: x % y, lambda x, y: -x, lambda x, y: x.abs(), lambda x, y: x & y, lambda x, y: x ^ y,
               lambda x, y: x << 1, lambda x, y: x * 3, lambda x, y: x + 200, lambda x, y: x.clamp(-5, 5),
               lambda x, y: x.max(), lambda x, y: x.sort().values, lambda x, y: x.cumsum(0), lambda x, y: x.sum(),
               lambda x, y: x.prod(), lambda x, y: x.float() / 3, lambda x, y: x / y, lambda x, y: x > y,
               lambda x, y: x.where(x > 0, y), lambda x, y: x.argmax()):
        _same(op(a, b), op(ta, tb))


@pytest.mark.parametrize("name", SMALL)
def test_conversions_and_type_names(name):
    t = getattr(torch, name)
    values = [-300.7, -128.5, -1.5, 0.0, 2.9, 127.2, 1000.0]
    in_range = [v for v in values if abs(v) < 128] if name == "int8" else values
    _same(wg.tensor(in_range).to(getattr(wg, name)), torch.tensor(in_range).to(t))
    _same(wg.tensor(in_range).char() if name == "int8" else wg.tensor(in_range).short(),
          torch.tensor(in_range).char() if name == "int8" else torch.tensor(in_range).short())
    x = wg.tensor([1, -2, 3], dtype=getattr(wg, name))
    tx = torch.tensor([1, -2, 3], dtype=t)
    for to in ("float", "long", "int", "bool", "half", "bfloat16", "double"):
        _same(getattr(x, to)(), getattr(tx, to)())
    assert x.type() == tx.type() and x.element_size() == tx.element_size()
    assert wg.iinfo(getattr(wg, name)).max == torch.iinfo(t).max and wg.iinfo(getattr(wg, name)).min == \
        torch.iinfo(t).min
    assert wg.short is wg.int16 and wg.int16 is wg.promote_types("short", "int16")


@pytest.mark.parametrize("name", SMALL)
def test_creation_out_of_range_is_torch_error(name):
    big = 200 if name == "int8" else 40000
    for lib in (wg, torch):
        with pytest.raises(RuntimeError, match="without overflow"):
            lib.tensor([big], dtype=getattr(lib, name))


PROMOTE = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


@pytest.mark.parametrize("left", ["int8", "int16"])
@pytest.mark.parametrize("right", PROMOTE)
def test_promotion_table(left, right):
    assert wg.promote_types(getattr(wg, left), getattr(wg, right)).name == \
        str(torch.promote_types(getattr(torch, left), getattr(torch, right))).split(".")[1]
    ours = wg.ones(2, dtype=getattr(wg, left)) + wg.ones(2, dtype=getattr(wg, right))
    _same(ours, torch.ones(2, dtype=getattr(torch, left)) + torch.ones(2, dtype=getattr(torch, right)))
    _same(wg.ones(2, dtype=getattr(wg, left)) * 2.5, torch.ones(2, dtype=getattr(torch, left)) * 2.5)


def test_numpy_arrays_share_and_keep_their_dtype():
    a = np.array([1, -2, 3], dtype=np.int8)
    t = wg.from_numpy(a)
    a[0] = 100
    assert t.dtype is wg.int8 and t.tolist() == [100, -2, 3]
    assert t.numpy().dtype == np.int8 and wg.tensor(np.array([5], np.int16)).dtype is wg.int16


def test_checkpoints_keep_int8_and_int16():
    state = {"s": torch.tensor([-30000, 5], dtype=torch.int16), "c": torch.tensor([-128, 127], dtype=torch.int8)}
    buf = io.BytesIO()
    torch.save(state, buf)
    loaded = wg.load(io.BytesIO(buf.getvalue()))
    for k, v in state.items():
        _same(loaded[k], v)
    from webgrad.io import torch_format
    out = io.BytesIO()
    torch_format.save(loaded, out)
    back = torch.load(io.BytesIO(out.getvalue()))
    assert all(torch.equal(back[k], v) for k, v in state.items())
    safetensors_torch = pytest.importorskip("safetensors.torch")
    blob = safetensors_torch.save(dict(state, f=torch.ones(2)))
    loaded = wg.load(io.BytesIO(blob))
    assert loaded["s"].dtype is wg.int16 and loaded["c"].dtype is wg.int8
    buf = io.BytesIO()
    wg.save(loaded, buf)
    assert buf.getvalue() == blob


def test_int16_checkpoints_load_onto_webgpu_as_int16():
    pytest.importorskip("wgpu")
    if not wg.webgpu.is_available():
        pytest.skip("no WebGPU adapter")
    loaded = wg.load(io.BytesIO(_saved()), map_location="webgpu")
    assert loaded["s"].dtype is wg.int16 and loaded["s"].tolist() == [-30000, 5]


def _saved():
    buf = io.BytesIO()
    torch.save({"s": torch.tensor([-30000, 5], dtype=torch.int16)}, buf)
    return buf.getvalue()


@pytest.mark.parametrize("device", ["cpu", "webgpu"])
@pytest.mark.parametrize("name", ["int8", "uint8", "int16", "int32"])
def test_a_python_int_out_of_range_is_torchs_error_not_a_wrap(device, name):
    """fill_, full, masked_fill and setitem with a Python int outside the dtype's range raise torch's RuntimeError
    (WebGPU wrapped the value, the CPU raised NumPy's OverflowError); values in range are written, and uint8 takes
    -255 .. -1 wrapped, as torch does."""
    if device == "webgpu" and not wg.webgpu.is_available():
        pytest.skip("no WebGPU adapter")

    def attempts(lib, dt, dev):
        x = lib.tensor([1, 2, 3], dtype=dt, device=dev)
        mask = lib.tensor([True, False, True], device=dev)
        out = []
        for value in (70000, -1, -255, -256, 100, 255, 256):
            for f in (lambda: x.clone().fill_(value), lambda: lib.full((2,), value, dtype=dt, device=dev),
                      lambda: x.masked_fill(mask, value), lambda: x.clone().__setitem__(0, value) or "set"):
                try:
                    r = f()
                    out.append(r if r == "set" else r.tolist())
                except RuntimeError as e:
                    out.append("overflow" if "without overflow" in str(e) else str(e))
        return out
    assert attempts(wg, getattr(wg, name), device) == attempts(torch, getattr(torch, name), "cpu")
