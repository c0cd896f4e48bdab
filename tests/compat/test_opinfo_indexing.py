"""OpInfo entries of the indexing, selection, order-statistics, logic, torch.masked and nn.functional families added
for issue 39, run on WebGPU (test_opinfo.py runs every entry on the cpu; the full WebGPU run is
`python -m webgrad.testing.opinfo --device webgpu`). Left out: softmin:with_dtype (float64)."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("expecttest")  # op_db needs it

from helpers import assert_opinfo_entries_pass, webgpu_available  # noqa: E402

ENTRIES = {
    "scatter": "index_add index_copy index_fill index_put index_reduce:amax index_reduce:amin index_reduce:mean "
               "index_reduce:prod scatter scatter_add scatter_reduce:sum scatter_reduce:prod scatter_reduce:mean "
               "scatter_reduce:amax scatter_reduce:amin masked_scatter take put select_scatter slice_scatter "
               "diagonal_scatter as_strided_scatter",
    "selection": "masked_select nonzero nonzero_static argwhere unique unique_consecutive searchsorted bucketize isin",
    "statistics": "kthvalue median nanmedian mode quantile nanquantile histc histogram histogramdd cummax cummin "
                  "cumprod logcumsumexp",
    "logic": "all any count_nonzero aminmax nansum nanmean isclose allclose equal isneginf isposinf signbit trace "
             "dist diff gradient trapezoid trapz cumulative_trapezoid cov corrcoef",
    "masked": "masked.amax masked.amin masked.argmax masked.argmin masked.cumprod masked.cumsum masked.log_softmax "
              "masked.logaddexp masked.logsumexp masked.mean masked.median masked.norm masked.normalize masked.prod "
              "masked.softmax masked.softmin masked.std masked.sum masked.var",
    "losses": "nn.functional.kl_div nn.functional.gaussian_nll_loss nn.functional.poisson_nll_loss "
              "nn.functional.cosine_embedding_loss nn.functional.hinge_embedding_loss "
              "nn.functional.margin_ranking_loss nn.functional.multi_margin_loss nn.functional.multilabel_margin_loss "
              "nn.functional.multilabel_soft_margin_loss nn.functional.soft_margin_loss "
              "nn.functional.triplet_margin_loss nn.functional.triplet_margin_with_distance_loss",
    "layers": "nn.functional.glu nn.functional.hardshrink nn.functional.softshrink nn.functional.tanhshrink "
              "nn.functional.threshold nn.functional.rrelu nn.functional.softmin nn.functional.normalize "
              "nn.functional.rms_norm nn.functional.local_response_norm nn.functional.cosine_similarity "
              "nn.functional.pairwise_distance nn.functional.pdist nn.functional.conv1d nn.functional.conv_transpose1d "
              "nn.functional.avg_pool1d nn.functional.max_pool1d nn.functional.adaptive_avg_pool1d "
              "nn.functional.adaptive_max_pool1d nn.functional.adaptive_max_pool2d nn.functional.unfold "
              "nn.functional.channel_shuffle nn.functional.embedding_bag nn.functional.bilinear "
              "nn.functional.max_unpool1d nn.functional.max_unpool1d:grad nn.functional.max_unpool2d "
              "nn.functional.max_unpool2d:grad nn.functional.max_unpool3d nn.functional.max_unpool3d:grad",
}


@pytest.mark.skipif(not webgpu_available(), reason="no WebGPU adapter")
@pytest.mark.parametrize("family", sorted(ENTRIES))
def test_entries_pass_on_webgpu(family):
    assert_opinfo_entries_pass(ENTRIES[family].split(), "webgpu")
