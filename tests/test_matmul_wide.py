"""matmul_plan's choice for a wide layer at a small batch (128x128 tiles split across workgroups, vec4
stores) and the kernel under that plan, against NumPy (test_matmul_kernel's harness: poisoned output,
junk around every operand). Shapes scaled down from the wide MLP 3072-4096-4096-10 at batch 128 so that
lavapipe runs them in seconds, with ragged edges and every transpose."""

import pytest

pytest.importorskip("wgpu")

from webgrad._backends.webgpu import matmul_plan  # noqa: E402

from test_matmul_kernel import TRANS, check, runner  # noqa: E402,F401  (runner: the module's fixture)


def _plan(M, N, K, ta=False, tb=False):
    return matmul_plan.plan(1, M, N, K, ta, tb, False, False, 0, 0, 0, 0, 0, 0)


def test_wide_layer_plans():
    # forward x @ W^T and input gradient dY @ W of a 4096-wide layer at batch 128
    for K, ta, tb in ((4096, False, True), (4096, False, False), (3072, False, True)):
        p = _plan(128, 4096, K, ta, tb)
        assert (p.config, p.splits, p.entry_point) == ("128x128", 8, "matmul_vv4"), p
        assert p.workgroups == (32, 1, 8) and p.reduce.entry_point == "matmul_reduce4"
    # the weight gradient X^T @ dY (K = 128) fills the GPU unsplit
    assert _plan(4096, 4096, 128, True, False).splits == 1
    # the tall-and-narrow mirror image takes the same tile
    assert _plan(4096, 128, 4096).config == "128x128"
    # products the rule leaves alone: square, small on both sides, and ResNet-18's weight gradients
    assert _plan(4096, 4096, 4096).config == "64x128"
    assert _plan(128, 1152, 128 * 256).config == "64x128"
    assert _plan(256, 2304, 128 * 64).config == "64x128"


@pytest.mark.parametrize("trans_a,trans_b", TRANS)
def test_wide_split_plan_parity(runner, trans_a, trans_b):  # noqa: F811
    # the wide plan's configuration and split on ragged shapes: M, N not multiples of the tile, K not of
    # BK nor of the split; bias and ReLU applied by the reduction
    check(runner, 1, 130, 260, 1037, trans_a, trans_b, bias=True, relu=True, config="128x128", splits=8, seed=31)
    p = check(runner, 1, 128, 512, 1024, trans_a, trans_b, bias=True, config="128x128", splits=8, seed=32)
    assert p.entry_point.endswith("4")  # N % 4 == 0 and a short K per split: vec4 stores
    # batched, one operand broadcast, offsets
    check(runner, 2, 96, 136, 520, trans_a, trans_b, bcast_b=True, config="128x128", splits=8, seed=33,
          a_off=4, b_off=8)
