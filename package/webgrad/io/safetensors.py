"""Checkpoints in the safetensors format (https://github.com/huggingface/safetensors), pure Python.

Layout: an 8-byte little-endian header length N, N bytes of JSON, then the tensor data:

    {"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}

Offsets are relative to the end of the header; every tensor is stored contiguous and little-endian.
The writer matches the reference one byte for byte: tensors ordered by dtype size (largest first, so
each one is aligned) then by name, compact JSON, the header padded with spaces to a multiple of 8.
(Metadata keys are written sorted; the reference writes them in arbitrary hash order.)

Loading checks the whole file before it creates any tensor: a truncated or corrupt file raises a
ValueError that says what is wrong, and never yields part of a checkpoint. Dtypes webgrad lacks are
converted where no information is lost in practice (I64 -> int32 when every value fits, F16/BF16 ->
float32); any other dtype is an error naming the tensor.
"""

import array
import json
import os
import struct
from collections.abc import Mapping

from .. import dtypes
from .._tensor import Tensor, tensor

MAX_HEADER = 100 * 1024 * 1024  # the reference reader's limit: a larger "length" means a corrupt file

# our dtypes <-> safetensors names, in the reference writer's order (larger items first)
_TO_NAME = {dtypes.float64: "F64", dtypes.float32: "F32", dtypes.int32: "I32", dtypes.uint8: "U8",
            dtypes.bool_: "BOOL"}
_WRITE_ORDER = {"F64": 0, "F32": 1, "I32": 2, "U8": 3, "BOOL": 4}
_NATIVE = {name: dt for dt, name in _TO_NAME.items()}
_ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
             "I32": 4, "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8}


# ===================================================================== save
def save(obj, f, metadata=None):
    """Write a flat dict name -> Tensor (a state_dict) to `f`, a path or a binary file object.
    `metadata` is an optional dict str -> str stored in the header."""
    if not isinstance(obj, Mapping):
        hint = "; pass model.state_dict()" if hasattr(obj, "state_dict") else ""
        raise TypeError(f"webgrad.save: expected a dict name -> Tensor, got {type(obj).__name__}{hint}")
    for name, t in obj.items():
        if not isinstance(name, str):
            raise TypeError(f"webgrad.save: keys must be strings, got {name!r}")
        if not isinstance(t, Tensor):
            raise TypeError(f"webgrad.save: {name!r} is a {type(t).__name__}; the safetensors format stores tensors "
                            "only (nested dicts such as an optimizer's state_dict are not supported)")
    if metadata is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise TypeError("webgrad.save: metadata must be a dict of str -> str")

    names = sorted(obj, key=lambda n: (_WRITE_ORDER[_TO_NAME[obj[n].dtype]], n))
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = dict(sorted(metadata.items()))
    for name in names:
        t = obj[name]
        size = t.numel() * t.dtype.itemsize
        header[name] = {"dtype": _TO_NAME[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)

    # read every tensor back before the file is opened: a failure then leaves no half-written checkpoint.
    # The canonical layout is already the file's (little-endian, packed, contiguous).
    blobs = [obj[name].detach()._bytes() for name in names]
    if hasattr(f, "write"):
        _write(f, text, blobs)
    else:
        with open(os.fspath(f), "wb") as out:
            _write(out, text, blobs)


def _write(out, header, blobs):
    out.write(struct.pack("<Q", len(header)))
    out.write(header)
    for blob in blobs:
        out.write(blob)


# ===================================================================== load
def load(f, device=None):
    """Read a safetensors file (a path or a binary file object) into a dict name -> Tensor on `device`."""
    if hasattr(f, "read"):
        raw = f.read()
    else:
        with open(os.fspath(f), "rb") as src:
            raw = src.read()
    entries, _ = parse(raw)
    # every conversion happens before the first upload, so an error leaves nothing half-loaded
    converted = {name: (_convert(name, dtype, data), shape) for name, (dtype, shape, data) in entries.items()}
    out = {}
    for name, ((dt, data), shape) in converted.items():
        try:
            out[name] = tensor(data, dtype=dt, device=device).reshape(shape)
        except TypeError as e:  # a dtype the device lacks (float64 on WebGPU)
            raise TypeError(f"safetensors: tensor {name!r}: {e}") from None
    return out


def parse(raw):
    """Check a whole safetensors file: ({name: (dtype name, shape, memoryview of its bytes)}, metadata).

    Raises ValueError for anything the reference reader would reject."""
    raw = memoryview(raw).cast("B")
    if len(raw) < 8:
        raise ValueError(f"safetensors: file is {len(raw)} bytes, too short for the 8-byte header length")
    n = struct.unpack("<Q", raw[:8])[0]
    if n > MAX_HEADER:
        raise ValueError(f"safetensors: header length {n} is over the {MAX_HEADER}-byte limit (corrupt file?)")
    if 8 + n > len(raw):
        raise ValueError(f"safetensors: header length {n} runs past the end of the {len(raw)}-byte file (truncated?)")
    try:
        header = json.loads(bytes(raw[8:8 + n]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"safetensors: the header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise ValueError(f"safetensors: the header must be a JSON object, got {type(header).__name__}")

    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise ValueError("safetensors: __metadata__ must map strings to strings")

    data = raw[8 + n:]
    entries = {}
    for name, info in header.items():
        entries[name] = _check_entry(name, info)
    # the reference layout: tensors back to back from offset 0, together filling the data section exactly
    end, previous = 0, None
    for name, (dtype, shape, (begin, stop)) in sorted(entries.items(), key=lambda e: (e[1][2], e[0])):
        if stop > len(data):
            raise ValueError(f"safetensors: tensor {name!r}: data_offsets [{begin}, {stop}] run past the end of the "
                             f"{len(data)}-byte data section (truncated file?)")
        if begin < end:
            raise ValueError(f"safetensors: tensor {name!r}: data_offsets [{begin}, {stop}] overlap "
                             f"tensor {previous!r}")
        if begin > end:
            after = f"tensor {previous!r}" if previous else "the header"
            raise ValueError(f"safetensors: tensor {name!r}: data_offsets [{begin}, {stop}] leave a gap of "
                             f"{begin - end} bytes after {after}")
        end, previous = stop, name
    if end != len(data):
        raise ValueError(f"safetensors: the tensors use {end} bytes of data but the file holds {len(data)}: "
                         f"{len(data) - end} unused trailing bytes")
    return {name: (dtype, shape, data[b:e]) for name, (dtype, shape, (b, e)) in entries.items()}, metadata


def _check_entry(name, info):
    if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):
        raise ValueError(f"safetensors: tensor {name!r}: header entry needs dtype, shape and data_offsets, "
                         f"got {info!r}")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if dtype not in _ITEMSIZE:
        raise ValueError(f"safetensors: tensor {name!r}: unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
        raise ValueError(f"safetensors: tensor {name!r}: shape must be a list of non-negative ints, got {shape!r}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) and o >= 0 for o in offsets)
            and offsets[0] <= offsets[1]):
        raise ValueError(f"safetensors: tensor {name!r}: data_offsets must be [begin, end] with 0 <= begin <= end, "
                         f"got {offsets!r}")
    count = 1
    for s in shape:
        count *= s
    if offsets[1] - offsets[0] != count * _ITEMSIZE[dtype]:
        raise ValueError(f"safetensors: tensor {name!r}: shape {shape} of {dtype} needs {count * _ITEMSIZE[dtype]} "
                         f"bytes, but data_offsets {offsets} span {offsets[1] - offsets[0]}")
    return dtype, tuple(shape), tuple(offsets)


def _convert(name, dtype, data):
    """(webgrad dtype, canonical bytes) for one tensor's stored bytes."""
    if dtype in _NATIVE:
        if dtype == "BOOL" and bytes(data).translate(None, b"\x00\x01"):
            raise ValueError(f"safetensors: tensor {name!r}: BOOL data holds bytes other than 0 and 1")
        return _NATIVE[dtype], data
    if dtype == "I64":
        values = array.array("q")
        values.frombytes(data)
        if values and (min(values) < -2**31 or max(values) > 2**31 - 1):
            raise ValueError(f"safetensors: tensor {name!r}: I64 values in [{min(values)}, {max(values)}] do not fit "
                             "in int32, webgrad's integer dtype")
        # every value fits in its low 32 bits: keep every other little-endian 32-bit word, no Python loop
        return dtypes.int32, memoryview(data).cast("i")[::2].tobytes()
    if dtype == "BF16":
        # a bfloat16 is the top half of a float32: its two bytes go above two zero bytes
        out = bytearray(2 * len(data))
        out[2::4], out[3::4] = data[0::2], data[1::2]
        return dtypes.float32, out
    if dtype == "F16":
        return dtypes.float32, array.array("f", struct.unpack(f"<{len(data) // 2}e", data)).tobytes()
    raise ValueError(f"safetensors: tensor {name!r} has dtype {dtype}, which webgrad cannot load "
                     "(supported: F32, F64, I32, U8, BOOL, and I64/F16/BF16 converted)")
