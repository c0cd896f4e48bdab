"""torch.version: what the build is. webgrad is pure Python on WebGPU, so every GPU toolkit field is None, as
in a CPU-only torch build; ``__version__`` is webgrad's own version (also ``webgrad.__version__``)."""

from . import __version__

__all__ = ["__version__", "debug", "cuda", "git_version", "hip", "rocm", "xpu"]
debug = False
cuda = None
git_version = None
hip = None
rocm = None
xpu = None
