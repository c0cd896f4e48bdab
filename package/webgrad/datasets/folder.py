"""ImageFolder: the user's own images, one subfolder per class (root/class_name/*.png|jpg), as torchvision.

In CPython the images are decoded with Pillow (an optional dependency: without it the error says so); in the
browser the page decodes them with createImageBitmap and hands over the pixels. Every image is converted to
RGB and brought to one size (`size`, or the first image's), then all are uploaded once as uint8 [N, 3, H, W].
Files whose extension is not an image's are skipped and counted (`.skipped`); so are images Pillow cannot
decode, and images over Pillow's limit of pixels (Image.MAX_IMAGE_PIXELS, 89.5 million: a decompression
bomb, checked from the file's header before anything is decoded), with a warning naming them. The one error
of a folder whose files are bad is FileNotFoundError: no file of the folder could be used.
"""

import os
import warnings

from .images import DeviceImages

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def find_classes(directory):
    """(sorted class folder names, {name: index}), as torchvision's find_classes."""
    try:
        classes = sorted(entry.name for entry in os.scandir(directory) if entry.is_dir())
    except FileNotFoundError:
        raise FileNotFoundError(f"image folder {directory!r} not found") from None
    if not classes:
        raise FileNotFoundError(f"Couldn't find any class folder in {directory}.")
    return classes, {name: i for i, name in enumerate(classes)}


def _pil():
    try:
        from PIL import Image
    except ImportError:
        raise RuntimeError("ImageFolder decodes PNG and JPEG files with Pillow, which is not installed: "
                           "pip install pillow (in the browser page, the worker decodes images itself)") from None
    return Image


def pil_loader(path):
    """The image at `path` as RGB. OSError for a file Pillow cannot decode, whatever Pillow raised (a corrupt
    file reaches parsers that raise SyntaxError, struct.error, EOFError ...), or for an image over Pillow's
    limit of pixels, from the size in its header."""
    Image = _pil()
    try:
        with open(path, "rb") as f:
            img = Image.open(f)
            limit = Image.MAX_IMAGE_PIXELS
            if limit and img.width * img.height > limit:
                raise OSError(f"{img.width}x{img.height} pixels, over Pillow's limit of {limit} "
                              "(Image.MAX_IMAGE_PIXELS): a decompression bomb?")
            return img.convert("RGB")
    except OSError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure of a parser on a corrupt file is that file's problem
        raise OSError(f"{type(e).__name__}: {e}") from None


class ImageFolder(DeviceImages):
    """dataset[i] is (float32 image [3, H, W] in [0, 1], class index); `.samples` lists (path, class index),
    `.classes` the class folder names. size: (height, width) or an int to resize every image to (default: the
    first image's size; images of other sizes are resized, counted in `.resized`)."""

    def __init__(self, root, transform=None, target_transform=None, loader=None, is_valid_file=None,
                 size=None, device=None, allow_empty=False):
        self.root = os.fspath(root)
        self.classes, self.class_to_idx = find_classes(self.root)
        self.samples, skipped = self.make_dataset(self.root, self.class_to_idx, is_valid_file, allow_empty)
        Image = _pil()  # resizing needs Pillow even with a custom loader
        load = loader or pil_loader
        if size is not None:
            size = (int(size), int(size)) if isinstance(size, int) else (int(size[0]), int(size[1]))
        planes, labels, self.resized, kept = [], [], 0, []
        for path, label in self.samples:
            try:
                img = load(path)
                img.load()
            except (OSError, SyntaxError, ValueError) as e:  # Pillow's errors for a corrupt or unknown file
                skipped.append((path, f"cannot be decoded ({e})"))
                continue
            if img.mode != "RGB":
                img = img.convert("RGB")
            if size is None:
                size = (img.height, img.width)
            if (img.height, img.width) != size:
                img = img.resize((size[1], size[0]), Image.BILINEAR)
                self.resized += 1
            planes.extend(band.tobytes() for band in img.split())  # R, G, B planes: CHW without NumPy
            labels.append(label)
            kept.append((path, label))
        undecodable = [p for p, why in skipped if why.startswith("cannot")]
        if undecodable:
            warnings.warn(f"ImageFolder skipped {len(undecodable)} file(s) that could not be decoded, e.g. "
                          f"{undecodable[0]}", stacklevel=2)
        if not kept:
            raise FileNotFoundError(f"no image in {self.root} could be decoded ({len(skipped)} files skipped)")
        self.samples = self.imgs = kept
        self.skipped = skipped
        h, w = size
        self._store(b"".join(planes), labels, (len(kept), 3, h, w), device, transform, target_transform)

    @staticmethod
    def make_dataset(directory, class_to_idx, is_valid_file=None, allow_empty=False):
        """([(path, class index)], [(path, why skipped)]): files walked in sorted order, as torchvision."""
        if is_valid_file is None:
            def is_valid_file(path):
                return path.lower().endswith(IMG_EXTENSIONS)
        samples, skipped, empty = [], [], []
        for name in sorted(class_to_idx):
            found = 0
            for folder, _, files in sorted(os.walk(os.path.join(directory, name), followlinks=True)):
                for file in sorted(files):
                    path = os.path.join(folder, file)
                    if is_valid_file(path):
                        samples.append((path, class_to_idx[name]))
                        found += 1
                    else:
                        skipped.append((path, "not an image file"))
            if not found:
                empty.append(name)
        if empty and not allow_empty:
            raise FileNotFoundError(f"Found no valid file for the classes {', '.join(sorted(empty))}. "
                                    f"Supported extensions are: {', '.join(IMG_EXTENSIONS)}")
        return samples, skipped

    def _repr_lines(self):
        h, w = self.data.shape[2:]
        return [f"    Classes: {len(self.classes)}", f"    Image size: {h}x{w}",
                f"    Skipped files: {len(self.skipped)}, resized images: {self.resized}"]
