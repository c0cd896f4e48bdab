"""webgrad: deep learning in the browser on WebGPU, with PyTorch's names and semantics.

    import webgrad as wg
    x = wg.randn(4, 3, requires_grad=True, device="webgpu")
    (x * 2).relu().sum().backward()
"""

__version__ = "0.1.0"

from .dtypes import bool_ as bool, float32, float64, int32, uint8  # noqa: F401,E402  (torch-style dtype names)
from .dtypes import float64 as double  # noqa: F401,E402
from .dtypes import DType as dtype  # noqa: F401,E402
from .dtypes import float32 as float  # noqa: F401,E402
from .dtypes import int32 as int, int32 as long  # noqa: F401,E402
from .devices import device, get_default_device, set_default_device  # noqa: F401,E402
from .autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: F401,E402
from ._tensor import (Size, Tensor, arange, as_tensor, empty, empty_like, eye, from_numpy, frombuffer,  # noqa: F401,E402
                     full, full_like, linspace, ones, ones_like, tensor, zeros, zeros_like)
from .random import (Generator, manual_seed, initial_seed, seed, rand, rand_like, randint, randn,  # noqa: F401,E402
                     randn_like, randperm, get_rng_state, set_rng_state)
from . import ops as _ops  # noqa: E402  (attaches methods to Tensor)

globals().update({_k: _v for _k, _v in _ops.FUNCTIONS.items() if _k not in globals()})

from .io import load, save  # noqa: E402,F401  (safetensors checkpoints)
from .replay import replayable  # noqa: E402,F401
from . import data, datasets, utils, webgpu  # noqa: E402,F401
from . import nn  # noqa: E402,F401
from . import optim  # noqa: E402,F401
from . import accelerator, backends, cuda  # noqa: E402,F401  (device discovery with PyTorch's meaning)
from ._printing import set_printoptions  # noqa: E402,F401
from .memory_format import channels_last, contiguous_format, memory_format, preserve_format  # noqa: E402,F401
from ._out import add_out_argument as _add_out_argument  # noqa: E402
_add_out_argument(globals())  # out= on the functions PyTorch gives it
