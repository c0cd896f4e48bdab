"""nn.MultiheadAttention, as PyTorch, on F.scaled_dot_product_attention's pieces (nn/functional.py).

Without need_weights (nn.TransformerEncoderLayer's call) the attention itself is the fused attention kernels
(ops/attention.py); with it, the composition of matmul, softmax and dropout that also gives the weights.
"""

import math

from .._tensor import zeros
from ..ops.attention import fused_attention
from . import functional as F, init
from .functional import _additive, _attention
from .linear import NonDynamicallyQuantizableLinear
from .module import Module
from .parameter import Parameter

class MultiheadAttention(Module):
    """Attention over num_heads heads of embed_dim // num_heads features each, as torch.nn.MultiheadAttention.

    Parameters as PyTorch's (so a torch state_dict loads): in_proj_weight [3E, E] (q, k, v stacked),
    in_proj_bias [3E], out_proj (a Linear E -> E)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        if self.kdim != embed_dim or self.vdim != embed_dim:
            raise NotImplementedError("MultiheadAttention: kdim/vdim different from embed_dim (separate q/k/v "
                                      "projection weights) are not supported by webgrad")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are not supported by webgrad")
        self._qkv_same_embed_dim = True
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        self.in_proj_weight = Parameter(zeros(3 * embed_dim, embed_dim, device=device, dtype=dtype))
        self.register_parameter("q_proj_weight", None)
        self.register_parameter("k_proj_weight", None)
        self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(zeros(3 * embed_dim, device=device, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False
        self._reset_parameters()

    def _reset_parameters(self):
        # PyTorch's init: xavier_uniform_ on the stacked projection, zero biases; out_proj.weight keeps Linear's
        init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        if is_causal and attn_mask is None:
            # as PyTorch: is_causal is only a hint that attn_mask is the causal mask
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                               "module method `generate_square_subsequent_mask` to create this mask.")
        batched = query.ndim == 3
        if query.ndim not in (2, 3):
            raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received {query.ndim}-D "
                                 f"query tensor")
        if not batched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        L, N, E = query.shape
        S = key.shape[0]
        if E != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, but got {E}")
        H, D = self.num_heads, self.head_dim
        w = self.in_proj_weight
        b = self.in_proj_bias
        q = F.linear(query, w[0:E], None if b is None else b[0:E])
        k = F.linear(key, w[E:2 * E], None if b is None else b[E:2 * E])
        v = F.linear(value, w[2 * E:], None if b is None else b[2 * E:])
        # [T, N, E] -> [N, H, T, D]
        q = q.reshape(L, N, H, D).permute(1, 2, 0, 3)
        k = k.reshape(S, N, H, D).permute(1, 2, 0, 3)
        v = v.reshape(S, N, H, D).permute(1, 2, 0, 3)

        bias = None
        if attn_mask is not None:
            if attn_mask.ndim == 2:
                if tuple(attn_mask.shape) != (L, S):
                    raise RuntimeError(f"The shape of the 2D attn_mask is {tuple(attn_mask.shape)}, but should be "
                                       f"{(L, S)}.")
                bias = _additive(attn_mask, q, attend_when_true=False)
            elif attn_mask.ndim == 3:
                if tuple(attn_mask.shape) != (N * H, L, S):
                    raise RuntimeError(f"The shape of the 3D attn_mask is {tuple(attn_mask.shape)}, but should be "
                                       f"{(N * H, L, S)}.")
                bias = _additive(attn_mask, q, attend_when_true=False).reshape(N, H, L, S)
            else:
                raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (N, S):
                raise AssertionError(f"expecting key_padding_mask shape of {(N, S)}, but got "
                                     f"{tuple(key_padding_mask.shape)}")
            pad = _additive(key_padding_mask, q, attend_when_true=False).reshape(N, 1, 1, S)
            bias = pad if bias is None else bias + pad

        dropout_p = self.dropout if self.training else 0.0
        # without the weights to return, the fused attention kernels (no [N, H, L, S] weights in memory)
        out = None if need_weights else fused_attention(q, k, v, bias, dropout_p, False, None)
        weights = None
        if out is None:
            out, weights = _attention(q, k, v, bias, dropout_p, None)
        out = out.permute(2, 0, 1, 3).reshape(L, N, E)  # [N, H, L, D] -> [L, N, E]
        out = self.out_proj(out)
        if self.batch_first and batched:
            out = out.transpose(0, 1)
        elif not batched:
            out = out.squeeze(1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            weights = weights.squeeze(0)
        return out, weights


from .sdpa_backends import SDPBackend, sdpa_kernel  # noqa: E402,F401  (torch.nn.attention's names)
