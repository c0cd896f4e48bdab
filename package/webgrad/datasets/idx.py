"""Reading IDX files (the format MNIST is distributed in), plain or gzip-compressed, with no NumPy.

An IDX file is a big-endian header followed by the raw data: two zero bytes, a type byte (0x08 =
unsigned bytes, the only type MNIST uses), the number of dimensions, then one uint32 per dimension.
Every check names the file, so a bad download is easy to tell from a bug.
"""

import gzip
import os
import struct
import zlib

UBYTE = 0x08
# Deflate cannot expand data more than ~1032 times (a 258-byte match per 2 bits at best); a .gz whose header
# declares more than this times its own size cannot hold it, and is refused before any decompression.
MAX_GZIP_RATIO = 1100


def read_idx(path, ndim, noun, check=None):
    """(dims, payload) of an IDX file of unsigned bytes with `ndim` dimensions, plain or gzip-compressed
    (the name ends in .gz).

    payload is a memoryview of exactly prod(dims) bytes; `noun` names the items in error messages
    ("images" gives "expected 47040016 bytes for 60000 28x28 images, found 1000"); `check(dims)`, if given,
    may raise before the payload is read. The header is read first and the payload after it: a .gz is
    decompressed as a stream that stops one byte past what the header declares, so a small file that
    inflates to gigabytes (a gzip bomb) is refused after reading that much, not after inflating it all.
    """
    gz = str(path).endswith(".gz")
    try:
        with (gzip.open(path, "rb") if gz else open(path, "rb")) as f:
            stored = os.fstat(f.fileno()).st_size
            return _read(f, path, ndim, noun, check, gz, stored)
    except (OSError, EOFError, zlib.error) as e:  # BadGzipFile is an OSError; a cut-off stream is an EOFError
        if not gz or isinstance(e, FileNotFoundError):
            raise
        raise ValueError(f"{path}: corrupt or truncated gzip data ({e})") from None


def _read(f, path, ndim, noun, check, gz, stored):
    header = 4 + 4 * ndim
    head = f.read(header)
    if len(head) < header:
        raise ValueError(f"{path}: file is {len(head)} bytes{' after decompression' if gz else ''}, "
                         f"too short for the {header}-byte IDX header")
    magic = struct.unpack(">I", head[:4])[0]
    expected_magic = (UBYTE << 8) | ndim
    if magic != expected_magic:
        raise ValueError(f"{path}: bad magic number 0x{magic:08x}, expected 0x{expected_magic:08x} "
                         f"(IDX of unsigned bytes with {ndim} dimension{'s' if ndim > 1 else ''}); "
                         "is this the right file, and is it decompressed?")
    dims = struct.unpack(f">{ndim}I", head[4:header])
    if check is not None:
        check(dims)
    count = 1
    for d in dims:
        count *= d
    shape = "x".join(str(d) for d in dims[1:])
    what = f"{dims[0]} {shape + ' ' if shape else ''}{noun}"
    if not gz:
        if stored != header + count:
            raise ValueError(f"{path}: expected {header + count} bytes for {what}, found {stored}")
    elif header + count > MAX_GZIP_RATIO * stored + 1024:
        raise ValueError(f"{path}: the header declares {header + count} bytes for {what}, more than "
                         f"{stored} bytes of gzip data can hold")
    payload = f.read(count + 1)  # one byte more than declared: a longer stream is refused without reading on
    if len(payload) != count:
        found = f"more than {header + count}" if len(payload) > count else str(header + len(payload))
        raise ValueError(f"{path}: expected {header + count} bytes for {what}, found {found}"
                         f"{' after decompression' if gz else ''}")
    return dims, memoryview(payload)
