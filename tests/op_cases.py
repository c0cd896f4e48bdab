"""Every differentiable op, as (name, fn, input specs): one table drives the gradient checks on every
device, the comparison with PyTorch and the CPU-vs-WebGPU parity tests.

fn(m, F, *inputs) is written once for both libraries: m is `webgrad` or `torch`, F its nn.functional.

An input spec is a shape (standard normal values) or (kind, shape[, high]) with kind:
  "pos"   values in [0.5, 2]          (log, sqrt, pow bases)
  "away"  |values| in [0.5, 2]        (denominators, kinks kept away from the data)
  "int"   integers in [0, high)       (indices; constant, no gradient)
  "perm"  a permutation of range(shape[0])
"""

import numpy as np



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


B = (3, 1)       # broadcasts against (3, 5)
M = (3, 5)

CASES = [
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
    ("neg", lambda m, F, a: -a, [M]),
    ("pow_scalar", lambda m, F, a: a ** 3, [M]),
    ("pow_fractional", lambda m, F, a: a ** 1.5, [("pos", M)]),
    ("pow_tensor", lambda m, F, a, b: a ** b, [("pos", M), B]),
    ("rpow_scalar", lambda m, F, a: 2.0 ** a, [M]),
    ("abs", lambda m, F, a: a.abs(), [("away", M)]),
    ("exp", lambda m, F, a: a.exp(), [M]),
    ("log", lambda m, F, a: a.log(), [("pos", M)]),
    ("sqrt", lambda m, F, a: a.sqrt(), [("pos", M)]),
    ("rsqrt", lambda m, F, a: a.rsqrt(), [("pos", M)]),
    ("sin", lambda m, F, a: a.sin(), [M]),
    ("cos", lambda m, F, a: a.cos(), [M]),
    ("reciprocal", lambda m, F, a: a.reciprocal(), [("away", M)]),
    ("square", lambda m, F, a: a.square(), [M]),
    ("clamp", lambda m, F, a: a.clamp(-0.5, 0.5), [("away", M)]),
    ("clamp_min", lambda m, F, a: m.clamp(a, min=0.7), [("away", M)]),
    ("minimum", lambda m, F, a, b: m.minimum(a, b), [M, B]),
    ("maximum", lambda m, F, a, b: m.maximum(a, b), [M, B]),
    ("where", lambda m, F, a, b: m.where(a > 0, a, b), [M, B]),
    ("where_scalar", lambda m, F, a: m.where(a > 0, a, 0.0), [("away", M)]),
    ("atan2", lambda m, F, a, b: m.atan2(a, b), [M, ("away", M)]),
    # activations
    ("relu", lambda m, F, a: a.relu(), [("away", M)]),
    ("leaky_relu", lambda m, F, a: F.leaky_relu(a, 0.1), [("away", M)]),
    ("gelu", lambda m, F, a: F.gelu(a), [M]),
    ("gelu_tanh", lambda m, F, a: F.gelu(a, approximate="tanh"), [M]),
    ("sigmoid", lambda m, F, a: a.sigmoid(), [M]),
    ("tanh", lambda m, F, a: a.tanh(), [M]),
    ("softplus", lambda m, F, a: F.softplus(a, beta=2.0), [M]),
    ("silu", lambda m, F, a: F.silu(a), [M]),
    # reductions
    ("sum_all", lambda m, F, a: a.sum(), [M]),
    ("sum_dim", lambda m, F, a: a.sum(dim=1), [(2, 3, 4)]),
    ("sum_dims_keepdim", lambda m, F, a: a.sum(dim=(0, 2), keepdim=True), [(2, 3, 4)]),
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
    ("clone_contiguous", lambda m, F, a: a.t().contiguous().clone(), [M]),
    # losses
    ("cross_entropy", lambda m, F, x, t: F.cross_entropy(x, t), [(4, 5), ("int", (4,), 5)]),
    ("cross_entropy_smooth_sum", lambda m, F, x, t: F.cross_entropy(x, t, reduction="sum", label_smoothing=0.1),
     [(4, 5), ("int", (4,), 5)]),
    ("cross_entropy_none", lambda m, F, x, t: F.cross_entropy(x, t, reduction="none"), [(4, 5), ("int", (4,), 5)]),
    ("cross_entropy_ignore", lambda m, F, x, t: F.cross_entropy(x, t, ignore_index=1), [(6, 3), ("int", (6,), 3)]),
    ("cross_entropy_spatial", lambda m, F, x, t: F.cross_entropy(x, t), [(2, 3, 2, 2), ("int", (2, 2, 2), 3)]),
]
