"""Conv2d and Conv3d (weight [out_channels, in_channels / groups, *kernel_size]), ConvTranspose2d and
ConvTranspose3d (weight [in_channels, out_channels / groups, *kernel_size]), bias [out_channels], as PyTorch.

_ConvNd holds what the four share, as torch.nn.modules.conv._ConvNd does: the argument checks, the parameters
and their initialisation, padding_mode, output_size for the transposed ones, the repr and the plain convolutions'
forward. A subclass names its number of spatial dims and its functional form."""


from ..ops.conv import _pair
from ..ops.conv3d import _triple
from .._tensor import empty
from . import functional as F, init
from .module import Module
from .parameter import Parameter

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")
_TUPLES = {2: _pair, 3: _triple}  # int or sequence -> a tuple of one entry per spatial dim, checked


class _ConvNd(Module):
    _dims = None      # spatial dims
    _function = None  # F.conv{2,3}d or F.conv_transpose{2,3}d

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, transposed, output_padding,
                 groups, bias, padding_mode, device=None, dtype=None):
        super().__init__()
        op, ntuple = type(self).__name__, _TUPLES[self._dims]
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) must be divisible by "
                             f"groups ({groups})")
        if transposed and padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {op}')
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {list(_PADDING_MODES)}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = ntuple(kernel_size, "kernel_size", op)
        self.stride = ntuple(stride, "stride", op)
        self.dilation = ntuple(dilation, "dilation", op)
        if isinstance(padding, str) and not transposed:
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of ['valid', 'same']")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = ntuple(padding, "padding", op)
        self.output_padding = ntuple(output_padding, "output_padding", op)
        self.transposed, self.groups, self.padding_mode = transposed, groups, padding_mode
        shape = (in_channels, out_channels // groups) if transposed else (out_channels, in_channels // groups)
        self.weight = Parameter(empty(shape + self.kernel_size, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init._default_weight_and_bias_(self.weight, self.bias)

    @property
    def _reversed_padding_repeated_twice(self):
        """F.pad's amounts (last dim first, left then right) when padding_mode is not 'zeros'; 'same' puts the
        odd cell at the end, as PyTorch."""
        if self.padding == "valid":
            return [0, 0] * self._dims
        if self.padding == "same":
            totals = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            pairs = [(t // 2, t - t // 2) for t in totals]
        else:
            pairs = [(p, p) for p in self.padding]
        return [amount for pair in reversed(pairs) for amount in pair]

    def _conv_forward(self, input, weight, bias):
        """The convolution with this module's options and the given weight and bias (PyTorch's hook for
        subclasses that transform the weight first)."""
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return self._function(padded, weight, bias, self.stride, 0, self.dilation, self.groups)
        return self._function(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        """Conv2d's and Conv3d's forward; the transposed modules override it to take output_size."""
        return self._conv_forward(input, self.weight, self.bias)

    def _output_padding(self, input, output_size):
        """The output_padding that makes a transposed convolution's output output_size (spatial sizes, or the
        whole shape), checked against the sizes a strided convolution maps to the input's size."""
        if output_size is None:
            return self.output_padding
        dims, output_size = self._dims, list(output_size)
        if len(output_size) == input.ndim:  # [N, C, *spatial] or [C, *spatial] given: keep the spatial sizes
            output_size = output_size[-dims:]
        if len(output_size) != dims:
            raise ValueError(f"ConvTranspose{dims}D: for {input.ndim}D input, output_size must have {dims} or "
                             f"{input.ndim} elements (got {len(output_size)})")
        spatial = tuple(input.shape[-dims:])
        low = [(n - 1) * s - 2 * p + d * (k - 1) + 1
               for n, s, p, d, k in zip(spatial, self.stride, self.padding, self.dilation, self.kernel_size)]
        high = [m + s - 1 for m, s in zip(low, self.stride)]
        for want, lo, hi in zip(output_size, low, high):
            if not lo <= want <= hi:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes range from {low} to "
                                 f"{high} (for an input of {list(spatial)})")
        return tuple(want - lo for want, lo in zip(output_size, low))

    def _transposed_forward(self, input, output_size):
        return self._function(input, self.weight, self.bias, self.stride, self.padding,
                              self._output_padding(input, output_size), self.groups, self.dilation)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self._dims:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self._dims:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._dims:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv2d(_ConvNd):
    _dims, _function = 2, staticmethod(F.conv2d)

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, False, 0, groups, bias,
                         padding_mode, device, dtype)


class Conv3d(_ConvNd):
    _dims, _function = 3, staticmethod(F.conv3d)

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, False, 0, groups, bias,
                         padding_mode, device, dtype)


class ConvTranspose2d(_ConvNd):
    """The adjoint of Conv2d (F.conv_transpose2d). forward(input, output_size=None): output_size picks among
    the output sizes a strided convolution maps to the input's size, as PyTorch."""

    _dims, _function = 2, staticmethod(F.conv_transpose2d)

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, True, output_padding,
                         groups, bias, padding_mode, device, dtype)

    def forward(self, input, output_size=None):
        return self._transposed_forward(input, output_size)


class ConvTranspose3d(_ConvNd):
    """The adjoint of Conv3d (F.conv_transpose3d); output_size as ConvTranspose2d's."""

    _dims, _function = 3, staticmethod(F.conv_transpose3d)

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, True, output_padding,
                         groups, bias, padding_mode, device, dtype)

    def forward(self, input, output_size=None):
        return self._transposed_forward(input, output_size)
