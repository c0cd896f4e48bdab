"""torch._inductor.config: settings kept as given (webgrad compiles nothing, see webgrad.compiler); unknown names
are accepted too, since no setting here changes anything."""

import sys

from ..compiler import _Config, _Patch

max_autotune = False
max_autotune_gemm = False
max_autotune_pointwise = False
coordinate_descent_tuning = False
epilogue_fusion = True
fx_graph_cache = True
freezing = False
cpp_wrapper = False
shape_padding = True
conv_1x1_as_mm = False
force_fuse_int_mm_with_mul = False
use_mixed_mm = True
triton = _Config(cudagraphs=False, cudagraph_trees=True, unique_kernel_names=True, autotune_pointwise=True)
cpp = _Config(threads=-1, simdlen=None)


def patch(changes=None, **kwargs):
    """A context manager and decorator that sets the settings and restores them afterwards."""
    return _Patch(sys.modules[__name__], dict(changes or {}, **kwargs))
