"""3-D convolution and transposed convolution, as torch.nn.functional.conv3d and conv_transpose3d, composed from
the 2-D ones (ops/conv.py), so every backend runs them on its conv2d kernels and gradients come by composition.

conv3d moves the output depth into the batch and the kernel's depth taps into the channels: the input slices each
tap reads ([N, C, D', H, W], strided along the depth) are stacked into [N * D', kD * C, H, W] and convolved once
with the weight [O, kD * C / groups, kh, kw]. conv_transpose3d runs the 2-D transposed convolution once with the
kernel's depth taps as extra output channels ([N * D, kD * O / groups ...]) and adds each tap's plane at its output
depth (d * stride + k * dilation) with one index_add, then crops the padding.
"""

from .._tensor import Tensor, tensor, zeros
from .. import dtypes
from .conv import conv2d, conv_transpose2d, ntuple, pad
from .elementwise import check_same_device
from .shape import stack


def _triple(value, name, op):
    return ntuple(value, 3, name, op)


def _volume(input, weight, bias, op, what):
    """(5-D input, whether it was unbatched), after the checks conv2d's callers would otherwise get in 2-D terms."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): expected a Tensor, got {type(input).__name__}")
    if input.ndim not in (4, 5):
        raise RuntimeError(f"{op}(): expected a 4-D [C, D, H, W] or 5-D [N, C, D, H, W] input, got shape "
                           f"{list(input.shape)}")
    if not input.dtype.is_floating:
        raise RuntimeError(f"{op}(): expected a floating point input, got {input.dtype.name} (convert with .float())")
    if not isinstance(weight, Tensor) or weight.ndim != 5:
        raise RuntimeError(f"{op}(): weight must be a 5-D tensor [{what}, kd, kh, kw], got "
                           f"{list(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__}")
    check_same_device(op, input, weight, bias)
    if weight.dtype is not input.dtype or (bias is not None and bias.dtype is not input.dtype):
        raise RuntimeError(f"{op}(): input ({input.dtype.name}), weight ({weight.dtype.name}) and bias must share a "
                           "dtype")
    return (input.unsqueeze(0), True) if input.ndim == 4 else (input, False)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution (cross-correlation), as torch.nn.functional.conv3d. weight: [O, C/groups, kd, kh, kw]."""
    op = "conv3d"
    x, unbatched = _volume(input, weight, bias, op, "out_channels, in_channels/groups")
    stride, dilation = _triple(stride, "stride", op), _triple(dilation, "dilation", op)
    kernel = tuple(weight.shape[2:])
    if isinstance(padding, str):
        if padding == "valid":
            padding = 0
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError("conv3d(): padding='same' is not supported for strided convolutions")
            total = [d * (k - 1) for d, k in zip(dilation, kernel)]
            # the odd cell of each dim goes to its end, as PyTorch's
            x = pad(x, (0, total[2] % 2, 0, total[1] % 2, 0, total[0] % 2))
            padding = tuple(t // 2 for t in total)
        else:
            raise ValueError(f"conv3d(): padding must be an int, a triple, 'valid' or 'same', got {padding!r}")
    padding = _triple(padding, "padding", op)
    if any(s <= 0 for s in stride) or any(d <= 0 for d in dilation) or any(p < 0 for p in padding):
        raise ValueError(f"{op}(): stride and dilation must be positive and padding non-negative, got "
                         f"stride={stride}, padding={padding}, dilation={dilation}")
    n, c, depth = x.shape[0], x.shape[1], x.shape[2]
    o, cg, kd = weight.shape[0], weight.shape[1], kernel[0]
    if not isinstance(groups, int) or groups < 1 or c % groups or o % groups or cg * groups != c:
        extra = f" (and out_channels {o} must be divisible by groups)" if groups > 1 and o % groups else ""
        raise RuntimeError(f"{op}(): input of shape {list(input.shape)} has {c} channels, but the weight of shape "
                           f"{list(weight.shape)} with groups={groups} expects {cg * groups}{extra}")
    if bias is not None and tuple(bias.shape) != (o,):
        raise RuntimeError(f"{op}(): bias must have shape [{o}], got {list(bias.shape)}")
    out_depth = (depth + 2 * padding[0] - dilation[0] * (kd - 1) - 1) // stride[0] + 1
    if out_depth <= 0:
        raise RuntimeError(f"{op}(): the input of shape {list(input.shape)} is too small: padded depth "
                           f"{depth + 2 * padding[0]} < dilated kernel depth {dilation[0] * (kd - 1) + 1}")
    if padding[0]:
        x = pad(x, (0, 0, 0, 0, padding[0], padding[0]))
    span = (out_depth - 1) * stride[0] + 1
    taps = stack([x[:, :, k * dilation[0]:k * dilation[0] + span:stride[0]] for k in range(kd)], 1)
    h, w = x.shape[3], x.shape[4]
    # [N, kD, C, D', H, W] -> [N, D', groups, kD, C/groups, H, W]: each group's channels stay one block
    cols = taps.reshape(n, kd, groups, cg, out_depth, h, w).permute(0, 4, 2, 1, 3, 5, 6)
    cols = cols.reshape(n * out_depth, kd * c, h, w)
    planes = weight.permute(0, 2, 1, 3, 4).reshape(o, kd * cg, kernel[1], kernel[2])
    y = conv2d(cols, planes, None, stride[1:], padding[1:], dilation[1:], groups)
    out = y.reshape(n, out_depth, o, y.shape[2], y.shape[3]).permute(0, 2, 1, 3, 4).contiguous()
    if bias is not None:
        out = out + bias.reshape(1, o, 1, 1, 1)
    return out.squeeze(0) if unbatched else out


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """3-D transposed convolution, as torch.nn.functional.conv_transpose3d. weight: [C_in, C_out/groups, kd, kh,
    kw]."""
    op = "conv_transpose3d"
    x, unbatched = _volume(input, weight, bias, op, "in_channels, out_channels/groups")
    stride, padding = _triple(stride, "stride", op), _triple(padding, "padding", op)
    dilation, output_padding = _triple(dilation, "dilation", op), _triple(output_padding, "output_padding", op)
    if any(s <= 0 for s in stride) or any(d <= 0 for d in dilation) or any(p < 0 for p in padding + output_padding):
        raise ValueError(f"{op}(): stride and dilation must be positive and padding, output_padding non-negative, "
                         f"got stride={stride}, padding={padding}, output_padding={output_padding}, "
                         f"dilation={dilation}")
    if any(q >= s and q >= d for q, s, d in zip(output_padding, stride, dilation)):
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got output_padding="
                           f"{list(output_padding)}, stride={list(stride)}, dilation={list(dilation)}")
    n, c, depth = x.shape[0], x.shape[1], x.shape[2]
    ci, og, kd = weight.shape[0], weight.shape[1], weight.shape[2]
    if not isinstance(groups, int) or groups < 1 or ci % groups:
        raise RuntimeError(f"{op}(): groups must be a positive integer dividing the weight's in_channels {ci}, "
                           f"got groups={groups}")
    if c != ci:
        raise RuntimeError(f"{op}(): input of shape {list(input.shape)} has {c} channels, but the weight of shape "
                           f"{list(weight.shape)} expects {ci} (weight: [in_channels, out_channels/groups, kd, kh, "
                           "kw])")
    o = og * groups
    if bias is not None and tuple(bias.shape) != (o,):
        raise RuntimeError(f"{op}(): bias must have shape [{o}], got {list(bias.shape)}")
    whole = (depth - 1) * stride[0] + dilation[0] * (kd - 1) + 1  # the depth every tap reaches
    out_depth = whole - 2 * padding[0] + output_padding[0]
    if out_depth <= 0:
        raise RuntimeError(f"{op}(): the input of shape {list(input.shape)} gives an output depth of {out_depth}: "
                           f"padding={list(padding)} is too large")
    h, w = x.shape[3], x.shape[4]
    planes = x.permute(0, 2, 1, 3, 4).reshape(n * depth, c, h, w)
    taps = weight.permute(0, 2, 1, 3, 4).reshape(ci, kd * og, weight.shape[3], weight.shape[4])
    y = conv_transpose2d(planes, taps, None, stride[1:], padding[1:], output_padding[1:], groups, dilation[1:])
    oh, ow = y.shape[2], y.shape[3]
    # [N * D, groups * kD * O/groups, H', W'] -> [N, O, kD * D, H', W'], tap-major along the third dim
    y = y.reshape(n, depth, groups, kd, og, oh, ow).permute(0, 2, 4, 3, 1, 5, 6).reshape(n, o, kd * depth, oh, ow)
    at = tensor([k * dilation[0] + i * stride[0] for k in range(kd) for i in range(depth)], dtype=dtypes.int64,
                device=x.device)
    out = zeros((n, o, whole, oh, ow), dtype=x.dtype, device=x.device).index_add(2, at, y)
    out = pad(out, (0, 0, 0, 0, -padding[0], out_depth - (whole - padding[0])))
    if bias is not None:
        out = out + bias.reshape(1, o, 1, 1, 1)
    return out.squeeze(0) if unbatched else out
