"""Dataset files built to hurt: CIFAR archives that are bombs or lie about their members, pickled batches
that nest, abuse the memo or reach into NumPy, image folders of decompression bombs. Each is refused with
the reader's documented error (ValueError for CIFAR, FileNotFoundError for a folder without one usable
image), fast and without inflating what the file claims."""

import gzip
import io
import os
import pickle
import struct
import tarfile
import time
import tracemalloc
import warnings
import zlib

import numpy as np
import pytest

import webgrad as wg
from cifar_files import write_cifar10
from webgrad.datasets import CIFAR10, ImageFolder, unpickle

from tools.fuzz_readers import P, Raw, cifar_pickle, gzip_zeros, tar_gz


def _tarball(tmp_path, files, name="cifar-10-binary.tar.gz"):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / name
    path.write_bytes(files if isinstance(files, bytes) else tar_gz(files))
    return tmp_path


def _batch(n=2, label=3):
    return b"".join(bytes([label]) + bytes(range(256)) * 12 for _ in range(n))


def _refused(root, match, **kwargs):
    start = time.perf_counter()
    tracemalloc.start()
    with pytest.raises(ValueError, match=match):
        CIFAR10(root, train=False, **kwargs)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert time.perf_counter() - start < 3.0 and peak < 64 << 20, peak


def test_a_tar_bomb_is_refused_from_its_member_header(tmp_path):
    """A member of 1 GiB of zeros in a 1 MiB .tar.gz: refused before it is inflated."""
    info = tarfile.TarInfo("cifar-10-batches-bin/readme.html")
    info.size = 1 << 30
    rest = tar_gz({"cifar-10-batches-bin/test_batch.bin": _batch()}, compress=False)
    raw = gzip.compress(info.tobuf()) + gzip_zeros(1 << 30) + gzip.compress(rest)
    assert len(raw) < 1.5 * 2**20
    _refused(_tarball(tmp_path, raw), "inflates to more than")


def test_a_long_pax_header_is_refused_before_it_is_read(tmp_path):
    info = tarfile.TarInfo("././@PaxHeader")
    info.type, info.size = tarfile.XHDTYPE, 1 << 30
    raw = gzip.compress(info.tobuf(format=tarfile.USTAR_FORMAT)) + gzip_zeros(1 << 30)
    _refused(_tarball(tmp_path, raw), "inflates to more than")


def test_archives_that_lack_or_fake_the_batch(tmp_path):
    files = {"cifar-10-batches-bin/test_batch.bin": _batch()}
    _refused(_tarball(tmp_path / "a", {"other/test_batch.bin": _batch()}),
             "has no file cifar-10-batches-bin/test_batch.bin")
    raw = tar_gz(files, kinds={"cifar-10-batches-bin/test_batch.bin": "symlink"})
    _refused(_tarball(tmp_path / "b", raw), "has no file")
    cut = tar_gz(files, compress=False)
    _refused(_tarball(tmp_path / "c", gzip.compress(cut[:700])), "not a readable tar archive|cut short")
    _refused(_tarball(tmp_path / "d", b"\x1f\x8b" + bytes(50)), "not a readable tar archive")
    # a valid one, for contrast
    ds = CIFAR10(_tarball(tmp_path / "e", files), train=False)
    assert len(ds) == 2 and ds.targets.tolist() == [3, 3]


def test_class_names_must_count_ten(tmp_path):
    write_cifar10(tmp_path, per_batch=2, test=3)
    (tmp_path / "cifar-10-batches-bin" / "batches.meta.txt").write_text("a\nb\n")
    with pytest.raises(ValueError, match="names 2 classes, expected 10"):
        CIFAR10(tmp_path, train=False)


HOSTILE_PICKLES = {
    "deep tuple key": ({"deep": Raw(b"}N" + b"\x85" * 200_000 + b"Ns")}, "tuples nest more than 100"),
    "memo index": ({"memo": Raw(b"Nr\xf0\xff\xff\xff0j\xf1\xff\xff\xff")}, "memo entry 4294967281"),
    "os.system": ({"x": Raw(P().glob("os", "system").value(("true",)).op(b"R").out[2:])}, r"refused.*os\.system"),
    "ndarray called": ({"x": Raw(P().glob("numpy", "ndarray").value(((2**40,),)).op(b"R").out[2:])},
                       "cannot be called"),
    "object dtype": ({"x": Raw(P().glob("numpy", "dtype").value(("O", False, True)).op(b"R").out[2:])},
                     r"numpy\.dtype\('O'\)"),
    "labels of the wrong type": ({"labels": [1.5, 2.5]}, "must hold 2 integer labels"),
    "labels that are lists": ({"labels": [[1], [2]]}, "must hold 2 integer labels"),
    "labels out of range": ({"labels": [10, 3]}, "must hold 2 integer labels in 0..9"),
}


@pytest.mark.parametrize("name", list(HOSTILE_PICKLES))
def test_hostile_pickled_batches_are_refused(tmp_path, name):
    import random
    hostile, match = HOSTILE_PICKLES[name]
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    (folder / "test_batch").write_bytes(cifar_pickle(random.Random(0), 2, hostile))
    with pytest.raises(ValueError, match=match) as info:
        CIFAR10(tmp_path, train=False)
    assert isinstance(info.value, ValueError)  # pickle.UnpicklingError too, where the pickle itself is refused


def test_a_dtype_in_a_file_never_changes_numpys_own():
    """np.dtype('<i4') is shared by every int32 array: a pickled dtype's BUILD must set a copy's byte order."""
    before = np.dtype("i4").byteorder, np.arange(3, dtype=np.int32).tolist()
    raw = P().glob("numpy", "dtype").value(("i4", False, True)).op(b"R").value((3, ">", None, None, None, -1, -1, 0))
    raw = raw.op(b"b").done()
    got = unpickle.loads(raw, "x")
    assert got.byteorder == ">"
    assert (np.dtype("i4").byteorder, np.arange(3, dtype=np.int32).tolist()) == before


def test_the_pickled_version_still_reads_as_written(tmp_path):
    x, y, test_x, test_y = write_cifar10(tmp_path, per_batch=3, test=4, kind="python")
    for protocol in (2, 4, 5):
        with open(tmp_path / "cifar-10-batches-py" / "test_batch", "wb") as f:
            pickle.dump({"data": test_x.reshape(-1, 3072), "labels": test_y.tolist(), "batch_label": "t"}, f,
                        protocol=protocol)
        ds = CIFAR10(tmp_path, train=False)
        assert ds.targets.tolist() == test_y.tolist()
        assert ds.data.numpy().tobytes() == test_x.tobytes()


def _png(width, height, rows=b""):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def test_image_bombs_are_skipped_from_their_header(tmp_path):
    pytest.importorskip("PIL")
    from PIL import Image
    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        Image.new("RGB", (4, 3), (10, 20, 30)).save(tmp_path / cls / "ok.png")
    (tmp_path / "a" / "bomb.png").write_bytes(_png(12_000, 12_000, bytes(64 * 36_001)))  # 144 M pixels
    (tmp_path / "b" / "huge.png").write_bytes(_png(100_000, 100_000))
    (tmp_path / "b" / "junk.jpg").write_bytes(b"\xff\xd8\xff" + os.urandom(40))
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = ImageFolder(tmp_path)
    assert time.perf_counter() - start < 3.0
    assert len(ds) == 2 and tuple(ds.data.shape) == (2, 3, 3, 4)
    reasons = dict(ds.skipped)
    assert "over Pillow's limit" in reasons[str(tmp_path / "a" / "bomb.png")]
    assert str(tmp_path / "b" / "junk.jpg") in reasons
    assert any("could not be decoded" in str(w.message) for w in caught)


def test_a_folder_without_one_usable_image_is_refused(tmp_path):
    pytest.importorskip("PIL")
    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        (tmp_path / cls / "x.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(20))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(FileNotFoundError, match="no image .* could be decoded"):
            ImageFolder(tmp_path)


def test_the_process_trains_after_hostile_archives(tmp_path):
    """The process keeps working: after every hostile file above, a dataset still loads and trains."""
    test_a_tar_bomb_is_refused_from_its_member_header(tmp_path / "bomb")
    x, y, test_x, test_y = write_cifar10(tmp_path / "ok", per_batch=8, test=8)
    ds = CIFAR10(tmp_path / "ok", train=True)
    model = wg.nn.Sequential(wg.nn.Flatten(), wg.nn.Linear(3072, 10))
    opt = wg.optim.SGD(model.parameters(), lr=0.01)
    images, labels = ds.get_batch(wg.arange(16, dtype=wg.int32))
    first = None
    for _ in range(20):
        opt.zero_grad()
        loss = wg.nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert loss.item() < first
