"""Modules for the functions of nn/functional_layers.py and nn/functional_losses.py, as torch.nn: activations (GLU,
Hardshrink, Softshrink, Tanhshrink, Threshold, RReLU, Softmin), RMSNorm, LocalResponseNorm, CosineSimilarity,
PairwiseDistance, 1-D convolution and pooling (Conv1d, ConvTranspose1d, AvgPool1d, MaxPool1d, AdaptiveAvgPool1d,
AdaptiveMaxPool1d, AdaptiveMaxPool2d, MaxUnpool1d/2d/3d), Unfold, Fold, ChannelShuffle, Bilinear, EmbeddingBag, and the
loss modules
(KLDivLoss, GaussianNLLLoss, ...). Each holds its options (and parameters) and calls its function.
"""

import math

from .._autograd import no_grad
from .._tensor import empty, ones
from . import functional as F, init
from .loss import _Loss, _WeightedLoss
from .module import Module
from .parameter import Parameter


def _one(value, name, op):
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise ValueError(f"{op}: {name} must be an int or a 1-tuple, got {value!r}")
        return (int(value[0]),)
    return (int(value),)


class _Options(Module):
    """A module whose forward is F.<_function>(input, **its options)."""

    _function = None
    _options = ()

    def __init__(self, *args, **kwargs):
        super().__init__()
        names = list(self._options)
        values = dict(zip((n for n, _ in names), (d for _, d in names)))
        for (name, _), value in zip(names, args):
            values[name] = value
        for name, value in kwargs.items():
            if name not in values:
                raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword argument '{name}'")
            values[name] = value
        for name, value in values.items():
            setattr(self, name, value)

    def forward(self, input):
        return getattr(F, self._function)(input, **{n: getattr(self, n) for n, _ in self._options})

    def extra_repr(self):
        return ", ".join(f"{n}={getattr(self, n)!r}" for n, _ in self._options)


class GLU(_Options):
    _function, _options = "glu", (("dim", -1),)


class Hardshrink(_Options):
    _function, _options = "hardshrink", (("lambd", 0.5),)


class Softshrink(_Options):
    _function, _options = "softshrink", (("lambd", 0.5),)


class Tanhshrink(_Options):
    _function = "tanhshrink"


class Threshold(_Options):
    _function, _options = "threshold", (("threshold", None), ("value", None), ("inplace", False))


class Softmin(_Options):
    _function, _options = "softmin", (("dim", None),)


class LocalResponseNorm(_Options):
    _function, _options = "local_response_norm", (("size", None), ("alpha", 1e-4), ("beta", 0.75), ("k", 1.0))


class ChannelShuffle(_Options):
    _function, _options = "channel_shuffle", (("groups", None),)


class AvgPool1d(_Options):
    _function, _options = "avg_pool1d", (("kernel_size", None), ("stride", None), ("padding", 0),
                                         ("ceil_mode", False), ("count_include_pad", True))


class MaxPool1d(_Options):
    _function, _options = "max_pool1d", (("kernel_size", None), ("stride", None), ("padding", 0), ("dilation", 1),
                                         ("return_indices", False), ("ceil_mode", False))


class AdaptiveAvgPool1d(_Options):
    _function, _options = "adaptive_avg_pool1d", (("output_size", None),)


class AdaptiveMaxPool1d(_Options):
    _function, _options = "adaptive_max_pool1d", (("output_size", None), ("return_indices", False))


class AdaptiveMaxPool2d(_Options):
    _function, _options = "adaptive_max_pool2d", (("output_size", None), ("return_indices", False))


class Unfold(_Options):
    _function, _options = "unfold", (("kernel_size", None), ("dilation", 1), ("padding", 0), ("stride", 1))


class Fold(_Options):
    _function, _options = "fold", (("output_size", None), ("kernel_size", None), ("dilation", 1), ("padding", 0),
                                   ("stride", 1))


class _MaxUnpool(Module):
    _function = None

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride if stride is not None else kernel_size, \
            padding

    def forward(self, input, indices, output_size=None):
        return getattr(F, self._function)(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpool):
    _function = "max_unpool1d"


class MaxUnpool2d(_MaxUnpool):
    _function = "max_unpool2d"


class MaxUnpool3d(_MaxUnpool):
    _function = "max_unpool3d"


class RReLU(Module):
    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


class CosineSimilarity(Module):
    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class RMSNorm(Module):
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ones(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class _Conv1dBase(Module):
    def _setup(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
               shape, device, dtype):
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) must be divisible by "
                             f"groups ({groups})")
        op = type(self).__name__
        self.in_channels, self.out_channels, self.groups, self.padding_mode = in_channels, out_channels, groups, \
            padding_mode
        self.kernel_size = _one(kernel_size, "kernel_size", op)
        self.stride, self.dilation = _one(stride, "stride", op), _one(dilation, "dilation", op)
        self.padding = padding if isinstance(padding, str) else _one(padding, "padding", op)
        self.weight = Parameter(empty(shape + self.kernel_size, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init._default_weight_and_bias_(self.weight, self.bias)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding not in ((0,), "valid"):
            s += f", padding={self.padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + (", bias=False" if self.bias is None else "")


class Conv1d(_Conv1dBase):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"padding_mode must be one of ['zeros', 'reflect', 'replicate', 'circular'], but got "
                             f"padding_mode='{padding_mode}'")
        if isinstance(padding, str) and padding not in ("same", "valid"):
            raise ValueError(f"Invalid padding string {padding!r}, should be one of ['valid', 'same']")
        self._setup(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                    (out_channels, in_channels // groups), device, dtype)
        if padding == "same" and self.stride != (1,):
            raise ValueError("padding='same' is not supported for strided convolutions")

    def forward(self, input):
        if self.padding_mode != "zeros":
            if self.padding == "same":
                total = self.dilation[0] * (self.kernel_size[0] - 1)
                pads = (total // 2, total - total // 2)
            else:
                pads = (0, 0) if self.padding == "valid" else (self.padding[0], self.padding[0])
            padded = F.pad(input, pads, mode=self.padding_mode)
            return F.conv1d(padded, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return F.conv1d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class ConvTranspose1d(_Conv1dBase):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        self.output_padding = _one(output_padding, "output_padding", "ConvTranspose1d")
        self._setup(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                    (in_channels, out_channels // groups), device, dtype)

    def forward(self, input, output_size=None):
        output_padding = self.output_padding
        if output_size is not None:
            low = (input.shape[-1] - 1) * self.stride[0] - 2 * self.padding[0] + \
                self.dilation[0] * (self.kernel_size[0] - 1) + 1
            want = list(output_size)[-1]
            if not low <= want < low + self.stride[0]:
                raise ValueError(f"requested an output size of {list(output_size)}, but valid sizes range from "
                                 f"[{low}] to [{low + self.stride[0] - 1}] (for an input of {[input.shape[-1]]})")
            output_padding = (want - low,)
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding, output_padding,
                                  self.groups, self.dilation)


class Bilinear(Module):
    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        self.weight = Parameter(empty((out_features, in1_features, in2_features), device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class EmbeddingBag(Module):
    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None, device=None,
                 dtype=None):
        super().__init__()
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim, self.mode = num_embeddings, embedding_dim, mode
        self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse = max_norm, norm_type, \
            scale_grad_by_freq, sparse
        self.include_last_offset, self.padding_idx = include_last_offset, padding_idx
        if _weight is None:
            self.weight = Parameter(empty((num_embeddings, embedding_dim), device=device, dtype=dtype))
            self.reset_parameters()
        else:
            self.weight = Parameter(_weight)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                               self.mode, self.sparse, per_sample_weights, self.include_last_offset, self.padding_idx)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                        mode="mean", sparse=False, include_last_offset=False, padding_idx=None):
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse, embeddings, include_last_offset,
                  padding_idx)
        bag.weight.requires_grad_(not freeze)
        return bag

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm!r}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type!r}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq!r}"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx!r}"
        return s


# ===================================================================== losses
class KLDivLoss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class GaussianNLLLoss(_Loss):
    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(None, None, reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input, target):
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full, eps=self.eps,
                                  reduction=self.reduction)


class _MarginLoss(_Loss):
    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin


class CosineEmbeddingLoss(_MarginLoss):
    def forward(self, input1, input2, target):
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class MarginRankingLoss(_MarginLoss):
    def forward(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class HingeEmbeddingLoss(_MarginLoss):
    def __init__(self, margin=1.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(margin, size_average, reduce, reduction)

    def forward(self, input, target):
        return F.hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    def forward(self, input, target):
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    def forward(self, input, target):
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight, reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    def forward(self, input, target):
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        self.p, self.margin = p, margin

    def forward(self, input, target):
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self.weight,
                                   reduction=self.reduction)


class TripletMarginLoss(_Loss):
    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got {margin} instead")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p, eps=self.eps,
                                     swap=self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(None, None, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} "
                             "instead")
        self.distance_function, self.margin, self.swap = distance_function, margin, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(anchor, positive, negative,
                                                   distance_function=self.distance_function, margin=self.margin,
                                                   swap=self.swap, reduction=self.reduction)


__all__ = ["GLU", "Hardshrink", "Softshrink", "Tanhshrink", "Threshold", "RReLU", "Softmin", "RMSNorm",
           "LocalResponseNorm", "CosineSimilarity", "PairwiseDistance", "Conv1d", "ConvTranspose1d", "AvgPool1d",
           "MaxPool1d", "AdaptiveAvgPool1d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "Unfold", "Fold",
           "ChannelShuffle", "Bilinear", "EmbeddingBag", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "KLDivLoss", "GaussianNLLLoss", "PoissonNLLLoss",
           "CosineEmbeddingLoss", "MarginRankingLoss", "HingeEmbeddingLoss", "SoftMarginLoss",
           "MultiLabelSoftMarginLoss", "MultiLabelMarginLoss", "MultiMarginLoss", "TripletMarginLoss",
           "TripletMarginWithDistanceLoss"]
