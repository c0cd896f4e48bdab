"""The large-product tiles of matmul.wgsl (matmul_plan's "w" configurations: threads mapped in 8 x 4
subgroup blocks, XOR-swizzled workgroup tiles, and the single-buffered BK = 16 variant) against NumPy
on lavapipe, through test_matmul_kernel's harness (poisoned output, junk around every operand): every
transpose, ragged edges (M, N not multiples of the tile, K not of BK), scalar and vec4 loads and stores,
split-K, bias and ReLU; and the planner's choice of them. Sizes are small so that lavapipe runs each
case in about a second (pipeline compiles dominate)."""

import pytest

pytest.importorskip("wgpu")

from webgrad._backends.webgpu import matmul_plan  # noqa: E402

from test_matmul_kernel import TRANS, check, runner  # noqa: E402,F401  (runner: the module's fixture)

BIG = ["128x128w", "64x128w", "128x64w", "128x128w16", "64x128w16"]


def _plan(M, N, K, ta=False, tb=False, **kw):
    return matmul_plan.plan(1, M, N, K, ta, tb, False, False, 0, 0, 0, 0, 0, 0, **kw)


def test_big_configs_fit_default_workgroup_memory():
    # a browser grants 16,384 bytes of workgroup memory by default; the kernel declares nothing but the
    # two tiles (matmul_reduce's lanes belong to other entry points)
    for name in BIG:
        c = dict(matmul_plan.CONFIGS[name])
        bm, bn = matmul_plan.config_shape(name)
        assert c.get("NBUF", 2) * c["BK"] * (bm + bn) * 4 <= 16384, name
        matmul_plan.check_config(c, 16384)


def test_products_declare_only_the_tiles():
    # check_config bounds As and Bs by 16,384 bytes; that is the whole use only while the product entry
    # points touch no other workgroup variable (a 4-byte one, padded to 16, once put five configurations
    # at 16,400 bytes, which Chromium refuses under default limits; wgpu-native does not check). The
    # reduction's lanes belong to matmul_reduce / matmul_reduce4 only.
    import re

    from webgrad._backends.webgpu import matmul

    src = matmul.shader().source()
    names = re.findall(r"var<workgroup>\s+(\w+)", src)
    assert sorted(names) == ["As", "Bs", "lanes1", "lanes4"], names
    body = src[:src.index("fn matmul_reduce(")]
    assert not re.search(r"\blanes[14]\[", body), "a product entry point uses the reduction's workgroup memory"


@pytest.mark.parametrize("trans_a,trans_b", TRANS)
@pytest.mark.parametrize("config", ["128x128w", "128x128w16"])
def test_big_tiles_every_transpose(runner, config, trans_a, trans_b):  # noqa: F811
    # two tiles down and three across, the last ones ragged; K = 76: a partial last step of BK 8 and 16, vec4 loads
    p = check(runner, 1, 200, 260, 76, trans_a, trans_b, bias=True, relu=True, config=config, splits=1, seed=3)
    assert p.entry_point == "matmul_vv4"


@pytest.mark.parametrize("config,trans_a,trans_b", [("64x128w", False, True), ("128x64w", True, False),
                                                    ("64x128w16", True, True)])
def test_big_tiles_scalar_loads_and_stores(runner, config, trans_a, trans_b):  # noqa: F811
    # odd offsets and K: scalar loads of a (a_off = 1) and scalar, bounds-checked stores (N = 203); batched
    check(runner, 2, 131, 203, 45, trans_a, trans_b, bias=True, config=config, splits=1, seed=5, a_off=1,
          b_off=3, o_off=2)


@pytest.mark.parametrize("trans_a,trans_b", [(False, True), (True, False)])
def test_big_tiles_split_k(runner, trans_a, trans_b):  # noqa: F811
    # the wide plan's tile (choose_config's 128x128, run as 128x128w) split across workgroups, a ragged
    # last split; bias and ReLU move to the reduction
    p = check(runner, 1, 130, 136, 300, trans_a, trans_b, bias=True, relu=True, config="128x128w", splits=3,
              seed=7)
    assert p.splits == 3 and p.reduce is not None


def test_planner_takes_big_tiles():
    # the measured rule (matmul_plan._big_twin): big square products of every transpose on 128x128 warp
    # tiles, NT on the BK=16 twin
    for ta, tb in TRANS:
        want = "128x128w16" if tb and not ta else "128x128w"
        assert _plan(4096, 4096, 4096, ta, tb).config == want
        assert _plan(2048, 2048, 2048, ta, tb).config == want
    # too few 128x128 tiles to fill the GPU, or a K too short for them: the middle twin (matmul_plan.MID_TWIN),
    # as for a transformer's projections at 4096 tokens; a K under 384 keeps the plain tile
    assert _plan(2048, 1024, 2048).config == "64x128w16"
    for M, N, K, ta, tb in ((4096, 1536, 384, False, True), (4096, 384, 1152, False, False),
                            (1152, 384, 4096, True, False)):
        assert _plan(M, N, K, ta, tb).config == "64x128w16"
    assert _plan(4096, 1536, 128, False, True).config in ("64x128", "128x64")
    # too few of its tiles for two workgroups per SM, with a long K: split 4 ways (matmul_plan.MID_SPLITS)
    assert (_plan(4096, 384, 1536, False, True).splits, _plan(4096, 1536, 384, False, True).splits) == (4, 1)
    # up to 511 tiles over a K of 4096 and more (gpt2-small's weight gradients); a shorter K stays unsplit
    assert (_plan(3072, 768, 8192, True, False).splits, _plan(2048, 1024, 2048).splits) == (4, 1)
    # a weight gradient with fewer twin tiles over 4,096 tokens and more: about 1,024 workgroups, up to 16 splits
    # (matmul_plan.WEIGHT_GRAD_WORKGROUPS); under that K, choose_splits's 2 a SM
    assert [_plan(M, N, K, True, False).splits for M, N, K in ((1536, 384, 16384), (1152, 384, 4096),
                                                               (2304, 768, 8192), (1152, 384, 2048))] == [15, 16, 5, 5]
    # the wide layer at batch 128: 128x128 tiles split 8 ways, as the BK=16 twin (matmul_plan.WIDE_TWIN)
    p = _plan(128, 4096, 4096, False, True)
    assert (p.config, p.splits) == ("128x128w16", 8)
    # a convolution's gathered operand keeps the plain tiles; so does a forced configuration
    g = (16, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1)
    assert not _plan(256, 256 * 4, 64 * 9 * 16, gather=g).config.endswith(("w", "w16"))
    assert _plan(4096, 4096, 4096, config="64x128").config == "64x128"
    # small products are not affected
    assert not _plan(256, 256, 256).config.endswith("w")


def test_planner_splits_long_plain_products_over_big_tiles():
    # matmul_plan.LONG_NN_TWIN: an input gradient through a language model's output layer (K = the vocabulary)
    # with too few 128x128 tiles for the big rule runs on them split across workgroups, about 512 of them
    for M, N, K, splits in ((4096, 512, 32000, 4), (4096, 768, 32000, 3), (4096, 512, 16384, 4),
                            (4096, 512, 32001, 4)):
        p = _plan(M, N, K)
        assert (p.config, p.splits) == ("128x128w16", splits), (M, N, K, p)
    assert _plan(4096, 512, 32001).entry_point == "matmul_sv"  # (a's rows not 16-byte aligned: scalar loads)
    # a shorter K, a transposed operand, or enough 128x128 tiles keep the rules above
    assert _plan(4096, 512, 8192).config == "64x128w16"
    assert _plan(32000, 512, 4096, True, False).config == "128x128w"
    assert _plan(4096, 32000, 512, False, True).splits == 1
    assert _plan(8192, 768, 50257).config == "128x128w"


def test_planner_stores_vec4s_where_they_paid():
    # matmul_plan.VEC_STORE_MAX_K_BIG: unsplit 128x128 tiles store vec4s up to a K of 256, smaller tiles up to 512
    assert _plan(4096, 1536, 512, False, True).entry_point == "matmul_vv"  # 128x128w16
    assert _plan(4096, 1536, 512).entry_point == "matmul_vv"  # 128x128w
    assert _plan(4096, 4096, 128, True, False).entry_point == "matmul_vv4"  # a weight gradient over a batch
    assert _plan(4096, 512, 512, False, True).entry_point == "matmul_vv4"  # 64x128w16
    p = _plan(128, 4096, 4096, False, True)  # the wide plan: split 8 ways, each split walking K = 512
    assert (p.splits, p.entry_point) == (8, "matmul_vv4")


def test_planned_long_plain_product_runs(runner, monkeypatch):  # noqa: F811
    # a product the planner gives LONG_NN_TWIN split across workgroups (the K threshold lowered so that a small
    # product qualifies), run as planned: ragged tiles and a ragged last split, bias and ReLU in the reduction
    matmul_plan._plan.cache_clear()
    monkeypatch.setattr(matmul_plan, "LONG_NN_MIN_K", 512)
    monkeypatch.setattr(matmul_plan, "LONG_NN_MIN_TILES", 2)
    try:
        p = check(runner, 1, 500, 252, 1036, False, False, bias=True, relu=True, seed=13)
        assert (p.config, p.reduce is not None) == ("128x128w16", True), p
        assert p.splits == matmul_plan.LONG_NN_MAX_SPLITS
    finally:
        matmul_plan._plan.cache_clear()


def test_planned_middle_twin_runs(runner):  # noqa: F811
    # a product the planner gives the middle twin, split across workgroups, run as planned: bias and ReLU
    p = check(runner, 1, 256, 512, 1036, False, True, bias=True, relu=True, seed=11)
    assert p.config == "64x128w16" and p.splits > 1
    p = check(runner, 1, 270, 512, 1036, True, False, seed=12)  # ragged rows, a transposed a
    assert p.config == "64x128w16" and p.splits > 1


def test_planned_big_tiles_run(runner, monkeypatch):  # noqa: F811
    # a product the planner gives a warp-tiled tile, run as planned (the tile-count threshold lowered so
    # that a small product qualifies): ragged 128x128 tiles, K not a multiple of BK, bias and ReLU
    matmul_plan._plan.cache_clear()
    monkeypatch.setattr(matmul_plan, "BIG_W_MIN_TILES", 4)
    try:
        p = check(runner, 1, 250, 510, 1036, False, False, bias=True, relu=True, seed=9)
        assert p.config == "128x128w", p
        p = check(runner, 1, 250, 510, 1036, False, True, seed=10)
        assert p.config == "128x128w16", p
    finally:
        matmul_plan._plan.cache_clear()


def test_experimental_config_specs():
    # bench kernels --configs and tools/conv_sweep.py --configs take "WG_X,WG_Y,TM,TN,BK[,KS][,w][,nbuf1]"
    from webgrad._backends.webgpu import conv_gemm

    name, c = matmul_plan.parse_config_spec("16,16,8,8,16,w,nbuf1")
    assert name == "128x128:16,16,8,8,16,w,nbuf1" and c == matmul_plan.CONFIGS["128x128w16"]
    assert matmul_plan.parse_config_spec("8,8,4,4,8,4")[1] == dict(matmul_plan.CONFIGS["32x32k4"], NBUF=2)
    for bad in ("16,16,8,8", "16,16,8,8,16,x", "16,16,8,8,64,w"):
        with pytest.raises(ValueError):
            matmul_plan.add_config(bad)
    with pytest.raises(ValueError, match="KS"):
        conv_gemm.add_config("8,8,4,4,8,4")
    # up to 32 KiB of workgroup memory (the double-buffered BK = 16 twin), for sweeps: the plan never names them
    wide, conv = matmul_plan.add_config("16,16,8,8,16,w"), conv_gemm.add_config("16,8,8,8,16,w")
    try:
        assert matmul_plan.CONFIGS[wide]["NBUF"] == 2 and conv_gemm.CONFIGS[conv]["BK"] == 16
        with pytest.raises(ValueError, match="16384 bytes"):
            matmul_plan.check_config(dict(matmul_plan.CONFIGS[wide]))
    finally:
        del matmul_plan.CONFIGS[wide], conv_gemm.CONFIGS[conv]
