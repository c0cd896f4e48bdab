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

import os
import tarfile
import zlib

from .images import DeviceImages
from . import unpickle

SIDE, CHANNELS = 32, 3
PIXELS = SIDE * SIDE * CHANNELS  # 3,072 bytes per image

CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


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
        """Every file of the tarball, read in one pass (a .tar.gz cannot seek: one decompression, not one
        per batch file)."""
        if not hasattr(self, "_contents"):
            try:
                with tarfile.open(self.tar) as t:
                    self._contents = {m.name: t.extractfile(m).read() for m in t if m.isfile()}
            except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
                raise ValueError(f"{self.tar}: not a readable tar archive, or truncated ({e})") from None
        return self._contents

    def read(self, name):
        path = self.where(name)
        if not self.exists(name):
            raise FileNotFoundError(f"{path} not found")
        if self.folder is None:
            return path, self._members()[f"{self.prefix}/{name}"]
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
        raise ValueError(f"{path}: no {', '.join(missing)} in this dict (keys: {sorted(batch)}); not a CIFAR batch")
    data = batch["data"]
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != PIXELS:
        got = f"{data.dtype} array {data.shape}" if isinstance(data, np.ndarray) else type(data).__name__
        raise ValueError(f"{path}: 'data' is a {got}, expected a uint8 array [N, {PIXELS}]")
    n = data.shape[0]
    labels = []
    for key, limit in zip(label_keys, num_labels):
        values = [int(v) for v in batch[key]]
        if len(values) != n or (values and not 0 <= min(values) <= max(values) < limit):
            raise ValueError(f"{path}: '{key}' must hold {n} labels in 0..{limit - 1}")
        labels.append(bytes(values))
    return labels, np.ascontiguousarray(data).tobytes(), n


def _pickled_names(files, name, key, fallback):
    """Class names from a pickled meta file of the Python version (fallback where it is missing)."""
    if not files.exists(name):
        return fallback
    path, raw = files.read(name)
    meta = unpickle.loads(raw, path)
    names = meta.get(key, meta.get(key.encode())) if isinstance(meta, dict) else None
    if not isinstance(names, list) or len(names) != len(fallback):
        raise ValueError(f"{path}: expected {len(fallback)} names under {key!r}")
    return [n.decode("utf-8") if isinstance(n, bytes) else str(n) for n in names]


def _names(files, name, fallback):
    if files.exists(name):
        _, raw = files.read(name)
        names = [line.strip() for line in raw.decode("utf-8", "replace").splitlines() if line.strip()]
        if names:
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
