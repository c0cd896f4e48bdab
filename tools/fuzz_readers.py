"""Fuzz webgrad's file readers with seeded hostile inputs: `python -m tools.fuzz_readers [--inputs N]`.

    python -m tools.fuzz_readers                       # every reader, 2,000 inputs each
    python -m tools.fuzz_readers --inputs 100000 --readers pt,cifar
    python -m tools.fuzz_readers --reproduce pt:1234 --save bad/   # write one input to a file

Readers (see docs/FUZZING.md): safetensors, pt (PyTorch's zip format), idx (MNIST), cifar (binary, pickled,
and both as .tar.gz), images (ImageFolder) and app (the dashboard's checkpoints). Each input is made from
valid files by mutation (flipped, cut, spliced bytes) or by crafting (hostile pickles, zip and tar entries,
decompression bombs, headers that lie). Input i of a reader depends only on (seed, reader, i), so any input
can be made again alone.

Every outcome is one of:
  value     the reader returned, and the value passed the reader's checks (shapes are ints, labels in range,
            tensors equal what the reference reader gives where one is installed: torch for .pt, the
            `safetensors` package for safetensors);
  refused   the reader raised its documented exception type;
  unclean   anything else: another exception type, a crash of the process, an input over --timeout;
  silent    the reader returned something wrong (a check failed, or the reference refuses the file), or the
            process was left broken (webgrad.zeros(3) or webgrad.randn(3) fails after the load).

By default inputs run in a child process that is started again after a crash or a hang (--in-process runs
them here, as the tests do). --memory-limit caps the child's address space, so a bomb ends in MemoryError
instead of taking the machine's memory.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import pickle
import random
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
import warnings
import zipfile
import zlib
from collections import OrderedDict
from pathlib import Path

if __package__ in (None, ""):  # `python tools/fuzz_readers.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "package"))

import webgrad as wg  # noqa: E402

OUTCOMES = ("value", "refused", "unclean", "silent")


# ===================================================================== shared byte mutations
INTERESTING = [0, 1, 2, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 2**31 - 1, 2**31, 2**32 - 1, 2**40, 2**63 - 1]


def flip(rng, raw, count=None):
    b = bytearray(raw)
    if not b:
        return bytes([rng.randrange(256)])
    for _ in range(count or rng.randint(1, 4)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b)


def mutate_bytes(rng, raw):
    """One generic mutation of a byte string."""
    kind = rng.randrange(8)
    n = len(raw)
    if kind <= 1 or n < 2:
        return flip(rng, raw)
    if kind == 2:
        return raw[:rng.randrange(n)]
    if kind == 3:
        return raw + rng.randbytes(rng.randint(1, 32))
    if kind == 4:  # delete a range
        a = rng.randrange(n)
        return raw[:a] + raw[a + rng.randint(1, 64):]
    if kind == 5:  # duplicate a range
        a = rng.randrange(n)
        return raw[:a] + raw[a:a + rng.randint(1, 64)] + raw[a:]
    if kind == 6:  # an interesting integer written over 1, 2, 4 or 8 bytes
        width = rng.choice([1, 2, 4, 8])
        value = rng.choice(INTERESTING) % (1 << (8 * width))
        at = rng.randrange(n)
        return raw[:at] + value.to_bytes(width, rng.choice(["little", "big"])) + raw[at + width:]
    a, b = sorted(rng.randrange(n) for _ in range(2))  # swap two ranges
    c = rng.randint(1, 32)
    return raw[:a] + raw[b:b + c] + raw[a + c:b] + raw[a:a + c] + raw[b + c:]


# ===================================================================== pickle opcodes (protocol 2)
class P:
    """A protocol-2 pickle written opcode by opcode, so that a fuzzer can put anything anywhere."""

    def __init__(self):
        self.out = bytearray(b"\x80\x02")

    def op(self, raw):
        self.out += raw
        return self

    def value(self, v):
        out = self.out
        if v is None:
            out += b"N"
        elif v is True or v is False:
            out += b"\x88" if v else b"\x89"
        elif isinstance(v, int):
            if 0 <= v < 256:
                out += b"K" + bytes([v])
            elif 0 <= v < 65536:
                out += b"M" + struct.pack("<H", v)
            elif -2**31 <= v < 2**31:
                out += b"J" + struct.pack("<i", v)
            else:
                raw = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
                out += b"\x8a" + bytes([len(raw)]) + raw
        elif isinstance(v, float):
            out += b"G" + struct.pack(">d", v)
        elif isinstance(v, str):
            raw = v.encode("utf-8", "surrogatepass")
            out += b"X" + struct.pack("<I", len(raw)) + raw
        elif isinstance(v, bytes):
            self.glob("_codecs", "encode").op(b"(").value(v.decode("latin-1")).value("latin1").op(b"tR")
        elif isinstance(v, Raw):
            out += v.raw
        elif isinstance(v, tuple):
            out += b"("
            for x in v:
                self.value(x)
            out += b"t"
        elif isinstance(v, list):
            out += b"]"
            if v:
                out += b"("
                for x in v:
                    self.value(x)
                out += b"e"
        elif isinstance(v, OrderedDict):
            self.glob("collections", "OrderedDict").op(b")R")
            self.items(v)
        elif isinstance(v, dict):
            out += b"}"
            self.items(v)
        elif isinstance(v, T):
            v.emit(self)
        else:
            raise TypeError(type(v))
        return self

    def items(self, d):
        if d:
            self.out += b"("
            for k, x in d.items():
                self.value(k)
                self.value(x)
            self.out += b"u"

    def glob(self, module, name):
        self.out += b"c" + module.encode() + b"\n" + name.encode() + b"\n"
        return self

    def done(self):
        return bytes(self.out) + b"."


class Raw:
    """Opcodes written as they are (a hostile fragment inside a pickle)."""

    def __init__(self, raw):
        self.raw = raw


class T:
    """A tensor as torch pickles it: _rebuild_tensor_v2(persistent storage, offset, size, stride, ...)."""

    def __init__(self, key, stype, numel, offset, size, stride, requires_grad=False, parameter=False,
                 rebuild="_rebuild_tensor_v2", hooks=True):
        self.key, self.stype, self.numel, self.offset = key, stype, numel, offset
        self.size, self.stride, self.requires_grad, self.parameter = size, stride, requires_grad, parameter
        self.rebuild, self.hooks = rebuild, hooks

    def emit(self, p):
        if self.parameter:
            p.glob("torch._utils", "_rebuild_parameter").op(b"(")
        p.glob("torch._utils", self.rebuild).op(b"(")
        p.op(b"(").value("storage").glob("torch", self.stype).value(self.key).value("cpu").value(self.numel)
        p.op(b"tQ").value(self.offset).value(self.size).value(self.stride)
        if self.rebuild == "_rebuild_tensor_v2":
            p.value(self.requires_grad)
            if self.hooks:
                p.glob("collections", "OrderedDict").op(b")R")
        p.op(b"tR")
        if self.parameter:
            p.value(self.requires_grad).glob("collections", "OrderedDict").op(b")R").op(b"tR")


# ===================================================================== zip archives (torch.save's format)
def zip_archive(records, name="archive", compress=(), order=None):
    """A torch.save-style zip: records {relative name: bytes}; `compress`: the names stored deflated."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for rel in order or records:
            info = zipfile.ZipInfo(f"{name}/{rel}" if name is not None else rel, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if rel in compress else zipfile.ZIP_STORED
            z.writestr(info, records[rel])
    return buf.getvalue()


_ZEROS = {}


def deflated_zeros(n):
    """(raw deflate stream, n, CRC-32) of n zero bytes, n a multiple of 1 MiB: one MiB compressed once and
    flushed (its blocks refer only to themselves), repeated, then an empty final block. A bomb of about
    n / 1000 bytes for the price of one MiB."""
    if n not in _ZEROS:
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        chunk = bytes(1 << 20)
        block = c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)
        crc = 0
        for _ in range(n >> 20):
            crc = zlib.crc32(chunk, crc)
        _ZEROS[n] = (block * (n >> 20) + b"\x03\x00", n, crc)
    return _ZEROS[n]


def gzip_zeros(n):
    """A gzip member of n zero bytes: appended to another gzip member, the stream inflates to both."""
    stream, n, crc = deflated_zeros(n)
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + stream + struct.pack("<II", crc, n & 0xFFFFFFFF)


def zip_with_raw_member(records, member, deflated, size, crc, name="archive"):
    """A zip whose member `member` holds the given deflate stream and declares `size` bytes and `crc`."""
    raw = zip_archive(records, name)
    z = zipfile.ZipFile(io.BytesIO(raw))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as w:
        for info in z.infolist():
            w.writestr(info, z.read(info))
        info = zipfile.ZipInfo(f"{name}/{member}", date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        # write the member by hand: zipfile would compress it again
        w.fp.seek(w.start_dir)
        offset = w.fp.tell()
        info.header_offset = offset
        info.CRC, info.compress_size, info.file_size = crc, len(deflated), size
        info.flag_bits = 0
        info.extract_version = info.create_version = 20
        w.fp.write(info.FileHeader(zip64=size >= 0xFFFFFFFF))
        w.fp.write(deflated)
        w.start_dir = w.fp.tell()
        w.filelist.append(info)
        w.NameToInfo[info.filename] = info
    return out.getvalue()


def patch_zip_header(rng, raw):
    """Change one field of a local or central header of a zip (method, flags, sizes, name length)."""
    sigs = [i for i in range(len(raw) - 4) if raw[i:i + 4] in (b"PK\x03\x04", b"PK\x01\x02")]
    if not sigs:
        return flip(rng, raw)
    at = rng.choice(sigs)
    central = raw[at:at + 4] == b"PK\x01\x02"
    fields = ({"flags": (8, 2), "method": (10, 2), "crc": (16, 4), "csize": (20, 4), "usize": (24, 4),
               "namelen": (28, 2), "extralen": (30, 2), "offset": (42, 4)} if central else
              {"flags": (6, 2), "method": (8, 2), "crc": (14, 4), "csize": (18, 4), "usize": (22, 4),
               "namelen": (26, 2), "extralen": (28, 2)})
    field = rng.choice(list(fields))
    off, width = fields[field]
    value = {"flags": rng.choice([1, 8, 0x40, 0x800, 0xFFFF]), "method": rng.choice([1, 6, 8, 9, 12, 14, 98, 99])
             }.get(field, rng.choice(INTERESTING) % (1 << (8 * width)))
    return raw[:at + off] + value.to_bytes(width, "little") + raw[at + off + width:]


# ===================================================================== the readers
class Target:
    name = ""
    needs = ()  # modules the reader needs; the target is skipped where one is missing

    def documented(self):
        """The exception types the reader documents for a bad file."""
        raise NotImplementedError

    def make(self, rng):
        """One input (bytes, or {relative path: bytes} for readers of folders)."""
        raise NotImplementedError

    def load(self, data, tmp):
        raise NotImplementedError

    def check(self, value, data):
        """None if the returned value is right, else what is wrong with it."""
        return None


def _shape_ok(t):
    return all(type(s) is int and s >= 0 for s in t.shape)


def scratch():
    """Where the inputs of readers of folders are written: memory (/dev/shm) where the system has it, since
    creating and removing thousands of small folders on a busy disk costs more than the reading."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def _write_tree(files, tmp):
    """Write {relative path: bytes} under a fresh folder of tmp; returns it."""
    root = Path(tempfile.mkdtemp(dir=tmp))
    for rel, raw in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
    return root


# --------------------------------------------------------------------- safetensors
def st_file(header, data=b""):
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


HOSTILE_JSON = [0, 1, -1, 2**31, 2**62, 2**64 - 1, 2**64, True, None, 1.5, 3.0, "", "F32", "BOGUS", [], {}, [0],
                [1, 2], [2**62] * 40, [-1, 3], {"a": "b"}, {"a": 1}, [[[[1]]]]]
RAW_JSON = [b"NaN", b"-Infinity", b"-0", b"1e999", b"3.0", b'"\\ud800"', b"9" * 30, b"[" * 200,
            b"[" * 130 + b"]" * 130, b"{", b"}", b'"', b"\\"]


class Safetensors(Target):
    name = "safetensors"

    def __init__(self):
        wg.manual_seed(0)  # the seed files, hence every input, are the same in every process
        self.seeds = []
        for state, meta in (({"w": wg.randn(2, 3), "b": wg.tensor([1.0, -2.0]), "n": wg.tensor([3, 4], dtype=wg.int32),
                              "p": wg.tensor(bytes([0, 7, 255])), "m": wg.tensor([True, False])}, {"format": "pt"}),
                            ({"e": wg.zeros(0, 4), "s": wg.tensor(2.5, dtype=wg.float64)}, None), ({}, {"k": "v"})):
            buf = io.BytesIO()
            wg.io.safetensors.save(state, buf, metadata=meta)
            self.seeds.append(buf.getvalue())
        self.seeds.append(st_file({"h": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]},
                                   "i": {"dtype": "I64", "shape": [1], "data_offsets": [4, 12]},
                                   "z": {"dtype": "BF16", "shape": [1], "data_offsets": [12, 14]}}, bytes(14)))
        try:
            import safetensors
            self.reference = safetensors
        except ImportError:
            self.reference = None

    def documented(self):
        return (ValueError,)

    def make(self, rng):
        raw = rng.choice(self.seeds)
        for _ in range(1 + (rng.random() < 0.3)):
            raw = self.mutate(rng, raw)
        return raw

    def mutate(self, rng, raw):
        if len(raw) < 8:
            return mutate_bytes(rng, raw)
        n = struct.unpack("<Q", raw[:8])[0]
        if n > len(raw) - 8:
            return mutate_bytes(rng, raw)
        header, data = raw[8:8 + n], raw[8 + n:]
        kind = rng.randrange(10)
        if kind >= 8:  # other values in a valid file: a header untouched, data bytes changed
            return raw[:8 + n] + (flip(rng, data) if data else data)
        if kind == 0:
            return mutate_bytes(rng, raw)
        if kind == 1:  # a wrong header length
            return struct.pack("<Q", rng.choice([0, 1, max(n - 1, 0), n + 1, n + 8, 2**63, 100 * 2**20 + 1])) + raw[8:]
        if kind == 2:  # a raw token in the header
            at = rng.randrange(len(header) + 1)
            header = header[:at] + rng.choice(RAW_JSON) + header[at + rng.randint(0, 3):]
            return struct.pack("<Q", len(header)) + header + data
        if kind == 3:  # a key written twice (the second copy may differ)
            text = header.rstrip(b" ")
            if not text.startswith(b"{") or len(text) < 3:
                return mutate_bytes(rng, raw)
            try:
                doc = json.loads(text)
            except ValueError:
                return mutate_bytes(rng, raw)
            key = rng.choice(list(doc) + ["__metadata__"]) if doc else "__metadata__"
            value = doc.get(key, {"x": "y"}) if rng.random() < 0.6 else rng.choice(HOSTILE_JSON + [{"k": "v"}])
            extra = json.dumps({key: value})[1:-1].encode()
            body = text[1:-1]
            if rng.random() < 0.5 or not body:
                text = b"{" + extra + (b"," + body if body else b"") + b"}"
            else:
                text = b"{" + body + b"," + extra + b"}"
            text += b" " * (-len(text) % 8)
            return struct.pack("<Q", len(text)) + text + data
        try:
            doc = json.loads(header)
        except ValueError:
            return mutate_bytes(rng, raw)
        if not isinstance(doc, dict):
            return mutate_bytes(rng, raw)
        parent, key, node = None, None, doc
        for _ in range(rng.randint(1, 3)):
            if isinstance(node, dict) and node:
                k = rng.choice(list(node))
            elif isinstance(node, list) and node:
                k = rng.randrange(len(node))
            else:
                break
            parent, key = node, k
            if rng.random() < 0.5 or not isinstance(node[k], (dict, list)):
                break
            node = node[k]
        if parent is None:
            doc[rng.choice(["x", "__metadata__"])] = rng.choice(HOSTILE_JSON)
        else:
            parent[key] = rng.choice(HOSTILE_JSON)
        header = json.dumps(doc).encode()
        return struct.pack("<Q", len(header)) + header + (data if kind < 6 else data[:rng.randrange(len(data) + 1)])

    def load(self, data, tmp):
        return wg.io.safetensors.load(io.BytesIO(data), device="cpu")

    def check(self, value, data):
        if not isinstance(value, dict) or not all(isinstance(t, wg.Tensor) and _shape_ok(t) for t in value.values()):
            return "not a dict of well-formed tensors"
        if self.reference is None:
            return None
        try:
            ref = dict(self.reference.deserialize(data))
        except Exception as e:  # noqa: BLE001 - the reference's refusal (SafetensorError)
            return f"the reference reader refuses this file ({str(e)[:120]})"
        if sorted(ref) != sorted(value):
            return f"names differ from the reference: {sorted(value)[:5]} vs {sorted(ref)[:5]}"
        for name, t in value.items():
            if list(t.shape) != list(ref[name]["shape"]):
                return f"{name}: shape {list(t.shape)} but the reference reads {ref[name]['shape']}"
            native = ref[name]["dtype"] in ("F32", "F64", "I32", "U8", "BOOL", "F16")
            if native and t._bytes() != bytes(ref[name]["data"]):
                return f"{name}: data differs from the reference"
        return None


# --------------------------------------------------------------------- PyTorch's zip format
STORAGES = {"FloatStorage": (4, "<f"), "DoubleStorage": (8, "<d"), "IntStorage": (4, "<i"), "ByteStorage": (1, "B"),
            "BoolStorage": (1, "?"), "LongStorage": (8, "<q"), "HalfStorage": (2, "<e"), "BFloat16Storage": (2, "<H"),
            "ShortStorage": (2, "<h"), "CharStorage": (1, "b")}
HOSTILE_DIMS = [3.0, True, False, -1, None, "3", 2**31, 2**40, 2**62, 2**64, 2**100, -2**63, [3], (3,), 1.5,
                float("nan"), float("inf"), b"3", 0]
HOSTILE_GLOBALS = [("os", "system"), ("posix", "system"), ("builtins", "eval"), ("builtins", "getattr"),
                   ("builtins", "__import__"), ("torch", "Tensor"), ("torch._utils", "_rebuild_qtensor"),
                   ("torch", "load"), ("collections", "defaultdict"), ("builtins", "dict"), ("numpy", "array"),
                   ("torch", "Size"), ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "complex"),
                   ("_codecs", "encode"), ("torch", "float32"), ("torch", "int64"), ("torch", "bfloat16"),
                   ("torch", "FloatStorage"), ("torch._utils", "_rebuild_parameter"), ("collections", "OrderedDict")]
RAW_OPS = [b"(", b")", b"t", b"R", b"b", b"Q", b"u", b"s", b"e", b"a", b"0", b"1", b"2", b".", b"N", b"}", b"]",
           b"\x85", b"\x86", b"\x87", b"\x88", b"\x89", b"\x8f", b"\x90", b"\x91", b"\x94", b"\x95" + bytes(8),
           b"h\x00", b"h\xff", b"j\xff\xff\xff\x7f", b"q\x00", b"r\xff\xff\xff\xf0", b"K\x03", b"G" + bytes(8),
           b"X\xff\xff\xff\x7f", b"\x8a\x08" + bytes(8), b"\x8b\xff\xff\xff\x7f", b"c\n\n", b"Cos\nsystem\n",
           b"\x80\x05", b"\x93", b"\x8c\x02os\x8c\x06system\x93", b"l", b"d", b"T\x05\x00\x00\x00hello",
           b"U\x03abc", b"B\x03\x00\x00\x00abc", b"C\x02ab", b"\x8e" + bytes(8), b"I3\n", b"L3\n", b"F3.0\n",
           b"S'x'\n", b"V3\n", b"P0\n", b"g0\n", b"p0\n", b"\x81", b"\x92", b"i__builtin__\nlist\n"]


def _storage_bytes(rng, stype, numel):
    item, fmt = STORAGES[stype]
    if stype == "BoolStorage":
        return bytes(rng.randrange(2) for _ in range(numel))
    if stype in ("FloatStorage", "DoubleStorage", "HalfStorage"):
        return b"".join(struct.pack(fmt, rng.uniform(-4, 4)) for _ in range(numel))
    if stype == "BFloat16Storage":
        return b"".join(struct.pack("<H", struct.unpack("<I", struct.pack("<f", rng.uniform(-4, 4)))[0] >> 16)
                        for _ in range(numel))
    bits = 8 * item
    lo, hi = (0, 255) if stype == "ByteStorage" else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    lo, hi = max(lo, -1000), min(hi, 1000)
    return b"".join(struct.pack(fmt, rng.randint(lo, hi)) for _ in range(numel))


class TorchZip(Target):
    name = "pt"

    def __init__(self):
        try:
            import torch
            self.torch = torch
        except ImportError:
            self.torch = None

    def documented(self):
        from webgrad.io import torch_format
        # the reader's one documented type; before it had one, the two its docstring and tests named
        one = getattr(torch_format, "UnpicklingError", None)
        return (one,) if one is not None else (ValueError, pickle.UnpicklingError)

    # a checkpoint described as (object tree with T leaves, records), so that mutations can act on either
    def spec(self, rng):
        records, tensors = {}, []
        for i in range(rng.randint(1, 4)):
            stype = rng.choice(list(STORAGES))
            numel = rng.randint(0, 12)
            records[str(i)] = _storage_bytes(rng, stype, numel)
            kind = rng.randrange(4)
            if kind == 0 or numel == 0:
                size, stride, offset = (numel,), (1,), 0
            elif kind == 1 and numel >= 6:
                size, stride, offset = (2, 3), (3, 1), 0
            elif kind == 2 and numel >= 4:
                size, stride, offset = (2,), (2,), 1  # a strided view
            else:
                size, stride, offset = (), (), rng.randrange(numel)  # a 0-d view
            floating = stype in ("FloatStorage", "DoubleStorage", "HalfStorage", "BFloat16Storage")
            grad = floating and rng.random() < 0.3
            tensors.append(T(str(i), stype, numel, offset, size, stride, requires_grad=grad,
                             parameter=grad and rng.random() < 0.5))
        if rng.random() < 0.3 and tensors:
            tensors.append(tensors[0])  # the same tensor twice: a shared storage
        shape = rng.randrange(4)
        if shape == 0:
            obj = OrderedDict((f"layer.{i}", t) for i, t in enumerate(tensors))
        elif shape == 1:
            obj = {"model": OrderedDict((f"w{i}", t) for i, t in enumerate(tensors)), "epoch": rng.randint(0, 9),
                   "history": [0.5, 0.25], "meta": {"name": "mlp", "flags": (True, None)}}
        elif shape == 2:
            obj = [tensors, {"lr": 0.1, "betas": (0.9, 0.999)}, "text", b"\x00\xff", -7, 2**40]
        else:
            obj = {"state": {i: {"step": t} for i, t in enumerate(tensors)}, "param_groups": [{"params": [0, 1]}]}
        return obj, records, tensors

    def make(self, rng):
        obj, records, tensors = self.spec(rng)
        kind = rng.randrange(20)
        extra = {}
        compress = ()
        if kind < 6 and tensors:  # a hostile field in one tensor
            t = rng.choice(tensors)
            field = rng.choice(["size", "stride", "offset", "numel", "requires_grad", "stype", "key", "rebuild",
                                "hooks", "ndim"])
            bad = rng.choice(HOSTILE_DIMS)
            if field == "size" and t.numel >= 2 and rng.random() < 0.3:
                # a float size smaller than its storage: the view is copied, through the cache of shapes
                t.size, t.stride, t.offset = (float(rng.randint(1, t.numel - 1)),), (1,), 0
            elif field == "size":
                first = tuple(bad if i == 0 else s for i, s in enumerate(t.size or (1,)))
                t.size = first if rng.random() < 0.8 else bad
                if rng.random() < 0.5:
                    t.stride = (0,) * len(t.size) if isinstance(t.size, tuple) else t.stride
            elif field == "stride":
                t.stride = tuple(bad if i == 0 else s for i, s in enumerate(t.stride or (1,))) if rng.random() < 0.8 \
                    else bad
            elif field == "offset":
                t.offset = bad
            elif field == "numel":
                t.numel = bad if rng.random() < 0.7 else t.numel + rng.choice([-1, 1, 1000])
            elif field == "requires_grad":
                t.requires_grad = rng.choice([1, 0, "yes", None, 2.0, True])
            elif field == "stype":
                t.stype = rng.choice(list(STORAGES) + ["UntypedStorage", "QInt8Storage", "Storage", "Tensor"])
            elif field == "key":
                t.key = rng.choice(["99", "", "../0", "0/../1", 0, None, "data.pkl", "\x00"])
            elif field == "rebuild":
                t.rebuild = rng.choice(["_rebuild_tensor", "_rebuild_tensor_v3", "_rebuild_sparse_tensor"])
            elif field == "hooks":
                t.hooks = False
            else:  # many dims
                n = rng.choice([33, 64, 65, 1000])
                t.size, t.stride = (1,) * n, (1,) * n
            if rng.random() < 0.2:  # a huge view of a small storage: stride 0 (torch's expand)
                t.size, t.stride = (rng.choice([2**20, 2**40, 2**62]),), (0,)
        elif kind == 6:  # a hostile global somewhere in the object
            module, name = rng.choice(HOSTILE_GLOBALS)
            args = rng.choice([(), ("echo hi",), ([1, 2],), (3, 4), ("x", "rot13"), ("x", "zlib"), ([["a", 1]],)])
            obj = {"model": obj, "x": Raw(P().glob(module, name).value(args).op(b"R").out[2:])}
        elif kind == 7:  # deep nesting, several ways
            depth = rng.choice([100, 1000, 20_000, 50_000])
            how = rng.randrange(5)
            if how == 0:
                frag = b"]" * depth + b"a" * (depth - 1)
            elif how == 1:
                frag = b"N" + b"\x85" * depth  # tuples in tuples
            elif how == 2:
                frag = b"(" * depth + b"N" + b"t" * depth
            elif how == 3:  # as a dict key: hashing it recurses in C, and 200,000 levels overflow the C stack
                frag = b"}" + b"N" + b"\x85" * 200_000 + b"Ns"
            else:
                frag = b"]q\x00h\x00a"  # a list holding itself
            obj = {"deep": Raw(frag), "model": obj}
        elif kind == 8:  # memo abuse
            idx = rng.choice([2**32 - 16, 2**31 + 5, 2**30, 255, 4096])
            frag = rng.choice([b"Nr" + struct.pack("<I", idx) + b"0j" + struct.pack("<I", idx),
                               b"j" + struct.pack("<I", idx), b"h\xfe", b"Nq\x05h\x05h\x06"])
            obj = {"memo": Raw(frag), "model": obj}
        elif kind == 9:  # a decompression bomb: a large unused record
            size = rng.choice([64 << 20, 256 << 20])
            data = zip_with_raw_member({"data.pkl": P().value(obj).done(), "version": b"3\n", "byteorder": b"little",
                                        **{f"data/{k}": v for k, v in records.items()}},
                                       "data/999", *deflated_zeros(size))
            return data
        elif kind == 10:  # a record that lies about its size, deflated
            size = rng.choice([2**31, 2**40, 100 << 20])
            t = tensors[0]
            return zip_with_raw_member({"data.pkl": P().value(obj).done(), "version": b"3\n", "byteorder": b"little",
                                        **{f"data/{k}": v for k, v in records.items() if k != t.key}},
                                       f"data/{t.key}", zlib.compress(b"\x00" * 64)[2:-4], size, 0)
        elif kind == 11:  # records stored deflated (valid)
            compress = {"data.pkl"} | {f"data/{k}" for k in records if rng.random() < 0.7}
        elif kind == 12:  # the archive's layout
            layout = rng.randrange(7)
            files = {"data.pkl": P().value(obj).done(), "version": b"3\n", "byteorder": b"little",
                     **{f"data/{k}": v for k, v in records.items()}}
            if layout == 0:
                files.pop(rng.choice(list(files)))
            elif layout == 1:
                files["byteorder"] = rng.choice([b"big", b"", b"\xff", b"little\n"])
            elif layout == 2:
                files["version"] = rng.choice([b"", b"99\n", b"0\n", b"x", b"-1"])
            elif layout == 3:
                return zip_archive(files, name=rng.choice(["", "a/b", None, "."]))
            elif layout == 4:  # two archives in one zip
                first = zip_archive(files)
                buf = io.BytesIO(first)
                with zipfile.ZipFile(buf, "a") as z, warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # zipfile's "Duplicate name": the point here
                    for name, value in (("other/data.pkl", {"x": 1}), ("archive/data.pkl", [1, 2])):
                        z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), P().value(value).done())
                return buf.getvalue()
            elif layout == 5:
                files[".data/version"] = b"3\n"
                files[".format_version"] = b"1"
            else:
                order = list(files)
                rng.shuffle(order)
                return zip_archive(files, order=order)
            return zip_archive(files)
        pickled = P().value(obj).done()
        if kind in (13, 14, 15):  # mutate the pickle's bytes
            for _ in range(rng.randint(1, 3)):
                if rng.random() < 0.5:
                    at = rng.randrange(len(pickled))
                    pickled = pickled[:at] + rng.choice(RAW_OPS) + pickled[at + rng.randint(0, 2):]
                else:
                    pickled = mutate_bytes(rng, pickled)
        files = {"data.pkl": pickled, "byteorder": b"little", **{f"data/{k}": v for k, v in records.items()},
                 "version": b"3\n", **extra}
        raw = zip_archive(files, compress=compress)
        if kind == 16:
            raw = patch_zip_header(rng, raw)
        elif kind >= 17:
            raw = mutate_bytes(rng, raw)
            if rng.random() < 0.3:
                raw = mutate_bytes(rng, raw)
        return raw

    def load(self, data, tmp):
        from webgrad.io import torch_format
        return torch_format.load(data, device="cpu")

    def check(self, value, data):
        bad = _walk_check(value, 0)
        if bad:
            return bad
        if self.torch is None:
            return None
        try:
            # map_location: webgrad puts every tensor where load() is told to, whatever device saved it
            ref = self.torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
        except Exception as e:  # noqa: BLE001 - torch's refusal
            return (f"torch.load(weights_only=True, map_location='cpu') refuses this file ({type(e).__name__}: "
                    f"{str(e)[:150]})")
        return _same(value, ref, self.torch, "")


def _walk_check(value, depth):
    if depth > 200:
        return "a value nested over 200 levels deep"
    if isinstance(value, wg.Tensor):
        return None if _shape_ok(value) and value.numel() == _prod(value.shape) else f"a tensor of shape {value.shape}"
    if isinstance(value, dict):
        for v in value.values():
            bad = _walk_check(v, depth + 1)
            if bad:
                return bad
    elif isinstance(value, (list, tuple)):
        for v in value:
            bad = _walk_check(v, depth + 1)
            if bad:
                return bad
    return None


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _same(w, t, torch, path):
    """None if webgrad's value equals torch's (tensors by value after webgrad's documented conversions)."""
    if isinstance(t, torch.Tensor):
        if not isinstance(w, wg.Tensor):
            return f"{path}: torch gives a tensor, webgrad a {type(w).__name__}"
        if tuple(w.shape) != tuple(t.shape):
            return f"{path}: shape {list(w.shape)} vs torch {list(t.shape)}"
        if w.requires_grad != t.requires_grad:
            return f"{path}: requires_grad {w.requires_grad} vs torch {t.requires_grad}"
        import numpy as np
        if str(w.dtype).split(".")[-1] != str(t.dtype).split(".")[-1] and t.dtype is torch.bfloat16:
            return f"{path}: dtype {w.dtype} vs torch {t.dtype}"
        # bfloat16 (on both sides) compares as its float32 values: NumPy has no bfloat16
        a = w.detach().float().numpy() if w.dtype is wg.bfloat16 else w.detach().numpy()
        b = t.detach().float().numpy() if t.dtype in (torch.float16, torch.bfloat16) and a.dtype == np.float32 \
            else t.detach().numpy()
        if not np.array_equal(a.astype(b.dtype) if a.dtype != b.dtype else a, b, equal_nan=a.dtype.kind == "f"):
            return f"{path}: values differ from torch's"
        return None
    if isinstance(t, dict):
        if not isinstance(w, dict) or list(w) != list(t):
            return f"{path}: dict keys differ from torch's"
        for k in t:
            bad = _same(w[k], t[k], torch, f"{path}/{k!r}")
            if bad:
                return bad
        return None
    if isinstance(t, (list, tuple)):
        if not isinstance(w, (list, tuple)) or len(w) != len(t) or isinstance(w, list) != isinstance(t, list):
            return f"{path}: a {type(w).__name__} vs torch's {type(t).__name__} of {len(t)}"
        for i, (a, b) in enumerate(zip(w, t)):
            bad = _same(a, b, torch, f"{path}/{i}")
            if bad:
                return bad
        return None
    if isinstance(t, torch.dtype):
        return None if getattr(w, "name", None) == str(t).split(".")[-1] else f"{path}: dtype {w} vs torch {t}"
    if type(w) is not type(t) or not (w == t or (w != w and t != t)):
        return f"{path}: {type(w).__name__} {str(w)[:40]} vs torch's {type(t).__name__} {str(t)[:40]}"
    return None


# --------------------------------------------------------------------- IDX (MNIST)
def idx_file(dims, payload, magic=None):
    magic = (0x08 << 8) | len(dims) if magic is None else magic
    return struct.pack(">I", magic) + struct.pack(f">{len(dims)}I", *dims) + payload


class Idx(Target):
    name = "idx"

    def documented(self):
        return (ValueError,)

    def make(self, rng):
        n = rng.randint(0, 3)
        images = idx_file((n, 28, 28), rng.randbytes(n * 784))
        labels = idx_file((n,), bytes(rng.randrange(10) for _ in range(n)))
        gz = rng.random() < 0.4
        kind = rng.randrange(10)
        which = rng.randrange(2)
        files = [images, labels]
        if kind <= 4:
            files[which] = mutate_bytes(rng, files[which])
        elif kind == 5:  # a header that lies about the count or the size
            if which == 0:
                dims = (rng.choice([n + 1, 2**32 - 1, 10**6, 0]), 28, 28)
            else:
                dims = (rng.choice([n + 1, 2**32 - 1]),)
            files[which] = idx_file(dims, files[which][4 + 4 * len(dims):])
        elif kind == 6:  # other dims or types
            files[which] = idx_file((n, rng.choice([0, 27, 2**16]), 28), b"", magic=rng.choice([None, 0x0803, 0x0D03,
                                                                                                0x0804, 0x08FF]))
        elif kind == 7:
            gz = True  # a gzip bomb: the header declares little, the stream holds much more
        elif kind == 8:
            gz = True
            files[which] = files[which] + bytes(rng.randint(1, 100))
        if gz:
            files = [gzip.compress(f, compresslevel=1, mtime=0) for f in files]
            if kind == 7:
                files[which] += gzip_zeros(rng.choice([1 << 20, 64 << 20]))
            if kind == 9:
                files[which] = mutate_bytes(rng, files[which])
        suffix = ".gz" if gz else ""
        return {f"train-images-idx3-ubyte{suffix}": files[0], f"train-labels-idx1-ubyte{suffix}": files[1]}

    def load(self, data, tmp):
        from webgrad.datasets import MNIST
        return MNIST(str(_write_tree(data, tmp)), train=True, device="cpu")

    def check(self, value, data):
        n = len(value)
        if tuple(value.data.shape) != (n, 28, 28) or tuple(value.targets.shape) != (n,):
            return f"data {value.data.shape} and targets {value.targets.shape} for {n} samples"
        (images, labels) = [gzip.decompress(v) if k.endswith(".gz") else v for k, v in sorted(data.items())]
        if value.data._bytes() != images[16:] or value.targets.tolist() != list(labels[8:]):
            return "the loaded pixels or labels differ from the file's"
        return None


# --------------------------------------------------------------------- CIFAR
def tar_gz(files, compress=True, kinds=None):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, raw in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            info.mtime = 0
            kind = (kinds or {}).get(name)
            if kind == "symlink":
                info.type, info.linkname, info.size = tarfile.SYMTYPE, "/etc/passwd", 0
                raw = b""
            elif kind == "dir":
                info.type, info.size = tarfile.DIRTYPE, 0
                raw = b""
            t.addfile(info, io.BytesIO(raw))
    raw = buf.getvalue()
    return gzip.compress(raw, compresslevel=1, mtime=0) if compress else raw


def cifar_pickle(rng, n, hostile=None):
    """A pickled CIFAR-10 batch as numpy pickles it: {'batch_label', 'labels', 'data', 'filenames'}."""
    data = rng.randbytes(n * 3072)
    array = (P().glob("numpy.core.multiarray", "_reconstruct").op(b"(").glob("numpy", "ndarray").value((0,))
             .value(b"b").op(b"tR").op(b"(").value(1).value((n, 3072)).glob("numpy", "dtype").op(b"(").value("u1")
             .value(False).value(True).op(b"tR").op(b"(").value(3).value("|").value(None).value(None).value(None)
             .value(-1).value(-1).value(0).op(b"tb").value(False).value(data).op(b"tb"))
    labels = [rng.randrange(10) for _ in range(n)]
    obj = {"batch_label": "testing batch 1 of 1", "labels": labels, "data": Raw(bytes(array.out[2:])),
           "filenames": [f"{i}.png" for i in range(n)]}
    if hostile is not None:
        obj.update(hostile)
    return P().value(obj).done()


class Cifar(Target):
    name = "cifar"

    def __init__(self):
        try:
            import numpy  # noqa: F401 - the pickled version needs it
            self.numpy = True
        except ImportError:
            self.numpy = False

    def documented(self):
        # ValueError for a file's contents. Before the reader had one type, its binary version and archives
        # raised ValueError, its pickled version pickle.UnpicklingError as well, and an archive without the
        # batch FileNotFoundError: all three count as documented for that code.
        return (ValueError,) if _cifar_one_type() else (ValueError, pickle.UnpicklingError, FileNotFoundError)

    def make(self, rng):
        n = rng.randint(1, 3)
        python = self.numpy and rng.random() < 0.4
        if python:
            folder, batch, meta = "cifar-10-batches-py", "test_batch", "batches.meta"
            raw = cifar_pickle(rng, n)
            kind = rng.randrange(10)
            if kind <= 2:
                raw = mutate_bytes(rng, raw)
            elif kind <= 5:
                raw = cifar_pickle(rng, n, self.hostile(rng, n))
            elif kind == 6:
                at = rng.randrange(len(raw))
                raw = raw[:at] + rng.choice(RAW_OPS) + raw[at:]
            meta_raw = P().value({"label_names": ["c%d" % i for i in range(10)], "num_vis": 3072}).done()
            if rng.random() < 0.1:
                meta_raw = mutate_bytes(rng, meta_raw)
        else:
            folder, batch, meta = "cifar-10-batches-bin", "test_batch.bin", "batches.meta.txt"
            raw = b"".join(bytes([rng.randrange(10)]) + rng.randbytes(3072) for _ in range(n))
            kind = rng.randrange(10)
            if kind <= 3:
                raw = mutate_bytes(rng, raw)
            elif kind == 4:
                raw = bytes([rng.choice([10, 255])]) + raw[1:]
            meta_raw = "\n".join("c%d" % i for i in range(10)).encode()
            if rng.random() < 0.1:
                meta_raw = mutate_bytes(rng, meta_raw)
        files = {f"{folder}/{batch}": raw, f"{folder}/{meta}": meta_raw}
        if rng.random() < 0.5:
            return files
        # the same files in the .tar.gz as downloaded
        tarball = ("cifar-10-python.tar.gz" if python else "cifar-10-binary.tar.gz")
        kind = rng.randrange(10)
        kinds = None
        if kind == 0:  # a bomb: an unused member of zeros before the batch, as its own gzip member
            size = rng.choice([64 << 20, 256 << 20])
            info = tarfile.TarInfo(f"{folder}/readme.html")
            info.size, info.mtime = size, 0
            return {tarball: gzip.compress(info.tobuf(), mtime=0) + gzip_zeros(size) +
                    gzip.compress(tar_gz(files, compress=False), compresslevel=1, mtime=0)}
        if kind == 1:
            kinds = {f"{folder}/{batch}": rng.choice(["symlink", "dir"])}
        elif kind == 2:
            files = {k.replace(folder, rng.choice(["x", folder + "/sub", ""])): v for k, v in files.items()}
        tar = tar_gz(files, compress=False, kinds=kinds)
        if kind == 3:
            tar = mutate_bytes(rng, tar)
        elif kind == 4:  # a member whose header declares a huge size
            tar = tar[:124] + b"%011o\x00" % rng.choice([2**33 - 1, 2**31, 10**9]) + tar[136:]
            tar = tar[:148] + b"%06o\x00 " % _tar_checksum(tar[:512]) + tar[156:]
        elif kind == 5:  # a pax header that is very long
            tar = _pax_bomb(rng) + tar
        raw_gz = gzip.compress(tar, compresslevel=1, mtime=0)
        if kind == 6:
            raw_gz = mutate_bytes(rng, raw_gz)
        return {tarball: raw_gz}

    def hostile(self, rng, n):
        choice = rng.randrange(9)
        if choice == 0:
            return {"labels": rng.choice([[10] * n, [-1] * n, [1.5] * n, ["a"] * n, [[1]] * n, None, 5, [2**70] * n])}
        if choice == 1:
            return {"data": rng.choice([None, "x", [1, 2], b"\x00" * 3072])}
        if choice == 2:
            module, name = rng.choice(HOSTILE_GLOBALS + [("numpy.core.multiarray", "_reconstruct"),
                                                         ("numpy", "dtype"), ("numpy", "ndarray")])
            return {"x": Raw(P().glob(module, name).value(rng.choice([(), ("echo hi",), ("O",), ("V99999999999",),
                                                                       (2**40,)])).op(b"R").out[2:])}
        if choice == 3:
            return {"deep": Raw(rng.choice([b"N" + b"\x85" * 200_000, b"]" * 100_000 + b"a" * 99_999,
                                            b"}N" + b"\x85" * 200_000 + b"Ns"]))}
        if choice == 4:
            return {"memo": Raw(b"Nr" + struct.pack("<I", rng.choice([2**32 - 16, 2**31 + 5])) + b"0")}
        if choice == 5:  # an array that is not [N, 3072] uint8
            dtype, shape = rng.choice([("O", (n, 3072)), ("f8", (n, 384)), ("u1", (n, 3071)), ("u1", (2**40,)),
                                       ("u1", (n * 3072,))])
            arr = (P().glob("numpy.core.multiarray", "_reconstruct").op(b"(").glob("numpy", "ndarray").value((0,))
                   .value(b"b").op(b"tR").op(b"(").value(1).value(shape).glob("numpy", "dtype").op(b"(").value(dtype)
                   .value(False).value(True).op(b"tR").op(b"(").value(3).value("|").value(None).value(None)
                   .value(None).value(-1).value(-1).value(0).op(b"tb").value(False).value(bytes(n * 3072)).op(b"tb"))
            return {"data": Raw(bytes(arr.out[2:]))}
        if choice == 6:
            return {rng.choice([1, (1, 2), None, b"labels"]): [0] * n}
        if choice == 7:
            return {"labels": [rng.randrange(10) for _ in range(n + rng.choice([-1, 1, 1000]))]}
        return {"batch_label": Raw(b"\x8a\x08" + bytes(8)), "filenames": Raw(b"X\xff\xff\xff\x0f")}

    def load(self, data, tmp):
        from webgrad.datasets import CIFAR10
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return CIFAR10(str(_write_tree(data, tmp)), train=False, device="cpu")

    def check(self, value, data):
        n = len(value)
        if tuple(value.data.shape) != (n, 3, 32, 32) or value.data.dtype is not wg.uint8:
            return f"data {value.data.shape} {value.data.dtype} for {n} samples"
        labels = value.targets.tolist()
        if len(labels) != n or any(not 0 <= v < 10 for v in labels):
            return f"labels {labels[:10]} for {n} samples"
        if len(value.classes) != 10 or not all(isinstance(c, str) for c in value.classes):
            return f"classes {value.classes!r:.100}"
        return None


def _cifar_one_type():
    from webgrad.datasets import unpickle
    return issubclass(getattr(unpickle, "UnpicklingError", pickle.UnpicklingError), ValueError)


def _tar_checksum(block):
    return sum(block[:148]) + 8 * 32 + sum(block[156:512])


def _pax_bomb(rng):
    size = rng.choice([1 << 20, 512 << 20])
    info = tarfile.TarInfo("././@PaxHeader")
    info.type = tarfile.XHDTYPE
    info.size = size
    header = info.tobuf(format=tarfile.USTAR_FORMAT)
    return header + b"%d path=x\n" % size  # declares far more than it holds


# --------------------------------------------------------------------- ImageFolder
def _png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


class Images(Target):
    name = "images"
    needs = ("PIL",)

    def __init__(self):
        from PIL import Image
        self.seeds = {}
        rng = random.Random(0)
        for fmt, ext in (("PNG", "png"), ("JPEG", "jpg"), ("BMP", "bmp"), ("GIF", "gif"), ("PPM", "ppm")):
            img = Image.frombytes("RGB", (8, 6), rng.randbytes(8 * 6 * 3))
            buf = io.BytesIO()
            img.save(buf, fmt)
            self.seeds[ext] = buf.getvalue()

    def documented(self):
        return (FileNotFoundError,)

    def make(self, rng):
        files = {}
        for cls in ("a", "b"):
            for i in range(rng.randint(1, 2)):
                ext = rng.choice(list(self.seeds))
                files[f"{cls}/{i}.{ext}"] = self.seeds[ext]
        name = rng.choice(list(files))
        kind = rng.randrange(8)
        if kind <= 3:
            files[name] = mutate_bytes(rng, files[name])
            if rng.random() < 0.3:
                files[name] = mutate_bytes(rng, files[name])
        elif kind == 4:  # a PNG whose header declares a huge image
            w, h = rng.choice([(100_000, 100_000), (2**31 - 1, 1), (12_000, 12_000), (0, 5), (30_000, 1)])
            ihdr = _png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 1, 0, 0, 0, 0))
            rows = zlib.compress(bytes(min(h, 64) * min(1 + (w + 7) // 8, 4096)))  # the start of its pixels
            files[name.rsplit(".", 1)[0] + ".png"] = b"\x89PNG\r\n\x1a\n" + ihdr + _png_chunk(b"IDAT", rows) + \
                _png_chunk(b"IEND", b"")
        elif kind == 5:
            files[name] = rng.choice([b"", b"not an image", b"\x89PNG\r\n\x1a\n", b"GIF89a", b"BM"])
        elif kind == 6:  # every image broken
            files = {k: mutate_bytes(rng, v)[:rng.randrange(1, 40)] for k, v in files.items()}
        else:
            files[name] = self.seeds["gif"][:6] + struct.pack("<HH", 65535, 65535) + self.seeds["gif"][10:] \
                if rng.random() < 0.5 else self.seeds["bmp"][:18] + struct.pack("<ii", 50_000, -50_000) + \
                self.seeds["bmp"][26:]
        return files

    def load(self, data, tmp):
        from webgrad.datasets import ImageFolder
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ImageFolder(str(_write_tree(data, tmp)), device="cpu")

    def check(self, value, data):
        n = len(value)
        if value.data.ndim != 4 or value.data.shape[0] != n or value.data.shape[1] != 3 or not _shape_ok(value.data):
            return f"data {value.data.shape} for {n} samples"
        if n != len(value.samples) or any(label not in (0, 1) for _, label in value.samples):
            return "samples and data disagree"
        return None


# --------------------------------------------------------------------- the dashboard's checkpoints
class AppCheckpoint(Target):
    name = "app"

    def __init__(self):
        from webgrad.apps.mnist import checkpoint
        self.ck = checkpoint
        wg.manual_seed(0)  # the seed file, hence every input, is the same in every process
        model = wg.nn.Linear(3, 2)
        opt = wg.optim.Adam(model.parameters(), lr=0.01)
        model(wg.randn(4, 3)).sum().backward()
        opt.step()
        self.state = {"config": {"model": "mlp", "epochs": 2, "batch_size": 8},
                      "model": model.state_dict(), "optimizer": opt.state_dict(),
                      "progress": {"step": 3, "epochs_done": 0, "steps_per_epoch": 10, "total_steps": 20,
                                   "elapsed_s": 1.5},
                      "history": {"loss": [[1, 2.5], [2, float("nan")]], "accuracy": []},
                      "rng": {"now": [1, 2], "epoch": None}, "scheduler": None, "scaler": None}
        self.summary = {"model": "mlp", "epoch": 1, "loss": 2.5}
        self.seed = checkpoint.pack(self.state, self.summary)

    def documented(self):
        return (self.ck.CheckpointError,)

    def resign(self, raw, edit):
        """The file with its header's metadata changed by edit(meta) and the digest written again."""
        n = int.from_bytes(raw[:8], "little")
        header = json.loads(raw[8:8 + n])
        meta = header["__metadata__"]
        meta.pop("sha256", None)
        edit(meta, header)
        data = raw[8 + n:]
        meta["sha256"] = self.ck._digest({k: v for k, v in meta.items() if isinstance(v, str)}, data)
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        return len(text).to_bytes(8, "little") + text + data

    def make(self, rng):
        kind = rng.randrange(6)
        if kind == 0:
            return mutate_bytes(rng, self.seed)
        state_json = json.loads(self.ck.json.dumps(self.ck._encode(self.state, "", {}), separators=(",", ":")))

        def hostile_value():
            return rng.choice([{"$t": 5}, {"$t": "nope"}, {"$items": 3}, {"$items": [[1]]}, {"$items": [[[], 1]]},
                               {"$float": "x"}, {"$float": 5}, {"$tuple": None}, {"$tuple": 7}, {"$x": 1},
                               {"$t": "a", "b": 1}, [1] * 3, None, "s", 2**80, -1, 1.5, {"": {}}, {"$t": ["x"]}])

        def edit_state(meta, header):
            doc = state_json
            if rng.random() < 0.2:
                meta["state"] = rng.choice(["[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000,
                                            "{", "null", "[]", '{"config": 1}', "1e999", "NaN"])
                return
            node = doc
            for _ in range(rng.randint(1, 3)):
                if isinstance(node, dict) and node:
                    key = rng.choice(list(node))
                    if rng.random() < 0.4 or not isinstance(node[key], (dict, list)):
                        node[key] = hostile_value()
                        break
                    node = node[key]
                elif isinstance(node, list) and node:
                    i = rng.randrange(len(node))
                    if rng.random() < 0.4 or not isinstance(node[i], (dict, list)):
                        node[i] = hostile_value()
                        break
                    node = node[i]
                else:
                    break
            meta["state"] = json.dumps(doc)

        def edit_meta(meta, header):
            key = rng.choice(["summary", "version", "format", "state"])
            meta[key] = rng.choice(["", "{", "[" * 50_000, "2", "1", "webgrad-checkpoint", "null", "{}", "x" * 100])

        def edit_tensors(meta, header):
            names = [k for k in header if k != "__metadata__"]
            if names:
                name = rng.choice(names)
                header[name] = rng.choice([{"dtype": "F32", "shape": [2**40], "data_offsets": [0, 0]},
                                           {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}, 3, None])

        edit = {1: edit_state, 2: edit_state, 3: edit_meta, 4: edit_tensors, 5: edit_state}[kind]
        try:
            return self.resign(self.seed, edit)
        except Exception:  # noqa: BLE001 - an edit that made the header unwritable: use the bytes as they are
            return mutate_bytes(rng, self.seed)

    def load(self, data, tmp):
        return self.ck.unpack(data, device="cpu", required=self.ck.RUN_KEYS)

    def check(self, value, data):
        state, summary = value
        if not isinstance(state, dict) or not all(k in state for k in self.ck.RUN_KEYS):
            return "a state without the run's keys"
        progress = state["progress"]
        counts = ("step", "epochs_done", "steps_per_epoch", "total_steps")
        if not isinstance(progress, dict) or not all(type(progress.get(k)) is int for k in counts):
            return f"a progress entry the run cannot use: {str(progress)[:80]}"
        for part in ("model", "optimizer", "config"):
            if not isinstance(state[part], dict):
                return f"state[{part!r}] is a {type(state[part]).__name__}"
        return None


TARGETS = {cls.name: cls for cls in (Safetensors, TorchZip, Idx, Cifar, Images, AppCheckpoint)}


# ===================================================================== running
def _canary():
    """None while webgrad still works after a load, else what broke (the process was poisoned). The cache of
    shapes is looked at as well: a key such as (3.0,) breaks the first later tensor of shape (3,) made in the
    process, which zeros(3) here cannot show once (3,) itself is cached."""
    from webgrad import _tensor
    bad = [shape for shape in _tensor._CONTIGUOUS if any(type(s) is not int for s in shape)]
    if bad:
        return f"webgrad's cache of shapes holds {bad[0]!r}: the next tensor of that shape fails"
    try:
        a, b = wg.zeros(3), wg.randn(3)
        if a.tolist() != [0.0, 0.0, 0.0] or tuple(b.shape) != (3,) or tuple(wg.ones(2, 3).shape) != (2, 3):
            return "webgrad.zeros/randn give wrong results after this load"
    except Exception as e:  # noqa: BLE001
        return f"webgrad.zeros(3) fails after this load: {type(e).__name__}: {e}"
    return None


def _repair():
    """Empty webgrad's cache of shapes: a poisoned one (the code before it refused non-integer keys) must
    not count against the inputs after the one that poisoned it."""
    from webgrad import _tensor
    _tensor._CONTIGUOUS.clear()


def make_input(target, seed, i):
    return target.make(random.Random(f"{seed}/{target.name}/{i}"))


def run_one(target, data, tmp):
    """(outcome, detail, milliseconds) of one input."""
    _repair()  # each input starts from an empty cache of shapes: what it puts there is its own doing
    start = time.perf_counter()
    try:
        value = target.load(data, tmp)
        outcome, detail = "value", None
    except target.documented() as e:
        outcome, detail = "refused", f"{type(e).__name__}: {str(e)[:300]}"
        value = None
    except RecursionError as e:  # before any other handler: a RecursionError leaves little stack to handle it
        outcome, detail, value = "unclean", f"RecursionError: {str(e)[:200]}", None
    except Exception as e:  # noqa: BLE001 - the point of the fuzzer
        tb = traceback.extract_tb(e.__traceback__)[-1]
        where = f"{Path(tb.filename).name}:{tb.lineno}"
        outcome, detail, value = "unclean", f"{type(e).__name__}: {str(e)[:200]} (at {where})", None
    ms = (time.perf_counter() - start) * 1e3
    if outcome == "value":
        try:
            bad = target.check(value, data)
        except Exception as e:  # noqa: BLE001 - a value the checks cannot even look at
            bad = f"the value cannot be checked ({type(e).__name__}: {str(e)[:120]})"
        if bad:
            outcome, detail = "silent", bad
    del value
    broken = _canary()
    if broken:
        outcome, detail = "silent", broken
        _repair()
    return outcome, detail, ms


class Report:
    def __init__(self, name):
        self.name = name
        self.counts = dict.fromkeys(OUTCOMES, 0)
        self.examples = {"unclean": [], "silent": []}
        self.slowest = (0.0, None)
        self.elapsed = 0.0

    def add(self, i, outcome, detail, ms):
        self.counts[outcome] += 1
        if outcome in self.examples:
            self.examples[outcome].append((i, detail))
        if ms > self.slowest[0]:
            self.slowest = (ms, i)

    @property
    def inputs(self):
        return sum(self.counts.values())


def fuzz(name, inputs, seed=0, tmp=None, start=0):
    """Run `inputs` inputs of reader `name` in this process; returns a Report."""
    target = TARGETS[name]()
    report = Report(name)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=tmp or scratch()) as folder:
        for i in range(start, start + inputs):
            data = make_input(target, seed, i)
            report.add(i, *run_one(target, data, folder))
            if i % 50 == 49:  # the readers write a folder per input
                for child in Path(folder).iterdir():
                    shutil.rmtree(child, ignore_errors=True)
    report.elapsed = time.perf_counter() - t0
    return report


def _child(args):
    """Run inputs [start, stop) and print one JSON line each (the parent restarts us after a crash)."""
    if args.memory_limit:
        import resource
        limit = int(args.memory_limit * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    target = TARGETS[args.reader]()
    with tempfile.TemporaryDirectory(dir=scratch()) as folder:
        for i in range(args.start, args.stop):
            print(json.dumps({"i": i, "start": True}), flush=True)
            outcome, detail, ms = run_one(target, make_input(target, args.seed, i), folder)
            print(json.dumps({"i": i, "outcome": outcome, "detail": detail, "ms": ms}), flush=True)
            if i % 50 == 49:
                for child in Path(folder).iterdir():
                    shutil.rmtree(child, ignore_errors=True)
    return 0


def fuzz_isolated(name, inputs, seed=0, timeout=60.0, memory_limit=None, progress=None):
    """As fuzz(), each input in a child process; a crash or an input over `timeout` s counts as unclean."""
    import selectors
    report = Report(name)
    t0 = time.perf_counter()
    i = 0
    while i < inputs:
        cmd = [sys.executable, "-m", "tools.fuzz_readers", "--child", "--readers", name, "--seed", str(seed),
               "--start", str(i), "--stop", str(inputs)]
        if memory_limit:
            cmd += ["--memory-limit", str(memory_limit)]
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        current, buffer = None, b""
        while True:
            if not sel.select(timeout):
                proc.kill()
                proc.wait()
                report.add(current, "unclean", f"no answer within {timeout:.0f} s", timeout * 1e3)
                i = current + 1
                break
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                code = proc.wait()
                if current is not None:
                    report.add(current, "unclean", f"the process died (exit status {code})", 0.0)
                    i = current + 1
                else:
                    i = inputs
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                msg = json.loads(line)
                if msg.get("start"):
                    current = msg["i"]
                    continue
                report.add(msg["i"], msg["outcome"], msg["detail"], msg["ms"])
                current = None
                if progress and msg["i"] % 500 == 499:
                    progress(report)
        sel.close()
        proc.stdout.close()
    report.elapsed = time.perf_counter() - t0
    return report


def table(reports):
    lines = ["| reader | inputs | value | refused | clean | unclean | silent | slowest (ms) | time (s) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in reports:
        c = r.counts
        lines.append(f"| {r.name} | {r.inputs:,} | {c['value']:,} | {c['refused']:,} | {c['value'] + c['refused']:,} "
                     f"| {c['unclean']:,} | {c['silent']:,} | {r.slowest[0]:,.0f} | {r.elapsed:,.1f} |")
    return "\n".join(lines)


def _available(name):
    for module in TARGETS[name].needs:
        try:
            __import__(module)
        except ImportError:
            return False
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=int, default=2000, help="inputs per reader (default 2,000)")
    ap.add_argument("--seed", default="0", help="the seed (any string); input i depends on (seed, reader, i)")
    ap.add_argument("--readers", default=",".join(TARGETS), help=f"comma-separated, of: {', '.join(TARGETS)}")
    ap.add_argument("--in-process", action="store_true", help="run the inputs in this process (no crash isolation)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds one input may take (isolated runs)")
    ap.add_argument("--memory-limit", type=float, default=4.0, help="GiB of address space for the child (0: none)")
    ap.add_argument("--examples", type=int, default=5, help="unclean and silent inputs to list per reader")
    ap.add_argument("--reproduce", metavar="READER:I", help="make input I of READER and run it here")
    ap.add_argument("--save", metavar="DIR", type=Path, help="with --reproduce: write the input into DIR")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--stop", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        args.reader = args.readers
        return _child(args)
    if args.reproduce:
        name, i = args.reproduce.split(":")
        target = TARGETS[name]()
        data = make_input(target, args.seed, int(i))
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            files = data if isinstance(data, dict) else {f"{name}-{i}.bin": data}
            for rel, raw in files.items():
                (args.save / rel).parent.mkdir(parents=True, exist_ok=True)
                (args.save / rel).write_bytes(raw)
            print(f"written under {args.save}: {', '.join(files)}")
        with tempfile.TemporaryDirectory(dir=scratch()) as tmp:
            print(run_one(target, data, tmp))
        return 0
    reports = []
    for name in args.readers.split(","):
        if not _available(name):
            print(f"{name}: skipped ({', '.join(TARGETS[name].needs)} not installed)", file=sys.stderr)
            continue
        if args.in_process:
            report = fuzz(name, args.inputs, args.seed)
        else:
            report = fuzz_isolated(name, args.inputs, args.seed, args.timeout, args.memory_limit or None,
                                   progress=lambda r: print(f"  {r.name}: {r.inputs:,} inputs ...", file=sys.stderr))
        reports.append(report)
        print(f"{name}: {report.counts} slowest {report.slowest[0]:.0f} ms (input {report.slowest[1]}), "
              f"{report.elapsed:.1f} s", file=sys.stderr)
        for kind in ("unclean", "silent"):
            for i, detail in report.examples[kind][:args.examples]:
                print(f"    {kind} {name}:{i}: {detail}", file=sys.stderr)
    print(table(reports))
    return 1 if any(r.counts["unclean"] or r.counts["silent"] for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
