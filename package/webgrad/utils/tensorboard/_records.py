"""TensorBoard's event file format, written without TensorFlow, protobuf or the tensorboard package.

An event file is a sequence of TFRecords, each

    uint64 length | uint32 masked_crc32c(length bytes) | data (length bytes) | uint32 masked_crc32c(data)

(little-endian; CRC-32C, Castagnoli, masked as ((crc >> 15 | crc << 17) + 0xa282ead8) mod 2**32), whose data is
one serialized tensorflow.Event protobuf. The few messages a scalar needs are encoded by hand:

    Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5;
              SessionLog session_log = 7; }
    Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
    SessionLog { enum status = 1 (START = 1); }
"""

import struct

_CASTAGNOLI = 0x82F63B78  # CRC-32C, reflected


def _table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _CASTAGNOLI if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data):
    """One TFRecord framing `data` (bytes)."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


# ----------------------------------------------------------------------------------------------- protobuf
def _varint(n):
    n &= 0xFFFFFFFFFFFFFFFF  # int64 as protobuf writes a negative one: ten bytes of two's complement
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _key(field, wire):
    return _varint(field << 3 | wire)


def _bytes_field(field, data):
    return _key(field, 2) + _varint(len(data)) + data


def scalar_summary(tag, value):
    """Summary { value { tag, simple_value } } (torch's add_scalar without new_style)."""
    item = _bytes_field(1, tag.encode("utf-8")) + _key(2, 5) + struct.pack("<f", value)
    return _bytes_field(1, item)


def event(wall_time, step=None, file_version=None, summary=None, session_start=False):
    """A serialized Event."""
    out = _key(1, 1) + struct.pack("<d", wall_time)
    if step is not None:
        out += _key(2, 0) + _varint(int(step))
    if file_version is not None:
        out += _bytes_field(3, file_version.encode("utf-8"))
    if summary is not None:
        out += _bytes_field(5, summary)
    if session_start:
        out += _bytes_field(7, _key(1, 0) + _varint(1))
    return out
