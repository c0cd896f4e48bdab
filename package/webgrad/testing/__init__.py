"""Tools that measure webgrad against PyTorch: its OpInfo operator database and real scripts."""

from .assert_close import assert_close  # noqa: E402,F401  (torch.testing.assert_close)
from .make_tensor import make_tensor  # noqa: E402,F401  (torch.testing.make_tensor)
