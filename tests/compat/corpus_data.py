"""Tiny synthetic stand-ins for the data the corpus scripts read, written at test time in the exact on-disk format
each script (or torchvision) expects: MNIST / FashionMNIST IDX files and pickled MNIST, CIFAR-10 python pickles, image
folders, a LeNet checkpoint, text corpora, nanoGPT's token files, the Cora citation graph, surnames by language,
English-French sentence pairs. Nothing is downloaded and nothing binary is committed.

Every generator is deterministic (fixed NumPy seeds) and makes data a model can learn a little from in a few steps:
digit k lights row band k, a CIFAR class tints one colour channel, text follows a small Markov chain.

    make(kind, path, **options)      # path: the folder (or file) the script reads, e.g. "../data" or "input.txt"
"""

import os
import pickle
import struct
import tarfile

import numpy as np

# ---------------------------------------------------------------------------------------------------------- images


def _digits(n, seed, side=28):
    """n uint8 images [n, side, side] and labels [n]: noise plus a bright band whose row position is the label.
    Every class appears (n // 10 or n // 10 + 1 times), in shuffled order."""
    rng = np.random.RandomState(seed)
    labels = rng.permutation(np.arange(n) % 10).astype(np.uint8)
    images = (rng.rand(n, side, side) * 60).astype(np.uint8)
    band = side // 10
    for i, k in enumerate(labels):
        images[i, k * band:(k + 1) * band, 2:side - 2] += 180
    return images, labels


def _write_idx(path, array):
    """IDX format: magic (0, 0, type 0x08 = ubyte, ndim), big-endian int32 dims, then the bytes."""
    with open(path, "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, 0x08, array.ndim))
        f.write(struct.pack(">" + "I" * array.ndim, *array.shape))
        f.write(np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def mnist(path, train=64, test=32, folder="MNIST"):
    """torchvision's layout: PATH/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte (uncompressed)."""
    raw = os.path.join(path, folder, "raw")
    os.makedirs(raw, exist_ok=True)
    for prefix, n, seed in (("train", train, 1), ("t10k", test, 2)):
        images, labels = _digits(n, seed)
        _write_idx(os.path.join(raw, f"{prefix}-images-idx3-ubyte"), images)
        _write_idx(os.path.join(raw, f"{prefix}-labels-idx1-ubyte"), labels)


def fashion_mnist(path, train=64, test=32):
    mnist(path, train, test, folder="FashionMNIST")


def _colour_images(n, seed, side):
    """n uint8 RGB images [n, side, side, 3] and labels [n]: noise, class k tints channel k % 3 and a k-th stripe."""
    rng = np.random.RandomState(seed)
    labels = rng.permutation(np.arange(n) % 10)
    images = (rng.rand(n, side, side, 3) * 90).astype(np.uint8)
    for i, k in enumerate(labels):
        images[i, :, :, k % 3] += 100
        stripe = (k * side) // 10
        images[i, stripe:stripe + max(1, side // 10), :, :] = 250
    return images, labels


def mnist_pickle(path, train=256, valid=128, test=64):
    """PATH (a .pkl.gz file): the pickled MNIST of deeplearning.net that "What is torch.nn really?" reads,
    ((x_train, y_train), (x_valid, y_valid), (x_test, y_test)) with float32 rows of 784 pixels in [0, 1) and int64
    labels, gzip-compressed."""
    import gzip
    parts = []
    for n, seed in ((train, 6), (valid, 7), (test, 8)):
        images, labels = _digits(n, seed)
        parts.append(((images.reshape(n, 784) / 256.0).astype(np.float32), labels.astype(np.int64)))
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with gzip.open(path, "wb") as f:
        pickle.dump(tuple(parts), f, protocol=2)


def lenet_checkpoint(path, seed=3):
    """PATH: a state_dict of pytorch/examples' MNIST LeNet (conv1 1->10 and conv2 10->20 of 5x5, fc1 320->50, fc2
    50->10), as the FGSM tutorial's "pretrained" lenet_mnist_model.pth: weights drawn as nn.Conv2d / nn.Linear draw
    theirs (uniform within 1/sqrt(fan_in)), written in torch.save's zip format by webgrad.save (which reads and
    writes that format bit for bit), so both libraries' torch.load read the same file."""
    import webgrad
    rng = np.random.RandomState(seed)
    shapes = {"conv1": (10, 1, 5, 5), "conv2": (20, 10, 5, 5), "fc1": (50, 320), "fc2": (10, 50)}
    state = {}
    for name, shape in shapes.items():
        bound = 1.0 / np.sqrt(np.prod(shape[1:]))
        state[f"{name}.weight"] = webgrad.tensor(rng.uniform(-bound, bound, shape).astype(np.float32))
        state[f"{name}.bias"] = webgrad.tensor(rng.uniform(-bound, bound, shape[:1]).astype(np.float32))
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    webgrad.save(state, path)


def cifar10(path, train=40, test=20):
    """PATH/cifar-10-batches-py/{data_batch_1..5, test_batch, batches.meta}, pickled dicts as the original ('data'
    uint8 [N, 3072] channel-major, 'labels' list; the keys are str, as the Python 2 originals read with latin1)."""
    folder = os.path.join(path, "cifar-10-batches-py")
    os.makedirs(folder, exist_ok=True)
    images, labels = _colour_images(train + test, 3, 32)
    flat = images.transpose(0, 3, 1, 2).reshape(len(images), -1)

    def dump(name, rows):
        with open(os.path.join(folder, name), "wb") as f:
            pickle.dump({"batch_label": name, "labels": [int(v) for v in labels[rows]], "data": flat[rows],
                         "filenames": [f"{i}.png" for i in rows]}, f)

    parts = np.array_split(np.arange(train), 5)
    for i, rows in enumerate(parts, 1):
        dump(f"data_batch_{i}", rows)
    dump("test_batch", np.arange(train, train + test))
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    with open(os.path.join(folder, "batches.meta"), "wb") as f:
        pickle.dump({"label_names": names, "num_cases_per_batch": len(parts[0]), "num_vis": 3072}, f)


def image_folder(path, n=8, size=64, classes=("a", "b"), ext=".png"):
    """PATH/<class>/<i>.png: n RGB images spread over the class folders (ImageFolder's layout)."""
    from PIL import Image
    images, _ = _colour_images(n, 4, size)
    for i, image in enumerate(images):
        folder = os.path.join(path, classes[i % len(classes)])
        os.makedirs(folder, exist_ok=True)
        Image.fromarray(image).save(os.path.join(folder, f"{i:04d}{ext}"))


def bsds300(path, train=2, test=1, size=256):
    """PATH/BSDS300/images/{train,test}/*.jpg, as super_resolution's download step leaves them."""
    from PIL import Image
    images, _ = _colour_images(train + test, 5, size)
    for split, rows in (("train", range(train)), ("test", range(train, train + test))):
        folder = os.path.join(path, "BSDS300", "images", split)
        os.makedirs(folder, exist_ok=True)
        for i in rows:
            Image.fromarray(images[i]).save(os.path.join(folder, f"{i:04d}.jpg"), quality=95)

# ------------------------------------------------------------------------------------------------------------ text


_WORDS = ("the a one every some this that cat dog bird fish king queen man woman child city river house tree "
          "runs sees eats finds takes loves hears walks sleeps sings red big old small green quick happy dark "
          "and but with near over under from into").split()


def _sentences(n_sentences, seed):
    """Sentences from a fixed Markov chain over _WORDS (each word has three likely successors)."""
    rng = np.random.RandomState(seed)
    follow = np.random.RandomState(7).randint(0, len(_WORDS), size=(len(_WORDS), 3))
    out = []
    for _ in range(n_sentences):
        w = rng.randint(len(_WORDS))
        words = [_WORDS[w]]
        for _ in range(rng.randint(5, 12)):
            w = follow[w, rng.randint(3)] if rng.rand() < 0.9 else rng.randint(len(_WORDS))
            words.append(_WORDS[w])
        out.append(" ".join(words))
    return out


def words(path, sentences=60, seed=0):
    """One file of word-level text, a sentence per line (yunjey's language_model reads data/train.txt)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(_sentences(sentences, seed)) + "\n")


def wikitext(path, train=80, valid=20, test=20):
    """PATH/{train,valid,test}.txt in WikiText-2's style (word_language_model's data.Corpus reads them)."""
    os.makedirs(path, exist_ok=True)
    for name, n, seed in (("train", train, 0), ("valid", valid, 1), ("test", test, 2)):
        lines = [" " + s + " . " for s in _sentences(n, seed)]
        with open(os.path.join(path, f"{name}.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")


def chars(path, sentences=120, seed=0):
    """Character-level text (tiny-shakespeare's input.txt stand-in): sentences with capitals and punctuation."""
    lines = [s[0].upper() + s[1:] + ("." if i % 3 else ",") for i, s in enumerate(_sentences(sentences, seed))]
    lines.insert(len(lines) // 2, "O God, O God!")  # minGPT's chargpt samples from this prompt
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def names(path, n=300, seed=0):
    """names.txt for makemore: one lowercase name per line, made from syllables."""
    rng = np.random.RandomState(seed)
    syllables = "an el ia ro ma li sa ke ta no ra vi de jo ly mi".split()
    out = sorted({"".join(rng.choice(syllables, size=rng.randint(2, 4))) for _ in range(n)})
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


# syllables by language: names of one language share their sounds, so a character RNN can tell them apart; a few
# carry accents, which the tutorials fold to ASCII
_NAME_SOUNDS = {
    "Italian": ("ro ma ri bel li ni co sta fa gio ran to".split(), "ni lli tti no"),
    "Russian": ("iv an ov ko vic zh ev pe tr mi ly ch".split(), "ov ev sky in"),
    "German": ("sch mid ber ger hof man wal ter kl ein st au".split(), "er mann berg stein"),
    "Spanish": ("gar ci mar tí nez lo pe go mez ro dri guez".split(), "ez es o a"),
    "Chinese": ("zh ang wa li ch en hu yu xi ao ng qi".split(), "ng an ui"),
    "Japanese": ("ta ka ha shi su zu ki wa mo to ya ma".split(), "moto da ka ta"),
}


def language_names(path, per_language=40, seed=0):
    """PATH/<Language>.txt, one surname a line (the char-RNN tutorials' data/names): names built from each
    language's own syllables and ending, some with accented letters (Ślusàrski-style) as the originals have."""
    rng = np.random.RandomState(seed)
    os.makedirs(path, exist_ok=True)
    for language, (syllables, endings) in _NAME_SOUNDS.items():
        names = set()
        while len(names) < per_language:
            word = "".join(rng.choice(syllables, size=rng.randint(1, 3))) + rng.choice(endings.split())
            names.add(word.capitalize())
        with open(os.path.join(path, f"{language}.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(sorted(names)) + "\n")


_PAIRS_SUBJECTS = [("I am", "Je suis"), ("He is", "Il est"), ("She is", "Elle est"), ("You are", "Vous êtes"),
                   ("We are", "Nous sommes"), ("They are", "Ils sont")]
_PAIRS_ADJECTIVES = [("cold", "froid"), ("tall", "grand"), ("happy", "heureux"), ("tired", "fatigué"),
                     ("young", "jeune"), ("small", "petit"), ("hungry", "affamé"), ("ready", "prêt"),
                     ("too cold", "trop froid"), ("very tired", "très fatigué")]
# the sentences the seq2seq tutorial translates after training: every word must be in its vocabulary
_PAIRS_FIXED = [("I am too cold.", "Je suis trop froid."), ("She is five years younger than me.",
                 "Elle a cinq ans de moins que moi."), ("She is too short.", "Elle est trop petit."),
                ("I am not scared to die.", "Je ne crains pas de mourir."),
                ("He is a talented young director.", "C'est un jeune directeur plein de talent.")]


def translation_pairs(path, n=60, seed=0):
    """data/eng-fra.txt as the seq2seq tutorial reads it: 'English<TAB>French' a line, short sentences that
    begin with its English prefixes (I am, he is, ...), with accents and apostrophes to normalise."""
    rng = np.random.RandomState(seed)
    lines = [f"{e}\t{f}" for e, f in _PAIRS_FIXED]
    while len(lines) < n:
        (se, sf), (ae, af) = _PAIRS_SUBJECTS[rng.randint(6)], _PAIRS_ADJECTIVES[rng.randint(10)]
        lines.append(f"{se} {ae}.\t{sf} {af}{'s' if sf.startswith(('Nous', 'Ils')) else ''}.")
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def shakespeare_char(path, sentences=200):
    """nanoGPT's data/shakespeare_char: train.bin / val.bin (uint16 token ids) and meta.pkl, as its prepare.py
    writes them from input.txt (90% / 10% split)."""
    os.makedirs(path, exist_ok=True)
    text = "\n".join(_sentences(sentences, 0)) + "\n"
    vocab = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(vocab)}
    ids = np.array([stoi[c] for c in text], dtype=np.uint16)
    cut = int(len(ids) * 0.9)
    ids[:cut].tofile(os.path.join(path, "train.bin"))
    ids[cut:].tofile(os.path.join(path, "val.bin"))
    with open(os.path.join(path, "meta.pkl"), "wb") as f:
        pickle.dump({"vocab_size": len(vocab), "itos": dict(enumerate(vocab)), "stoi": stoi}, f)

# ----------------------------------------------------------------------------------------------------------- graph


def cora(path, nodes=1700, features=24, classes=4, edges=3400, archive=None):
    """PATH/cora.content (id, binary features, class name per line) and PATH/cora.cites (cited citing), as the
    Cora tarball holds them; features and links follow the class, so a graph net can learn. With `archive`, also
    a cora.tgz at that path (for scripts that download and unpack it). The examples split off 1500 (GCN) or 1600
    (GAT) nodes for validation and test before training on the rest: hence 1700 nodes."""
    rng = np.random.RandomState(11)
    os.makedirs(path, exist_ok=True)
    ids = rng.choice(np.arange(1000, 99999), size=nodes, replace=False)
    labels = rng.randint(0, classes, size=nodes)
    names = [f"Class_{k}" for k in range(classes)]
    lines = []
    for node, k in zip(ids, labels):
        x = (rng.rand(features) < 0.1).astype(int)
        x[k * (features // classes):(k + 1) * (features // classes)] |= (rng.rand(features // classes) < 0.5)
        if not x.any():
            x[k] = 1
        lines.append("\t".join([str(node)] + [str(v) for v in x] + [names[k]]))
    with open(os.path.join(path, "cora.content"), "w") as f:
        f.write("\n".join(lines) + "\n")
    links = set()
    while len(links) < edges:
        a = rng.randint(nodes)
        same = np.flatnonzero(labels == labels[a]) if rng.rand() < 0.8 else np.arange(nodes)
        b = rng.choice(same)
        if a != b:
            links.add((ids[a], ids[b]))
    with open(os.path.join(path, "cora.cites"), "w") as f:
        f.write("\n".join(f"{a}\t{b}" for a, b in sorted(links)) + "\n")
    if archive:
        with tarfile.open(archive, "w:gz") as tar:
            for name in ("cora.content", "cora.cites"):
                tar.add(os.path.join(path, name), arcname=f"cora/{name}")

# ---------------------------------------------------------------------------------------------------------- entry


KINDS = {"mnist": mnist, "fashion_mnist": fashion_mnist, "cifar10": cifar10, "image_folder": image_folder,
         "bsds300": bsds300, "words": words, "wikitext": wikitext, "chars": chars, "names": names,
         "shakespeare_char": shakespeare_char, "cora": cora, "language_names": language_names,
         "translation_pairs": translation_pairs, "mnist_pickle": mnist_pickle, "lenet_checkpoint": lenet_checkpoint}


def make(kind, path, **options):
    """Write the stand-in data of `kind` at `path` (relative paths are taken from the current directory)."""
    if kind not in KINDS:
        raise ValueError(f"unknown stand-in data kind {kind!r}; known: {', '.join(sorted(KINDS))}")
    KINDS[kind](path, **options)

