"""Every differentiable op, as (name, fn, input specs): one table drives the gradient checks on every
device, the comparison with PyTorch and the CPU-vs-WebGPU parity tests.

fn(m, F, *inputs) is written once for both libraries: m is `webgrad` or `torch`, F its nn.functional.

An input spec is a shape (standard normal values) or (kind, shape[, high]) with kind:
  "pos"   values in [0.5, 2]          (log, sqrt, pow bases)
  "away"  |values| in [0.5, 2]        (denominators, kinks kept away from the data)
  "prob"  values in [0.05, 0.95]      (probabilities)
  "unit"  values in (-0.9, 0.9)       (asin, atanh, erfinv)
  "gt1"   values in [1.2, 3]          (acosh)
  "int"   integers in [0, high)       (indices; constant, no gradient)
  "perm"  a permutation of range(shape[0])
"""

import numpy as np

from webgrad.ops import table


def make_inputs(specs, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for spec in specs:
        if isinstance(spec, tuple) and spec and isinstance(spec[0], str):
            kind, shape = spec[0], spec[1]
            if kind == "pos":
                a = rng.uniform(0.5, 2.0, shape)
            elif kind == "away":
                a = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
            elif kind == "prob":
                a = rng.uniform(0.05, 0.95, shape)
            elif kind == "unit":
                a = rng.uniform(-0.9, 0.9, shape)
            elif kind == "gt1":
                a = rng.uniform(1.2, 3.0, shape)
            elif kind == "int":
                a = rng.integers(0, spec[2], shape).astype(np.int32)
            elif kind == "perm":
                a = rng.permutation(shape[0]).astype(np.int32)
            else:
                raise ValueError(kind)
        else:
            a = rng.standard_normal(spec)
        out.append(np.asarray(a, dtype=np.float32) if a.dtype.kind == "f" else a)
    return out


def const(m, like, values):
    """A constant (no gradient) with `like`'s dtype and device, in either library."""
    return m.tensor(values, dtype=like.dtype, device=like.device)


B = (3, 1)       # broadcasts against (3, 5)
M = (3, 5)


def _spec(domain, shape):
    return shape if domain == "normal" else (domain, shape)


def table_case(op):
    """The test row of op-table record `op` (webgrad/ops/table.py), written once for both libraries: the
    method form where the record has one, else nn.functional's, else the module-level function, else
    torch.special's."""
    name = op.name
    ns = (lambda m: m.special) if op.expose == {"special"} else (lambda m: m)  # noqa: E731
    if op.kind == "binary":
        return (name, lambda m, F, a, b: getattr(ns(m), name)(a, b), [_spec(op.test[0], M), _spec(op.test[1], B)])
    args = op.test_args
    if "method" in op.expose:
        fn = lambda m, F, a: getattr(a, name)(*args)  # noqa: E731
    elif "functional" in op.expose:
        fn = lambda m, F, a: getattr(F, name)(a, *args)  # noqa: E731
    else:
        fn = lambda m, F, a: getattr(ns(m), name)(a, *args)  # noqa: E731
    return (name, fn, [_spec(op.test, M)])


def table_cases(ops=None):
    """Rows for every exposed, differentiable record of the op table (or of `ops`)."""
    ops = list(ops) if ops is not None else [*table.UNARY.values(), *table.BINARY.values()]
    return [table_case(op) for op in ops if op.expose and op.differentiable]


CASES = table_cases() + [
    # arithmetic with broadcasting
    ("add", lambda m, F, a, b: a + b, [B, M]),
    ("add_scalar", lambda m, F, a: 2.5 + a, [M]),
    ("add_alpha", lambda m, F, a, b: m.add(a, b, alpha=2), [M, (5,)]),
    ("sub", lambda m, F, a, b: a - b, [M, (1, 5)]),
    ("rsub_scalar", lambda m, F, a: 1.5 - a, [M]),
    ("mul", lambda m, F, a, b: a * b, [(2, 3, 4), (3, 1)]),
    ("mul_scalar", lambda m, F, a: a * -3.0, [M]),
    ("div", lambda m, F, a, b: a / b, [M, ("away", B)]),
    ("div_scalar", lambda m, F, a: a / 4.0, [M]),
    ("rdiv_scalar", lambda m, F, a: 2.0 / a, [("away", M)]),
    ("pow_scalar", lambda m, F, a: a ** 3, [M]),
    ("pow_fractional", lambda m, F, a: a ** 1.5, [("pos", M)]),
    ("pow_tensor", lambda m, F, a, b: a ** b, [("pos", M), B]),
    ("rpow_scalar", lambda m, F, a: 2.0 ** a, [M]),
    ("clamp", lambda m, F, a: a.clamp(-0.5, 0.5), [("away", M)]),
    ("clamp_min", lambda m, F, a: m.clamp(a, min=0.7), [("away", M)]),
    ("minimum", lambda m, F, a, b: m.minimum(a, b), [M, B]),
    ("maximum", lambda m, F, a, b: m.maximum(a, b), [M, B]),
    ("where", lambda m, F, a, b: m.where(a > 0, a, b), [M, B]),
    ("where_scalar", lambda m, F, a: m.where(a > 0, a, 0.0), [("away", M)]),
    # activations
    ("gelu", lambda m, F, a: F.gelu(a), [M]),
    ("gelu_tanh", lambda m, F, a: F.gelu(a, approximate="tanh"), [M]),
    # reductions
    ("sum_all", lambda m, F, a: a.sum(), [M]),
    ("sum_dim", lambda m, F, a: a.sum(dim=1), [(2, 3, 4)]),
    ("sum_dims_keepdim", lambda m, F, a: a.sum(dim=(0, 2), keepdim=True), [(2, 3, 4)]),
    ("prod_all", lambda m, F, a: a.prod(), [M]),
    ("prod_dim_keepdim", lambda m, F, a: m.prod(a, 1, keepdim=True), [(2, 3, 4)]),
    ("mean", lambda m, F, a: a.mean(dim=-1), [M]),
    ("mean_keepdim", lambda m, F, a: a.mean(dim=0, keepdim=True), [M]),
    ("max_all", lambda m, F, a: a.max(), [M]),
    ("max_dim", lambda m, F, a: a.max(dim=1)[0], [(2, 3, 4)]),
    ("min_dim_keepdim", lambda m, F, a: a.min(dim=0, keepdim=True).values, [M]),
    ("amax", lambda m, F, a: a.amax(dim=1), [M]),
    ("amin", lambda m, F, a: a.amin(dim=(0, 1)), [(2, 3, 4)]),
    ("var", lambda m, F, a: a.var(dim=1), [M]),
    ("var_biased_keepdim", lambda m, F, a: a.var(dim=0, unbiased=False, keepdim=True), [M]),
    ("std", lambda m, F, a: a.std(), [M]),
    ("logsumexp", lambda m, F, a: a.logsumexp(dim=1), [M]),
    ("softmax", lambda m, F, a: a.softmax(dim=1), [M]),
    ("softmax_dim0", lambda m, F, a: F.softmax(a, dim=0), [(4, 3, 2)]),
    ("log_softmax", lambda m, F, a: F.log_softmax(a, dim=-1), [M]),
    ("log_softmax_dim1", lambda m, F, a: a.log_softmax(dim=1), [(2, 4, 3)]),
    # linear algebra
    ("matmul", lambda m, F, a, b: a @ b, [(3, 4), (4, 5)]),
    ("matmul_batched", lambda m, F, a, b: a @ b, [(2, 3, 4), (2, 4, 5)]),
    ("matmul_broadcast_batch", lambda m, F, a, b: a @ b, [(2, 1, 3, 4), (3, 4, 2)]),
    ("matmul_batched_2d", lambda m, F, a, b: a @ b, [(2, 3, 4), (4, 5)]),
    ("matmul_vec", lambda m, F, a, b: a @ b, [(3, 4), (4,)]),
    ("matmul_vecmat", lambda m, F, a, b: a @ b, [(4,), (4, 2)]),
    ("dot", lambda m, F, a, b: a @ b, [(4,), (4,)]),
    ("matmul_transposed", lambda m, F, a, b: a.t() @ b.mT, [(4, 3), (5, 4)]),
    ("linear", lambda m, F, x, w, b: F.linear(x, w, b), [(3, 4), (5, 4), (5,)]),
    ("linear_3d", lambda m, F, x, w: F.linear(x, w), [(2, 3, 4), (5, 4)]),
    ("t", lambda m, F, a: a.t() * 1.0, [M]),
    ("transpose", lambda m, F, a: a.transpose(0, 2) * 1.0, [(2, 3, 4)]),
    ("permute", lambda m, F, a: a.permute(2, 0, 1).exp(), [(2, 3, 4)]),
    # shape
    ("reshape", lambda m, F, a: a.reshape(5, 3).exp(), [M]),
    ("view", lambda m, F, a: a.view(-1).exp(), [M]),
    ("reshape_noncontiguous", lambda m, F, a: a.t().reshape(15).exp(), [M]),
    ("flatten", lambda m, F, a: a.flatten(1).exp(), [(2, 3, 4)]),
    ("unsqueeze_squeeze", lambda m, F, a: a.unsqueeze(1).exp().squeeze(1), [M]),
    ("expand", lambda m, F, a: a.expand(3, 5).exp(), [B]),
    ("cat", lambda m, F, a, b: m.cat([a, b], dim=1), [(3, 2), (3, 4)]),
    ("stack", lambda m, F, a, b: m.stack([a, b], dim=1), [M, M]),
    ("split", lambda m, F, a: a.split(2, dim=1)[1].exp(), [M]),
    ("chunk", lambda m, F, a: a.chunk(3, dim=0)[2].exp(), [(6, 2)]),
    ("getitem_int_slice", lambda m, F, a: a[1, ::2].exp(), [M]),
    ("getitem_none_ellipsis", lambda m, F, a: a[..., None, 1:3].exp(), [(2, 3, 4)]),
    ("getitem_negative", lambda m, F, a: a[-1, -2:].exp(), [M]),
    ("index_select", lambda m, F, a, i: a.index_select(0, i), [(4, 3), ("int", (6,), 4)]),
    ("index_select_dim1", lambda m, F, a, i: m.index_select(a, 1, i), [(2, 5, 3), ("int", (4,), 5)]),
    ("getitem_tensor", lambda m, F, a, i: a[i], [(4, 3), ("int", (2, 3), 4)]),
    ("gather", lambda m, F, a, i: a.gather(1, i), [(4, 5), ("int", (4, 2), 5)]),
    ("gather_dim0", lambda m, F, a, i: m.gather(a, 0, i), [(4, 5), ("int", (3, 5), 4)]),
    ("flip", lambda m, F, a: a.flip(1).exp(), [M]),
    ("repeat", lambda m, F, a: a.repeat(2, 1, 3), [(2, 3)]),
    ("tril", lambda m, F, a: a.tril(), [(4, 5)]),
    ("triu_batched_offset", lambda m, F, a: m.triu(a, diagonal=-1), [(2, 3, 4)]),
    ("tril_offset", lambda m, F, a: m.tril(a, 2), [(4, 3)]),
    ("diag_of_matrix", lambda m, F, a: m.diag(a), [(4, 3)]),
    ("diag_of_matrix_offset", lambda m, F, a: m.diag(a, -1), [(4, 3)]),
    ("diag_to_matrix", lambda m, F, a: m.diag(a, 1), [(3,)]),
    ("diag_to_matrix_below", lambda m, F, a: m.diag(a, -2), [(3,)]),
    ("diagonal", lambda m, F, a: a.diagonal(1, 0, 2) * 1.0, [(3, 2, 4)]),
    ("nan_to_num", lambda m, F, a: m.nan_to_num(a.log(), nan=0.5, posinf=3.0), [("away", M)]),
    ("clone_contiguous", lambda m, F, a: a.t().contiguous().clone(), [M]),
    # losses
    ("cross_entropy", lambda m, F, x, t: F.cross_entropy(x, t), [(4, 5), ("int", (4,), 5)]),
    ("cross_entropy_smooth_sum", lambda m, F, x, t: F.cross_entropy(x, t, reduction="sum", label_smoothing=0.1),
     [(4, 5), ("int", (4,), 5)]),
    ("cross_entropy_none", lambda m, F, x, t: F.cross_entropy(x, t, reduction="none"), [(4, 5), ("int", (4,), 5)]),
    ("cross_entropy_ignore", lambda m, F, x, t: F.cross_entropy(x, t, ignore_index=1), [(6, 3), ("int", (6,), 3)]),
    ("cross_entropy_spatial", lambda m, F, x, t: F.cross_entropy(x, t), [(2, 3, 2, 2), ("int", (2, 2, 2), 3)]),
    ("cross_entropy_weight", lambda m, F, x, t: F.cross_entropy(x, t, weight=const(m, x, [0.5, 2.0, 1.0])),
     [(5, 3), ("int", (5,), 3)]),
    ("cross_entropy_weight_smooth_ignore", lambda m, F, x, t: F.cross_entropy(
        x, t, weight=const(m, x, [0.5, 2.0, 1.0]), ignore_index=0, label_smoothing=0.2),
     [(2, 3, 3), ("int", (2, 3), 3)]),
    ("nll_loss", lambda m, F, x, t: F.nll_loss(x, t), [(4, 5), ("int", (4,), 5)]),
    ("nll_loss_weight_ignore_spatial", lambda m, F, x, t: F.nll_loss(
        x, t, weight=const(m, x, [1.0, 0.3, 2.0]), ignore_index=2), [(2, 3, 2, 2), ("int", (2, 2, 2), 3)]),
    ("mse_loss", lambda m, F, x, y: F.mse_loss(x, y), [M, M]),
    ("l1_loss_sum", lambda m, F, x, y: F.l1_loss(x, y, reduction="sum"), [M, M]),
    ("smooth_l1_loss", lambda m, F, x, y: F.smooth_l1_loss(x, y, beta=0.5), [M, M]),
    ("huber_loss_none", lambda m, F, x, y: F.huber_loss(x, y, reduction="none", delta=0.7), [M, M]),
    ("binary_cross_entropy", lambda m, F, x, y: F.binary_cross_entropy(x, y), [("prob", M), ("prob", M)]),
    ("binary_cross_entropy_weight", lambda m, F, x, y: F.binary_cross_entropy(
        x, y, weight=const(m, x, [0.5, 1.0, 2.0, 1.5, 0.1]), reduction="sum"), [("prob", M), ("prob", M)]),
    ("bce_with_logits", lambda m, F, x, y: F.binary_cross_entropy_with_logits(x, y), [M, ("prob", M)]),
    ("bce_with_logits_pos_weight", lambda m, F, x, y: F.binary_cross_entropy_with_logits(
        x, y, pos_weight=const(m, x, [0.5, 1.0, 2.0, 1.5, 3.0]), reduction="none"), [M, ("prob", M)]),
    # convolution, pooling, padding (ops/conv.py)
    ("conv2d", lambda m, F, x, w, b: F.conv2d(x, w, b), [(2, 3, 5, 6), (4, 3, 3, 3), (4,)]),
    ("conv2d_small_output", lambda m, F, x, w, b: F.conv2d(x, w, b, stride=2), [(2, 4, 4, 4), (5, 4, 3, 3), (5,)]),
    ("conv2d_stride_pad", lambda m, F, x, w, b: F.conv2d(x, w, b, stride=2, padding=1), [(2, 2, 7, 6), (3, 2, 3, 3), (3,)]),
    ("conv2d_dilation_rect", lambda m, F, x, w: F.conv2d(x, w, stride=(1, 2), padding=(2, 1), dilation=(2, 1)),
     [(1, 2, 6, 7), (3, 2, 2, 3)]),
    ("conv2d_same_even_kernel", lambda m, F, x, w: F.conv2d(x, w, padding="same"), [(1, 2, 5, 4), (2, 2, 2, 3)]),
    ("conv2d_groups", lambda m, F, x, w, b: F.conv2d(x, w, b, padding=1, groups=2), [(2, 4, 4, 3), (6, 2, 3, 3), (6,)]),
    ("conv2d_unbatched_1x1", lambda m, F, x, w: F.conv2d(x, w), [(2, 3, 4), (3, 2, 1, 1)]),
    ("max_pool2d", lambda m, F, x: F.max_pool2d(x, 2), [(2, 3, 6, 5)]),
    ("max_pool2d_stride_pad_dilation", lambda m, F, x: F.max_pool2d(x, 3, stride=2, padding=1, dilation=(1, 2)),
     [(1, 2, 7, 8)]),
    ("avg_pool2d", lambda m, F, x: F.avg_pool2d(x, 2), [(2, 3, 6, 5)]),
    ("avg_pool2d_pad", lambda m, F, x: F.avg_pool2d(x, 3, stride=2, padding=1), [(1, 2, 7, 6)]),
    ("avg_pool2d_pad_exclude", lambda m, F, x: F.avg_pool2d(x, (3, 2), stride=(2, 1), padding=1, count_include_pad=False),
     [(1, 2, 5, 6)]),
    ("avg_pool2d_divisor", lambda m, F, x: F.avg_pool2d(x, 2, divisor_override=3), [(1, 2, 4, 4)]),
    ("adaptive_avg_pool2d", lambda m, F, x: F.adaptive_avg_pool2d(x, (2, 3)), [(2, 2, 4, 6)]),
    ("adaptive_avg_pool2d_uneven", lambda m, F, x: F.adaptive_avg_pool2d(x, (3, 4)), [(1, 2, 5, 7)]),
    ("adaptive_avg_pool2d_global", lambda m, F, x: F.adaptive_avg_pool2d(x, 1), [(2, 3, 4, 5)]),
    ("pad_constant", lambda m, F, x: F.pad(x, (1, 2, 0, 1), value=0.5), [(2, 3, 4)]),
    ("pad_crop", lambda m, F, x: F.pad(x, (-1, 2, 1, -1)), [(2, 4, 5)]),
    ("pad_reflect", lambda m, F, x: F.pad(x, (2, 1, 1, 2), mode="reflect"), [(1, 2, 4, 5)]),
    ("pad_replicate", lambda m, F, x: F.pad(x, (2, 1, 1, 2), mode="replicate"), [(1, 2, 3, 4)]),
    ("pad_circular", lambda m, F, x: F.pad(x, (2, 1, 3, 0), mode="circular"), [(1, 2, 3, 4)]),
    # normalization and embedding (nn/functional.py compositions)
    ("batch_norm_train", lambda m, F, x, w, b: F.batch_norm(x, None, None, w, b, training=True),
     [(4, 3, 2, 2), (3,), (3,)]),
    ("batch_norm_train_1d", lambda m, F, x: F.batch_norm(x, None, None, training=True), [(5, 3)]),
    ("batch_norm_eval", lambda m, F, x, w, b: F.batch_norm(
        x, const(m, x, [0.1, -0.2, 0.3]), const(m, x, [0.5, 1.5, 2.0]), w, b),
     [(2, 3, 4), (3,), (3,)]),
    ("layer_norm", lambda m, F, x, w, b: F.layer_norm(x, (4,), w, b), [(2, 3, 4), (4,), (4,)]),
    ("layer_norm_2d_no_affine", lambda m, F, x: F.layer_norm(x, (3, 4)), [(2, 3, 4)]),
    ("embedding", lambda m, F, i, w: F.embedding(i, w), [("int", (2, 3), 5), (5, 4)]),
    # transposed convolution (ops/conv.py)
    ("conv_transpose2d", lambda m, F, x, w, b: F.conv_transpose2d(x, w, b), [(2, 3, 3, 4), (3, 2, 3, 3), (2,)]),
    ("conv_transpose2d_stride_pad_outpad", lambda m, F, x, w, b: F.conv_transpose2d(
        x, w, b, stride=2, padding=1, output_padding=1), [(2, 2, 3, 3), (2, 3, 3, 3), (3,)]),
    ("conv_transpose2d_dilation_rect", lambda m, F, x, w: F.conv_transpose2d(
        x, w, stride=(2, 1), padding=(0, 1), output_padding=(1, 0), dilation=(1, 2)), [(1, 2, 3, 4), (2, 3, 2, 3)]),
    ("conv_transpose2d_groups", lambda m, F, x, w, b: F.conv_transpose2d(x, w, b, stride=2, groups=2),
     [(1, 4, 2, 3), (4, 3, 2, 2), (6,)]),
    ("conv_transpose2d_unbatched", lambda m, F, x, w: F.conv_transpose2d(x, w, stride=3), [(2, 2, 3), (2, 1, 2, 2)]),
    # resampling and padding layers (nn/_resample.py, nn/padding.py)
    ("interpolate_nearest_scale", lambda m, F, x: F.interpolate(x, scale_factor=2), [(1, 2, 2, 3)]),
    ("interpolate_nearest_size", lambda m, F, x: F.interpolate(x, size=(5, 2)), [(2, 1, 3, 4)]),
    ("interpolate_nearest_frac_scale", lambda m, F, x: F.interpolate(x, scale_factor=(1.7, 0.6)), [(1, 2, 3, 5)]),
    ("interpolate_nearest_exact", lambda m, F, x: F.interpolate(x, size=(4, 3), mode="nearest-exact"), [(1, 2, 3, 5)]),
    ("interpolate_nearest_1d", lambda m, F, x: F.interpolate(x, size=7), [(2, 2, 3)]),
    ("interpolate_bilinear", lambda m, F, x: F.interpolate(x, scale_factor=2, mode="bilinear"), [(1, 2, 3, 3)]),
    ("interpolate_bilinear_size_down", lambda m, F, x: F.interpolate(x, size=(2, 5), mode="bilinear"), [(2, 1, 5, 3)]),
    ("interpolate_bilinear_align_corners", lambda m, F, x: F.interpolate(
        x, size=(4, 5), mode="bilinear", align_corners=True), [(1, 2, 3, 2)]),
    ("interpolate_bilinear_frac_scale", lambda m, F, x: F.interpolate(
        x, scale_factor=(1.5, 2.5), mode="bilinear"), [(1, 1, 2, 3)]),
    ("interpolate_linear", lambda m, F, x: F.interpolate(x, size=5, mode="linear"), [(2, 2, 3)]),
    ("pixel_shuffle", lambda m, F, x: F.pixel_shuffle(x, 2), [(2, 8, 2, 3)]),
    ("pixel_shuffle_unbatched", lambda m, F, x: F.pixel_shuffle(x, 3), [(9, 2, 1)]),
    ("pixel_unshuffle", lambda m, F, x: F.pixel_unshuffle(x, 2), [(1, 2, 4, 6)]),
    # per-sample normalization and PReLU (nn/functional.py compositions)
    ("group_norm", lambda m, F, x, w, b: F.group_norm(x, 2, w, b), [(2, 4, 3, 2), (4,), (4,)]),
    ("group_norm_no_affine_1d", lambda m, F, x: F.group_norm(x, 3, eps=1e-3), [(2, 6, 2)]),
    ("instance_norm", lambda m, F, x, w, b: F.instance_norm(x, weight=w, bias=b), [(2, 3, 2, 3), (3,), (3,)]),
    ("instance_norm_running_stats", lambda m, F, x: F.instance_norm(
        x, const(m, x, [0.1, -0.2, 0.3]), const(m, x, [0.5, 1.5, 2.0]), use_input_stats=False), [(2, 3, 4)]),
    ("prelu", lambda m, F, x, w: F.prelu(x, w), [("away", (2, 3, 2, 2)), (3,)]),
    ("prelu_one_weight", lambda m, F, x, w: F.prelu(x, w), [("away", (2, 5)), (1,)]),
    # scaled dot-product attention (nn/attention.py: a composition of matmul, softmax and where)
    ("sdpa", lambda m, F, q, k, v: F.scaled_dot_product_attention(q, k, v), [(2, 3, 2), (2, 4, 2), (2, 4, 3)]),
    ("sdpa_causal_scale", lambda m, F, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.7),
     [(1, 2, 3, 2), (1, 2, 3, 2), (1, 2, 3, 2)]),
    ("sdpa_bool_mask", lambda m, F, q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=const(m, q, [[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]) > 0.5), [(2, 2, 2), (2, 3, 2), (2, 3, 2)]),
    ("sdpa_float_mask", lambda m, F, q, k, v, a: F.scaled_dot_product_attention(q, k, v, attn_mask=a),
     [(2, 2, 2), (2, 3, 2), (2, 3, 1), (2, 3)]),
    # batch norm's fused kernels (device batch_norm / batch_norm_backward) beyond the rows above: 5-d, eval 4-d,
    # weight without bias
    ("batch_norm_train_5d", lambda m, F, x, w, b: F.batch_norm(x, None, None, w, b, training=True),
     [(2, 3, 2, 2, 3), (3,), (3,)]),
    ("batch_norm_train_weight_only", lambda m, F, x, w: F.batch_norm(x, None, None, w, training=True, eps=1e-3),
     [(3, 2, 5), (2,)]),
    ("batch_norm_eval_4d", lambda m, F, x, w, b: F.batch_norm(
        x, const(m, x, [0.1, -0.2]), const(m, x, [0.5, 1.5]), w, b), [(2, 2, 3, 2), (2,), (2,)]),
]
