"""Checkpoints in the safetensors format (https://github.com/huggingface/safetensors), pure Python.

Layout: an 8-byte little-endian header length N, N bytes of JSON, then the tensor data:

    {"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}

Offsets are relative to the end of the header; every tensor is stored contiguous and little-endian.
The writer matches the reference one byte for byte: tensors ordered by dtype size (largest first, so
each one is aligned) then by name, compact JSON, the header padded with spaces to a multiple of 8.
(Metadata keys are written sorted; the reference writes them in arbitrary hash order.)

Loading checks the whole file before it creates any tensor: a truncated or corrupt file raises a
ValueError that says what is wrong, and never yields part of a checkpoint. Everything the reference
reader refuses is refused; so is a key written twice in one JSON object (the reference refuses a second
__metadata__ or a second field of an entry, and keeps the last of two tensors or metadata keys of one
name). The only other exception is the device's: TypeError for a dtype it cannot hold (float64 on WebGPU), and
RuntimeError for I64 values beyond the int32 range on WebGPU (webgrad/dtypes.py). I64 loads as int64; BF16, I16
and I8 as bfloat16, int16 and int8 (on every device); F16 loads as float16; any other dtype is an error naming the
tensor.
"""

import itertools
import json
import math
import os
import re
import struct
from collections.abc import Mapping

from .. import dtypes
from .._tensor import Tensor, tensor

MAX_HEADER = 100 * 1024 * 1024  # the reference reader's limit: a larger "length" means a corrupt file
# The reference reader (Rust, serde_json) refuses JSON nested 128 levels deep; a valid header needs 3
# ({name: {"shape": [...]}}), deeper levels can only sit in extra fields it ignores. Checked before
# json.loads, whose recursion would otherwise end in a RecursionError.
MAX_DEPTH = 127
U64 = 1 << 64  # dims and offsets are Rust usize values: larger numbers are refused, as the reference does

# our dtypes <-> safetensors names, in the reference writer's order (larger items first)
_TO_NAME = {dtypes.int64: "I64", dtypes.float64: "F64", dtypes.float32: "F32", dtypes.int32: "I32",
            dtypes.bfloat16: "BF16", dtypes.float16: "F16", dtypes.int16: "I16", dtypes.int8: "I8", dtypes.uint8: "U8",
            dtypes.bool_: "BOOL", dtypes.complex64: "C64"}
_WRITE_ORDER = {"I64": 0, "F64": 1, "C64": 2, "F32": 3, "I32": 4, "BF16": 5, "F16": 6, "I16": 7, "I8": 8, "U8": 9,
                "BOOL": 10}
_NATIVE = {name: dt for dt, name in _TO_NAME.items()}
_ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
             "I32": 4, "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8, "C64": 8}


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
    for text in itertools.chain(obj, *(metadata.items() if metadata else ())):
        if not _encodable(text):
            raise ValueError(f"webgrad.save: {_short(text)} cannot be stored: it is not valid Unicode "
                             "(a lone surrogate), and safetensors headers are UTF-8")

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
            if dt is dtypes.complex64:  # its float32 (real, imag) pairs, seen as complex (webgrad/_complex.py)
                from .._complex import view_as_complex
                out[name] = view_as_complex(tensor(data, dtype=dtypes.float32, device=device).reshape(*shape, 2))
                continue
            out[name] = tensor(data, dtype=dt, device=device).reshape(shape)
        except (TypeError, RuntimeError) as e:  # a dtype (float64) or int64 values (beyond int32) WebGPU lacks
            raise type(e)(f"safetensors: tensor {name!r}: {e}") from None
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
    text = bytes(raw[8:8 + n])
    try:
        decoded = text.decode("utf-8")  # a str: json.loads would guess UTF-16 or UTF-32 from bytes
    except UnicodeDecodeError as e:
        raise ValueError(f"safetensors: the header is not valid UTF-8 ({e})") from None
    depth = json_depth(text)
    if depth > MAX_DEPTH:
        raise ValueError(f"safetensors: the header's JSON nests {depth} levels deep, more than the format's "
                         f"reader allows ({MAX_DEPTH}); a valid header needs 3")
    try:
        header = json.loads(decoded, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant,
                            object_pairs_hook=_object)
    except ValueError as e:  # JSONDecodeError, and our hooks' refusals
        raise ValueError(f"safetensors: the header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise ValueError(f"safetensors: the header must be a JSON object, got {type(header).__name__}")

    metadata = header.pop("__metadata__", None)  # null is the reference's "no metadata"
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise ValueError(f"safetensors: __metadata__ must be an object of strings, got {_short(metadata)}")
    for k, v in metadata.items():
        if not isinstance(v, str):
            raise ValueError(f"safetensors: __metadata__[{_short(k)}] must be a string, got {_short(v)}")
        if not (_encodable(k) and _encodable(v)):
            raise ValueError(f"safetensors: __metadata__ entry {_short(k)} is not valid Unicode (a lone surrogate)")

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
    if not _encodable(name):
        raise ValueError(f"safetensors: tensor name {_short(name)} is not valid Unicode (a lone surrogate)")
    if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):
        raise ValueError(f"safetensors: tensor {_short(name)}: header entry needs dtype, shape and data_offsets, "
                         f"got {_short(info)}")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype, str):
        raise ValueError(f"safetensors: tensor {_short(name)}: dtype must be a string, got {_short(dtype)}")
    if dtype not in _ITEMSIZE:
        raise ValueError(f"safetensors: tensor {_short(name)}: unknown or unsupported dtype {_short(dtype)}")
    if not isinstance(shape, list):
        raise ValueError(f"safetensors: tensor {_short(name)}: shape must be a list of non-negative ints, "
                         f"got {_short(shape)}")
    # Each dim is checked, and the element count kept below 2**64 as the reference does (it refuses an
    # overflowing product), one dim at a time: a shape such as [2**62] * 60000 fails at its second dim
    # instead of building a 3.6-million-digit integer.
    count = 1
    for i, s in enumerate(shape):
        if not _is_u64(s):
            raise ValueError(f"safetensors: tensor {_short(name)}: dim {i} of its shape must be a non-negative int "
                             f"below 2**64, got {_short(s)}")
        count *= s
        if count >= U64:
            raise ValueError(f"safetensors: tensor {_short(name)}: its shape's element count overflows 64 bits "
                             f"at dim {i} (shape {_short(shape)})")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_u64(o) for o in offsets)
            and offsets[0] <= offsets[1]):
        raise ValueError(f"safetensors: tensor {_short(name)}: data_offsets must be [begin, end], integers with "
                         f"0 <= begin <= end < 2**64, got {_short(offsets)}")
    nbytes = count * _ITEMSIZE[dtype]  # both below 2**64: a small product
    if offsets[1] - offsets[0] != nbytes:
        raise ValueError(f"safetensors: tensor {_short(name)}: shape {_short(shape)} of {dtype} needs {nbytes} "
                         f"bytes, but data_offsets {offsets} span {offsets[1] - offsets[0]}")
    return dtype, tuple(shape), tuple(offsets)


def _is_u64(x):
    return type(x) is int and 0 <= x < U64  # bool is an int subclass: refused, as JSON true is no number


def _encodable(text):
    """False for a str holding a lone surrogate (JSON "\\ud800" decodes to one; UTF-8 cannot carry it)."""
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _short(value, limit=80):
    """repr(value), cut to `limit` characters: an error message about a hostile header stays small."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


# JSON strings (their brackets do not nest), and a step per byte for the bracket depth count
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*+"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


def json_depth(text):
    """The deepest bracket nesting of a JSON text (bytes), at C speed (no Python loop over its bytes): checked
    before json.loads, whose recursion ends in a RecursionError on deep nesting."""
    brackets = _JSON_STRING.sub(b"", text).translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _parse_int(s):
    # Python reads "-0" as 0 and any length of digits; the reference reads "-0" as a float and refuses
    # floats where it needs an integer. Integers of more than 20 digits cannot be below 2**64 either.
    if s == "-0" or len(s) > 21:
        return _parse_float(s)
    return int(s)


def _parse_float(s):
    value = float(s)
    if math.isinf(value):
        raise ValueError(f"number {s[:40]} is out of range")
    return value


def _object(pairs):
    # A key written twice is refused at every level: the reference refuses a second __metadata__ or a second
    # field of a tensor's entry, and keeps the last of two tensors (or metadata keys) of one name, a file that
    # says two things at once.
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {_short(key)} appears twice in one object")
        out[key] = value
    return out


def _parse_constant(s):
    raise ValueError(f"{s} is not JSON (NaN and Infinity literals are a Python extension)")


def _convert(name, dtype, data):
    """(webgrad dtype, canonical bytes) for one tensor's stored bytes."""
    if dtype in _NATIVE:
        if dtype == "BOOL" and bytes(data).translate(None, b"\x00\x01"):
            raise ValueError(f"safetensors: tensor {name!r}: BOOL data holds bytes other than 0 and 1")
        return _NATIVE[dtype], data
    raise ValueError(f"safetensors: tensor {name!r} has dtype {dtype}, which webgrad cannot load "
                     "(supported: F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL, C64)")
