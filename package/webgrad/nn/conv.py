"""Conv2d (weight [out_channels, in_channels / groups, kh, kw]) and ConvTranspose2d (weight
[in_channels, out_channels / groups, kh, kw]), bias [out_channels], as PyTorch."""


from ..ops.conv import _pair
from .._tensor import empty
from . import functional as F, init
from .module import Module
from .parameter import Parameter

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class Conv2d(Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) must be divisible by "
                             f"groups ({groups})")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {list(_PADDING_MODES)}, but got padding_mode='{padding_mode}'")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _pair(kernel_size, "kernel_size", "Conv2d")
        self.stride = _pair(stride, "stride", "Conv2d")
        self.dilation = _pair(dilation, "dilation", "Conv2d")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of ['valid', 'same']")
            if padding == "same" and self.stride != (1, 1):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _pair(padding, "padding", "Conv2d")
        self.output_padding, self.transposed = (0, 0), False
        self.groups, self.padding_mode = groups, padding_mode
        self.weight = Parameter(empty((out_channels, in_channels // groups) + self.kernel_size, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init._default_weight_and_bias_(self.weight, self.bias)

    def _explicit_padding(self):
        """(left, right, top, bottom) for F.pad when padding_mode is not 'zeros'."""
        if self.padding == "valid":
            return (0, 0, 0, 0)
        if self.padding == "same":
            totals = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            (th, tw) = totals
            return (tw // 2, tw - tw // 2, th // 2, th - th // 2)
        ph, pw = self.padding
        return (pw, pw, ph, ph)

    def forward(self, input):
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._explicit_padding(), mode=self.padding_mode)
            return F.conv2d(padded, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class ConvTranspose2d(Module):
    """The adjoint of Conv2d (F.conv_transpose2d). forward(input, output_size=None): output_size picks among
    the output sizes a strided convolution maps to the input's size, as PyTorch."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) must be divisible by "
                             f"groups ({groups})")
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _pair(kernel_size, "kernel_size", "ConvTranspose2d")
        self.stride = _pair(stride, "stride", "ConvTranspose2d")
        self.padding = _pair(padding, "padding", "ConvTranspose2d")
        self.dilation = _pair(dilation, "dilation", "ConvTranspose2d")
        self.output_padding = _pair(output_padding, "output_padding", "ConvTranspose2d")
        self.transposed, self.groups, self.padding_mode = True, groups, padding_mode
        self.weight = Parameter(empty((in_channels, out_channels // groups) + self.kernel_size, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    reset_parameters = Conv2d.reset_parameters

    def _output_padding(self, input, output_size):
        if output_size is None:
            return self.output_padding
        output_size = list(output_size)
        if len(output_size) == input.ndim:  # [N, C, H, W] or [C, H, W] given: keep the spatial sizes
            output_size = output_size[-2:]
        if len(output_size) != 2:
            raise ValueError(f"ConvTranspose2D: for {input.ndim}D input, output_size must have 2 or {input.ndim} "
                             f"elements (got {len(output_size)})")
        spatial = tuple(input.shape[-2:])
        low = [(n - 1) * s - 2 * p + d * (k - 1) + 1
               for n, s, p, d, k in zip(spatial, self.stride, self.padding, self.dilation, self.kernel_size)]
        high = [m + s - 1 for m, s in zip(low, self.stride)]
        for want, lo, hi in zip(output_size, low, high):
            if not lo <= want <= hi:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes range from {low} to "
                                 f"{high} (for an input of {list(spatial)})")
        return tuple(want - lo for want, lo in zip(output_size, low))

    def forward(self, input, output_size=None):
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0, 0):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s
