"""Writing CIFAR-format files for the tests (the repository cannot download CIFAR): synthetic images that
hold a learnable signal, a colour and a stripe texture that depend on the class, under noise."""

import os
import pickle

import numpy as np

# a distinct colour per class (RGB), and a stripe period per class
PALETTE = np.array([[230, 25, 75], [60, 180, 75], [255, 225, 25], [0, 130, 200], [245, 130, 48],
                    [145, 30, 180], [70, 240, 240], [240, 50, 230], [210, 245, 60], [128, 128, 128]], np.float64)


def synthetic_images(labels, rng, noise=40.0):
    """uint8 [N, 3, 32, 32]: the class colour, brightened along stripes whose period depends on the class."""
    labels = np.asarray(labels)
    n = len(labels)
    rows = np.arange(32)[None, :, None]
    stripes = ((rows // (2 + labels[:, None, None] % 4)) % 2) * 40.0         # [N, 32, 1]
    base = PALETTE[labels % 10][:, :, None, None] * 0.75                     # [N, 3, 1, 1]
    img = base + stripes[:, None] + rng.normal(0.0, noise, (n, 3, 32, 32))
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def binary_records(labels_per_byte, images):
    """CIFAR binary bytes: per record the label byte(s), then the 3,072 pixels (R plane, G, B)."""
    labels = np.stack([np.asarray(lab, np.uint8) for lab in labels_per_byte], axis=1)
    return np.concatenate([labels, images.reshape(len(images), -1)], axis=1).tobytes()


def write_cifar10(root, per_batch=100, test=200, seed=0, kind="binary"):
    """Write cifar-10-batches-bin/ (or -py/) under root; returns (train images, labels, test images, labels)."""
    rng = np.random.default_rng(seed)
    train_y = rng.integers(0, 10, 5 * per_batch)
    test_y = rng.integers(0, 10, test)
    train_x, test_x = synthetic_images(train_y, rng), synthetic_images(test_y, rng)
    folder = os.path.join(str(root), "cifar-10-batches-bin" if kind == "binary" else "cifar-10-batches-py")
    os.makedirs(folder, exist_ok=True)
    batches = [(f"data_batch_{b + 1}", slice(b * per_batch, (b + 1) * per_batch)) for b in range(5)]
    for name, part, xs, ys in [(n, s, train_x, train_y) for n, s in batches] + [("test_batch", slice(None), test_x, test_y)]:
        if kind == "binary":
            with open(os.path.join(folder, name + ".bin"), "wb") as f:
                f.write(binary_records([ys[part]], xs[part]))
        else:  # as the original files: a dict of 'data' (uint8 [N, 3072]) and 'labels' (ints)
            batch = {"batch_label": name, "labels": [int(v) for v in ys[part]],
                     "data": xs[part].reshape(-1, 3072), "filenames": [f"{i}.png" for i in range(len(ys[part]))]}
            with open(os.path.join(folder, name), "wb") as f:
                pickle.dump(batch, f, protocol=2)
    return train_x, train_y, test_x, test_y


def write_cifar100(root, train=120, test=60, seed=0):
    """cifar-100-binary/ under root (a pathlib.Path): train.bin and test.bin (a coarse and a fine label byte, then
    the pixels) and the fine classes' names, thing0 ... thing99."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-100-binary"
    folder.mkdir(parents=True)
    for name, n in (("train", train), ("test", test)):
        fine = rng.integers(0, 100, n)
        (folder / f"{name}.bin").write_bytes(binary_records([fine // 5, fine], synthetic_images(fine, rng)))
    (folder / "fine_label_names.txt").write_text("\n".join(f"thing{i}" for i in range(100)) + "\n")
    return folder
