"""The torch.* forms of neural-network ops (torch.layer_norm, torch.dropout, torch.lstm_cell, ...).

PyTorch exposes ATen's signatures at the top level, which differ from torch.nn.functional's: reductions are ints
(0 none, 1 mean, 2 sum), dropout's `train` has no default, torch.batch_norm takes weight and bias before the
running statistics, torch.embedding takes the weight first, grid_sampler takes its modes as ints. Each function here
maps those arguments onto webgrad's nn.functional implementation, so autograd and both devices come with it.
"""

from . import dtypes
from ._tensor import Tensor, arange, zeros
from .nn import functional as F
from .nn import rnn as _rnn
from .nn.functional import (bilinear, celu, channel_shuffle, hardshrink, pixel_shuffle, pixel_unshuffle, prelu,
                            rrelu_, selu, threshold_)

_REDUCTIONS = ("none", "mean", "sum")  # ATen's Reduction enum: 0, 1, 2
# The losses' default reduction is 0 (none): ATen declares Mean, but PyTorch's Python binding of torch.kl_div,
# torch.ctc_loss, ... reads that default as 0 and returns unreduced losses unless a reduction is passed.
_INTERPOLATIONS = ("bilinear", "nearest", "bicubic")  # grid_sampler's interpolation_mode: 0, 1, 2
_PADDINGS = ("zeros", "border", "reflection")  # grid_sampler's padding_mode: 0, 1, 2
_BAG_MODES = ("sum", "mean", "max")  # embedding_bag's mode: 0, 1, 2


def _enum(value, names, what):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < len(names):
        raise RuntimeError(f"{what} must be an int in [0, {len(names) - 1}] ({', '.join(names)}), got {value!r}")
    return names[value]


def _reduction(reduction):
    return _enum(reduction, _REDUCTIONS, "reduction")


# ============================================================ activations
def celu_(input, alpha=1.0):
    return F.celu(input, alpha, inplace=True)


def selu_(input):
    return F.selu(input, inplace=True)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    if generator is not None:
        raise NotImplementedError("rrelu(): a generator argument is not supported; webgrad.manual_seed seeds it")
    return F.rrelu(input, lower, upper, training)


def threshold(input, threshold, value):
    return F.threshold(input, threshold, value)


def native_channel_shuffle(input, groups):
    return F.channel_shuffle(input, groups)


# ================================================================ dropout
def _p(p):
    """ATen checks p itself, with a RuntimeError (F's functions raise ValueError), whether training or not."""
    if not 0.0 <= p <= 1.0:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
    return p


def dropout(input, p, train):
    return F.dropout(input, _p(p), train)


def dropout_(input, p, train):
    return F.dropout(input, _p(p), train, inplace=True)


def alpha_dropout(input, p, train):
    return F.alpha_dropout(input, _p(p), train)


def alpha_dropout_(input, p, train):
    return F.alpha_dropout(input, _p(p), train, inplace=True)


def _feature_input(input):
    if input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return input


def feature_dropout(input, p, train):
    """Zeros whole channels (dims 0 and 1 index one), as torch.feature_dropout."""
    return F._feature_dropout(_feature_input(input), _p(p), train, False)


def feature_dropout_(input, p, train):
    return F._feature_dropout(_feature_input(input), _p(p), train, True)


def feature_alpha_dropout(input, p, train):
    return F.feature_alpha_dropout(_feature_input(input), _p(p), train)


def feature_alpha_dropout_(input, p, train):
    return F.feature_alpha_dropout(_feature_input(input), _p(p), train, inplace=True)


# ========================================================== normalization
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    return F.group_norm(input, num_groups, weight, bias, eps)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    """ATen's argument order: weight and bias before the running statistics, every argument given."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled):
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    return F.rms_norm(input, normalized_shape, weight, eps)


# ============================================================= embeddings
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """ATen's order (weight first); a negative padding_idx means none, as ATen's -1."""
    return F.embedding(indices, weight, padding_idx if padding_idx >= 0 else None,
                       scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """(output, offset2bag, bag_size, max_indices), as torch.embedding_bag: output is F.embedding_bag's; offset2bag
    is each index's bag, bag_size each bag's length, and max_indices, for mode 2 (max), the weight row that gave each
    maximum (bag_size for the other modes). PyTorch's CPU kernel leaves offset2bag empty and bag_size zero in mode 0
    (sum); here they are filled in every mode. Indices are read flat: PyTorch's kernel, given 2-D indices, counts
    only their first dim in a bag's length (F.embedding_bag is the form for 2-D bags)."""
    kind = _enum(mode, _BAG_MODES, "embedding_bag(): mode")
    indices = indices.reshape(-1)  # ATen reads the indices flat, bags given by offsets, whatever their shape
    out = F.embedding_bag(indices, weight, offsets, scale_grad_by_freq=scale_grad_by_freq, mode=kind, sparse=sparse,
                          per_sample_weights=per_sample_weights, include_last_offset=include_last_offset,
                          padding_idx=padding_idx)
    bags = out.shape[0]
    flat = indices.long()
    starts = offsets[:bags].long()
    offset2bag = (starts.unsqueeze(0) <= arange(flat.shape[0], device=indices.device).unsqueeze(1)).long()
    offset2bag = offset2bag.sum(1) - 1  # each index's bag: the bag starts at or before it, less one
    counted = flat if padding_idx is None else flat[flat != padding_idx % weight.shape[0]]
    bag_of_counted = offset2bag if padding_idx is None else offset2bag[flat != padding_idx % weight.shape[0]]
    bag_size = zeros(bags, dtype=dtypes.int64, device=indices.device).index_add(
        0, bag_of_counted, counted.new_ones(counted.shape[0]))
    if kind != "max":
        return out, offset2bag, bag_size, bag_size.clone()
    with_max = weight.detach().index_select(0, counted) == out.detach().index_select(0, bag_of_counted)
    candidates = counted.unsqueeze(1).expand(-1, weight.shape[1])
    candidates = candidates.masked_fill(~with_max, weight.shape[0])
    max_indices = zeros((bags, weight.shape[1]), dtype=dtypes.int64, device=indices.device).scatter_reduce(
        0, bag_of_counted.unsqueeze(1).expand(-1, weight.shape[1]), candidates, "amin", include_self=False)
    return out, offset2bag, bag_size, max_indices


# ================================================================= losses
def kl_div(input, target, reduction=0, *, log_target=False):
    """ATen's kl_div: reduction 1 is the mean over every element (F.kl_div's 'batchmean' divides by the batch)."""
    loss = F.kl_div(input, target, reduction="none", log_target=log_target)
    kind = _reduction(reduction)
    return loss if kind == "none" else loss.mean() if kind == "mean" else loss.sum()


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=0, zero_infinity=False):
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, _reduction(reduction), zero_infinity)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    return F.cosine_embedding_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    return F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    return F.margin_ranking_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, reduction=0):
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction=_reduction(reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps, reduction=_reduction(reduction))


# ========================================================== convolutions
_CONVOLUTIONS = {3: (F.conv1d, F.conv_transpose1d), 4: (F.conv2d, F.conv_transpose2d), 5: (F.conv3d, F.conv_transpose3d)}


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """ATen's one convolution entry: the input's rank picks conv1d/2d/3d, `transposed` their transposes."""
    if input.ndim not in _CONVOLUTIONS:
        raise RuntimeError(f"convolution(): expected a 3-D, 4-D or 5-D input (batched 1, 2 or 3 spatial dims), got "
                           f"{input.ndim}-D")
    direct, transpose = _CONVOLUTIONS[input.ndim]
    if transposed:
        return transpose(input, weight, bias, tuple(stride), tuple(padding), tuple(output_padding), groups,
                         tuple(dilation))
    if any(output_padding):
        raise RuntimeError("convolution(): output_padding is only used by transposed convolutions, got "
                           f"{list(output_padding)}")
    return direct(input, weight, bias, tuple(stride), tuple(padding), tuple(dilation), groups)


def conv_tbc(input, weight, bias, pad=0):
    """A 1-D convolution of a [time, batch, channels] input with a [kernel, in, out] weight, as torch.conv_tbc."""
    if input.ndim != 3:
        raise RuntimeError(f"conv_tbc: Input must have 3 dims: time, batch, in_channel, got {input.ndim}")
    if weight.ndim != 3:
        raise RuntimeError(f"conv_tbc: Weight tensor must have 3 dims: kernel_width, in_channels, out_channels, got "
                           f"{weight.ndim}")
    if bias.ndim != 1:
        raise RuntimeError(f"conv_tbc: Bias must have 1 dim: out_channels, got {bias.ndim}")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError(f"conv_tbc: Input dim 2 (input channels: {input.shape[2]}) is not == dim 1 in the weight "
                           f"tensor ({weight.shape[1]})")
    out = F.conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)  # [B, C_out, T_out]
    return out.permute(2, 0, 1)


# ====================================================== spatial sampling
def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    return F.grid_sample(input, grid, _enum(interpolation_mode, _INTERPOLATIONS, "grid_sampler(): interpolation_mode"),
                         _enum(padding_mode, _PADDINGS, "grid_sampler(): padding_mode"), align_corners)


def _grid_sampler_nd(input, grid, interpolation_mode, padding_mode, align_corners, spatial):
    op = f"grid_sampler_{spatial}d"
    if not isinstance(input, Tensor) or input.ndim != spatial + 2:
        got = f"{input.ndim}-D" if isinstance(input, Tensor) else type(input).__name__
        raise RuntimeError(f"{op}(): expected {spatial + 2}D input, but got {got}")
    if spatial == 3 and interpolation_mode == 2:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    """ATen's 4-D grid sampler (N, C, H, W), F.grid_sample's with its modes as ints."""
    return _grid_sampler_nd(input, grid, interpolation_mode, padding_mode, align_corners, 2)


def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    """ATen's 5-D grid sampler (N, C, D, H, W): bilinear (trilinear) or nearest."""
    return _grid_sampler_nd(input, grid, interpolation_mode, padding_mode, align_corners, 3)


def affine_grid_generator(theta, size, align_corners):
    return F.affine_grid(theta, list(size), align_corners)


# ============================================================= rnn cells
def _projected(input, w_ih, b_ih, op):
    """input W_ihᵀ + b_ih for a batch [N, H_in]: the ATen cells take batched inputs only (nn.RNNCell unbatches)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(input).__name__}")
    if input.ndim != 2:
        raise IndexError(f"{op}: expected a batched [N, input_size] input, got a {input.ndim}-D tensor")
    if input.shape[-1] != w_ih.shape[1]:
        raise RuntimeError(f"{op}: input has inconsistent input_size: got {input.shape[-1]} expected "
                           f"{w_ih.shape[1]}")
    return F.linear(input, w_ih, b_ih)


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One LSTM step: hx is (h, c); returns (h', c'). Torch's argument order: w_ih, w_hh, b_ih, b_hh."""
    if len(hx) != 2:
        raise RuntimeError(f"lstm_cell: expected hx to hold two tensors (h, c), got {len(hx)}")
    return _rnn._lstm_cell(_projected(input, w_ih, b_ih, "lstm_cell"), tuple(hx), w_hh, b_hh)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return _rnn._gru_cell(_projected(input, w_ih, b_ih, "gru_cell"), hx, w_hh, b_hh)


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return _rnn._rnn_cell(_projected(input, w_ih, b_ih, "rnn_tanh_cell"), hx, w_hh, b_hh, "tanh")


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return _rnn._rnn_cell(_projected(input, w_ih, b_ih, "rnn_relu_cell"), hx, w_hh, b_hh, "relu")


# the functions whose torch.* form is nn.functional's own, then those mapped above
FUNCTIONS = {"bilinear": bilinear, "celu": celu, "channel_shuffle": channel_shuffle, "hardshrink": hardshrink,
             "pixel_shuffle": pixel_shuffle, "pixel_unshuffle": pixel_unshuffle, "prelu": prelu, "rrelu_": rrelu_,
             "selu": selu, "threshold_": threshold_}
FUNCTIONS.update((name, globals()[name]) for name in (
    "celu_", "selu_", "rrelu", "threshold", "dropout", "dropout_", "alpha_dropout", "alpha_dropout_",
    "feature_dropout", "feature_dropout_", "feature_alpha_dropout", "feature_alpha_dropout_", "embedding",
    "embedding_bag", "layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm", "native_channel_shuffle",
    "kl_div", "ctc_loss", "cosine_embedding_loss", "hinge_embedding_loss", "margin_ranking_loss",
    "triplet_margin_loss", "poisson_nll_loss", "conv_tbc", "convolution", "grid_sampler", "grid_sampler_2d",
    "grid_sampler_3d", "affine_grid_generator", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"))
