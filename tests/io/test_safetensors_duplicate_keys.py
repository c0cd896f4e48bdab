"""A key written twice in a safetensors header is refused at every level. The reference reader refuses a
second __metadata__ and a second field of a tensor's entry; it keeps the last of two tensors or two metadata
keys of one name, which webgrad refuses as well (a file that says two things at once)."""

import io
import struct

import pytest

import webgrad as wg

reference = pytest.importorskip("safetensors")

ENTRY = '{"dtype":"U8","shape":[1],"data_offsets":[0,1]}'


def _file(header, data=b""):
    text = header.encode()
    return struct.pack("<Q", len(text)) + text + data


def _reference_refuses(raw):
    try:
        reference.deserialize(raw)
        return False
    except Exception:  # noqa: BLE001 - SafetensorError, the Rust reader's refusal
        return True


@pytest.mark.parametrize("header,data,reference_refuses", [
    ('{"__metadata__":{"k":"a"},"__metadata__":{"k":"b"}}', b"", True),  # the case
    ('{"__metadata__":{"k":"a"},"w":' + ENTRY + ',"__metadata__":{}}', b"x", True),
    ('{"w":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"x", True),
    ('{"w":{"dtype":"U8","shape":[1],"shape":[1],"data_offsets":[0,1]}}', b"x", True),
    ('{"w":' + ENTRY + ',"w":' + ENTRY + '}', b"x", False),
    ('{"__metadata__":{"k":"a","k":"b"}}', b"", False),
    ('{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1,"x":2}}', b"x", False),
])
def test_a_key_written_twice_is_refused(header, data, reference_refuses):
    raw = _file(header, data)
    with pytest.raises(ValueError, match="appears twice in one object"):
        wg.load(io.BytesIO(raw))
    assert _reference_refuses(raw) == reference_refuses


def test_distinct_keys_still_load():
    raw = _file('{"__metadata__":{"k":"a","j":"b"},"w":' + ENTRY + '}', b"\x07")
    assert wg.load(io.BytesIO(raw))["w"].tolist() == [7]
    assert not _reference_refuses(raw)
