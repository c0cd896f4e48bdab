"""torch.utils.tensorboard: SummaryWriter writing scalars to TensorBoard event files (writer.py)."""

from .writer import FileWriter, SummaryWriter  # noqa: F401

__all__ = ["FileWriter", "SummaryWriter"]
