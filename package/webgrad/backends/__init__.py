"""torch.backends: switches scripts set for PyTorch's native backends (cudnn, mps).

webgrad's own device backends are internal (webgrad._backends); this package only answers the
questions PyTorch scripts ask, with PyTorch's meaning on a machine without CUDA or MPS.
"""

from . import cpu, cuda, cudnn, mkldnn, mps, openmp, opt_einsum  # noqa: F401
