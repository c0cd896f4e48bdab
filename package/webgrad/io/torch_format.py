"""PyTorch's checkpoint format (what torch.save writes since 1.6), both ways, without torch.

A checkpoint is a zip archive (stored, uncompressed) whose entries sit in one folder, `<name>/`:

    <name>/data.pkl      a pickle (protocol 2) of the saved object; each tensor in it is the call
                         torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)
                         whose storage is a persistent id ('storage', torch.FloatStorage, key, 'cpu', numel)
    <name>/data/<key>    the bytes of each storage (little-endian, packed)
    <name>/byteorder     "little";  <name>/version  "3"

Writing: the pickle is emitted opcode by opcode (a small emitter for dicts, OrderedDicts, lists, tuples,
strings, numbers, bools, None and tensors), so torch need not be installed and nothing of webgrad's own
classes ends up in the file: `torch.load(path, weights_only=True)` reads it. Records are aligned to 64
bytes as torch aligns them.

Reading: a restricted unpickler, like torch's weights_only=True. It builds only tensors (from the
storages and rebuild functions listed in _ALLOWED), OrderedDict and the pickle's own primitive types
(dict, list, tuple, str, bytes, numbers, bool, None); any other global (os.system, a class of the
saver's code) is refused before anything runs, with a message naming it. Dtypes webgrad lacks are
converted where no information is lost in practice (int64 -> int32 when every value fits, float16 and
bfloat16 -> float32); others are an error naming the dtype.
"""

import array
import io
import pickle
import struct
import sys
import zipfile
from collections import OrderedDict

from .. import devices, dtypes
from .._tensor import Tensor
from .._view import View

# webgrad dtype <-> torch storage class name
_STORAGE_OF = {dtypes.float32: "FloatStorage", dtypes.float64: "DoubleStorage", dtypes.int64: "LongStorage",
               dtypes.int32: "IntStorage", dtypes.uint8: "ByteStorage", dtypes.bool_: "BoolStorage"}
# storage classes a checkpoint may name -> (item size, how to read them)
_READ = {"FloatStorage": (4, dtypes.float32), "DoubleStorage": (8, dtypes.float64), "IntStorage": (4, dtypes.int32),
         "ByteStorage": (1, dtypes.uint8), "BoolStorage": (1, dtypes.bool_), "LongStorage": (8, dtypes.int64),
         "HalfStorage": (2, "float16"), "BFloat16Storage": (2, "bfloat16"), "ShortStorage": (2, "int16"),
         "CharStorage": (1, "int8")}
_ALIGN = 64


def is_torch_zip(raw):
    return raw[:4] == b"PK\x03\x04"


def is_legacy_torch(raw):
    # torch.save before 1.6 (and _use_new_zipfile_serialization=False): a bare pickle stream
    return raw[:2] == b"\x80\x02" and b"\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19" in raw[:32]


# ===================================================================== save
def save(obj, f, archive_name="archive"):
    """Write `obj` (nested dicts/lists/tuples of tensors, numbers, strings, bools and None) to `f`, a path
    or a binary file object, in torch.save's zip format."""
    storages = []  # (key, bytes) in pickling order; a tensor object saved twice is stored once
    pickled = _Emitter(storages).dump(obj)
    # every tensor was read back while pickling: a failure then leaves no half-written file
    if hasattr(f, "write"):
        _write_zip(f, archive_name, pickled, storages)
    else:
        with open(f, "wb") as out:
            _write_zip(out, archive_name, pickled, storages)


def _write_zip(out, name, pickled, storages):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as z:
        records = [("data.pkl", pickled), ("byteorder", b"little")]
        records += [(f"data/{key}", raw) for key, raw in storages]
        records += [("version", b"3\n")]
        for record, data in records:
            info = zipfile.ZipInfo(f"{name}/{record}", date_time=(1980, 1, 1, 0, 0, 0))
            # pad the local header's extra field so the data starts on a 64-byte boundary, as torch does
            header = 30 + len(info.filename.encode())
            pad = (-(buffer.tell() + header + 4)) % _ALIGN
            info.extra = struct.pack("<HH", 0xFB0F, pad) + b"Z" * pad
            z.writestr(info, data)
    out.write(buffer.getvalue())


class _Emitter:
    """Pickle protocol 2 for the vocabulary of checkpoints, written opcode by opcode."""

    def __init__(self, storages):
        self.storages = storages
        self.keys = {}  # id(tensor) -> storage key
        self.out = bytearray()

    def dump(self, obj):
        self.out += b"\x80\x02"
        self.emit(obj)
        self.out += b"."
        return bytes(self.out)

    def global_(self, module, name):
        self.out += b"c" + module.encode() + b"\n" + name.encode() + b"\n"

    def emit(self, obj):
        out = self.out
        if obj is None:
            out += b"N"
        elif obj is True or obj is False:
            out += b"\x88" if obj else b"\x89"
        elif isinstance(obj, int):
            if -2**31 <= obj < 2**31:
                out += b"J" + struct.pack("<i", obj)
            else:
                raw = obj.to_bytes((obj.bit_length() + 8) // 8, "little", signed=True)
                out += b"\x8a" + bytes([len(raw)]) + raw
        elif isinstance(obj, float):
            out += b"G" + struct.pack(">d", obj)
        elif isinstance(obj, str):
            raw = obj.encode("utf-8", "surrogatepass")
            out += b"X" + struct.pack("<I", len(raw)) + raw
        elif isinstance(obj, (bytes, bytearray)):
            # protocol 2 has no bytes opcode: pickle itself writes _codecs.encode(latin-1 text)
            self.global_("_codecs", "encode")
            self.emit((bytes(obj).decode("latin-1"), "latin1"))
            out += b"R"
        elif isinstance(obj, Tensor):
            self.tensor(obj)
        elif isinstance(obj, OrderedDict):
            self.global_("collections", "OrderedDict")
            out += b")R"
            self.items(obj)
        elif isinstance(obj, dict):
            out += b"}"
            self.items(obj)
        elif isinstance(obj, list):
            out += b"]"
            if obj:
                out += b"("
                for v in obj:
                    self.emit(v)
                out += b"e"
        elif isinstance(obj, tuple):
            out += b"("
            for v in obj:
                self.emit(v)
            out += b"t"
        elif isinstance(obj, dtypes.DType):
            self.global_("torch", {"bool": "bool"}.get(obj.name, obj.name))
        else:
            hint = "; pass model.state_dict()" if hasattr(obj, "state_dict") else ""
            raise TypeError(f"webgrad.save: cannot store a {type(obj).__name__} in a PyTorch checkpoint (it holds "
                            f"tensors, dicts, lists, tuples, strings, numbers, bools and None){hint}")

    def items(self, mapping):
        if mapping:
            self.out += b"("
            for k, v in mapping.items():
                self.emit(k)
                self.emit(v)
            self.out += b"u"

    def tensor(self, t):
        if t.dtype not in _STORAGE_OF:
            raise TypeError(f"webgrad.save: no PyTorch storage for {t.dtype}")
        key = self.keys.get(id(t))
        if key is None:
            key = self.keys[id(t)] = str(len(self.storages))
            self.storages.append((key, t.detach().contiguous()._bytes()))
        shape = tuple(t.shape)
        strides = tuple(View.contiguous_strides(shape))
        self.global_("torch._utils", "_rebuild_tensor_v2")
        self.out += b"("
        self.out += b"("  # the persistent id of the storage
        self.emit("storage")
        self.global_("torch", _STORAGE_OF[t.dtype])
        self.emit(key)
        self.emit("cpu")
        self.emit(t.numel())
        self.out += b"tQ"
        self.emit(0)
        self.emit(shape)
        self.emit(strides)
        self.emit(bool(t.requires_grad))
        self.global_("collections", "OrderedDict")
        self.out += b")R"  # backward hooks: an empty OrderedDict, as torch writes
        self.out += b"tR"


# ===================================================================== load
class _StorageType:
    def __init__(self, name):
        self.name = name


class _Storage:
    """A storage record of the archive, read when the first tensor needs it."""

    def __init__(self, type_name, raw):
        self.type_name, self.raw = type_name, raw


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None):
    return _Pending(storage, storage_offset, tuple(size), tuple(stride), bool(requires_grad))


def _rebuild_tensor(storage, storage_offset, size, stride):
    return _Pending(storage, storage_offset, tuple(size), tuple(stride), False)


def _rebuild_parameter(data, requires_grad, backward_hooks, *args):
    data.requires_grad = bool(requires_grad)
    return data


class _Pending:
    """A tensor of the checkpoint, built on the device once the whole pickle has been read and checked."""

    def __init__(self, storage, offset, size, stride, requires_grad):
        self.storage, self.offset, self.size, self.stride, self.requires_grad = \
            storage, offset, size, stride, requires_grad


# every global a checkpoint may name; anything else is refused (see the module doc)
_ALLOWED = {("collections", "OrderedDict"): OrderedDict,
            ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
            ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
            ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
            ("torch", "Size"): tuple,
            ("builtins", "set"): set, ("builtins", "frozenset"): frozenset, ("builtins", "complex"): complex,
            ("_codecs", "encode"): lambda text, encoding="utf-8": text.encode(encoding)}
_ALLOWED.update({("torch", name): _StorageType(name) for name in _READ})
_ALLOWED.update({("torch", d.name): d for d in dtypes.ALL})  # dtypes saved as values


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, data, records):
        super().__init__(io.BytesIO(data))
        self.records = records
        self.cache = {}

    def find_class(self, module, name):
        found = _ALLOWED.get((module, name))
        if found is None:
            raise pickle.UnpicklingError(
                f"webgrad.load: refused to load this PyTorch checkpoint: it references the global {module}.{name}, "
                "and webgrad reads only tensors, OrderedDicts and plain containers (like torch.load(weights_only="
                "True)); nothing was run. Re-save the file with tensors and plain dicts only (e.g. model.state_dict())")
        return found

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) >= 3 and pid[0] == "storage" and isinstance(pid[1], _StorageType)):
            raise pickle.UnpicklingError(f"webgrad.load: unexpected persistent id {pid!r} in a PyTorch checkpoint")
        type_name, key = pid[1].name, str(pid[2])
        storage = self.cache.get(key)
        if storage is None:
            raw = self.records.get(key)
            if raw is None:
                raise ValueError(f"PyTorch checkpoint: the record data/{key} is missing (truncated file?)")
            storage = self.cache[key] = _Storage(type_name, raw)
        return storage


def load(raw, device=None):
    """The object saved in a torch.save zip archive (bytes), with tensors as webgrad tensors on `device`."""
    try:
        z = zipfile.ZipFile(io.BytesIO(raw))
    except zipfile.BadZipFile as e:
        raise ValueError(f"PyTorch checkpoint (zip format detected): the archive is damaged ({e})") from None
    names = z.namelist()
    pkl = [n for n in names if n.endswith("data.pkl") and n.count("/") == 1]
    if not pkl:
        raise ValueError("a zip file without <name>/data.pkl: not a PyTorch checkpoint (torch.save's zip format)")
    prefix = pkl[0][:-len("data.pkl")]
    records = {n[len(prefix) + 5:]: z.read(n) for n in names if n.startswith(prefix + "data/")}
    byteorder = z.read(prefix + "byteorder").decode().strip() if prefix + "byteorder" in names else "little"
    if byteorder != "little":
        raise ValueError(f"PyTorch checkpoint: byte order {byteorder!r} is not supported (only little-endian)")
    obj = _RestrictedUnpickler(z.read(pkl[0]), records).load()
    dev = devices.get(device)
    built = {}
    return _materialise(obj, dev, built)


def _materialise(obj, dev, built):
    """Replace every _Pending in obj (recursively) by a webgrad tensor."""
    if isinstance(obj, _Pending):
        return _tensor_from(obj, dev, built)
    if isinstance(obj, OrderedDict):
        out = OrderedDict((k, _materialise(v, dev, built)) for k, v in obj.items())
        if hasattr(obj, "_metadata"):
            out._metadata = obj._metadata
        return out
    if isinstance(obj, dict):
        return {k: _materialise(v, dev, built) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_materialise(v, dev, built) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_materialise(v, dev, built) for v in obj)
    return obj


def _storage_values(storage):
    """(webgrad dtype, canonical bytes) for a storage, converting dtypes webgrad lacks."""
    item, kind = _READ[storage.type_name]
    raw = storage.raw
    if len(raw) % item:
        raise ValueError(f"PyTorch checkpoint: a {storage.type_name} record of {len(raw)} bytes is not a whole "
                         f"number of {item}-byte elements")
    if isinstance(kind, dtypes.DType):
        return kind, raw
    if kind in ("int16", "int8"):
        values = array.array({"int16": "h", "int8": "b"}[kind], raw)
        if sys.byteorder != "little":
            values.byteswap()
        out = array.array("i", values)
    elif kind == "float16":
        out = array.array("f", struct.unpack(f"<{len(raw) // 2}e", raw))
    else:  # bfloat16: the top half of a float32
        halves = array.array("H", raw)
        if sys.byteorder != "little":
            halves.byteswap()
        out = array.array("I", (h << 16 for h in halves))
    if sys.byteorder != "little":
        out.byteswap()
    return (dtypes.int32 if kind.startswith("int") else dtypes.float32), out.tobytes()


def _tensor_from(p, dev, built):
    storage = built.get(id(p.storage))
    if storage is None:
        dtype, raw = _storage_values(p.storage)
        numel = len(raw) // dtype.itemsize
        storage = built[id(p.storage)] = (dev.backend.from_bytes(raw, dtype), dtype, numel)
    data, dtype, numel = storage
    span = 1 + sum((n - 1) * s for n, s in zip(p.size, p.stride)) if all(p.size) else 0
    if p.offset < 0 or any(s < 0 for s in p.stride) or p.offset + span > numel:
        raise ValueError(f"PyTorch checkpoint: a tensor of size {list(p.size)}, stride {list(p.stride)} at offset "
                         f"{p.offset} does not fit its storage of {numel} elements")
    view = Tensor._make(View(data, p.size, p.stride, p.offset, dtype), dev)
    # each loaded tensor owns its memory: the first whole-storage tensor takes the storage, views are copied
    first = id(p.storage) not in built.setdefault("used", set())
    built["used"].add(id(p.storage))
    t = view if first and view.is_contiguous() and numel == view.numel() else view.clone()
    if p.requires_grad:
        t.requires_grad_(True)
    return t
