"""Reading IDX files (the format MNIST is distributed in), plain or gzip-compressed, with no NumPy.

An IDX file is a big-endian header followed by the raw data: two zero bytes, a type byte (0x08 =
unsigned bytes, the only type MNIST uses), the number of dimensions, then one uint32 per dimension.
Every check names the file, so a bad download is easy to tell from a bug.
"""

import gzip
import struct
import zlib

UBYTE = 0x08


def read_bytes(path):
    """The file's contents, decompressed if the name ends in .gz."""
    if not str(path).endswith(".gz"):
        with open(path, "rb") as f:
            return f.read()
    try:
        with gzip.open(path, "rb") as f:
            return f.read()
    except (OSError, EOFError, zlib.error) as e:  # BadGzipFile is an OSError; a cut-off stream is an EOFError
        raise ValueError(f"{path}: corrupt or truncated gzip data ({e})") from None


def read_idx(path, ndim, noun):
    """(dims, payload) of an IDX file of unsigned bytes with `ndim` dimensions.

    payload is a memoryview of exactly prod(dims) bytes; `noun` names the items in error messages
    ("images" gives "expected 47040016 bytes for 60000 28x28 images, found 1000").
    """
    raw = read_bytes(path)
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path}: file is {len(raw)} bytes, too short for the {header}-byte IDX header")
    magic = struct.unpack(">I", raw[:4])[0]
    expected_magic = (UBYTE << 8) | ndim
    if magic != expected_magic:
        raise ValueError(f"{path}: bad magic number 0x{magic:08x}, expected 0x{expected_magic:08x} "
                         f"(IDX of unsigned bytes with {ndim} dimension{'s' if ndim > 1 else ''}); "
                         "is this the right file, and is it decompressed?")
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    count = 1
    for d in dims:
        count *= d
    if len(raw) != header + count:
        shape = "x".join(str(d) for d in dims[1:])
        what = f"{dims[0]} {shape + ' ' if shape else ''}{noun}"
        note = " after decompression" if str(path).endswith(".gz") else ""
        raise ValueError(f"{path}: expected {header + count} bytes for {what}, found {len(raw)}{note}")
    return dims, memoryview(raw)[header:]
