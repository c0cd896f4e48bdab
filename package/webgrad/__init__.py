"""webgrad: deep learning in the browser on WebGPU, with PyTorch's names and semantics.

    import webgrad as wg
    x = wg.randn(4, 3, requires_grad=True, device="webgpu")
    (x * 2).relu().sum().backward()
"""

__version__ = "0.1.0"

from .dtypes import bool_ as bool, float16, float32, float64, int32, int64, uint8  # torch-style dtype names
from .dtypes import float64 as double, float16 as half
from .dtypes import DType as dtype
from .dtypes import float32 as float
from .dtypes import int32 as int, int64 as long
from .dtypes import int8, int16, int16 as short  # (CPU tensors)
from .dtypes import promote_types, result_type  # torch's type promotion
from .devices import OutOfMemoryError, device, get_default_device, set_default_device
from ._autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from ._inference import inference_mode, is_inference_mode_enabled  # no_grad semantics, as torch's
from ._settings import (get_default_dtype, get_num_interop_threads, get_num_threads, set_default_dtype,
                        set_num_interop_threads, set_num_threads)
from ._tensor import (Size, Tensor, arange, as_tensor, empty, empty_like, eye, from_numpy, frombuffer,
                      full, full_like, linspace, ones, ones_like, tensor, zeros, zeros_like)
from .random import (Generator, manual_seed, initial_seed, seed, rand, rand_like, randint, randn,
                     randn_like, randperm, get_rng_state, set_rng_state)
from .ops.api import FUNCTIONS as _FUNCTIONS  # declares Tensor's methods (ops/api.py) on import
from .io import load, save  # safetensors checkpoints
from . import serialization  # torch.serialization: safe_globals for weights-only loads
from . import sparse  # torch.sparse: sparse COO tensors
from .sparse import sparse_coo, sparse_coo_tensor, mm as spmm  # noqa: F401
from .replay import replayable
from . import amp
from .amp import autocast
from . import autograd, data, datasets, distributions, transforms, utils, webgpu
from . import nn
from . import optim
from . import profiler  # torch.profiler (and torch.autograd.profiler, below)
from .autograd import profiler as _autograd_profiler  # noqa: F401  (makes webgrad.autograd.profiler)
from . import accelerator, backends, cuda  # device discovery, with PyTorch's meaning
from ._as_torch import as_torch
from ._legacy import BoolTensor, ByteTensor, DoubleTensor, FloatTensor, HalfTensor, IntTensor, LongTensor  # noqa: F401
from .dtypes import bfloat16  # CPU tensors: float32 words holding bfloat16 values (see webgrad/dtypes.py)
from .dtypes import complex64, complex64 as cfloat, complex128, complex128 as cdouble  # webgrad/_complex.py
from ._typeinfo import finfo, iinfo
from ._norm import norm
from ._out import with_out as _with_out
from . import distributed, jit, onnx  # torch.distributed (a world of one), TorchScript's names, ONNX (refused)
from . import special  # torch.special: Bessel, gamma and error functions, orthogonal polynomials
from . import version  # torch.version: the build (no CUDA/ROCm toolkit)
from . import library  # torch.library: Python custom operators (torch.ops.<namespace>)
from . import compiler  # torch.compiler (and torch._dynamo): the switches around torch.compile
from . import _dynamo, _inductor  # noqa: F401  (torch._dynamo.config after a bare `import torch`)
from ._printing import set_printoptions
from .memory_format import channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format
from .layout import layout, strided
from . import fft, linalg, signal  # torch.fft (transforms on complex64), torch.linalg (norms, products), torch.signal
from . import masked  # torch.masked: reductions and normalizations over the elements a mask keeps
from math import e, inf, nan, pi  # torch.inf, torch.nan, torch.pi, torch.e: Python floats, as PyTorch's
newaxis = None  # torch.newaxis (x[:, torch.newaxis]), as NumPy's
from ._out import add_out_argument as _add_out_argument

# Every op function (webgrad.exp, webgrad.cat, ...): the hand-written ones by name and the op table's
# records, both listed in ops/api.py; then out= on those PyTorch gives it.
globals().update(_FUNCTIONS)
_add_out_argument(globals())
norm = _with_out(norm)
globals().update(linalg.TORCH_FUNCTIONS)  # torch.inverse, det, svd, qr, cholesky_solve, ... (linalg.py)
from .nn.functional import conv1d, conv3d, conv_transpose1d, conv_transpose3d  # torch.conv1d, ...: F's functions
from .nn.functional import cosine_similarity, pairwise_distance, pdist  # noqa: F401  (torch.cosine_similarity, ...)
from .amp.autocast_mode import (get_autocast_cpu_dtype, get_autocast_dtype, get_autocast_gpu_dtype,  # noqa: F401
                                is_autocast_cpu_enabled, is_autocast_enabled)
from ._settings import set_default_tensor_type  # noqa: F401  (deprecated in PyTorch, still in old scripts)
from . import func, mps, testing, xpu  # torch.func.functional_call, torch.mps/xpu (no such device), torch.testing
from .func import vmap  # torch.vmap: torch.func.vmap
from . import hub  # torch.hub: load_state_dict_from_url, download_url_to_file, hub.load of a local hubconf.py
from ._dynamo.eval_frame import compile  # noqa: A001  (eager: the model runs as written)
from ._flags import (are_deterministic_algorithms_enabled, get_float32_matmul_precision,  # noqa: F401
                     is_deterministic_algorithms_warn_only_enabled, set_float32_matmul_precision,
                     use_deterministic_algorithms)
from ._flags import get_deterministic_debug_mode, set_deterministic_debug_mode  # noqa: F401
from ._symbolic import cond, sym_float, sym_int, sym_ite, sym_max, sym_min, sym_not, sym_sum  # noqa: F401
from . import _foreach  # torch._foreach_add_, _foreach_lerp_, _foreach_norm ...: one op per tensor of a list
globals().update({_name: getattr(_foreach, _name) for _name in _foreach.NAMES})
from ._predicates import is_floating_point, is_nonzero, is_tensor, numel
from . import cpu  # torch.cpu: the CPU device's module (torch.get_device_module("cpu"))
from .amp import GradScaler  # torch.GradScaler: torch.amp.GradScaler
from ._nn_aten import FUNCTIONS as _NN_ATEN  # torch.layer_norm, dropout, lstm_cell, ...: ATen's signatures
from ._toplevel_math import FUNCTIONS as _TOPLEVEL_MATH  # torch.gcd, unravel_index, asarray, the *_copy views, ...
from ._runtime_switches import FUNCTIONS as _SWITCHES  # torch.set_warn_always, set_anomaly_enabled, autocast state
from ._nn_native import FUNCTIONS as _NN_NATIVE  # torch.native_layer_norm, _softmax_backward_data, _chunk_cat, ...
from ._lowrank import FUNCTIONS as _LOWRANK  # torch.svd_lowrank, pca_lowrank
from ._householder import FUNCTIONS as _HOUSEHOLDER  # torch.geqrf, ormqr
from ._aten_masked_index import FUNCTIONS as _MASKED_INDEX  # torch._unsafe_masked_index(_put_accumulate)
globals().update(_NN_ATEN, **_TOPLEVEL_MATH, **_SWITCHES, **_NN_NATIVE, **_LOWRANK, **_HOUSEHOLDER, **_MASKED_INDEX)
from . import overrides, _C  # torch.overrides: Tensor subclasses, __torch_function__ (wrappers installed on first use)

__all__ = [
    "bool", "float16", "float32", "float64", "int32", "int64", "uint8", "int8", "int16", "short", "double", "half", "amp", "autocast", "dtype", "float", "int", "long",
    "promote_types", "result_type", "finfo", "iinfo",
    "device", "get_default_device", "set_default_device",
    "enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled", "inference_mode", "is_inference_mode_enabled",
    "get_default_dtype", "set_default_dtype", "get_num_threads", "set_num_threads", "get_num_interop_threads",
    "set_num_interop_threads", "serialization", "sparse", "sparse_coo", "sparse_coo_tensor", "spmm",
    "Size", "Tensor", "arange", "as_tensor", "empty", "empty_like", "eye", "from_numpy", "frombuffer",
    "full", "full_like", "linspace", "ones", "ones_like", "tensor", "zeros", "zeros_like",
    "Generator", "manual_seed", "initial_seed", "seed", "rand", "rand_like", "randint", "randn",
    "randn_like", "randperm", "get_rng_state", "set_rng_state",
    "accelerator", "backends", "cuda", "as_torch", "set_printoptions", "channels_last", "channels_last_3d",
    "contiguous_format", "memory_format", "preserve_format", "layout", "strided",
    "complex64", "cfloat", "complex128", "cdouble",
    "BoolTensor", "ByteTensor", "DoubleTensor", "FloatTensor", "HalfTensor", "IntTensor", "LongTensor", "bfloat16",
    "norm", "distributed", "jit", "onnx", "conv1d", "conv3d", "conv_transpose1d", "conv_transpose3d",
    "load", "save", "replayable", "autograd", "data", "datasets", "distributions", "transforms", "utils", "webgpu", "nn", "optim",
    *sorted(_FUNCTIONS), *sorted(linalg.TORCH_FUNCTIONS),
    "func", "mps", "testing", "xpu", "compile", "are_deterministic_algorithms_enabled", "get_float32_matmul_precision",
    "is_deterministic_algorithms_warn_only_enabled", "set_float32_matmul_precision", "use_deterministic_algorithms",
    "is_floating_point", "is_nonzero", "is_tensor", "numel", "vmap",
    "e", "inf", "nan", "pi", "newaxis",
    "cpu", "GradScaler", *sorted(_NN_ATEN), *sorted(_TOPLEVEL_MATH), *sorted(_SWITCHES), *sorted(_NN_NATIVE),
    *sorted(_LOWRANK), *sorted(_HOUSEHOLDER), *sorted(_MASKED_INDEX),
]
