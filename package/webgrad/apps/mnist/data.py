"""The page's datasets, kept on the GPU as uint8 [N, C, H, W] with int32 labels: MNIST (the IDX files the
worker downloaded), CIFAR-10 and CIFAR-100 (files the user picked, which the worker wrote into Pyodide's file
system: the binary tarball or its extracted files) and "your images" (a folder of one subfolder per class,
decoded and resized by the worker, handed over as one uint8 buffer). And Text (TextData): a text the user
dropped, or the bundled sample, as one uint8 token per character on the GPU, for a GPT to learn.

DataLoader gathers every batch there, one index_select, then augments it (webgrad.transforms, on the GPU)
and turns it into normalised floats: no pixel crosses from Python to the GPU while training.

Everything that can be wrong with the user's files raises DataError with a message for the page; the App
then keeps the data it had.
"""

import copy
import hashlib
import math
from collections import Counter
from importlib.resources import files

import webgrad as wg
from webgrad import transforms as T
from webgrad import webgpu
from webgrad.data import DataLoader, Subset
from webgrad.datasets import CIFAR10, CIFAR100, MNIST
from webgrad.datasets.images import DeviceImages

PIXELS = 28 * 28
TEST_EVERY = 5  # "your images": every 5th image of each class is held out for testing
MAX_SIDE = 2048  # the largest image side the page resizes to


class DataError(ValueError):
    """The user's data cannot be used (the message says why); the current data stays."""


def format_bytes(n):
    if n < 2 ** 20:
        return f"{n / 1024:.1f} KiB"
    if n < 2 ** 30:
        return f"{n / 2 ** 20:.1f} MiB"
    return f"{n / 2 ** 30:.2f} GiB"


def buffer_limit(device):
    """The most bytes one GPU buffer may hold on `device` (None: no limit known, e.g. the CPU). Each split
    of a dataset is one tensor, so one buffer: this is the size that decides whether it fits. (WebGPU does
    not tell how much memory the GPU has in all; the page reports what tensors hold as it trains.)"""
    if device != "webgpu":
        return None
    limits = webgpu.adapter_info()["limits"]
    return min(limits["max_storage_buffer_binding_size"], limits["max_buffer_size"])


def check_fits(nbytes, device, what):
    limit = buffer_limit(device)
    if limit is not None and nbytes > limit:
        raise DataError(f"{what} is too large for this GPU: its images need {format_bytes(nbytes)} of GPU memory "
                        f"in one buffer, and this GPU allows at most {format_bytes(limit)} per buffer "
                        "(maxStorageBufferBindingSize). Use fewer or smaller images.")


class Images(DeviceImages):
    """uint8 images [N, C, H, W] and int32 labels already on the device (webgrad.datasets' batch path)."""

    def __init__(self, data, targets, labels, classes, root):
        self.data, self.targets, self._labels, self.classes, self.root = data, targets, bytes(labels), classes, root
        self.transform = self.target_transform = None
        self._mean, self._std = (0.0,), (1.0,)

    @classmethod
    def from_bytes(cls, pixels, labels, shape, classes, root, device):
        self = cls.__new__(cls)
        self._store(pixels, bytes(labels), shape, device, None, None)
        self.classes, self.root = classes, root
        return self

    def view(self, transform=None, mean=(0.0,), std=(1.0,)):
        """The same images (shared tensors) with a batched transform, or normalised by mean/std."""
        out = copy.copy(self)
        out.transform, out._mean, out._std = transform, tuple(mean), tuple(std)
        return out


class Data:
    """A training and a test split on the device. name: "mnist" | "cifar10" | "cifar100" | "images"; shape:
    (C, H, W). source: "page" (MNIST, downloaded with it) | "files" (the user's: after a reload they must be
    chosen again)."""

    def __init__(self, name, label, train, test, notes="", rebuild=None, source="files"):
        self.name, self.label, self.train, self.test, self.notes = name, label, train, test, notes
        self.source = source
        self.classes = list(train.classes)
        self.shape = tuple(train.data.shape[1:])
        # MNIST trains on [0, 1] pixels (what the drawing area sends); colour images are centred
        c = self.shape[0]
        self.mean, self.std = ((0.0,), (1.0,)) if name == "mnist" else ((0.5,) * c, (0.25,) * c)
        self._rebuild = rebuild  # device -> a new Data with the same images (after a lost GPU device)

    def rebuild(self, device):
        return self._rebuild(device)

    def info(self):
        """What a checkpoint keeps of the data it trained on, to say which one to load before a Resume."""
        return {"name": self.name, "label": self.label, "source": self.source}

    # ------------------------------------------------------------------ the sources

    @classmethod
    def mnist(cls, root, device):
        splits = []
        for train in (True, False):
            ds = MNIST(root, train=train, device=device)
            n = len(ds)
            splits.append(Images(ds.data.reshape(n, 1, 28, 28), ds.targets, ds._labels,
                                 [str(d) for d in range(10)], root))
        return cls("mnist", "MNIST", *splits, rebuild=lambda dev: cls.mnist(root, dev), source="page")

    @classmethod
    def cifar10(cls, root, device, name="cifar10"):
        """CIFAR-10 (or with name="cifar100", CIFAR-100's 100 fine classes) from the folder the worker wrote the
        user's files into."""
        dataset, label = (CIFAR100, "CIFAR-100") if name == "cifar100" else (CIFAR10, "CIFAR-10")
        splits = []
        for train in (True, False):
            try:
                ds = dataset(root, train=train, device=device)  # 180 MB at most: it fits any GPU
            except (ValueError, FileNotFoundError, RuntimeError) as e:
                raise DataError(f"{label}: {_strip_root(str(e), root)}") from None
            splits.append(Images(ds.data, ds.targets, ds._labels, ds.classes, root))
        return cls(name, label, *splits, rebuild=lambda dev: cls.cifar10(root, dev, name))

    @classmethod
    def cifar100(cls, root, device):
        return cls.cifar10(root, device, "cifar100")

    @classmethod
    def images(cls, pixels, labels, classes, size, device, skipped=0, resized=0, name="your images"):
        """The user's images: pixels uint8 N x 3 x size x size (planar RGB, as the worker decoded them),
        labels one byte per image (class index into `classes`)."""
        n, side = len(labels), int(size)
        classes = [str(c) for c in classes]
        if len(classes) < 2:
            raise DataError(f"{name}: found {len(classes)} class folder{'s' if len(classes) != 1 else ''} "
                            f"({', '.join(classes) or 'none'}); a classifier needs at least 2: put the images "
                            "of each class in a subfolder of their own (e.g. cats/, dogs/)")
        if not 8 <= side <= MAX_SIDE:
            raise DataError(f"{name}: image size {side} is not from 8 to {MAX_SIDE} pixels")
        if len(pixels) != n * 3 * side * side:
            raise DataError(f"{name}: {len(pixels)} bytes of pixels for {n} images of 3x{side}x{side}")
        counts = [0] * len(classes)
        for label in labels:
            if label >= len(classes):
                raise DataError(f"{name}: label {label} but only {len(classes)} classes")
            counts[label] += 1
        empty = [c for c, k in zip(classes, counts) if k == 0]
        if empty:
            raise DataError(f"{name}: no image in the class folder(s) {', '.join(empty)}")
        check_fits(len(pixels), device, name)
        # every TEST_EVERY-th image of each class is held out; a class of 2 to TEST_EVERY - 1 images gives its last
        seen, train_idx, test_idx = [0] * len(classes), [], []
        for i, label in enumerate(labels):
            k, total = seen[label], counts[label]
            held_out = k % TEST_EVERY == TEST_EVERY - 1 or (2 <= total < TEST_EVERY and k == total - 1)
            (test_idx if held_out else train_idx).append(i)
            seen[label] += 1
        if not test_idx:
            test_idx = train_idx[-1:]
        per = 3 * side * side
        view = memoryview(pixels)

        def split(idx):
            return (b"".join(view[i * per:(i + 1) * per] for i in idx), bytes(labels[i] for i in idx))

        parts = []
        for idx in (train_idx, test_idx):
            px, lab = split(idx)
            parts.append(Images.from_bytes(px, lab, (len(idx), 3, side, side), classes, name, device))
        notes = []
        if skipped:
            notes.append(f"{skipped} file{'s' if skipped != 1 else ''} skipped (not images)")
        if resized:
            notes.append(f"{resized} image{'s' if resized != 1 else ''} of another size resized to {side}x{side}")
        host = bytes(pixels), bytes(labels)
        return cls("images", name, *parts, notes="; ".join(notes),
                   rebuild=lambda dev: cls.images(*host, classes, size, dev, skipped, resized, name))

    # ------------------------------------------------------------------ batches

    def train_loader(self, n, batch_size, augment=None):
        """Shuffled batches of the first n training images, augmented on the GPU (a webgrad.transforms
        Compose without its final normalisation, or None); the last partial batch is dropped."""
        if augment:
            view = self.train.view(T.Compose(list(augment) + [T.ToTensor(), T.Normalize(self.mean, self.std)]))
        else:
            view = self.train.view(mean=self.mean, std=self.std)
        return DataLoader(Subset(view, range(n)), batch_size, shuffle=True, drop_last=True)

    def test_loader(self, n, batch_size):
        """The first n test images, in order."""
        return DataLoader(Subset(self.test.view(mean=self.mean, std=self.std), range(n)), batch_size)

    async def test_labels(self):
        """The test labels as a list of ints (read back once)."""
        return await self.test.targets.tolist_async()

    async def test_pixels(self, count):
        """The uint8 pixels (C x H x W each) of the first `count` test images, as bytes (for the page)."""
        return bytes(await self.test.data[:count].reshape(-1).tolist_async())


# ====================================================================== text
MAX_TEXT_BYTES = 16 * 2 ** 20  # a long book is about 1 MiB; the page (web/js/dataset-picker.js) says the same
MIN_TOKENS = 100
MAX_CHARS = 256  # distinct characters that can be tokens (one byte each); past it the UTF-8 bytes are
VAL_FRACTION = 0.1  # the end of the text is held out: the validation loss is measured there
SAMPLE_FILE = "data/shakespeare.txt"  # in webgrad.apps: public-domain Shakespeare (see data/README.md there)
SAMPLE_LABEL = "Shakespeare (the bundled sample)"


def decode_text(raw, name):
    """(text, note) of a file's bytes; DataError for an empty, huge or binary file. UTF-8 (a BOM dropped) or,
    where the bytes are not UTF-8, Latin-1; line ends as \n."""
    if not raw:
        raise DataError(f"{name} is empty: choose a file with some text in it")
    if len(raw) > MAX_TEXT_BYTES:
        raise DataError(f"{name} holds {len(raw):,} bytes, more than the {MAX_TEXT_BYTES // 2 ** 20} MiB "
                        f"({MAX_TEXT_BYTES:,} bytes) the page takes; a long book is about 1 MiB")
    zero = raw.find(b"\0")
    if zero >= 0:
        raise DataError(f"{name} is not a text file: it holds binary data (a zero byte at offset {zero:,}); "
                        "choose a plain-text file (.txt)")
    note = ""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text, note = raw.decode("latin-1"), "not UTF-8: read as Latin-1"
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    control = sum(1 for c in text if (ord(c) < 32 and c not in "\t\n\r\f\v") or 127 <= ord(c) < 160)
    if control > max(8, len(text) // 100):
        raise DataError(f"{name} is not a text file: {control:,} of its {len(text):,} characters are control "
                        "codes (binary data); choose a plain-text file (.txt)")
    return text, note


class TextData:
    """A text as tokens on the device (uint8 [N], one per character; where the text has more than MAX_CHARS
    distinct characters, one per byte of its UTF-8), split into the first 90% for training and the rest for
    the validation loss. vocab: the characters (strings) or byte values (ints) by token id.

    Batches are cut on the GPU: random windows of block_size + 1 tokens, the input the first block_size, the
    target the same shifted by one."""

    name = "text"
    shape = None  # not images

    def __init__(self, raw, label, device, source="file"):
        text, note = decode_text(bytes(raw), label)
        chars = sorted(set(text))
        if len(chars) <= MAX_CHARS:
            self.kind, self.vocab = "characters", chars
            table = {ord(c): i for i, c in enumerate(chars)}
            tokens = text.translate(table).encode("latin-1")
        else:
            data = text.encode("utf-8")
            self.kind, self.vocab = "bytes", sorted(set(data))
            tokens = data.translate(bytes.maketrans(bytes(self.vocab), bytes(range(len(self.vocab)))))
            note = "; ".join(filter(None, [note, f"{len(chars):,} distinct characters, so the tokens are the "
                                                 "text's UTF-8 bytes"]))
        if len(tokens) < MIN_TOKENS:
            raise DataError(f"{label} is too short: {len(tokens)} {self.kind}; the page needs at least {MIN_TOKENS} "
                            "to learn from")
        if len(self.vocab) < 2:
            raise DataError(f"{label} repeats one character only: there is nothing to learn")
        self.label, self.source, self.notes, self.raw = label, source, note, bytes(raw)
        self.classes = self.vocab  # the model's output classes: one per token
        self.chars = len(text)
        self.digest = hashlib.sha256(tokens + repr(self.vocab).encode("utf-8")).hexdigest()
        counts = Counter(tokens)
        self.unigram = -sum(c / len(tokens) * math.log(c / len(tokens)) for c in counts.values())
        split = max(len(tokens) - max(int(len(tokens) * VAL_FRACTION), 2), 2)
        self.train = wg.frombuffer(tokens[:split], dtype=wg.uint8, device=device)
        self.test = wg.frombuffer(tokens[split:], dtype=wg.uint8, device=device)
        self.device = device
        self.preview = text[:400]

    def rebuild(self, device):
        return TextData(self.raw, self.label, device, self.source)

    def info(self):
        return {"name": self.name, "label": self.label, "source": "sample" if self.source == "sample" else "files",
                "sha256": self.digest, "tokens": self.kind, "vocab_size": len(self.vocab)}

    @classmethod
    def sample(cls, device):
        """The bundled sample: public-domain Shakespeare (package data of webgrad.apps)."""
        return cls(files("webgrad.apps").joinpath(SAMPLE_FILE).read_bytes(), SAMPLE_LABEL, device, "sample")

    # ------------------------------------------------------------------ tokens
    def encode(self, text):
        """Token ids of `text` (a prompt); DataError names what the text's vocabulary lacks."""
        if self.kind == "characters":
            table = {c: i for i, c in enumerate(self.vocab)}
            missing = sorted({c for c in text if c not in table})
            if missing:
                shown = " ".join(repr(c) for c in missing[:10])
                raise DataError(f"the prompt has characters the text does not ({shown}): the model knows only the "
                                f"{len(self.vocab)} characters of {self.label}")
            return [table[c] for c in text]
        table = {b: i for i, b in enumerate(self.vocab)}
        data = text.encode("utf-8")
        missing = sorted({b for b in data if b not in table})
        if missing:
            raise DataError(f"the prompt has bytes the text does not ({', '.join(map(str, missing[:10]))}): the model "
                            f"knows only the {len(self.vocab)} byte values of {self.label}")
        return [table[b] for b in data]

    def decode(self, ids):
        if self.kind == "characters":
            return "".join(self.vocab[i] for i in ids)
        return bytes(self.vocab[i] for i in ids).decode("utf-8", "replace")

    def default_prompt(self):
        """What the samples during training start from: a new line where the text has one (nanoGPT's), else
        the text's first character."""
        return "\n" if "\n" in self.vocab or 10 in self.vocab else self.preview[:1]

    # ------------------------------------------------------------------ batches
    def batch(self, split, batch_size, block_size):
        """(input, target), int64 [batch_size, t] each: random windows of the split (train | val), t =
        block_size or, for a split shorter than that, its length - 1."""
        data = self.train if split == "train" else self.test
        t = min(block_size, len(data) - 1)
        starts = wg.randint(0, len(data) - t, (batch_size, 1), device=self.device)
        chunk = data[starts + wg.arange(t + 1, device=self.device)].long()
        return chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()

    def val_windows(self, count, block_size):
        """(input, target) of `count` windows spread evenly over the validation split (the same every time)."""
        data = self.test
        t = min(block_size, len(data) - 1)
        last = len(data) - t - 1
        starts = sorted({round(i * last / max(count - 1, 1)) for i in range(count)})
        ix = wg.tensor([[s] for s in starts], dtype=wg.int64, device=self.device) + wg.arange(t + 1, device=self.device)
        chunk = data[ix].long()
        return chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()


def _strip_root(message, root):
    """File names as the user knows them (not Pyodide's folder the worker wrote them into)."""
    return message.replace(root.rstrip("/") + "/", "").replace(repr(root), "the files you chose").replace(root, "the files you chose")
