"""torchvision stand-in for the corpus runner (see ../README.md): the datasets read the files corpus_data.py writes,
nothing is downloaded. Written against `import torch`, so it serves webgrad.as_torch() and the real torch alike."""

from . import datasets, models, transforms, utils  # noqa: F401

__version__ = "0.0.0+corpus-standin"
