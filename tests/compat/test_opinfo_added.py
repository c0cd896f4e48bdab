"""OpInfo entries of the composed families and near misses fixed for issue 39, run on WebGPU (the full WebGPU
run is `python -m webgrad.testing.opinfo --device webgpu`; test_opinfo.py runs every entry on the cpu)."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("expecttest")  # op_db needs it

from helpers import assert_opinfo_entries_pass, webgpu_available  # noqa: E402

ENTRIES = {
    "near misses": "var:unbiased std:unbiased var_mean:unbiased std_mean:unbiased take_along_dim bool byte float half "
                   "int long linspace:tensor_overload movedim broadcast_shapes squeeze squeeze:multiple mean "
                   "index_select gather matmul __rmatmul__ prod cat nn.functional.max_pool2d nn.functional.avg_pool2d "
                   "nn.functional.pad:reflect nn.functional.pad:replicate nn.functional.pad:replicate_negative "
                   "nn.functional.pad:circular nn.functional.interpolate:bicubic nn.functional.interpolate:area "
                   "nn.functional.cross_entropy nn.functional.conv_transpose2d nn.functional.group_norm "
                   "nn.functional.batch_norm norm:nuc",
    "joining": "hstack vstack dstack column_stack hsplit vsplit dsplit tensor_split split_with_sizes unsafe_split "
               "unsafe_chunk atleast_1d atleast_2d atleast_3d broadcast_tensors meshgrid:variadic_tensors "
               "meshgrid:list_of_tensors",
    "movement": "ravel roll rot90 fliplr flipud tile repeat_interleave diag_embed diagflat unfold as_strided "
                "sum_to_size constant_pad_nd alias_copy as_strided_copy diagonal_copy expand_copy narrow_copy "
                "permute_copy squeeze_copy t_copy transpose_copy unbind_copy unfold_copy unsqueeze_copy view_copy "
                "split_with_sizes_copy",
    "products": "einsum addmm addmm:decomposed addmv addr addbmm baddbmm mv outer inner vdot kron tensordot cdist "
                "cross block_diag cartesian_prod combinations",
    "creation": "empty_strided empty_permuted scalar_tensor logspace logspace:tensor_overload normal "
                "normal:number_mean normal:in_place bernoulli cauchy exponential geometric log_normal fill zero_ "
                "resize_ resize_as_",
    "linalg": "linalg.vector_norm linalg.matrix_norm linalg.norm linalg.norm:subgradients_at_zero linalg.vecdot "
              "linalg.cross linalg.diagonal linalg.multi_dot linalg.vander fft.fftshift fft.ifftshift "
              "signal.windows.bartlett signal.windows.blackman signal.windows.cosine signal.windows.exponential "
              "signal.windows.gaussian signal.windows.general_cosine signal.windows.general_hamming "
              "signal.windows.hamming signal.windows.hann signal.windows.kaiser signal.windows.nuttall",
}


@pytest.mark.skipif(not webgpu_available(), reason="no WebGPU adapter")
@pytest.mark.parametrize("family", sorted(ENTRIES))
def test_entries_pass_on_webgpu(family):
    assert_opinfo_entries_pass(ENTRIES[family].split(), "webgpu")
