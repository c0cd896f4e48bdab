"""torch._inductor: the settings of PyTorch's compiler backend that scripts set (config.coordinate_descent_tuning,
config.triton.cudagraphs ...). webgrad's torch.compile runs eagerly, so they are kept as given and change nothing."""

from . import config  # noqa: F401
