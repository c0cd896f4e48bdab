"""The ops, one module per family: forward, backward and CPU-side rules side by side.

    table.py        the op table: one record per elementwise op (CPU reference, WGSL, derivative, exposure)
    core.py         helpers every family uses (results, broadcasting, casts)
    elementwise.py  the table's ops made differentiable, plus arithmetic with scalars, comparisons, where
    reduce.py  matmul.py  shape.py  loss.py  conv.py  inplace.py   the hand-written families
    api.py          where ops become public: Tensor methods and operators, webgrad.* functions

This package imports nothing at import time, so backends can read ``ops.table`` as plain data.
"""
