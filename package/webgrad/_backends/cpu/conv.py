"""The CPU reference of convolution and pooling.

Each kernel loops over the kh*kw taps of the window only: tap (i, j) of every output position is one strided
slice of the padded image, so the work is kh*kw NumPy operations at any image size. conv2d is im2col and one
BLAS product in the tensors' own dtype (float16 operands accumulate in float32 and round once, as PyTorch)."""

from .. import kernels
from .arrays import array, np, wide, write


def taps(padded, kernel, stride, dilation, out_hw):
    """Yield (i, j, view [N, C, OH, OW] of `padded` read by kernel tap (i, j))."""
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, stride, dilation, out_hw
    for i in range(kh):
        for j in range(kw):
            yield i, j, padded[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]


def pool_out(h, w, kernel, stride, padding, dilation=(1, 1)):
    return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                 for n, k, s, p, d in zip((h, w), kernel, stride, padding, dilation))


def pad_image(x, padding, fill=0.0):
    v = array(x).astype(np.float64)
    (ph, pw) = padding
    return np.pad(v, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)


def unfold(x, kernel, stride, padding, dilation, out_hw, dtype):
    """im2col of x as an array [N, C*kh*kw, OH*OW] of `dtype`."""
    n, c = x.shape[:2]
    cols = np.empty((n, c, kernel[0], kernel[1]) + tuple(out_hw), dtype)
    for i, j, tap in taps(pad_image(x, padding), kernel, stride, dilation, out_hw):
        cols[:, :, i, j] = tap
    return cols.reshape(n, c * kernel[0] * kernel[1], out_hw[0] * out_hw[1])


def fold(out, cols, kernel, stride, padding, dilation):
    """col2im: out [N, C, H, W] = the sum of the entries of cols [N, C*kh*kw, OH*OW] reading each pixel."""
    n, c, h, w = out.shape
    (ph, pw) = padding
    oh, ow = pool_out(h, w, kernel, stride, padding, dilation)
    src = cols.astype(np.float64).reshape(n, c, kernel[0], kernel[1], oh, ow)
    img = np.zeros((n, c, h + 2 * ph, w + 2 * pw))
    for i, j, tap in taps(img, kernel, stride, dilation, (oh, ow)):
        tap += src[:, :, i, j]  # one tap never reads a pixel twice, so += on the view is exact
    write(out, img[:, :, ph:ph + h, pw:pw + w])


@kernels.im2col.implement("cpu")
def im2col(out, x, kernel, stride, padding, dilation):
    oh, ow = pool_out(x.shape[2], x.shape[3], kernel, stride, padding, dilation)
    write(out, unfold(x, kernel, stride, padding, dilation, (oh, ow), np.float64))


@kernels.col2im.implement("cpu")
def col2im(out, cols, kernel, stride, padding, dilation):
    fold(out, array(cols), kernel, stride, padding, dilation)

# conv2d: im2col + one BLAS product in the tensors' own dtype (as matmul above).


@kernels.conv2d.implement("cpu")
def conv2d(out, x, weight, bias, stride, padding, dilation, keep=False, relu=False):
    n, o, oh, ow = out.shape
    w = wide(array(weight))
    cols = unfold(x, w.shape[2:], stride, padding, dilation, (oh, ow), w.dtype)
    res = np.matmul(w.reshape(o, -1), cols)  # [N, O, OH*OW]
    if bias is not None:
        res += array(bias)[:, None]
    if relu:
        np.maximum(res, 0, out=res)
    write(out, res.reshape(out.shape))


@kernels.conv2d_backward_input.implement("cpu")
def conv2d_backward_input(out, grad, weight, stride, padding, dilation):
    w = wide(array(weight))
    g = wide(array(grad))
    n, o = g.shape[:2]
    dcols = np.matmul(w.reshape(o, -1).T, g.reshape(n, o, -1))  # [N, C*kh*kw, OH*OW]
    fold(out, dcols, w.shape[2:], stride, padding, dilation)


@kernels.conv2d_backward_weight.implement("cpu")
def conv2d_backward_weight(out, grad, x, stride, padding, dilation, workspace=None):
    g = wide(array(grad))
    n, o, oh, ow = g.shape
    cols = unfold(x, out.shape[2:], stride, padding, dilation, (oh, ow), g.dtype)
    # one product over images and positions together: [O, N*L] @ [N*L, C*kh*kw]
    write(out, np.tensordot(g.reshape(n, o, -1), cols, axes=([0, 2], [0, 2])).reshape(out.shape))


@kernels.max_pool2d.implement("cpu")
def max_pool2d(out, indices, x, kernel, stride, padding, dilation):
    n, c, h, w = x.shape
    oh, ow = out.shape[2], out.shape[3]
    kw = kernel[1]
    padded = pad_image(x, padding, fill=-np.inf)
    inside = np.pad(np.ones((1, 1, h, w), bool), ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    vals = np.stack([t for _, _, t in taps(padded, kernel, stride, dilation, (oh, ow))])
    real = np.stack([t for _, _, t in taps(inside, kernel, stride, dilation, (oh, ow))])
    real = np.broadcast_to(real, vals.shape)
    k = np.argmax(vals, axis=0)  # first maximum in row-major window order, as PyTorch
    # a window whose real cells are all -inf may have picked a padding cell: take its first real cell
    k = np.where(np.take_along_axis(real, k[None], 0)[0], k, np.argmax(real, axis=0))
    row = np.arange(oh)[:, None] * stride[0] - padding[0] + (k // kw) * dilation[0]
    col = np.arange(ow)[None, :] * stride[1] - padding[1] + (k % kw) * dilation[1]
    write(out, np.take_along_axis(vals, k[None], 0)[0])
    write(indices, row * w + col)


@kernels.max_pool2d_backward.implement("cpu")
def max_pool2d_backward(out, grad, indices, kernel=None, stride=None, padding=None, dilation=None):
    n, c, h, w = out.shape
    g = array(grad).astype(np.float64).reshape(n * c, -1)
    idx = array(indices).astype(np.intp).reshape(n * c, -1)
    res = np.zeros((n * c, h * w))
    np.add.at(res, (np.arange(n * c)[:, None], idx), g)
    write(out, res.reshape(out.shape))


def avg_divisor(hw, kernel, stride, padding, count_include_pad, out_hw):
    if count_include_pad:  # padding cells count; windows never reach past the padding (no ceil_mode)
        return float(kernel[0] * kernel[1])
    inside = np.pad(np.ones((1, 1) + hw), ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    return sum(t for _, _, t in taps(inside, kernel, stride, (1, 1), out_hw))


@kernels.avg_pool2d.implement("cpu")
def avg_pool2d(out, x, kernel, stride, padding, count_include_pad=True):
    n, c, h, w = x.shape
    oh, ow = out.shape[2], out.shape[3]
    total = sum(t for _, _, t in taps(pad_image(x, padding), kernel, stride, (1, 1), (oh, ow)))
    write(out, total / avg_divisor((h, w), kernel, stride, padding, count_include_pad, (oh, ow)))


@kernels.avg_pool2d_backward.implement("cpu")
def avg_pool2d_backward(out, grad, kernel, stride, padding, count_include_pad=True):
    n, c, h, w = out.shape
    (ph, pw), (oh, ow) = padding, grad.shape[2:]
    share = array(grad).astype(np.float64) / avg_divisor((h, w), kernel, stride, padding,
                                                                      count_include_pad, (oh, ow))
    img = np.zeros((n, c, h + 2 * ph, w + 2 * pw))
    for _, _, tap in taps(img, kernel, stride, (1, 1), (oh, ow)):
        tap += share
    write(out, img[:, :, ph:ph + h, pw:pw + w])
