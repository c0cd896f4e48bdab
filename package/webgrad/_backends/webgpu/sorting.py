"""topk, sort and argsort (shaders/sorting.wgsl): bitonic sorts of (key, index) pairs in workgroup memory.

A row of up to 1024 entries is one dispatch. A longer one, for k up to 512 (top-k sampling over a 50,257-token
vocabulary), keeps each tile's best k and sorts the candidates again: 3 dispatches for 50,257 entries and k 40.
A larger k sorts the whole row, padded to a power of two, in scratch: a tile pass, then per doubling beyond a
tile one dispatch per large stride and one for the strides within a tile.
"""

import struct

from ...dtypes import float32, int32, int64
from .. import kernels
from .dispatch import Kernel, Shader, grid, pow2_at_least
from .views import INDEX, check_view

SHADER = Shader("sorting.wgsl", {})
_BINDINGS = ((0, "read"), (1, "write"), (2, "write"), (3, "read"), (4, "write"), (5, "uniform"))
TILE_SORT = Kernel(SHADER, "tile_sort", _BINDINGS, ("SOURCE", "DEST", "GLOBAL_DIR"))
MERGE_GLOBAL = Kernel(SHADER, "merge_global", _BINDINGS)
MERGE_TILE = Kernel(SHADER, "merge_tile", _BINDINGS, ("DEST", "GLOBAL_DIR"))
TILE_MAX = 1024  # sorting.wgsl's: entries one workgroup sorts
WG = 256
# rows, n, k, tiles, tile, x_n, x_offset, values_offset, indices_offset, flags, size, stride, padded
_PARAMS = struct.Struct("<13I")
_X_SOURCE, _PAIRS = 0, 1
_TO_OUTPUTS, _TO_CANDIDATES, _TO_ROW = 0, 1, 2


@kernels.topk.implement("webgpu")
def topk(rt, values, indices, x, k, largest=True):
    check_view(x, "x", dtype=(float32, int32, int64), contiguous=True, ndim=2)
    check_view(values, "values", dtype=x.dtype, contiguous=True, ndim=2)
    check_view(indices, "indices", dtype=INDEX, contiguous=True, ndim=2)
    rows, n = x.shape
    if not 0 <= k <= n or values.shape != (rows, k) or indices.shape != (rows, k):
        raise ValueError(f"topk: values {values.shape} and indices {indices.shape} must be [{rows}, k] with 0 <= k "
                         f"<= {n}")
    if rows == 0 or k == 0:
        return
    flags = (1 if largest else 0) | (0 if x.dtype is float32 else 2)
    outputs = (x.storage, values.storage, indices.storage)

    def params(n_, k_, tiles, tile, size=0, stride=0, padded=0):
        return _PARAMS.pack(rows, n_, k_, tiles, tile, n, x.offset, values.offset, indices.offset, flags, size,
                            stride, padded)

    def tile_sort(source, dest, pairs_in, pairs_out, n_, k_, tiles, tile, padded=0, whole_row=False):
        constants = TILE_SORT.constants({"SOURCE": source, "DEST": dest, "GLOBAL_DIR": whole_row})
        rt.dispatch(TILE_SORT, constants, outputs + (pairs_in or rt.dummy, pairs_out or rt.spare(0)),
                    params(n_, k_, tiles, tile, padded=padded), grid(rows * tiles))

    if n <= TILE_MAX:
        tile_sort(_X_SOURCE, _TO_OUTPUTS, None, None, n, k, 1, max(2, pow2_at_least(n)))
        return
    if k <= TILE_MAX // 2:
        # each pass keeps every tile's best k: the row shrinks to tiles * k <= half its length
        source, pairs, m = _X_SOURCE, None, n
        while True:
            tiles = -(-m // TILE_MAX)
            if tiles == 1:
                tile_sort(source, _TO_OUTPUTS, pairs, None, m, k, 1, TILE_MAX)
                return
            kept = rt.storage(2 * rows * tiles * k, int32)  # (key, index) pairs
            tile_sort(source, _TO_CANDIDATES, pairs, kept, m, k, tiles, TILE_MAX)
            source, pairs, m = _PAIRS, kept, tiles * k
    # the whole row: bitonic over a power of two, in scratch
    padded = pow2_at_least(n)
    tiles = padded // TILE_MAX
    row_pairs = rt.storage(2 * rows * padded, int32)
    tile_sort(_X_SOURCE, _TO_ROW, None, row_pairs, n, k, tiles, TILE_MAX, padded, whole_row=True)
    size = 2 * TILE_MAX
    while size <= padded:
        stride = size // 2
        while stride >= TILE_MAX:
            rt.dispatch(MERGE_GLOBAL, (), outputs + (rt.dummy, row_pairs),
                        params(padded, k, tiles, TILE_MAX, size, stride, padded),
                        grid(-(-rows * padded // 2 // WG)))
            stride //= 2
        dest = _TO_OUTPUTS if size == padded else _TO_ROW
        constants = MERGE_TILE.constants({"DEST": dest, "GLOBAL_DIR": True})
        rt.dispatch(MERGE_TILE, constants, outputs + (rt.dummy, row_pairs),
                    params(padded, k, tiles, TILE_MAX, size, 0, padded), grid(rows * tiles))
        size *= 2
