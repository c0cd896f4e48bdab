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

A whole-module file (`torch.save(model, f)`, or any object beyond those plain values) is what torch.save makes
of it too: a pickle of the objects themselves, here webgrad's (`webgrad.nn.linear.Linear`, the script's own
`model.TransformerModel`, ...), each referenced by its module and name, with the tensors in it written as above
(torch._utils._rebuild_tensor_v2 / _rebuild_parameter over the archive's storages; their location is their
device, "cpu" or "webgpu"). Loading one imports those modules and runs the classes' code: only
load_trusted() does that (torch.load(weights_only=False), for files the user trusts), or load() for the classes
the user allowlisted (torch.serialization.add_safe_globals). The file loads in webgrad where the same modules
exist; real torch cannot rebuild webgrad's classes, so exchange weights with it through state_dict().

Reading: a pickle machine of webgrad's own (unpickler.py) reads what torch.load(weights_only=True)
reads: tensors (from the storages and rebuild functions listed in _ALLOWED), OrderedDict and the pickle's
own plain types (dict, list, tuple, set, str, bytes, numbers, bool, None); any other global (os.system, a
class of the saver's code) is refused before anything runs, with a message naming it. Records are read
only when a tensor uses them, after a check of their declared size against the load's budget (deflated
records included: a zip bomb is refused before it is inflated). Dtypes webgrad lacks are converted where
no information is lost in practice (float16 -> float32; bfloat16, int16 and int8 keep their dtype on every
device); int64 loads as int64; others are an error naming
the dtype. Every problem of the file raises UnpicklingError (see
load()). load_trusted() is the separate, explicit path for whole-module files: Python's own Unpickler, which
runs what the file names, with torch's names mapped to webgrad's (torch.nn.modules.linear.Linear is
webgrad's Linear) and the same archive checks.
"""

import array
import importlib
import io
import pickle
import re
import struct
import sys
import types
import zipfile
import zlib
from collections import OrderedDict

from .. import devices, dtypes
from .._tensor import Tensor
from .._view import View
from .unpickler import TORCH_OBJECT_OPCODES, TORCH_OPCODES, Refused, Unpickler, UnpicklingError, short

# webgrad dtype <-> torch storage class name
_STORAGE_OF = {dtypes.float32: "FloatStorage", dtypes.float64: "DoubleStorage", dtypes.int64: "LongStorage",
               dtypes.int32: "IntStorage", dtypes.uint8: "ByteStorage", dtypes.bool_: "BoolStorage",
               dtypes.complex64: "ComplexFloatStorage", dtypes.bfloat16: "BFloat16Storage",
               dtypes.int16: "ShortStorage", dtypes.int8: "CharStorage"}
# storage classes a checkpoint may name -> (item size, how to read them)
_READ = {"FloatStorage": (4, dtypes.float32), "DoubleStorage": (8, dtypes.float64), "IntStorage": (4, dtypes.int32),
         "ByteStorage": (1, dtypes.uint8), "BoolStorage": (1, dtypes.bool_), "LongStorage": (8, dtypes.int64),
         "HalfStorage": (2, "float16"), "BFloat16Storage": (2, dtypes.bfloat16), "ShortStorage": (2, dtypes.int16),
         "CharStorage": (1, dtypes.int8), "ComplexFloatStorage": (8, dtypes.complex64)}
_ALIGN = 64


def is_torch_zip(raw):
    return raw[:4] == b"PK\x03\x04"


def is_legacy_torch(raw):
    # torch.save before 1.6 (and _use_new_zipfile_serialization=False): a bare pickle stream
    return raw[:2] == b"\x80\x02" and b"\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19" in raw[:32]


# ===================================================================== save
def save(obj, f, archive_name="archive"):
    """Write `obj` to `f`, a path or a binary file object, in torch.save's zip format: nested dicts/lists/tuples
    of tensors, numbers, strings, bools and None as a checkpoint any torch.load(weights_only=True) reads; any
    other object (a whole nn.Module) as a pickle of webgrad's objects (see the module doc)."""
    storages = []  # (key, bytes) in pickling order; a tensor object saved twice is stored once
    try:
        pickled = _Emitter(storages).dump(obj)
    except _NotData:
        storages = []
        out = io.BytesIO()
        _ObjectPickler(out, storages).dump(obj)
        pickled = out.getvalue()
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
            if type(obj) is not Tensor and _user_subclass(obj):
                raise _NotData(type(obj).__name__)  # its class and attributes go with it, in a whole-object pickle
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
            raise _NotData(type(obj).__name__)

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


class _NotData(Exception):
    """An object the checkpoint emitter does not write: the whole object is pickled instead."""


class _TorchName:
    """A global written under PyTorch's name (torch._utils._rebuild_tensor_v2, torch.FloatStorage): a name in the
    pickle, never called here."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):
        raise TypeError(f"{self.module}.{self.name} is a name written into a pickle")


_TORCH_NAMES = {}


def _torch_name(module, name):
    return _TORCH_NAMES.setdefault((module, name), _TorchName(module, name))


class _StorageRef:
    """A tensor's storage in a whole-object pickle: written as its persistent id, its bytes as a record."""

    def __init__(self, key, stype, numel, location):
        self.key, self.stype, self.numel, self.location = key, stype, numel, location


# where functions made at import (the op table's activations) are found by name, for a pickle's reference
_NAMESPACES = ("webgrad.nn.functional", "webgrad", "webgrad.special", "webgrad.linalg", "webgrad.fft")


def global_name(obj, name=None):
    """(module, qualified name) under which a pickle references `obj` (a class or function): where it is
    defined, or else the public namespace that holds it (webgrad.nn.functional.relu is made by the op table in
    webgrad.ops.elementwise, and found as webgrad.nn.functional's relu); None where neither finds it."""
    module_name = getattr(obj, "__module__", None)
    qualname = name or getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if module_name and qualname:
        found = sys.modules.get(module_name)
        for part in qualname.split("."):
            found = getattr(found, part, None)
        if found is obj:
            return module_name, qualname
    short_name = getattr(obj, "__name__", None)
    if short_name:
        for namespace in _NAMESPACES:
            module = sys.modules.get(namespace)
            held = getattr(module, short_name, None) if module is not None else None
            # (or what holds it in its place: a Tensor subclass's dispatching wrapper, webgrad/overrides.py)
            if held is not None and (held is obj or getattr(held, "__wrapped__", None) is obj):
                return namespace, short_name
    return None


class _ObjectPickler(pickle._Pickler):
    """Pickle protocol 2 of any object, as torch.save writes one: tensors as torch's rebuild calls over storages
    (persistent ids), dtypes as torch.float32 and the like, everything else by Python's rules (classes and
    functions by reference). The pure-Python pickler, whose save_global can write torch's names without torch."""

    dispatch = dict(pickle._Pickler.dispatch)  # functions through this class's save_global

    def __init__(self, file, storages):
        super().__init__(file, protocol=2, fix_imports=False)
        self.storages = storages

    def persistent_id(self, obj):
        if type(obj) is _StorageRef:
            return ("storage", _torch_name("torch", obj.stype), obj.key, obj.location, obj.numel)
        return None

    def reducer_override(self, obj):
        if isinstance(obj, (_TorchName, dtypes.DType)):
            return obj.name  # a str: pickle calls save_global(obj, obj.name)
        if isinstance(obj, Tensor):
            from ..nn.parameter import Parameter, UninitializedTensorMixin
            if isinstance(obj, UninitializedTensorMixin):  # a lazy module's placeholder: torch's own reduction
                return (_torch_name("torch.nn.parameter", type(obj).__name__), (bool(obj.requires_grad),))
            if _user_subclass(obj):  # torch's reduction of a Tensor subclass: the tensor, its class, its __dict__
                return (_torch_name("torch._tensor", "_rebuild_from_type_v2"),
                        (_torch_name("torch._utils", "_rebuild_tensor_v2"), type(obj), self.tensor_args(obj),
                         dict(getattr(obj, "__dict__", {}))))
            if isinstance(obj, Parameter):
                return (_torch_name("torch._utils", "_rebuild_parameter"),
                        (obj.detach(), bool(obj.requires_grad), OrderedDict()))
            return (_torch_name("torch._utils", "_rebuild_tensor_v2"), self.tensor_args(obj))
        return NotImplemented

    def tensor_args(self, t):
        if t.dtype not in _STORAGE_OF:
            raise TypeError(f"webgrad.save: no PyTorch storage for {t.dtype}")
        key = str(len(self.storages))
        self.storages.append((key, t.detach().contiguous()._bytes()))
        shape = tuple(t.shape)
        storage = _StorageRef(key, _STORAGE_OF[t.dtype], t.numel(), t.device.type)
        return (storage, 0, shape, tuple(View.contiguous_strides(shape)), bool(t.requires_grad), OrderedDict())

    def save_global(self, obj, name=None):
        if isinstance(obj, _TorchName):
            where = obj.module, obj.name
        elif isinstance(obj, dtypes.DType):
            where = "torch", obj.name
        else:
            where = global_name(obj, name)
            if where is None:
                return super().save_global(obj, name)  # raises PicklingError naming it
        self.write(pickle.GLOBAL + where[0].encode("utf-8") + b"\n" + where[1].encode("utf-8") + b"\n")
        self.memoize(obj)

    dispatch[types.FunctionType] = save_global


# ===================================================================== load
# A checkpoint is read in three steps, each bounded:
# 1. the zip's directory: every record in one folder, named once; version and byte order as torch reads them;
# 2. data.pkl, through a pickle machine of its own (unpickler.py) that builds only plain values and the
#    _Pending records of tensors, each checked as it is made (integer sizes, strides and offset, in bounds);
# 3. the tensors, whose records are read (inflated, when a zip stores them deflated) only now, only if a
#    tensor uses them, each checked against the archive's budget of bytes before it is read.
MAX_PICKLE = 64 * 2**20  # bytes of data.pkl: a checkpoint's pickle is kilobytes to a few megabytes
MIN_BUDGET = 64 * 2**20  # bytes a load may inflate and copy, at least; and BUDGET_RATIO times the file's size
BUDGET_RATIO = 32
MAX_DEPTH = 100  # containers in containers (a checkpoint nests 3 to 5 levels)
MAX_DIMS = 64
VERSIONS = range(1, 11)  # the format versions torch 2.x reads
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, OSError, ValueError,
               RuntimeError, struct.error, zlib.error, OverflowError, KeyError, IndexError)


class _Storage:
    """A record of the archive that tensors view: read when the first tensor is built."""

    def __init__(self, stype, key, numel, location="cpu"):
        self.stype, self.key, self.numel, self.location = stype, key, numel, location


class _Pending:
    """A tensor of the checkpoint, built on the device once the whole pickle has been read."""

    def __init__(self, storage, offset, size, stride, requires_grad):
        self.storage, self.offset, self.size, self.stride, self.requires_grad = \
            storage, offset, size, stride, requires_grad


def _ints(value, what):
    """A size or stride: a tuple (or list, or torch.Size) of Python ints in [0, 2**63) (int64, as torch reads
    them; bool is not an int here)."""
    if type(value) not in (tuple, list):
        raise ValueError(f"a tensor's {what} must be a tuple of ints, got {short(value)}")
    if len(value) > MAX_DIMS:
        raise ValueError(f"a tensor's {what} has {len(value)} dims, more than {MAX_DIMS}")
    for v in value:
        if not _index(v):
            raise ValueError(f"a tensor's {what} must hold ints in [0, 2**63), got {short(v)} in "
                             f"{short(tuple(value), 120)}")
    return tuple(value)


def _index(v):
    return type(v) is int and 0 <= v < 2**63


def _rebuild_tensor(storage, storage_offset, size, stride, requires_grad=False):
    if not isinstance(storage, _Storage):
        raise ValueError(f"a tensor's storage must be a record of the archive, got {short(storage)}")
    if not _index(storage_offset):
        raise ValueError(f"a tensor's storage offset must be an int in [0, 2**63), got {short(storage_offset)}")
    size, stride = _ints(size, "size"), _ints(stride, "stride")
    if len(size) != len(stride):
        raise ValueError(f"a tensor's size {list(size)} and stride {list(stride)} differ in length")
    if type(requires_grad) is not bool:
        raise ValueError(f"requires_grad must be a bool, got {short(requires_grad)}")
    if requires_grad and not storage.stype.floating:
        raise ValueError(f"only floating point tensors can require gradients, this one is a {storage.stype.name}")
    # the elements a view reaches, checked against its storage's length (torch's check: a view with a zero
    # dim reaches nothing, whatever its offset)
    if all(size):
        span = 1 + sum((n - 1) * s for n, s in zip(size, stride))
        if storage_offset + span > storage.numel:
            raise ValueError(f"a tensor of size {list(size)}, stride {list(stride)} at offset {storage_offset} "
                             f"reaches element {storage_offset + span - 1} of a storage of {storage.numel}")
    # a dim of size 1 never steps: its stride (any int, to torch) is replaced by the contiguous one
    stride = tuple(c if n == 1 else s for n, s, c in zip(size, stride, View.contiguous_strides(size)))
    return _Pending(storage, storage_offset, size, stride, requires_grad)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks, metadata=None):
    if not isinstance(backward_hooks, dict):
        raise ValueError(f"a tensor's backward hooks must be an OrderedDict, got {short(backward_hooks)}")
    if metadata:  # torch writes it only for conjugate or negative views of complex tensors
        raise ValueError(f"a tensor with metadata {short(metadata)}: webgrad has no conjugate or negative views "
                         "of complex tensors")
    return _rebuild_tensor(storage, storage_offset, size, stride, requires_grad)


def _rebuild_parameter(data, requires_grad, backward_hooks):
    if not isinstance(data, _Pending):
        raise ValueError(f"a Parameter's data must be a tensor, got {short(data)}")
    if type(requires_grad) is not bool:
        raise ValueError(f"requires_grad must be a bool, got {short(requires_grad)}")
    if requires_grad and not data.storage.stype.floating:
        raise ValueError(f"only floating point tensors can require gradients, this one is a {data.storage.stype.name}")
    data.requires_grad = requires_grad
    return data


def _ordered_dict(items=()):
    if type(items) not in (list, tuple) or any(type(i) not in (list, tuple) or len(i) != 2 for i in items):
        raise ValueError(f"OrderedDict() takes a list of (key, value) pairs here, got {short(items)}")
    return OrderedDict((k, v) for k, v in items)


def _size(dims=()):
    return _ints(dims, "torch.Size")


def _set(items=()):
    if type(items) not in (list, tuple, set):
        raise ValueError(f"set() takes a list here, got {short(items)}")
    return set(items)


def _complex(real=0.0, imag=0.0):
    if type(real) not in (int, float) or type(imag) not in (int, float):
        raise ValueError(f"complex() takes two numbers here, got {short(real)} and {short(imag)}")
    return complex(real, imag)


def _encode(text, encoding="utf-8"):
    # protocol 2 has no bytes opcode: pickle writes bytes as _codecs.encode(their latin-1 text, "latin1")
    if type(text) is not str or encoding not in ("latin1", "latin-1"):
        raise ValueError(f"_codecs.encode() is read for bytes (text, 'latin1'), got {short(text)}, {short(encoding)}")
    return text.encode("latin-1")


class _ReadAs(Refused):
    """torch.FloatStorage and friends: named in persistent ids, never called; how their records are read."""

    def __init__(self, name, item, kind):
        super().__init__(f"torch.{name}")
        self.short, self.item, self.kind = name, item, kind
        self.floating = kind in ("float16", "bfloat16") or (isinstance(kind, dtypes.DType) and (
            kind.is_floating or kind.is_complex))


# every global a checkpoint may name (as torch.load(weights_only=True) allows them); anything else is refused
_ALLOWED = {("collections", "OrderedDict"): _ordered_dict,
            ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
            ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
            ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
            ("torch", "Size"): _size, ("builtins", "set"): _set, ("builtins", "complex"): _complex,
            ("_codecs", "encode"): _encode}
_ALLOWED.update({("torch", name): _ReadAs(name, item, kind) for name, (item, kind) in _READ.items()})
_ALLOWED.update({("torch", d.name): d for d in dtypes.ALL})  # dtypes saved as values


def _find_class(module, name):
    found = _ALLOWED.get((module, name))
    if found is None:
        raise ValueError(
            f"refused to load this PyTorch checkpoint: it references the global {module}.{name}, and webgrad reads "
            "only tensors, OrderedDicts and plain containers (like torch.load(weights_only=True)); nothing was run. "
            "Re-save the file with tensors and plain dicts only (e.g. model.state_dict())")
    return found


def _build(obj, state):
    # torch.save pickles a state_dict as OrderedDict() + items + BUILD({'_metadata': ...}), the modules' versions
    if type(obj) is not OrderedDict or type(state) is not dict or set(state) - {"_metadata"}:
        raise ValueError(f"BUILD is read for a state_dict's _metadata only, got {short(state)} for {short(obj)}")
    obj.__dict__.update(state)


class _Archive:
    """The records of a checkpoint's zip, read on demand under a budget of bytes."""

    def __init__(self, raw):
        self.budget = max(MIN_BUDGET, BUDGET_RATIO * len(raw))
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(raw))
            infos = self.zip.infolist()
        except _ZIP_ERRORS as e:
            raise UnpicklingError(f"PyTorch checkpoint (zip format detected): the archive is damaged ({e})") from None
        if not infos:
            raise UnpicklingError("PyTorch checkpoint: the zip archive is empty")
        first = infos[0].filename
        if "/" not in first:
            raise UnpicklingError(f"PyTorch checkpoint: the record {short(first)} is not in a folder (torch.save "
                                  "writes every record under <name>/)")
        self.prefix = first[:first.index("/") + 1]
        self.records = {}
        names = self.directory(raw, infos)
        for info, name in zip(infos, names):
            # what miniz (torch's zip reader) checks of every entry before it reads any, and zipfile does not
            where = f"PyTorch checkpoint: the record {short(info.filename)}"
            try:
                name.decode("utf-8")
            except UnicodeDecodeError:
                raise UnpicklingError(f"{where} has a name that is not UTF-8 (torch reads names as UTF-8)") from None
            if info.volume:
                raise UnpicklingError(f"{where} is on disk {info.volume} of a multi-disk archive")
            if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
                raise UnpicklingError(f"{where} is stored, yet its sizes differ ({info.compress_size} bytes stored, "
                                      f"{info.file_size} in all): a corrupt directory")
            if info.header_offset + 30 + info.compress_size > len(raw):
                raise UnpicklingError(f"{where} runs past the end of the {len(raw)}-byte file (truncated?)")
            if not info.filename.startswith(self.prefix):
                raise UnpicklingError(f"{where} is outside the archive's folder {short(self.prefix)}")
            if info.filename in self.records:
                raise UnpicklingError(f"{where} is in the archive twice")
            self.records[info.filename] = info
        version = self.read(".data/version", small=True) if self.has(".data/version") else \
            self.read("version", small=True)
        number = re.match(rb"\s*[+-]?\d{1,18}", version)
        if number is None or int(number.group()) not in VERSIONS:
            raise UnpicklingError(f"PyTorch checkpoint: format version {short(version)}, and torch reads versions "
                                  f"{VERSIONS.start} to {VERSIONS.stop - 1}")
        if self.has("byteorder"):
            order = self.read("byteorder", small=True)
            if order != b"little":
                raise UnpicklingError(f"PyTorch checkpoint: byte order {short(order)} is not supported (only "
                                      "little-endian files, what torch.save writes on every common machine)")

    def directory(self, raw, infos):
        """The names of the zip's central directory as stored, after checking that its entries fill it exactly
        (zipfile reads past an entry that overruns the directory, and cuts a name at a NUL byte)."""
        pos, names = self.zip.start_dir, []
        for _ in infos:
            if raw[pos:pos + 4] != b"PK\x01\x02":
                raise UnpicklingError("PyTorch checkpoint: the zip's central directory is damaged")
            n, m, k = struct.unpack_from("<HHH", raw, pos + 28)
            names.append(raw[pos + 46:pos + 46 + n])
            pos += 46 + n + m + k
        if raw[pos:pos + 4] not in (b"PK\x05\x06", b"PK\x06\x06") or any(b"\x00" in name for name in names):
            raise UnpicklingError("PyTorch checkpoint: the zip's central directory is damaged (an entry overruns it, "
                                  "or a name holds a NUL byte)")
        if raw[pos:pos + 4] == b"PK\x05\x06":
            disk, first, here, total = struct.unpack_from("<HHHH", raw, pos + 4)
            if (disk, first) not in ((0, 0), (1, 1)) or here != total or total != len(infos):
                raise UnpicklingError(f"PyTorch checkpoint: the zip's end record describes a multi-disk archive, or "
                                      f"{here} and {total} entries for the {len(infos)} of its directory")
        return names

    def has(self, name):
        return self.prefix + name in self.records

    def info(self, name):
        info = self.records.get(self.prefix + name)
        if info is None:
            raise UnpicklingError(f"PyTorch checkpoint: the record {self.prefix}{name} is missing (truncated file?)")
        return info

    def take(self, nbytes, what):
        if nbytes > self.budget:
            raise UnpicklingError(f"PyTorch checkpoint: {what} needs {nbytes} bytes, over what is left of the load's "
                                  f"budget ({self.budget} bytes: {BUDGET_RATIO} times the file's size, at least "
                                  f"{MIN_BUDGET >> 20} MiB); a decompression bomb, or a checkpoint of views far larger "
                                  "than its data")
        self.budget -= nbytes

    def read(self, name, size=None, small=False):
        """The bytes of a record, checked before they are inflated: its method, its declared size."""
        info = self.info(name)
        where = f"the record {info.filename}"
        if info.flag_bits & 1:
            raise UnpicklingError(f"PyTorch checkpoint: {where} is encrypted")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise UnpicklingError(f"PyTorch checkpoint: {where} is compressed with zip method {info.compress_type}; "
                                  "torch.save stores records, and torch reads them stored or deflated")
        if size is not None and info.file_size != size:
            raise UnpicklingError(f"PyTorch checkpoint: {where} holds {info.file_size} bytes, and its storage needs "
                                  f"{size}")
        if small and info.file_size > 1024:
            raise UnpicklingError(f"PyTorch checkpoint: {where} declares {info.file_size} bytes, it holds a word")
        self.take(info.file_size, where)
        try:
            data = self.zip.read(info)
        except _ZIP_ERRORS as e:
            raise UnpicklingError(f"PyTorch checkpoint: {where} is damaged ({e})") from None
        if len(data) != info.file_size:
            raise UnpicklingError(f"PyTorch checkpoint: {where} holds {len(data)} bytes, its header says "
                                  f"{info.file_size}")
        return data


def _open(raw):
    """The archive of a checkpoint's bytes and its data.pkl, checked (see _Archive)."""
    if not is_torch_zip(raw):
        raise UnpicklingError("not a PyTorch checkpoint: torch.save's zip format starts with PK\\x03\\x04")
    archive = _Archive(raw)
    info = archive.info("data.pkl")
    if info.file_size > MAX_PICKLE:
        raise UnpicklingError(f"PyTorch checkpoint: data.pkl declares {info.file_size} bytes, over the "
                              f"{MAX_PICKLE >> 20} MiB a checkpoint's pickle may hold")
    return archive, archive.read("data.pkl")


def _storage_loader(archive):
    """persistent_load for the archive's storages: each id checked against its record."""
    storages = {}

    def persistent_load(pid):
        if type(pid) is not tuple or len(pid) != 5 or pid[0] != "storage":
            raise ValueError(f"a persistent id {short(pid, 120)}; torch.save writes ('storage', storage type, key, "
                             "location, numel)")
        _, stype, key, location, numel = pid
        if not isinstance(stype, _ReadAs):
            raise ValueError(f"a storage of type {short(stype)}: webgrad reads {', '.join(_READ)}")
        if type(key) is not str or type(location) is not str or not _index(numel):
            raise ValueError(f"a persistent id {short(pid, 120)}: key and location must be strings, numel an int "
                             "in [0, 2**63)")
        storage = storages.get(key)
        if storage is None:
            nbytes = numel * stype.item
            found = archive.info("data/" + key).file_size
            if found != nbytes:
                raise ValueError(f"the record data/{key} holds {found} bytes, and its storage of {numel} "
                                 f"{stype.short} elements needs {nbytes}")
            storage = storages[key] = _Storage(stype, key, numel, location)
        elif storage.stype is not stype or storage.numel != numel:
            raise ValueError(f"the record data/{key} is read as {storage.numel} {storage.stype.short} elements and as "
                             f"{numel} {stype.short} elements")
        return storage

    return persistent_load


def weights_only_message(full_path):
    """PyTorch's message (torch.load with weights_only=True) for a global outside the allowed ones."""
    if full_path.startswith("builtins."):  # torch names builtins bare: GLOBAL getattr
        full_path = full_path[len("builtins."):]
    full_path = full_path if len(full_path) <= 120 else full_path[:120] + "..."  # a hostile file's name, cut
    return ("Weights only load failed. This file can still be loaded, to do so you have two options, do those steps "
            "only if you trust the source of the checkpoint. \n\t(1) In PyTorch 2.6, we changed the default value of "
            "the `weights_only` argument in `torch.load` from `False` to `True`. Re-running `torch.load` with "
            "`weights_only` set to `False` will likely succeed, but it can result in arbitrary code execution. Do it "
            "only if you got the file from a trusted source.\n\t(2) Alternatively, to load with `weights_only=True` "
            "please check the recommended steps in the following error message.\n\tWeightsUnpickler error: "
            f"Unsupported global: GLOBAL {full_path} was not an allowed global by default. Please use "
            f"`torch.serialization.add_safe_globals([{full_path}])` or the `torch.serialization.safe_globals("
            f"[{full_path}])` context manager to allowlist this global if you trust this class/function.\n\nCheck "
            "the documentation of torch.load to learn more about types accepted by default with weights_only "
            "https://pytorch.org/docs/stable/generated/torch.load.html.")


def load(raw, device=None, allowed=None):
    """The object saved in a torch.save zip archive (bytes), with tensors as webgrad tensors on `device`.

    allowed: {"module.name": object} of the globals the user allowlisted (torch.serialization.add_safe_globals),
    read besides the default ones as torch.load(weights_only=True) reads them: such classes are made (NEWOBJ) and
    given their state (BUILD: __setstate__, or the instance's __dict__), and such functions called (REDUCE); the
    tensors of the file are then built as they are read (parameters as nn.Parameter), and a storage left outside
    a tensor is still refused. Without it, only the default globals: tensors and plain containers.

    Raises UnpicklingError (both a pickle.UnpicklingError, as torch.load(weights_only=True) raises, and a
    ValueError) naming the problem for any file it cannot read: a damaged archive, a pickle that is cut,
    corrupt or names a global outside the allowed list (with PyTorch's message), a tensor that does not fit its
    storage, a record over the load's budget of bytes. TypeError only where the device cannot hold a dtype
    (float64 on WebGPU)."""
    archive, pickled = _open(raw)
    builder = _Builder(archive, devices.get(device), follow_location=device is None and bool(allowed))
    refused = []
    objects = {}  # id -> the allowlisted objects, whose classes may be made and given state
    if allowed:
        objects = {id(v): v for v in allowed.values()}
        eager = _eager_rebuilds(builder)

    def find_class(module, name):
        found = _ALLOWED.get((module, name))
        if found is None and allowed:
            found = allowed.get(f"{module}.{name}")
        if found is None:
            refused.append(f"{module}.{name}")
            raise ValueError(f"refused to load this PyTorch checkpoint: it references the global {module}.{name}")
        if allowed:
            return eager.get(found, found)
        return found

    classes = [v for v in objects.values() if isinstance(v, type)]
    try:
        obj = Unpickler(pickled, find_class, _storage_loader(archive), _object_builder(classes) if allowed else _build,
                        encoding="utf-8", opcodes=TORCH_OBJECT_OPCODES if allowed else TORCH_OPCODES,
                        what=f"PyTorch checkpoint: {archive.prefix}data.pkl", classes=classes).load()
    except UnpicklingError:
        if refused:
            raise UnpicklingError(weights_only_message(refused[-1])) from None
        raise
    if allowed:
        builder.check_objects(obj, 0, set(classes), objects)
        return obj
    return builder.walk(obj, 0)


def _eager_rebuilds(builder):
    """The tensor rebuild functions of a load with allowlisted objects: each checks as _rebuild_tensor_v2 does,
    then builds the tensor at once (an object's __setstate__ may use it)."""

    def rebuild_tensor_v2(*args):
        return builder.tensor(_rebuild_tensor_v2(*args))

    def rebuild_tensor(*args):
        return builder.tensor(_rebuild_tensor(*args))

    def rebuild_parameter(data, requires_grad, backward_hooks=None):
        from ..nn.parameter import Parameter
        if not isinstance(data, Tensor):
            raise ValueError(f"a Parameter's data must be a tensor, got {short(data)}")
        if type(requires_grad) is not bool:
            raise ValueError(f"requires_grad must be a bool, got {short(requires_grad)}")
        if requires_grad and not data.dtype.is_floating:
            raise ValueError(f"only floating point tensors can require gradients, this one is a {data.dtype.name}")
        if backward_hooks is not None and not isinstance(backward_hooks, dict):
            raise ValueError(f"a Parameter's backward hooks must be an OrderedDict, got {short(backward_hooks)}")
        return Parameter(data, requires_grad)

    return {_rebuild_tensor_v2: rebuild_tensor_v2, _rebuild_tensor: rebuild_tensor,
            _rebuild_parameter: rebuild_parameter}


def _object_builder(classes):
    """BUILD as torch's weights-only unpickler does it: an OrderedDict's _metadata, or the state of an instance
    of an allowlisted class (its __setstate__, or its __dict__ and slots updated)."""
    classes = frozenset(classes)

    def build(obj, state):
        if type(obj) is OrderedDict:
            return _build(obj, state)
        if type(obj) not in classes:
            raise ValueError(f"Can only build Tensor, Parameter, OrderedDict or types allowlisted via "
                             f"`add_safe_globals`, but got {type(obj)}")
        setstate = getattr(obj, "__setstate__", None)
        if setstate is not None:
            return setstate(state)
        slots = None
        if type(state) is tuple and len(state) == 2:
            state, slots = state
        for part in (state, slots):
            if part is not None and (type(part) is not dict or any(type(k) is not str for k in part)):
                raise ValueError(f"the state of a {type(obj).__name__} must be a dict of names, got {short(part)}")
        if state:
            obj.__dict__.update(state)
        for k, v in (slots or {}).items():
            setattr(obj, k, v)

    return build


def _user_subclass(t):
    """Whether `t` is an instance of a user's Tensor subclass (not one of webgrad's own tensor classes)."""
    return (type(t).__module__ or "").split(".")[0] != "webgrad"


def _rebuild_from_type_v2(func, new_type, args, state):
    """torch._tensor._rebuild_from_type_v2: the tensor func(*args) rebuilds, as `new_type` with `state` (its
    __dict__, or a (__dict__, slots) pair) set on it."""
    ret = func(*args)
    if type(ret) is not new_type:
        ret = ret.as_subclass(new_type)
    if getattr(ret.__class__, "__setstate__", None) is not getattr(Tensor, "__setstate__", None):
        ret.__setstate__(state)
        return ret
    attributes, slots = state if isinstance(state, tuple) else (state, None)
    for name, value in {**(attributes or {}), **(slots or {})}.items():
        setattr(ret, name, value)
    return ret


def load_trusted(raw, device=None):
    """The object of a torch.save zip archive, whatever it holds: Python's Unpickler, which imports the modules the
    file names and runs their code (torch.load(weights_only=False), for files the user trusts). torch's names are
    webgrad's (torch.nn.modules.linear.Linear is webgrad.nn's Linear); tensors are built over the archive's
    storages with the same checks as load(), on `device`, or where they were saved ("webgpu") when it is None.
    The archive's checks (sizes, budget, records) are load()'s."""
    archive, pickled = _open(raw)
    builder = _Builder(archive, devices.get(device), follow_location=device is None)
    trusted = dict(_ALLOWED)
    trusted.update({("torch._utils", fn.__name__): fn for fn in (_rebuild_tensor_v2, _rebuild_tensor,
                                                                  _rebuild_parameter)})
    trusted[("torch._tensor", "_rebuild_from_type_v2")] = _rebuild_from_type_v2
    eager = _eager_rebuilds(builder)
    trusted = {k: eager.get(v, v) for k, v in trusted.items()}
    trusted[("collections", "OrderedDict")] = OrderedDict
    trusted[("builtins", "set")] = set
    persistent_load = _storage_loader(archive)

    class _Full(pickle.Unpickler):
        def find_class(self, module, name):
            found = trusted.get((module, name))
            if found is not None:
                return found
            if module == "torch" or module.startswith("torch."):
                return _webgrad_global(module, name)
            return super().find_class(module, name)

        def persistent_load(self, pid):
            return persistent_load(pid)

    obj = _Full(io.BytesIO(pickled), encoding="utf-8").load()
    builder.check_objects(obj, 0, None, {})
    return obj


def _webgrad_global(module, name):
    """torch.X.Y's name -> webgrad's object of that name (as webgrad.as_torch() maps modules)."""
    ours = "webgrad" + module[len("torch"):]
    try:
        found = importlib.import_module(ours)
        for part in name.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        raise pickle.UnpicklingError(f"the file names {module}.{name}, which webgrad does not have (as {ours}.{name})"
                                     ) from None
    return found


class _Builder:
    """The loaded object: containers copied, each _Pending replaced by a tensor; sharing is kept (an object
    reached twice is built once), nesting bounded, anything that is not data refused."""

    LEAVES = (type(None), bool, int, float, complex, str, bytes, dtypes.DType)

    def __init__(self, archive, dev, follow_location=False):
        self.archive, self.dev = archive, dev
        self.follow_location = follow_location  # a storage saved on "webgpu" goes back there (whole-object files)
        self.done = {}  # id(object) -> (object, what it became)
        self.storages = {}  # key -> (backend storage, dtype, numel, device)
        self.whole = set()  # keys whose storage a tensor already took as its own

    def walk(self, obj, depth):
        if depth > MAX_DEPTH:
            raise UnpicklingError(f"PyTorch checkpoint: the object nests more than {MAX_DEPTH} levels deep (or holds "
                                  "itself)")
        seen = self.done.get(id(obj))
        if seen is not None:
            return seen[1]
        if isinstance(obj, _Pending):
            out = self.tensor(obj)
        elif isinstance(obj, dict):
            out = type(obj)() if type(obj) is OrderedDict else {}
            for k, v in obj.items():
                out[self.key(k, depth)] = self.walk(v, depth + 1)
            if hasattr(obj, "_metadata"):
                out._metadata = self.walk(obj._metadata, depth + 1)
        elif isinstance(obj, list):
            out = [self.walk(v, depth + 1) for v in obj]
        elif isinstance(obj, tuple):
            out = tuple(self.walk(v, depth + 1) for v in obj)
        elif isinstance(obj, set):
            out = {self.key(v, depth) for v in obj}
        elif isinstance(obj, self.LEAVES):
            return obj
        else:
            what = "a storage outside a tensor" if isinstance(obj, _Storage) else short(obj)
            raise UnpicklingError(f"PyTorch checkpoint: the object holds {what}, which is not data webgrad loads")
        self.done[id(obj)] = (obj, out)
        return out

    def key(self, k, depth):
        out = self.walk(k, depth + 1)
        if isinstance(out, Tensor) or (isinstance(out, tuple) and any(isinstance(x, Tensor) for x in out)):
            raise UnpicklingError("PyTorch checkpoint: a tensor as a dict key or set item is not read")
        return out

    def check_objects(self, obj, depth, types, objects):
        """A loaded object graph with objects in it (tensors already built): nothing of the archive's machinery
        left in it (a storage outside a tensor); with `types` (a weights-only load with allowlisted globals), only
        containers, plain values, tensors, the allowlisted objects and instances of their classes, nesting at
        most MAX_DEPTH levels."""
        todo, seen = [(obj, depth)], set()
        while todo:
            item, level = todo.pop()
            if id(item) in seen or isinstance(item, (Tensor,) + self.LEAVES):
                continue
            seen.add(id(item))
            if level > MAX_DEPTH:
                raise UnpicklingError(f"PyTorch checkpoint: the object nests more than {MAX_DEPTH} levels deep")
            if isinstance(item, (_Storage, _Pending)) or (types is not None and isinstance(item, _ReadAs)):
                raise UnpicklingError("PyTorch checkpoint: the object holds a storage outside a tensor, which is not "
                                      "data webgrad loads")
            if isinstance(item, dict):
                todo.extend((x, level + 1) for pair in item.items() for x in pair)
            elif isinstance(item, (list, tuple, set, frozenset)):
                todo.extend((x, level + 1) for x in item)
            elif types is None or id(item) in objects:
                continue
            elif type(item) in types:
                todo.extend((x, level + 1) for x in getattr(item, "__dict__", {}).values())
            else:
                raise UnpicklingError(f"PyTorch checkpoint: the object holds {short(item)}, which is not data webgrad "
                                      "loads")

    def storage(self, s):
        built = self.storages.get(s.key)
        if built is None:
            raw = self.archive.read("data/" + s.key, size=s.numel * s.stype.item)
            dtype, raw = _storage_values(s, raw)
            dev = devices.get("webgpu") if self.follow_location and s.location == "webgpu" else self.dev
            # complex64 is stored as its float32 (real, imag) pairs (webgrad/_complex.py)
            real = dtypes.float32 if dtype is dtypes.complex64 else dtype
            built = self.storages[s.key] = (dev.backend.from_bytes(raw, real), dtype, s.numel, dev)
        return built

    def tensor(self, p):
        data, dtype, numel, dev = self.storage(p.storage)
        if dtype is dtypes.complex64:  # the float32 pairs, seen as complex once built
            from .._complex import view_as_complex
            from .._tensor import zeros
            if not all(p.size):
                return zeros(p.size, dtype=dtype, device=dev, requires_grad=p.requires_grad)
            pairs = _Pending(p.storage, 2 * p.offset, p.size + (2,), tuple(2 * s for s in p.stride) + (1,), False)
            saved, self.storages[p.storage.key] = self.storages[p.storage.key], (data, dtypes.float32, 2 * numel, dev)
            try:
                z = view_as_complex(self.tensor(pairs))
            finally:
                self.storages[p.storage.key] = saved
            return z.requires_grad_(True) if p.requires_grad else z
        if not all(p.size):  # no elements: neither its offset nor its strides mean anything
            t = Tensor._empty(p.size, dtype, dev)
            return t.requires_grad_(True) if p.requires_grad else t
        view = Tensor._make(View(data, p.size, p.stride, p.offset, dtype), dev)
        # each loaded tensor owns its memory: the first whole-storage tensor takes the storage, views are copied
        if p.storage.key not in self.whole and view.is_contiguous() and view.numel() == numel:
            self.whole.add(p.storage.key)
            t = view
        else:
            self.archive.take(view.numel() * dtype.itemsize, f"a view of data/{p.storage.key} of size {list(p.size)}")
            t = view.clone()
        if p.requires_grad:
            t.requires_grad_(True)
        return t


def _storage_values(storage, raw):
    """(webgrad dtype, canonical bytes) for a storage, converting dtypes webgrad lacks."""
    kind = storage.stype.kind
    if kind is dtypes.bool_:
        return kind, raw.translate(_BOOL)  # any nonzero byte is True (torch reads it so); webgrad stores 0 or 1
    if isinstance(kind, dtypes.DType):
        return kind, raw
    out = array.array("f", struct.unpack(f"<{len(raw) // 2}e", raw))  # float16
    if sys.byteorder != "little":
        out.byteswap()
    return dtypes.float32, out.tobytes()


_BOOL = bytes([0]) + bytes([1]) * 255
