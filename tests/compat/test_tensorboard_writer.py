"""torch.utils.tensorboard.SummaryWriter: the event files it writes are TensorBoard's format. They are decoded here
with the framing rules written out again (TFRecords, masked CRC-32C computed bit by bit) and a small protobuf
reader; and with the tensorboard package itself where it is installed."""

import glob
import os
import struct
import warnings

import pytest

import webgrad as wg
from webgrad.utils.tensorboard import SummaryWriter


def _crc32c_bitwise(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _masked(data):
    crc = _crc32c_bitwise(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _records(path):
    raw, pos, out = open(path, "rb").read(), 0, []
    while pos < len(raw):
        header = raw[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        assert struct.unpack("<I", raw[pos + 8:pos + 12])[0] == _masked(header), "length CRC"
        data = raw[pos + 12:pos + 12 + length]
        assert len(data) == length, "truncated record"
        assert struct.unpack("<I", raw[pos + 12 + length:pos + 16 + length])[0] == _masked(data), "data CRC"
        out.append(data)
        pos += 16 + length
    return out


def _fields(data):
    """protobuf wire format -> [(field number, value)] (varints as ints, fixed64 as double, fixed32 as float,
    length-delimited as bytes)."""
    pos, out = 0, []

    def varint():
        nonlocal pos
        shift = n = 0
        while True:
            b = data[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n

    while pos < len(data):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            out.append((field, varint()))
        elif wire == 1:
            out.append((field, struct.unpack("<d", data[pos:pos + 8])[0]))
            pos += 8
        elif wire == 5:
            out.append((field, struct.unpack("<f", data[pos:pos + 4])[0]))
            pos += 4
        elif wire == 2:
            n = varint()
            out.append((field, data[pos:pos + n]))
            pos += n
        else:
            raise AssertionError(f"wire type {wire}")
    return out


def _events(path):
    """Each Event as a dict: wall_time, step, file_version, scalars [(tag, value)], session_start."""
    events = []
    for data in _records(path):
        f = dict(_fields(data))
        ev = {"wall_time": f[1], "step": f.get(2, 0), "file_version": f.get(3, b"").decode() or None,
              "scalars": [], "session_start": 7 in f and dict(_fields(f[7])).get(1) == 1}
        if 5 in f:
            for field, value in _fields(f[5]):
                assert field == 1
                v = dict(_fields(value))
                ev["scalars"].append((v[1].decode(), v[2]))
        events.append(ev)
    return events


def test_crc32c_is_castagnolis():
    from webgrad.utils.tensorboard import _records
    assert _records.crc32c(b"123456789") == 0xE3069283 == _crc32c_bitwise(b"123456789")


def test_scalars_round_trip(tmp_path):
    with SummaryWriter(log_dir=str(tmp_path / "run")) as writer:
        assert writer.get_logdir() == str(tmp_path / "run")
        for step in range(3):
            writer.add_scalar("Loss/train", wg.tensor(1.0 / (step + 1)), step)
        writer.add_scalar("lr", 0.5, global_step=10, walltime=1234.5)
        writer.flush()
        (path,) = glob.glob(str(tmp_path / "run" / "events.out.tfevents.*"))
        assert os.path.basename(path).split(".")[3].isdigit()
        events = _events(path)
    assert events[0]["file_version"] == "brain.Event:2" and events[0]["scalars"] == []
    got = [(e["step"], e["scalars"]) for e in events[1:]]
    assert got == [(0, [("Loss/train", 1.0)]), (1, [("Loss/train", 0.5)]),
                   (2, [("Loss/train", pytest.approx(1 / 3))]), (10, [("lr", 0.5)])]
    assert events[-1]["wall_time"] == 1234.5


def test_add_scalars_writes_a_run_per_tag_as_torch(tmp_path):
    writer = SummaryWriter(str(tmp_path))
    writer.add_scalars("run/14h", {"xsinx": 1.5, "xcosx": -2.0}, 7)
    writer.close()
    for tag, value in (("xsinx", 1.5), ("xcosx", -2.0)):
        (path,) = glob.glob(str(tmp_path / f"run_14h_{tag}" / "events.out.tfevents.*"))
        assert [(e["step"], e["scalars"]) for e in _events(path)[1:]] == [(7, [("run/14h", value)])]


def test_buffered_until_flush_and_purge_step(tmp_path):
    writer = SummaryWriter(str(tmp_path), max_queue=100, flush_secs=10_000, purge_step=4)
    writer.add_scalar("a", 1.0, 5)
    (path,) = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    assert len(_records(path)) == 1  # only the file version so far
    writer.flush()
    events = _events(path)
    assert [e["step"] for e in events] == [0, 4, 4, 5] and events[2]["session_start"]
    writer.close()
    writer.add_scalar("b", 2.0, 6)  # a closed writer opens a new file, as torch's
    assert len(glob.glob(str(tmp_path / "events.out.tfevents.*"))) == 2
    writer.close()


def test_default_logdir_and_other_methods_warn_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    writer = SummaryWriter(comment="_lr0.1")
    assert writer.get_logdir().startswith("runs" + os.sep) and writer.get_logdir().endswith("_lr0.1")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        writer.add_histogram("w", wg.ones(3), 0)
        writer.add_histogram("w", wg.ones(3), 1)
        writer.add_image("img", wg.zeros(3, 4, 4), 0)
    assert [str(w.message).split(":")[0] for w in seen] == ["SummaryWriter.add_histogram", "SummaryWriter.add_image"]
    with pytest.raises(AssertionError, match="one element"):
        writer.add_scalar("x", wg.ones(2))
    writer.close()


def test_tensorboard_reads_it(tmp_path):
    loader = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    with SummaryWriter(str(tmp_path)) as writer:
        for step in range(4):
            writer.add_scalar("loss", 2.0 - step, step)
    acc = loader.EventAccumulator(str(tmp_path))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("loss")] == [(0, 2.0), (1, 1.0), (2, 0.0), (3, -1.0)]
