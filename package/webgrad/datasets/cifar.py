"""CIFAR-10 and CIFAR-100 from local files (webgrad never downloads), kept on the device as uint8.

Two distributions of the same data are read:
- the binary version (cifar-10-batches-bin/data_batch_1..5.bin and test_batch.bin: records of 1 label byte
  + 3,072 pixel bytes; cifar-100-binary/train.bin and test.bin: 1 coarse + 1 fine label byte + 3,072), in
  pure Python, so it works in Pyodide without NumPy;
- the Python version (cifar-10-batches-py, cifar-100-python: pickled dicts), where NumPy is installed,
  through a restricted unpickler (unpickle.py), never plain pickle.load.
The pixels of a record are 1,024 red, 1,024 green, 1,024 blue bytes, rows top to bottom: already the
[3, 32, 32] layout of a tensor image. root may be the folder holding the extracted folder, the extracted
folder itself, or either of those holding the .tar.gz as downloaded (read with tarfile, in memory).
"""

import gzip
import os
import tarfile
import zlib

from .images import DeviceImages
from . import unpickle

SIDE, CHANNELS = 32, 3
PIXELS = SIDE * SIDE * CHANNELS  # 3,072 bytes per image

CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]

# A .tar.gz is read in one pass, under a budget of inflated bytes checked before each member is read or
# passed over: BUDGET_RATIO times the file's size (the real archives inflate 1.1 times), at least MIN_BUDGET,
# at most MAX_BUDGET (the largest archive, CIFAR-100's, inflates to 178 MB).
MIN_BUDGET, BUDGET_RATIO, MAX_BUDGET = 64 * 2**20, 16, 2**31
_TAR_ERRORS = (tarfile.TarError, OSError, EOFError, zlib.error, ValueError, UnicodeDecodeError)


class _Budget:
    """A file object that refuses to be read or sought past `limit` bytes: the archive's own reads (a long
    pax header, a GNU long name) stay under the budget too, not only the members' data."""

    def __init__(self, f, limit, where):
        self.f, self.limit, self.where, self.pos = f, limit, where, 0

    def over(self, end):
        if end > self.limit:
            raise ValueError(f"{self.where}: inflates to more than {self.limit} bytes (this archive's budget: "
                             f"{BUDGET_RATIO} times its size, at least {MIN_BUDGET >> 20} MiB); a decompression "
                             "bomb, or not a CIFAR archive")

    def read(self, n=-1):
        n = self.limit - self.pos + 1 if n is None or n < 0 else n
        self.over(self.pos + n)
        data = self.f.read(n)
        self.pos += len(data)
        return data

    def seek(self, offset, whence=0):
        target = {0: offset, 1: self.pos + offset}.get(whence)
        if target is None:
            raise OSError("a tar archive read as a stream cannot seek from its end")
        self.over(target)
        self.f.seek(target)
        self.pos = target
        return target

    def tell(self):
        return self.pos


class _Files:
    """The files of one distribution, in a folder or in a tarball: read(name) -> (path for messages, bytes)."""

    def __init__(self, folder=None, tar=None, prefix=None):
        self.folder, self.tar, self.prefix = folder, tar, prefix

    def where(self, name):
        if self.folder is not None:
            return os.path.join(self.folder, name)
        return f"{self.tar}:{self.prefix}/{name}"

    def exists(self, name):
        if self.folder is not None:
            return os.path.isfile(os.path.join(self.folder, name))
        return f"{self.prefix}/{name}" in self._members()

    def _members(self):
        """The regular files of the tarball's folder, read in one pass (a .tar.gz cannot seek: one
        decompression, not one per batch file). Each member's size is checked against the budget before it is
        read, or passed over (skipping a member of a .tar.gz inflates it too)."""
        if not hasattr(self, "_contents"):
            stored = os.path.getsize(self.tar)
            budget = min(MAX_BUDGET, max(MIN_BUDGET, BUDGET_RATIO * stored))
            contents = {}
            try:
                with open(self.tar, "rb") as raw:
                    packed = raw.read(2) == b"\x1f\x8b"
                    raw.seek(0)
                    stream = _Budget(gzip.GzipFile(fileobj=raw) if packed else raw, budget, self.tar)
                    with tarfile.open(fileobj=stream, mode="r:") as t:
                        for m in t:
                            stream.over(m.offset_data + m.size)  # before it is read or passed over
                            if m.isfile() and m.name.startswith(self.prefix + "/"):
                                data = t.extractfile(m).read()
                                if len(data) != m.size:
                                    raise ValueError(f"{self.tar}: the member {m.name} is cut short")
                                contents[m.name] = data
            except _TAR_ERRORS as e:
                if isinstance(e, ValueError) and str(e).startswith(str(self.tar)):
                    raise
                raise ValueError(f"{self.tar}: not a readable tar archive, or truncated ({type(e).__name__}: "
                                 f"{e})") from None
            self._contents = contents
        return self._contents

    def read(self, name):
        path = self.where(name)
        if self.folder is None:
            members = self._members()
            if f"{self.prefix}/{name}" not in members:
                raise ValueError(f"{self.tar}: the archive has no file {self.prefix}/{name} (a CIFAR archive holds "
                                 "every batch; is it cut short, or another archive?)")
            return path, members[f"{self.prefix}/{name}"]
        if not self.exists(name):
            raise FileNotFoundError(f"{path} not found")
        with open(path, "rb") as f:
            return path, f.read()


def _find(root, layouts, download, name):
    """The first layout present under root: layouts are (folder name, tarball name, kind)."""
    root = os.fspath(root)
    for folder, tarball, kind in layouts:
        for candidate in (os.path.join(root, folder), root if os.path.basename(os.path.normpath(root)) == folder else None):
            if candidate and os.path.isdir(candidate):
                return kind, _Files(folder=candidate)
        for candidate in (os.path.join(root, tarball), root if root.endswith(tarball) else None):
            if candidate and os.path.isfile(candidate):
                return kind, _Files(tar=candidate, prefix=folder)
    hint = " download=True cannot help: webgrad never downloads; point root at files you have." if download else ""
    looked = ", ".join(f"{f}/ or {t}" for f, t, _ in layouts)
    raise FileNotFoundError(f"{name} not found under {root!r}: looked for {looked}.{hint} "
                            "(https://www.cs.toronto.edu/~kriz/cifar.html has the binary and Python versions)")


def parse_binary(raw, path, label_bytes, num_labels):
    """(labels per label byte, NCHW pixel bytes, n) of a CIFAR binary batch, in pure Python."""
    record = label_bytes + PIXELS
    if not raw or len(raw) % record:
        whole = len(raw) // record
        raise ValueError(f"{path}: {len(raw)} bytes is not a whole number of {record}-byte records ({label_bytes} "
                         f"label byte{'s' if label_bytes > 1 else ''} + {PIXELS} pixels): {whole} records and "
                         f"{len(raw) - whole * record} bytes over; the file is truncated or not a CIFAR binary batch")
    labels = [raw[k::record] for k in range(label_bytes)]  # bytes slicing with a step: no Python loop
    for k, (values, limit) in enumerate(zip(labels, num_labels)):
        top = max(values)
        if top >= limit:
            raise ValueError(f"{path}: label {top} at record {values.index(top)} (label byte {k}); labels must be "
                             f"below {limit}: not a CIFAR batch of this kind")
    view = memoryview(raw)
    pixels = b"".join(view[i + label_bytes:i + record] for i in range(0, len(raw), record))
    return labels, pixels, len(raw) // record


def _parse_pickle(files, name, label_keys, num_labels):
    """(labels per key, pixels, n) of a pickled batch (the Python version)."""
    try:
        import numpy as np
    except ImportError:
        raise RuntimeError(f"{files.where(name)}: the Python version of CIFAR is pickled NumPy arrays and needs "
                           "NumPy; use the binary version (which webgrad reads without NumPy)") from None
    path, raw = files.read(name)
    batch = unpickle.loads(raw, path)
    if not isinstance(batch, dict):
        raise ValueError(f"{path}: holds a {type(batch).__name__}, a CIFAR batch is a dict")
    batch = {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in batch.items()}
    missing = [k for k in ("data",) + label_keys if k not in batch]
    if missing:
        keys = sorted(repr(k)[:40] for k in batch)[:10]
        raise ValueError(f"{path}: no {', '.join(missing)} in this dict (keys: {', '.join(keys)}); not a CIFAR batch")
    data = batch["data"]
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != PIXELS:
        got = f"{data.dtype} array {data.shape}" if isinstance(data, np.ndarray) else type(data).__name__
        raise ValueError(f"{path}: 'data' is a {got}, expected a uint8 array [N, {PIXELS}]")
    n = data.shape[0]
    labels = []
    for key, limit in zip(label_keys, num_labels):
        values = batch[key]
        if isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype.kind in "iu":
            values = values.tolist()
        if not isinstance(values, list) or len(values) != n or not all(type(v) is int for v in values) or \
                (values and not 0 <= min(values) <= max(values) < limit):
            raise ValueError(f"{path}: '{key}' must hold {n} integer labels in 0..{limit - 1}")
        labels.append(bytes(values))
    return labels, np.ascontiguousarray(data).tobytes(), n


def _pickled_names(files, name, key, fallback):
    """Class names from a pickled meta file of the Python version (fallback where it is missing)."""
    if not files.exists(name):
        return fallback
    path, raw = files.read(name)
    meta = unpickle.loads(raw, path)
    names = meta.get(key, meta.get(key.encode())) if isinstance(meta, dict) else None
    if not isinstance(names, list) or len(names) != len(fallback) or \
            not all(isinstance(n, (str, bytes)) for n in names):
        raise ValueError(f"{path}: expected {len(fallback)} names (strings) under {key!r}")
    return [n.decode("utf-8", "replace") if isinstance(n, bytes) else n for n in names]


def _names(files, name, fallback):
    """Class names from a text file of the binary version, one per line (fallback where it is missing)."""
    if files.exists(name):
        path, raw = files.read(name)
        names = [line.strip() for line in raw.decode("utf-8", "replace").splitlines() if line.strip()]
        if len(names) != len(fallback):
            raise ValueError(f"{path}: names {len(names)} classes, expected {len(fallback)} (one per line)")
        return names
    return fallback


class CIFAR10(DeviceImages):
    """CIFAR-10 as torchvision.datasets.CIFAR10 (without PIL): dataset[i] is (float32 image [3, 32, 32] in
    [0, 1], int label); `.data` is uint8 [N, 3, 32, 32] and `.targets` int32 [N], both on `device`."""

    base_folder = "cifar-10-batches-bin"
    train_list = ["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5"]
    test_list = ["test_batch"]
    _layouts = (("cifar-10-batches-bin", "cifar-10-binary.tar.gz", "binary"),
                ("cifar-10-batches-py", "cifar-10-python.tar.gz", "python"))

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False, device=None):
        self.root, self.train = os.fspath(root), train
        self.format, files = _find(self.root, self._layouts, download, type(self).__name__)
        labels, pixels, n = self._read(files)
        self._store(pixels, labels, (n, CHANNELS, SIDE, SIDE), device, transform, target_transform)

    def _read(self, files):
        names = self.train_list if self.train else self.test_list
        parts, labels, n = [], [], 0
        for name in names:
            if self.format == "binary":
                path, raw = files.read(name + ".bin")
                (batch_labels,), pixels, count = parse_binary(raw, path, 1, (10,))
            else:
                (batch_labels,), pixels, count = _parse_pickle(files, name, ("labels",), (10,))
            parts.append(pixels)
            labels.append(batch_labels)
            n += count
        if self.format == "binary":
            self.classes = _names(files, "batches.meta.txt", CIFAR10_CLASSES)
        else:
            self.classes = _pickled_names(files, "batches.meta", "label_names", CIFAR10_CLASSES)
        return b"".join(labels), b"".join(parts), n

    @property
    def class_to_idx(self):
        return {name: i for i, name in enumerate(self.classes)}

    def _repr_lines(self):
        return [f"    Split: {'Train' if self.train else 'Test'}", f"    Format: {self.format}"]


class CIFAR100(CIFAR10):
    """CIFAR-100: `.targets` holds the fine labels (100 classes, as torchvision) and `.coarse_targets` the
    20 superclasses; `target_type="coarse"` makes the coarse labels the targets."""

    _layouts = (("cifar-100-binary", "cifar-100-binary.tar.gz", "binary"),
                ("cifar-100-python", "cifar-100-python.tar.gz", "python"))

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False, device=None,
                 target_type="fine"):
        if target_type not in ("fine", "coarse"):
            raise ValueError(f"target_type must be 'fine' or 'coarse', got {target_type!r}")
        self.target_type = target_type
        super().__init__(root, train, transform, target_transform, download, device)

    def _read(self, files):
        name = "train" if self.train else "test"
        if self.format == "binary":
            path, raw = files.read(name + ".bin")
            (coarse, fine), pixels, n = parse_binary(raw, path, 2, (20, 100))
            self.classes = _names(files, "fine_label_names.txt", [f"class {i}" for i in range(100)])
            self.coarse_classes = _names(files, "coarse_label_names.txt", [f"superclass {i}" for i in range(20)])
        else:
            (fine, coarse), pixels, n = _parse_pickle(files, name, ("fine_labels", "coarse_labels"), (100, 20))
            self.classes = _pickled_names(files, "meta", "fine_label_names", [f"class {i}" for i in range(100)])
            self.coarse_classes = _pickled_names(files, "meta", "coarse_label_names",
                                                 [f"superclass {i}" for i in range(20)])
        self.fine_targets, self.coarse_targets = list(fine), list(coarse)
        if self.target_type == "coarse":
            self.classes, self.fine_classes = self.coarse_classes, self.classes
            return coarse, pixels, n
        return fine, pixels, n
